//! Tests of the GRPO learner: it raises rewarded actions, its gradient
//! splits over streams, its ratios are exact at the sampling temperature.

use super::*;
use crate::VlaConfig;
use crate::rollout::ChunkInput;
use crate::tokenizer::Tokenizer;
use rand::{Rng, SeedableRng};
use tch::Device;
use wmrl_core::advantage::Stream;
use wmrl_core::diagnostics::StepDiagnostics;
use wmrl_core::fuse::SampleOut;
use wmrl_core::seams::BatchSample;

/// libtorch's global generator is shared by every test thread: tests of
/// this module that seed it and draw from it take this lock.
static TORCH_RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The `tiny` VLA for "open the drawer", its weights drawn after seeding
/// libtorch's generator with `seed` (hold [`TORCH_RNG`]).
fn tiny_policy(seed: i64) -> VlaPolicy {
    tch::manual_seed(seed);
    let config = VlaConfig::load("tiny", &[]).unwrap();
    let tokenizer = Tokenizer::from_instructions(["open the drawer"]);
    VlaPolicy::new(config.model, tokenizer, Device::Cpu).unwrap()
}

/// A latent of 64 values in [-1, 1) from `seed`.
fn random_latent(seed: u64) -> Vec<f32> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..64).map(|_| rng.random_range(-1.0..1.0)).collect()
}

/// Step diagnostics are not read by the learner; any valid value will do.
fn diagnostics() -> StepDiagnostics {
    serde_json::from_value(serde_json::json!({
        "step": 0, "mode": "real", "groups": 1, "anchor_groups": 1, "world_model_groups": 0,
        "anchor_samples": 32, "world_model_samples": 0,
        "stream_weights": {"anchor": 1.0, "world_model": 0.0, "noise_ratio": 0.0},
        "calibrator_pairs": 0, "calibrator_blocks": 0, "calibrator_identity": true,
        "zero_variance_groups": 0, "zero_variance_share": 0.0
    }))
    .unwrap()
}

/// GRPO raises the probability of the rewarded actions: rollouts whose
/// first action dimension is positive get reward 1, the rest 0, with
/// group-normalised advantages; after a few steps the policy samples
/// positive first dimensions far more often, and the encoder is untouched.
#[test]
fn grpo_steps_raise_the_rewarded_actions_and_leave_the_encoder_alone() {
    let _rng = TORCH_RNG.lock().unwrap_or_else(|e| e.into_inner());
    let policy = tiny_policy(0);
    let encoder_before = policy.encoder_fingerprint();
    let mut learner = VlaLearner::new(
        policy,
        GrpoConfig {
            lr: 3e-3,
            kl_coef: 0.01,
            entropy_coef: 0.001,
            epochs: 1,
            ratio: RatioKind::Chunk,
            ..Default::default()
        },
    )
    .unwrap();
    let prompt = TaskPrompt {
        task_index: 0,
        state_index: 0,
        instruction: "open the drawer".into(),
    };
    let latent = random_latent(1);
    let input = ChunkInput {
        latent: latent.clone(),
        proprio: vec![0.0; 15],
    };
    let sample_batch = |learner: &VlaLearner, seed: u64| -> Vec<EpisodeRecord> {
        let vla = learner.policy();
        let _g = tch::no_grad_guard();
        let z = Tensor::from_slice(&latent).view([1, 64]).repeat([32, 1]);
        let p = Tensor::zeros([32, 15], (Kind::Float, Device::Cpu));
        let instr = vla
            .encode_instructions(&vla.tokenize(&["open the drawer"]))
            .repeat([32, 1]);
        let logits = vla.act(&z, &p, &instr);
        tch::manual_seed(seed as i64);
        let dist = ActionDistribution::new(&logits);
        let toks = dist.sample();
        let lps = dist.token_log_probs(&toks);
        vla.chunks_from_tokens(&toks, &lps)
            .into_iter()
            .map(|chunk| EpisodeRecord {
                chunks: vec![chunk],
                inputs: vec![input.clone()],
                ..Default::default()
            })
            .collect()
    };
    let positive = |r: &EpisodeRecord| r.chunks[0].actions[0] > 0.0;
    let rate = |records: &[EpisodeRecord]| {
        records.iter().filter(|r| positive(r)).count() as f64 / records.len() as f64
    };
    let before = rate(&sample_batch(&learner, 1000));
    for step in 0..60 {
        let records = sample_batch(&learner, step);
        let rewards: Vec<f64> = records
            .iter()
            .map(|r| f64::from(u8::from(positive(r))))
            .collect();
        let mean = rewards.iter().sum::<f64>() / rewards.len() as f64;
        let std = (rewards.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / rewards.len() as f64)
            .sqrt()
            .max(1e-6);
        let samples = records
            .into_iter()
            .zip(&rewards)
            .enumerate()
            .map(|(i, (rollout, r))| BatchSample {
                signal: SampleOut {
                    group: 0,
                    sample: i,
                    stream: Stream::Anchor,
                    reward: *r,
                    advantage: (r - mean) / std,
                    loss_weight: 1.0 / 32.0,
                },
                rollout,
            })
            .collect();
        learner
            .learn(Batch {
                step,
                prompts: vec![prompt.clone()],
                samples,
                diagnostics: diagnostics(),
            })
            .unwrap();
        assert!(learner.last.grad_norm.is_finite() && learner.last.chunks == 32);
    }
    let after = rate(&sample_batch(&learner, 1000));
    eprintln!("P(first dimension > 0): {before:.2} -> {after:.2}");
    assert!(
        after > before + 0.3 && after > 0.8,
        "P(first dimension > 0): {before:.2} -> {after:.2}"
    );
    assert_eq!(learner.policy().encoder_fingerprint(), encoder_before);
    assert!(learner.last.kl > 0.0);
}

