//! Tests of the world model as a whole: it learns a known latent system,
//! imagines reproducibly, scores anchors, refuses other encoders, survives
//! NaN, and round-trips through checkpoints.

use image::{Rgb, RgbImage};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tch::Device;
use wmrl_core::seams::{EpisodeRequest, ExecutedEpisode, WorldModel};
use wmrl_vla::rollout::{EpisodeRecord, RecordedObservation, TaskPrompt, VlaAdapter};
use wmrl_vla::{Tokenizer, VlaConfig, VlaPolicy};

use crate::fit::fit;
use crate::quality::auroc;
use crate::train::score_episodes;
use crate::*;

/// A known system: z' = 0.9 z + B a, p' = p + 0.1 a[..3]; success iff the
/// final z[0] > 0.4 (the drift of action dimension 0 decides it).
fn synthetic_episodes(n: usize, seed: u64, dims: &Dims) -> Vec<LatentTrajectory> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let b: Vec<f32> = {
        let mut r = ChaCha8Rng::seed_from_u64(99);
        (0..dims.latent * dims.chunk())
            .map(|_| r.random_range(-0.3..0.3))
            .collect()
    };
    (0..n)
        .map(|i| {
            let k = 6;
            let drift: f32 = rng.random_range(-0.6..0.6);
            let mut z: Vec<f32> = (0..dims.latent)
                .map(|_| rng.random_range(-0.1..0.1))
                .collect();
            let mut p = vec![0.0f32; dims.proprio];
            let (mut latents, mut proprio, mut actions) = (z.clone(), p.clone(), Vec::new());
            for _ in 0..k {
                let a: Vec<f32> = (0..dims.chunk())
                    .map(|j| (if j == 0 { drift } else { 0.0 }) + rng.random_range(-0.3..0.3))
                    .collect();
                let mut next: Vec<f32> = z.iter().map(|v| 0.9 * v).collect();
                next[0] += a[0];
                for (row, value) in next.iter_mut().enumerate().skip(1) {
                    *value += (0..dims.chunk())
                        .map(|j| b[row * dims.chunk() + j] * a[j])
                        .sum::<f32>();
                }
                for (d, value) in p.iter_mut().enumerate() {
                    *value += 0.1 * a[d];
                }
                z = next;
                latents.extend_from_slice(&z);
                proprio.extend_from_slice(&p);
                actions.extend_from_slice(&a);
            }
            LatentTrajectory {
                task_index: i % 2,
                state_index: i,
                success: z[0] > 0.4,
                seed: i as u64,
                source: "synthetic".into(),
                steps: k * dims.chunk_len,
                latents,
                proprio,
                actions,
            }
        })
        .collect()
}

#[test]
fn learns_a_known_latent_system_and_its_success_predicate() {
    let dims = Dims {
        latent: 8,
        proprio: 3,
        chunk_len: 2,
        action_dim: 2,
    };
    let train = synthetic_episodes(400, 1, &dims);
    let held_out = synthetic_episodes(200, 2, &dims);
    let successes = train.iter().filter(|e| e.success).count();
    assert!(
        successes > 40 && successes < 360,
        "balanced enough: {successes}"
    );
    tch::manual_seed(0);
    let config = WmConfig::load("tiny", &["train.steps=300".into()]).unwrap();
    let mut model = LatentWorldModel::new(config, dims, "synthetic".into(), Device::Cpu).unwrap();
    let refs: Vec<&LatentTrajectory> = held_out.iter().collect();
    let before = score_episodes(&model, &refs).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let report = fit(&mut model, &train, dir.path(), |_, _| {}).unwrap();
    assert_eq!(report.steps, 300);
    let rows = wmrl_report::metrics::read_rows(&dir.path().join(fit::METRICS_FILE)).unwrap();
    let first = rows.first().unwrap()["one_step"].as_f64().unwrap();
    let last = rows.last().unwrap()["one_step"].as_f64().unwrap();
    assert!(last < first / 3.0, "one-step loss {first} -> {last}");
    assert!(dir.path().join(fit::LOSS_PLOT).exists());
    let outcomes: Vec<bool> = held_out.iter().map(|e| e.success).collect();
    let after = score_episodes(&model, &refs).unwrap();
    let auc_before = auroc(&before.iter().map(|s| s.0).collect::<Vec<_>>(), &outcomes).unwrap();
    let auc_after = auroc(&after.iter().map(|s| s.0).collect::<Vec<_>>(), &outcomes).unwrap();
    assert!(
        auc_after > 0.85,
        "held-out AUROC of the replay score {auc_before:.3} -> {auc_after:.3}"
    );
    assert!(
        after
            .iter()
            .all(|(a, b)| (0.0..=1.0).contains(a) && (0.0..=1.0).contains(b))
    );
}