/// `n` one-chunk rollouts sampled at `temperature` from one latent
/// (64 wide) and zero proprioception, instruction "open the drawer".
fn one_chunk_rollouts(
    policy: &VlaPolicy,
    latent: &[f32],
    n: i64,
    temperature: f64,
) -> Vec<EpisodeRecord> {
    let _g = tch::no_grad_guard();
    let z = Tensor::from_slice(latent).view([1, 64]).repeat([n, 1]);
    let p = Tensor::zeros([n, 15], (Kind::Float, Device::Cpu));
    let instr = policy
        .encode_instructions(&policy.tokenize(&["open the drawer"]))
        .repeat([n, 1]);
    let dist = ActionDistribution::with_temperature(&policy.act(&z, &p, &instr), temperature);
    let toks = dist.sample();
    let lps = dist.token_log_probs(&toks);
    policy
        .chunks_from_tokens(&toks, &lps)
        .into_iter()
        .map(|chunk| EpisodeRecord {
            chunks: vec![chunk],
            inputs: vec![ChunkInput {
                latent: latent.to_vec(),
                proprio: vec![0.0; 15],
            }],
            ..Default::default()
        })
        .collect()
}

/// The policy gradient is linear in the samples: the anchor stream's
/// plus the world-model stream's is the whole batch's; measuring it
/// changes nothing (the same call twice gives the same vector, and no
/// step is counted).
#[test]
fn the_policy_gradient_splits_over_streams_and_changes_nothing() {
    let _rng = TORCH_RNG.lock().unwrap_or_else(|e| e.into_inner());
    let policy = tiny_policy(5);
    let latent = random_latent(7);
    let records = one_chunk_rollouts(&policy, &latent, 16, 1.0);
    let mut learner = VlaLearner::new(policy, GrpoConfig::default()).unwrap();
    let batch = Batch {
        step: 0,
        prompts: vec![TaskPrompt {
            task_index: 0,
            state_index: 0,
            instruction: "open the drawer".into(),
        }],
        samples: records
            .into_iter()
            .enumerate()
            .map(|(i, rollout)| BatchSample {
                signal: SampleOut {
                    group: 0,
                    sample: i,
                    stream: if i % 4 == 0 {
                        Stream::Anchor
                    } else {
                        Stream::WorldModel
                    },
                    reward: (i % 3) as f64,
                    advantage: (i % 3) as f64 - 1.0,
                    loss_weight: 1.0 / 16.0,
                },
                rollout,
            })
            .collect(),
        diagnostics: diagnostics(),
    };
    let mut gradient =
        |keep: &dyn Fn(&SampleOut) -> bool| learner.policy_gradient(&batch, keep).unwrap().unwrap();
    let all = gradient(&|_| true);
    let anchors = gradient(&|s| s.stream == Stream::Anchor);
    let imagined = gradient(&|s| s.stream == Stream::WorldModel);
    assert_eq!(gradient(&|_| true), all, "measuring changed the learner");
    let norm = all
        .iter()
        .map(|g| f64::from(*g).powi(2))
        .sum::<f64>()
        .sqrt();
    let gap = all
        .iter()
        .zip(anchors.iter().zip(&imagined))
        .map(|(a, (x, y))| f64::from(a - x - y).powi(2))
        .sum::<f64>()
        .sqrt();
    assert!(norm > 1e-3, "|g| = {norm}");
    assert!(gap < 1e-4 * norm, "|g − g_A − g_W| = {gap}, |g| = {norm}");
    assert!(
        learner
            .policy_gradient(&batch, &|_| false)
            .unwrap()
            .is_none()
    );
    assert_eq!((learner.steps, learner.optimizer.steps()), (0, 0));
}

/// Rollouts sampled at temperature T have ratio exactly 1 under a learner
/// told T (the first step evaluates the policy that sampled them), and
/// not under one that assumes T = 1; with several epochs per batch the
/// last one sees a moved policy.
#[test]
fn the_ratio_is_exact_at_the_sampling_temperature() {
    let _rng = TORCH_RNG.lock().unwrap_or_else(|e| e.into_inner());
    let policy = tiny_policy(0);
    let latent = random_latent(3);
    let temperature = 0.5;
    let records = one_chunk_rollouts(&policy, &latent, 16, temperature);
    let moved = |learner_temperature: f64, epochs: usize| {
        let config = GrpoConfig {
            epochs,
            lr: 1e-5,
            kl_coef: 0.0,
            ratio: RatioKind::Chunk,
            ..Default::default()
        };
        let mut learner = VlaLearner::new(policy.try_clone().unwrap(), config)
            .unwrap()
            .with_sampling_temperature(learner_temperature)
            .unwrap();
        let samples = records
            .iter()
            .enumerate()
            .map(|(i, rollout)| BatchSample {
                signal: SampleOut {
                    group: 0,
                    sample: i,
                    stream: Stream::Anchor,
                    reward: (i % 2) as f64,
                    advantage: if i % 2 == 0 { -1.0 } else { 1.0 },
                    loss_weight: 1.0 / 16.0,
                },
                rollout: rollout.clone(),
            })
            .collect();
        learner
            .learn(Batch {
                step: 0,
                prompts: vec![TaskPrompt {
                    task_index: 0,
                    state_index: 0,
                    instruction: "open the drawer".into(),
                }],
                samples,
                diagnostics: diagnostics(),
            })
            .unwrap();
        learner.last.mean_abs_log_ratio
    };
    let exact = moved(temperature, 1);
    let assumed_one = moved(1.0, 1);
    // Later epochs on the same batch see the policy their steps moved.
    let third_epoch = moved(temperature, 3);
    assert!(
        third_epoch > 10.0 * exact.max(1e-7),
        "{third_epoch} vs {exact}"
    );
    assert!(
        exact < 1e-4,
        "|log ratio| at the sampling temperature: {exact}"
    );
    assert!(
        assumed_one > 0.1,
        "|log ratio| assuming T = 1: {assumed_one}"
    );
    assert!(
        VlaLearner::new(policy, GrpoConfig::default())
            .unwrap()
            .with_sampling_temperature(0.0)
            .is_err()
    );
}