/// Constant-colour start observations (the task index tints the image).
struct FlatStarts;

impl StartObservations for FlatStarts {
    fn start(&mut self, task: usize, state: usize) -> Result<RecordedObservation> {
        let image = RgbImage::from_pixel(32, 32, Rgb([40 * task as u8, 7 * state as u8, 90]));
        Ok(RecordedObservation {
            agent_view: image.clone(),
            wrist_view: image,
            proprio: vec![0.1; 15],
        })
    }
}

fn tiny_policy(seed: i64) -> VlaPolicy {
    tch::manual_seed(seed);
    let config = VlaConfig::load("tiny", &[]).unwrap();
    let tokenizer = Tokenizer::from_instructions(["open the drawer", "close the drawer"]);
    VlaPolicy::new(config.model, tokenizer, Device::Cpu).unwrap()
}

fn tiny_world_model(policy: &VlaPolicy, overrides: &[String]) -> VlaWorldModel {
    tch::manual_seed(3);
    let config = WmConfig::load("tiny", overrides).unwrap();
    let model = LatentWorldModel::new(
        config,
        Dims::of(policy),
        policy.encoder_fingerprint(),
        Device::Cpu,
    )
    .unwrap();
    VlaWorldModel::new(model, policy.try_clone().unwrap(), Box::new(FlatStarts)).unwrap()
}

fn prompts() -> Vec<TaskPrompt> {
    (0..4)
        .map(|i| TaskPrompt {
            task_index: i % 2,
            state_index: i,
            instruction: if i % 2 == 0 {
                "open the drawer"
            } else {
                "close the drawer"
            }
            .into(),
        })
        .collect()
}

fn requests(prompts: &[TaskPrompt], seed: u64) -> Vec<EpisodeRequest<'_, TaskPrompt>> {
    prompts
        .iter()
        .enumerate()
        .map(|(i, p)| EpisodeRequest {
            group: i,
            sample: 0,
            prompt: p,
            seed: seed + i as u64,
            attempt: 0,
        })
        .collect()
}

/// At a sampling temperature T ≠ 1 the recorded log-probabilities are those
/// of softmax(logits / T), the distribution the tokens were drawn from (the
/// learner's ratio is exact only then).
#[test]
fn imagined_log_probs_are_those_of_the_sampling_temperature() {
    let policy = tiny_policy(1);
    let mut wm = tiny_world_model(
        &policy,
        &[
            "imagine.success_threshold=1.0".into(),
            "imagine.temperature=0.5".into(),
        ],
    );
    let prompts = prompts();
    let dreams = wm.imagine(&policy, &requests(&prompts, 10)).unwrap();
    let dream = &dreams[0].rollout;
    let _guard = tch::no_grad_guard();
    let z = tch::Tensor::from_slice(&dream.inputs[2].latent).view([1, -1]);
    let p = tch::Tensor::from_slice(&dream.inputs[2].proprio).view([1, -1]);
    let instruction = policy.encode_instructions(&policy.tokenize(&["open the drawer"]));
    let logits = policy.act(&z, &p, &instruction);
    let tokens = tch::Tensor::from_slice(&dream.chunks[2].tokens).view([1, 8, 7]);
    let at = |t: f64| {
        wmrl_vla::ActionDistribution::with_temperature(&logits, t)
            .log_prob(&tokens)
            .double_value(&[0])
    };
    let recorded = f64::from(dream.chunks[2].log_prob);
    assert!(
        (at(0.5) - recorded).abs() < 1e-3,
        "{} vs {recorded}",
        at(0.5)
    );
    assert!(
        (at(1.0) - recorded).abs() > 0.1,
        "{} vs {recorded}",
        at(1.0)
    );
}