/// A one-group batch of `records` with the given advantages (weights 1/n).
fn batch_of(records: Vec<EpisodeRecord>, advantages: &[f64]) -> Batch<TaskPrompt, EpisodeRecord> {
    let n = records.len() as f64;
    Batch {
        step: 0,
        prompts: vec![TaskPrompt {
            task_index: 0,
            state_index: 0,
            instruction: "open the drawer".into(),
        }],
        samples: records
            .into_iter()
            .zip(advantages)
            .enumerate()
            .map(|(i, (rollout, a))| BatchSample {
                signal: SampleOut {
                    group: 0,
                    sample: i,
                    stream: Stream::Anchor,
                    reward: *a,
                    advantage: *a,
                    loss_weight: 1.0 / n,
                },
                rollout,
            })
            .collect(),
        diagnostics: diagnostics(),
    }
}

/// With the executor re-planning after 2 of 8 actions, only those actions'
/// tokens enter the loss: changing the tokens (and recorded log-probabilities)
/// of the actions never executed leaves the gradient exactly as it was,
/// while changing an executed token moves it. Holds for every ratio kind.
#[test]
fn only_executed_tokens_enter_the_loss() {
    let _rng = TORCH_RNG.lock().unwrap_or_else(|e| e.into_inner());
    let policy = tiny_policy(9);
    let latent = random_latent(4);
    let mut records = one_chunk_rollouts(&policy, &latent, 8, 1.0);
    let per_action = records[0].chunks[0].action_dim;
    for r in &mut records {
        r.chunks[0].executed = 2;
    }
    let advantages = [1.0, -1.0, 0.5, -0.5, 1.0, -1.0, 0.5, -0.5];
    for ratio in [RatioKind::Chunk, RatioKind::TokenMean, RatioKind::Token] {
        let mut learner = VlaLearner::new(
            policy.try_clone().unwrap(),
            GrpoConfig {
                ratio,
                ..Default::default()
            },
        )
        .unwrap();
        let mut gradient = |records: &[EpisodeRecord]| {
            learner
                .policy_gradient(&batch_of(records.to_vec(), &advantages), &|_| true)
                .unwrap()
                .unwrap()
        };
        let base = gradient(&records);
        let mut unexecuted = records.clone();
        for r in &mut unexecuted {
            let chunk = &mut r.chunks[0];
            for t in 2 * per_action..chunk.tokens.len() {
                chunk.tokens[t] = (chunk.tokens[t] + 17) % 256;
                chunk.token_log_probs[t] -= 1.0;
            }
            chunk.log_prob -= 1.0;
        }
        assert_eq!(gradient(&unexecuted), base, "{ratio:?}");
        let mut executed = records.clone();
        executed[0].chunks[0].tokens[0] = (executed[0].chunks[0].tokens[0] + 17) % 256;
        assert_ne!(gradient(&executed), base, "{ratio:?}");
    }
}