#[test]
fn imagination_is_batched_reproducible_and_scored() {
    let policy = tiny_policy(1);
    let mut wm = tiny_world_model(&policy, &["imagine.success_threshold=1.0".into()]);
    let prompts = prompts();
    let a = wm.imagine(&policy, &requests(&prompts, 10)).unwrap();
    let b = wm.imagine(&policy, &requests(&prompts, 10)).unwrap();
    let c = wm.imagine(&policy, &requests(&prompts, 20)).unwrap();
    assert_eq!(a, b, "same seeds, same imagined episodes");
    assert_ne!(a[0].rollout.chunks[0].tokens, c[0].rollout.chunks[0].tokens);
    let horizon = wm.model().horizon_chunks();
    for (dream, prompt) in a.iter().zip(&prompts) {
        assert_eq!(dream.rollout.task_index, prompt.task_index);
        // A threshold of 1 is never crossed: every episode runs the whole horizon.
        assert_eq!(dream.rollout.chunks.len(), horizon);
        assert_eq!(dream.rollout.steps, horizon * 8);
        assert!((0.0..=1.0).contains(&dream.score));
        assert!(
            dream
                .rollout
                .chunks
                .iter()
                .all(|c| c.log_prob.is_finite() && c.log_prob < 0.0)
        );
    }
    assert_eq!(wm.stats.imagined, 12);
    // The recorded inputs reproduce the recorded log-probabilities exactly
    // enough for a clipped-surrogate ratio.
    let dream = &a[0].rollout;
    assert_eq!(dream.inputs.len(), dream.chunks.len());
    let _guard = tch::no_grad_guard();
    let z = tch::Tensor::from_slice(&dream.inputs[3].latent).view([1, -1]);
    let p = tch::Tensor::from_slice(&dream.inputs[3].proprio).view([1, -1]);
    let instruction = policy.encode_instructions(&policy.tokenize(&["open the drawer"]));
    let logits = policy.act(&z, &p, &instruction);
    let tokens = tch::Tensor::from_slice(&dream.chunks[3].tokens).view([1, 8, 7]);
    let log_prob = wmrl_vla::ActionDistribution::new(&logits)
        .log_prob(&tokens)
        .double_value(&[0]);
    assert!(
        (log_prob - f64::from(dream.chunks[3].log_prob)).abs() < 1e-3,
        "{log_prob} vs {}",
        dream.chunks[3].log_prob
    );
    drop(_guard);

    // Anchors are scored like imagined episodes; with recorded observations
    // they enter the replay buffer and the model can be refreshed on them.
    let mut record = a[1].rollout.clone();
    let obs = FlatStarts.start(1, 1).unwrap();
    record.observations = vec![obs; record.chunks.len() + 1];
    let bare = EpisodeRecord {
        observations: vec![],
        ..record.clone()
    };
    let executed = [
        ExecutedEpisode {
            group: 0,
            sample: 0,
            prompt: &prompts[1],
            rollout: &record,
            reward: 1.0,
        },
        ExecutedEpisode {
            group: 0,
            sample: 1,
            prompt: &prompts[1],
            rollout: &bare,
            reward: 0.0,
        },
    ];
    let scores = WorldModel::<VlaAdapter, VlaPolicy>::score(&mut wm, &executed).unwrap();
    assert!(scores.iter().all(|s| (0.0..=1.0).contains(s)));
    assert!(
        (scores[0] - scores[1]).abs() < 1e-5,
        "replay scores start from the same observation"
    );
    assert!(wm.last_real_scores()[0].is_some() && wm.last_real_scores()[1].is_none());
    WorldModel::<VlaAdapter, VlaPolicy>::observe(&mut wm, &executed).unwrap();
    assert_eq!((wm.replay().len(), wm.stats.observe_skipped), (1, 1));
    assert!(wm.refresh(3).unwrap().is_some_and(f64::is_finite));
    assert!(wm.maybe_refresh(2).unwrap().is_some() && wm.maybe_refresh(3).unwrap().is_none());
}

#[test]
fn another_encoder_is_refused_and_nan_never_reaches_the_caller() {
    let policy = tiny_policy(1);
    let other = tiny_policy(2);
    let mut wm = tiny_world_model(&policy, &[]);
    let prompts = prompts();
    let err = wm.imagine(&other, &requests(&prompts, 0)).unwrap_err();
    assert!(matches!(err, Error::EncoderMismatch { .. }), "{err}");
    // Poison the dynamics: every imagined latent is NaN.
    tch::no_grad(|| {
        for (name, mut t) in wm.model_mut().var_store_mut().variables() {
            if name.starts_with("dynamics.out") {
                let _ = t.fill_(f64::NAN);
            }
        }
    });
    let err = wm
        .imagine(&policy, &requests(&prompts[..1], 5))
        .unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(
            err,
            Error::NonFinite {
                task: 0,
                state: 0,
                attempts: 3,
                ..
            }
        ),
        "{text}"
    );
    assert!(text.contains("task 0") && text.contains("seed"), "{text}");
    assert_eq!(wm.stats.non_finite_dropped, 3);
}

#[test]
fn checkpoints_round_trip_and_mismatches_name_the_tensor() {
    let policy = tiny_policy(1);
    let dims = Dims::of(&policy);
    tch::manual_seed(5);
    let model = LatentWorldModel::new(
        WmConfig::load("tiny", &[]).unwrap(),
        dims,
        policy.encoder_fingerprint(),
        Device::Cpu,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    checkpoint::save(&model, dir.path(), serde_json::json!({"note": "test"})).unwrap();
    let loaded = checkpoint::load(
        dir.path(),
        &dims,
        Some(&policy.encoder_fingerprint()),
        Device::Cpu,
    )
    .unwrap();
    let episodes = synthetic_episodes(6, 3, &dims);
    let refs: Vec<&LatentTrajectory> = episodes.iter().collect();
    assert_eq!(
        score_episodes(&model, &refs).unwrap(),
        score_episodes(&loaded, &refs).unwrap()
    );
    let err = checkpoint::load(dir.path(), &dims, Some("another"), Device::Cpu).unwrap_err();
    assert!(matches!(err, Error::EncoderMismatch { .. }), "{err}");
    // Another architecture in the JSON: the weights no longer fit.
    let json_path = dir.path().join(checkpoint::CONFIG_FILE);
    let text = std::fs::read_to_string(&json_path)
        .unwrap()
        .replace(r#""hidden": 64"#, r#""hidden": 48"#);
    std::fs::write(&json_path, text).unwrap();
    // An edit recorded in the manifest: another architecture, not damage.
    wmrl_report::manifest::write(
        dir.path(),
        &[checkpoint::WEIGHTS_FILE, checkpoint::CONFIG_FILE],
    )
    .unwrap();
    let err = checkpoint::load(dir.path(), &dims, None, Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("dynamics.") && err.contains("48") && err.contains("64"),
        "{err}"
    );
}

/// A prefix executor without a simulator: `chunks` constant chunks per
/// episode on flat observations; state 1 reaches the goal after one chunk,
/// state 2 runs out of steps after one chunk, and state 3 fails on its
/// request's own seed (an executor error).
struct ScriptedPrefixes {
    chunks: usize,
}

impl PrefixExecutor for ScriptedPrefixes {
    fn chunks(&self) -> usize {
        self.chunks
    }

    fn execute(
        &mut self,
        policy: &VlaPolicy,
        requests: &[EpisodeRequest<'_, TaskPrompt>],
    ) -> Result<Vec<wmrl_core::seams::Execution<EpisodeRecord>>> {
        use wmrl_core::seams::Execution;
        let chunk_len = policy.config().action.chunk_len as usize;
        Ok(requests
            .iter()
            .map(|r| {
                let state = r.prompt.state_index;
                // Like a simulator, it fails the same way on the same seed.
                if state == 3 && r.seed == 13 {
                    return Execution::Failed {
                        reason: "robot left".into(),
                    };
                }
                let chunks = if state == 1 || state == 2 {
                    1
                } else {
                    self.chunks
                };
                let chunk = wmrl_vla::inference::ActionChunk {
                    tokens: vec![128; chunk_len * 7],
                    actions: vec![0.0; chunk_len * 7],
                    chunk_len,
                    action_dim: 7,
                    log_prob: -3.0,
                    token_log_probs: Vec::new(),
                    executed: chunk_len,
                };
                let mut starts = FlatStarts;
                let obs = starts.start(r.prompt.task_index, state).unwrap();
                let record = EpisodeRecord {
                    task_index: r.prompt.task_index,
                    state_index: state,
                    success: state == 1,
                    steps: chunks * chunk_len,
                    chunks: vec![chunk; chunks],
                    observations: vec![obs; chunks + 1],
                    ..Default::default()
                };
                Execution::Completed {
                    reward: f64::from(u8::from(record.success)),
                    rollout: record,
                }
            })
            .collect())
    }
}

#[test]
fn branched_imagination_executes_prefixes_and_imagines_the_rest() {
    let policy = tiny_policy(1);
    let make = || {
        tiny_world_model(&policy, &["imagine.success_threshold=1.0".into()])
            .with_prefixes(Box::new(ScriptedPrefixes { chunks: 3 }))
    };
    let mut wm = make();
    assert_eq!(wm.prefix_chunks(), 3);
    let prompts = prompts();
    let requests = requests(&prompts, 10);
    let a = wm.imagine(&policy, &requests).unwrap();
    let b = make().imagine(&policy, &requests).unwrap();
    assert_eq!(a, b, "same seeds, same branched episodes");
    // The learner gets the executed chunks only, with encoded inputs.
    for (dream, chunks) in a.iter().zip([3, 1, 1, 3]) {
        assert_eq!(dream.rollout.chunks.len(), chunks);
        assert_eq!(dream.rollout.inputs.len(), chunks);
        assert_eq!(dream.rollout.steps, chunks * 8);
        assert!(dream.rollout.observations.is_empty());
    }
    // A prefix that reached the goal scores 1, one that ran out of steps 0;
    // the others are the model's estimate from the state reached.
    assert_eq!(a[1].score, 1.0);
    assert_eq!(a[2].score, 0.0);
    let horizon = wm.model().horizon_chunks();
    assert_eq!(wm.stats.imagined_chunks, 2 * (horizon - 3) as u64);
    // The continuation is what `imagine_from` imagines from the encoded last observation.
    let obs = FlatStarts.start(0, 0).unwrap();
    let latent =
        trajectory::encode_observations(&policy, &[&obs.agent_view], &[&obs.wrist_view]).unwrap();
    let start = ImagineStart {
        task_index: 0,
        state_index: 0,
        instruction: "open the drawer",
        latent: latent.clone(),
        proprio: obs.proprio.clone(),
        seed: wmrl_core::rng::derive_seed(10, &[crate::imagine::BRANCH]),
    };
    let branch = imagine_from(wm.model(), &policy, &[start], 3).unwrap();
    // (a batch of one, where imagination batched two: equal to float precision)
    assert!((branch[0].score - a[0].score).abs() < 1e-5);
    assert_eq!(branch[0].record.chunks.len(), horizon - 3);
    let input = &a[0].rollout.inputs[0].latent;
    assert!(input.iter().zip(&latent).all(|(x, y)| (x - y).abs() < 1e-4));
    // Real steps are counted, and a failed prefix is executed again with a
    // fresh seed (state 3's first attempt failed; its record is the second's).
    assert_eq!(wm.stats.prefix_episodes, 4);
    assert_eq!(wm.stats.prefix_steps, (3 + 1 + 1 + 3) * 8);
    assert_eq!(wm.stats.imagined, 4);
    // Trained with their imagined continuations, the episodes still running
    // after their prefix (states 0 and 3) carry the model's chunks too, with
    // imagined inputs; the scores and the executed chunks do not change.
    let c = make()
        .with_imagined_chunks_trained(true)
        .imagine(&policy, &requests)
        .unwrap();
    for ((with, without), chunks) in c.iter().zip(&a).zip([horizon, 1, 1, horizon]) {
        assert_eq!(with.score, without.score);
        assert_eq!(with.rollout.chunks.len(), chunks);
        assert_eq!(with.rollout.inputs.len(), chunks);
        assert_eq!(
            with.rollout.steps, without.rollout.steps,
            "executed steps only"
        );
        let executed = without.rollout.chunks.len();
        assert_eq!(with.rollout.chunks[..executed], without.rollout.chunks[..]);
        assert_eq!(with.rollout.inputs[..executed], without.rollout.inputs[..]);
    }
    // The continuation starts from the real state reached, then follows the model.
    let inputs = &c[0].rollout.inputs;
    assert!(
        inputs[3]
            .latent
            .iter()
            .zip(&latent)
            .all(|(x, y)| (x - y).abs() < 1e-4)
    );
    assert_ne!(
        inputs[horizon - 1].latent,
        inputs[3].latent,
        "the model's latent"
    );
}

#[test]
fn branch_fidelity_counts_the_episodes_still_running_at_each_depth() {
    let policy = tiny_policy(2);
    let wm = tiny_world_model(&policy, &["imagine.success_threshold=1.0".into()]);
    let dims = wm.model().dims();
    let episodes = synthetic_episodes(12, 4, &dims);
    let refs: Vec<&LatentTrajectory> = episodes.iter().collect();
    let instruction = |task: usize| (task < 2).then(|| "open the drawer".to_string());
    let horizon = wm.model().horizon_chunks();
    for depth in [0, 2] {
        let b = fidelity::branch_fidelity(wm.model(), &policy, &refs, &instruction, depth, 2, 7)
            .unwrap();
        let running = episodes.iter().filter(|e| e.chunks(&dims) > depth).count();
        assert_eq!((b.depth, b.episodes, b.non_finite), (depth, running, 0));
        assert!((b.mean_imagined_chunks - (horizon - depth) as f64).abs() < 1e-9);
        assert!((0.0..=1.0).contains(&b.mean_score));
        let again =
            fidelity::branch_fidelity(wm.model(), &policy, &refs, &instruction, depth, 2, 7)
                .unwrap();
        assert_eq!(b, again, "seeded");
    }
    let past_the_end =
        fidelity::branch_fidelity(wm.model(), &policy, &refs, &instruction, 6, 2, 7).unwrap();
    assert_eq!((past_the_end.episodes, past_the_end.auroc), (0, None));
    let unknown = |_: usize| None;
    let err = fidelity::branch_fidelity(wm.model(), &policy, &refs, &unknown, 0, 2, 7).unwrap_err();
    assert!(err.to_string().contains("unknown task"), "{err}");
    let err =
        fidelity::branch_fidelity(wm.model(), &policy, &refs, &instruction, 0, 0, 7).unwrap_err();
    assert!(err.to_string().contains("branch samples"), "{err}");
}