/// A group whose advantages are all zero enters the loss with no row at
/// all (and is counted); with a KL term it would otherwise still pull.
#[test]
fn all_equal_groups_contribute_no_rows() {
    let _rng = TORCH_RNG.lock().unwrap_or_else(|e| e.into_inner());
    let policy = tiny_policy(6);
    let latent = random_latent(2);
    let records = one_chunk_rollouts(&policy, &latent, 8, 1.0);
    let mut learner = VlaLearner::new(
        policy,
        GrpoConfig {
            kl_coef: 0.1,
            entropy_coef: 0.01,
            ..Default::default()
        },
    )
    .unwrap();
    let mut batch = batch_of(records.clone(), &[1.0, -1.0, 1.0, -1.0, 0.0, 0.0, 0.0, 0.0]);
    // A second group of four, all advantages zero (rewards all equal).
    // It is another task's: the per-task count says that task gave no signal.
    let task = batch.prompts[0].task_index;
    let mut other = batch.prompts[0].clone();
    other.task_index += 1;
    batch.prompts.push(other);
    for s in batch.samples.iter_mut().skip(4) {
        s.signal.group = 1;
    }
    learner.learn(batch).unwrap();
    assert_eq!(learner.last.chunks, 4);
    assert_eq!(learner.last.rollouts, 4);
    assert_eq!(learner.last.uninformative_groups, 1);
    assert_eq!(
        learner.last.tasks,
        vec![
            TaskGroups {
                task,
                groups: 1,
                informative: 1
            },
            TaskGroups {
                task: task + 1,
                groups: 1,
                informative: 0
            }
        ]
    );
    let optimizer_steps = learner.optimizer.steps();
    assert_eq!(optimizer_steps, 4, "one step per epoch");
    // Its policy gradient is exactly zero (not missing).
    let zero = learner
        .policy_gradient(&batch_of(records.clone(), &[0.0; 8]), &|_| true)
        .unwrap()
        .unwrap();
    assert!(!zero.is_empty() && zero.iter().all(|g| *g == 0.0));
    // A batch with no informative group takes no step at all.
    learner.learn(batch_of(records, &[0.0; 8])).unwrap();
    assert_eq!(
        (learner.last.chunks, learner.last.uninformative_groups),
        (0, 1)
    );
    assert_eq!(learner.optimizer.steps(), optimizer_steps);
}

/// The latent adapter starts as the identity (the same logits as without
/// it), is trained by a step while the encoder stays as it was, and comes
/// back from a checkpoint: a loaded policy acts exactly as the trained one.
#[test]
fn the_latent_adapter_starts_as_identity_trains_and_reloads() {
    let _rng = TORCH_RNG.lock().unwrap_or_else(|e| e.into_inner());
    let policy = tiny_policy(8);
    let latent = random_latent(3);
    let logits = |policy: &VlaPolicy| {
        let _g = tch::no_grad_guard();
        let z = Tensor::from_slice(&latent).view([1, 64]);
        let p = Tensor::zeros([1, 15], (Kind::Float, Device::Cpu));
        let instr = policy.encode_instructions(&policy.tokenize(&["open the drawer"]));
        policy.act(&z, &p, &instr)
    };
    let plain = logits(&policy);
    let encoder = policy.encoder_fingerprint();
    let records = one_chunk_rollouts(&policy, &latent, 8, 1.0);
    let mut learner = VlaLearner::new(
        policy,
        GrpoConfig {
            lr: 1e-2,
            epochs: 1,
            latent_adapter: 16,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(learner.policy().has_latent_adapter());
    assert_eq!(learner.policy().config().latent_adapter, 16);
    assert!(
        logits(learner.policy()).equal(&plain),
        "a new adapter changes no logit"
    );
    learner
        .learn(batch_of(
            records,
            &[1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0, -1.0],
        ))
        .unwrap();
    let trained = logits(learner.policy());
    assert!(!trained.equal(&plain), "the step changed the policy");
    let adapter_moved = learner
        .policy()
        .var_store()
        .variables()
        .iter()
        .any(|(name, t)| {
            name.starts_with(crate::model::ADAPTER_PREFIX)
                && name.contains("fc2")
                && t.abs().sum(Kind::Float).double_value(&[]) > 0.0
        });
    assert!(adapter_moved, "the adapter's output layer left zero");
    assert_eq!(learner.policy().encoder_fingerprint(), encoder);
    let dir = tempfile::tempdir().unwrap();
    crate::checkpoint::save(learner.policy(), dir.path(), serde_json::Value::Null).unwrap();
    let loaded = crate::checkpoint::load(dir.path(), Device::Cpu).unwrap();
    assert!(loaded.has_latent_adapter());
    assert!(logits(&loaded).equal(&trained));
}
