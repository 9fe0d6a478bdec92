//! The robot bridge on loopback: zenoh peers with scouting off and explicit
//! `tcp/127.0.0.1` endpoints, simulator-backed daemons, the trainer's pool.

mod common;

use std::time::Duration;

use zenoh::Wait;

use common::{ConstantActor, RawTrainer, daemon, endpoint};
use wmrl_core::seams::{AnchorExecutor, EpisodeRequest, Execution};
use wmrl_robots::net::NetOptions;
use wmrl_robots::pool::{PoolOptions, ZenohExecutorPool};
use wmrl_robots::protocol::{
    self, ActionChunkMsg, EpisodeStart, Leaf, Message, OperatorEvent, RobotId, StatusEvent,
};
use wmrl_robots::safety::SafetyLimits;
use wmrl_vla::rollout::TaskPrompt;

const SECOND: Duration = Duration::from_secs(1);

fn prompts(n: usize) -> Vec<TaskPrompt> {
    let tasks = wmrl_vla::sim::suite_tasks();
    (0..n)
        .map(|i| {
            let (task, instruction) = &tasks[(5 + i) % tasks.len()];
            TaskPrompt {
                task_index: *task,
                state_index: i,
                instruction: instruction.clone(),
            }
        })
        .collect()
}

fn requests(prompts: &[TaskPrompt]) -> Vec<EpisodeRequest<'_, TaskPrompt>> {
    prompts
        .iter()
        .enumerate()
        .map(|(i, prompt)| EpisodeRequest {
            group: i,
            sample: 0,
            prompt,
            seed: 100 + i as u64,
            attempt: 0,
        })
        .collect()
}

fn tiny_policy() -> wmrl_vla::VlaPolicy {
    tch::manual_seed(0);
    let config = wmrl_vla::VlaConfig::load("tiny", &[]).unwrap();
    let tasks = wmrl_vla::sim::suite_tasks();
    let tokenizer =
        wmrl_vla::Tokenizer::from_instructions(tasks.iter().map(|(_, text)| text.as_str()));
    wmrl_vla::VlaPolicy::new(config.model, tokenizer, tch::Device::Cpu).unwrap()
}

fn start(robot: &RobotId, episode_id: u64, max_steps: usize) -> Message {
    Message::EpisodeStart(EpisodeStart {
        robot_id: robot.clone(),
        episode_id,
        task: 5,
        initial_state: 0,
        instruction: "test".into(),
        max_steps,
    })
}

fn chunk(robot: &RobotId, episode_id: u64, seq: u64, actions: Vec<Vec<f32>>) -> Message {
    Message::ActionChunk(ActionChunkMsg {
        robot_id: robot.clone(),
        episode_id,
        seq,
        actions,
    })
}

#[test]
fn two_daemons_serve_the_pool_and_a_killed_one_has_its_episode_requeued() {
    let endpoint = endpoint();
    let trainer = NetOptions::listen_on(&endpoint).open().unwrap();
    let a = daemon(&endpoint, "panda-a", |_| {});
    let b = daemon(&endpoint, "panda-b", |_| {});
    let mut pool = ZenohExecutorPool::new(
        trainer,
        PoolOptions {
            max_steps: 120,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(pool.wait_for_robots(2, 10 * SECOND), 2, "both robots join");

    // Kill robot A in the middle of its first episode.
    let killer = std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + 30 * SECOND;
        while a.counters().steps < 16 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        let at_kill = a.counters();
        a.shutdown().unwrap();
        at_kill
    });
    let policy = tiny_policy();
    let prompts = prompts(6);
    let results = pool.execute(&policy, &requests(&prompts)).unwrap();
    let at_kill = killer.join().unwrap();

    assert!(
        at_kill.episodes_started >= 1 && at_kill.steps >= 16,
        "{at_kill:?}"
    );
    assert!(
        at_kill.episodes_finished < at_kill.episodes_started,
        "robot A was killed mid-episode: {at_kill:?}"
    );
    let counters = pool.counters();
    assert!(counters.requeued >= 1, "{counters:?}");
    assert_eq!(results.len(), 6);
    let mut completed = 0;
    for (result, prompt) in results.iter().zip(&prompts) {
        // The untrained policy may fling an object off the table: the
        // simulator reports that as an execution error. Losing robot A must not be one.
        let (rollout, reward) = match result {
            Execution::Completed { rollout, reward } => (rollout, reward),
            Execution::Failed { reason } => {
                assert!(reason.contains("simulation unstable"), "{reason}");
                continue;
            }
        };
        completed += 1;
        assert_eq!(
            (rollout.task_index, rollout.state_index),
            (prompt.task_index, prompt.state_index)
        );
        assert!(rollout.success || rollout.steps == 120, "{}", rollout.steps);
        assert!(!rollout.chunks.is_empty());
        assert_eq!(*reward, f64::from(u8::from(rollout.success)));
    }
    assert_eq!(completed as u64 + counters.robot_errors, 6, "{counters:?}");
    // Robot B finished the rest, including the re-queued episode.
    let b_counters = b.counters();
    assert!(
        b_counters.episodes_finished as usize + at_kill.episodes_finished as usize >= 6,
        "{b_counters:?} {at_kill:?}"
    );
    assert_eq!(pool.robots(), vec![RobotId::new("panda-b").unwrap()]);
}

#[test]
fn the_pool_matches_the_in_process_simulator_episode_for_episode() {
    let endpoint = endpoint();
    let trainer = NetOptions::listen_on(&endpoint).open().unwrap();
    let _robot = daemon(&endpoint, "panda-eq", |_| {});
    let mut pool = ZenohExecutorPool::new(
        trainer,
        PoolOptions {
            max_steps: 40,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(pool.wait_for_robots(1, 10 * SECOND), 1);
    let actor = ConstantActor {
        action: [0.3, -0.2, 0.1, 0.0, 0.0, 0.1, 1.0],
        chunk_len: 8,
    };
    let prompts = prompts(2);
    let bridged = pool.execute(&actor, &requests(&prompts)).unwrap();
    let mut local = wmrl_vla::sim::SimExecutor::new(
        1,
        wmrl_vla::sim::SimExecutorOptions {
            env: wmrl_sim::EnvConfig {
                max_steps: 40,
                ..common::sim_options(32).env
            },
            ..Default::default()
        },
    );
    let local = local.execute(&actor, &requests(&prompts)).unwrap();
    for (b, l) in bridged.iter().zip(&local) {
        match (b, l) {
            (
                Execution::Completed {
                    rollout: b,
                    reward: rb,
                },
                Execution::Completed {
                    rollout: l,
                    reward: rl,
                },
            ) => {
                assert_eq!((b.steps, b.success, rb), (l.steps, l.success, rl));
                assert_eq!(b.chunks.len(), l.chunks.len());
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn a_stalled_trainer_trips_the_watchdog_and_the_episode_resumes() {
    let endpoint = endpoint();
    let session = NetOptions::listen_on(&endpoint).open().unwrap();
    let robot = daemon(&endpoint, "panda-wd", |o| {
        o.watchdog = Duration::from_millis(200)
    });
    let trainer = RawTrainer::new(session, "panda-wd");
    trainer.put(Leaf::Episode, start(&trainer.robot, 1, 100));
    let first = trainer
        .observation(10 * SECOND)
        .expect("observation after reset");
    assert_eq!((first.seq, first.step), (0, 0));
    // The trainer stalls: no action for 500 ms.
    let (_, hold) = trainer.status_until(5 * SECOND, |e| {
        matches!(e, StatusEvent::WatchdogHold { .. })
    });
    let Some(StatusEvent::WatchdogHold {
        waited_ms,
        episode_id,
        ..
    }) = hold
    else {
        panic!("no watchdog hold");
    };
    assert_eq!(episode_id, 1);
    assert!((200..1000).contains(&waited_ms), "{waited_ms}");
    std::thread::sleep(Duration::from_millis(300));
    let counters = robot.counters();
    assert_eq!(
        (counters.watchdog_holds, counters.steps),
        (1, 0),
        "one hold, nothing moved"
    );
    // Actions arrive again: the episode continues.
    trainer.put(
        Leaf::Action,
        chunk(
            &trainer.robot,
            1,
            0,
            vec![wmrl_sim::NOOP_ACTION.to_vec(); 4],
        ),
    );
    let next = trainer
        .observation(10 * SECOND)
        .expect("observation after the chunk");
    assert_eq!((next.seq, next.step), (1, 4));
}

#[test]
fn out_of_bounds_actions_are_clamped_to_the_workspace() {
    let endpoint = endpoint();
    let session = NetOptions::listen_on(&endpoint).open().unwrap();
    // Learn the start height, then allow only 2 cm above it.
    let probe = {
        let mut env = wmrl_sim::SimEnv::new(common::sim_options(0).env);
        env.reset(5, 0).unwrap();
        env.ee_pose().translation.vector.z as f32
    };
    let ceiling = probe + 0.02;
    let robot = daemon(&endpoint, "panda-box", |o| {
        o.limits = SafetyLimits {
            workspace_max: [1.0, 1.0, ceiling],
            ..Default::default()
        }
    });
    let trainer = RawTrainer::new(session, "panda-box");
    trainer.put(Leaf::Episode, start(&trainer.robot, 7, 100));
    let first = trainer.observation(10 * SECOND).unwrap();
    assert!(
        (first.proprio[9] - probe).abs() < 1e-3,
        "eef z {} vs {probe}",
        first.proprio[9]
    );
    // Full-scale "up" for 20 steps would lift the hand by up to a metre.
    let up = vec![0.0, 0.0, 1.0, 0.0, 0.0, 0.0, -1.0];
    trainer.put(
        Leaf::Action,
        chunk(&trainer.robot, 7, 0, vec![up.clone(); 10]),
    );
    let mid = trainer.observation(10 * SECOND).unwrap();
    trainer.put(Leaf::Action, chunk(&trainer.robot, 7, 1, vec![up; 10]));
    let last = trainer.observation(10 * SECOND).unwrap();
    for obs in [&mid, &last] {
        assert!(
            obs.proprio[9] <= ceiling + 0.01,
            "eef z {} above the {ceiling} ceiling (+1 cm tracking tolerance)",
            obs.proprio[9]
        );
    }
    let (_, clamped) =
        trainer.status_until(5 * SECOND, |e| matches!(e, StatusEvent::Clamped { .. }));
    assert!(clamped.is_some(), "a clamped status event");
    assert!(
        robot.counters().clamped_actions >= 10,
        "{:?}",
        robot.counters()
    );
}

#[test]
fn bad_messages_are_rejected_and_the_daemon_keeps_serving() {
    let endpoint = endpoint();
    let session = NetOptions::listen_on(&endpoint).open().unwrap();
    let robot = daemon(&endpoint, "panda-bad", |o| o.max_message_bytes = 64 << 10);
    let trainer = RawTrainer::new(session, "panda-bad");
    let me = trainer.robot.clone();
    trainer.put(Leaf::Episode, start(&me, 3, 100));
    assert!(trainer.observation(10 * SECOND).is_some());

    // Python's json.dumps writes NaN as a bare `NaN`; JSON has no such token.
    let nan = br#"{"v":1,"type":"action_chunk","robot_id":"panda-bad","episode_id":3,"seq":0,"actions":[[0,NaN,0,0,0,0,0]]}"#;
    let overflow = br#"{"v":1,"type":"action_chunk","robot_id":"panda-bad","episode_id":3,"seq":0,"actions":[[0,1e39,0,0,0,0,0]]}"#;
    let bad: Vec<(&str, Vec<u8>)> = vec![
        ("malformed", b"{not json".to_vec()),
        ("oversized", vec![b' '; 100 << 10]),
        (
            "wrong version",
            br#"{"v":99,"type":"abort","robot_id":"panda-bad","episode_id":3}"#.to_vec(),
        ),
        (
            "other robot",
            protocol::encode(&chunk(
                &RobotId::new("ghost").unwrap(),
                3,
                0,
                vec![vec![0.0; 7]],
            )),
        ),
        ("nan", nan.to_vec()),
        ("overflow", overflow.to_vec()),
        (
            "wrong dimension",
            protocol::encode(&chunk(&me, 3, 0, vec![vec![0.0; 6]])),
        ),
        (
            "stale seq",
            protocol::encode(&chunk(&me, 3, 9, vec![vec![0.0; 7]])),
        ),
    ];
    for (name, bytes) in &bad {
        trainer.put_bytes(Leaf::Action, bytes.clone());
        let (_, rejected) =
            trainer.status_until(5 * SECOND, |e| matches!(e, StatusEvent::Rejected { .. }));
        let Some(StatusEvent::Rejected { reason, .. }) = rejected else {
            panic!("{name}: not rejected");
        };
        let expect = match *name {
            "malformed" => "malformed",
            "oversized" => "exceeds",
            "wrong version" => "version mismatch",
            "other robot" => "ghost",
            "nan" => "malformed",
            "overflow" => "finite",
            "wrong dimension" => "expected 7 values",
            _ => "stale",
        };
        assert!(reason.contains(expect), "{name}: {reason}");
    }
    let counters = robot.counters();
    assert_eq!(counters.rejected_messages, bad.len() as u64);
    assert_eq!(counters.steps, 0, "no bad chunk moved the arm");
    // Still serving: a good chunk runs.
    trainer.put(
        Leaf::Action,
        chunk(&me, 3, 0, vec![vec![0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0]; 2]),
    );
    let obs = trainer.observation(10 * SECOND).expect("still serving");
    assert_eq!(obs.step, 2);
}

#[test]
fn an_emergency_stop_halts_the_episode_until_cleared() {
    let endpoint = endpoint();
    let session = NetOptions::listen_on(&endpoint).open().unwrap();
    let robot = daemon(&endpoint, "panda-stop", |_| {});
    let trainer = RawTrainer::new(session, "panda-stop");
    let me = trainer.robot.clone();
    trainer.put(Leaf::Episode, start(&me, 1, 100));
    assert!(trainer.observation(10 * SECOND).is_some());
    trainer
        .session
        .put(
            protocol::ESTOP_KEY,
            protocol::encode(&Message::Operator(OperatorEvent::EmergencyStop)),
        )
        .wait()
        .unwrap();
    let outcome = trainer.outcome(10 * SECOND).expect("an outcome");
    assert_eq!(outcome.execution_error.as_deref(), Some("emergency stop"));
    assert!(!outcome.success);
    // Refused while stopped.
    trainer.put(Leaf::Episode, start(&me, 2, 100));
    let (_, rejected) =
        trainer.status_until(5 * SECOND, |e| matches!(e, StatusEvent::Rejected { .. }));
    assert!(
        matches!(&rejected, Some(StatusEvent::Rejected { reason, .. }) if reason.contains("emergency stop")),
        "{rejected:?}"
    );
    assert!(trainer.observation(Duration::from_millis(300)).is_none());
    // Cleared: the next episode starts with a reset.
    trainer.put(Leaf::Operator, Message::Operator(OperatorEvent::ClearStop));
    trainer.put(Leaf::Episode, start(&me, 3, 100));
    let obs = trainer
        .observation(10 * SECOND)
        .expect("runs after clear_stop");
    assert_eq!((obs.episode_id, obs.step), (3, 0));
    assert_eq!(robot.counters().emergency_stops, 1);
}

#[test]
fn a_robot_speaking_another_protocol_version_is_refused_by_the_pool() {
    let endpoint = endpoint();
    let trainer = NetOptions::listen_on(&endpoint).open().unwrap();
    // A robot from the future: announces itself, answers info with v2.
    let robot = NetOptions::connect_to(&endpoint).open().unwrap();
    let id = RobotId::new("panda-v2").unwrap();
    let _queryable = robot
        .declare_queryable(id.key(Leaf::Info))
        .callback(|query| {
            let v2 = br#"{"v":2,"type":"info","robot_id":"panda-v2"}"#.to_vec();
            query.reply(query.key_expr().clone(), v2).wait().unwrap();
        })
        .wait()
        .unwrap();
    let _token = robot
        .liveliness()
        .declare_token(id.key(Leaf::Alive))
        .wait()
        .unwrap();
    let mut pool = ZenohExecutorPool::new(
        trainer,
        PoolOptions {
            discovery_timeout: Duration::from_secs(2),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(pool.wait_for_robots(1, 2 * SECOND), 0);
    let actor = ConstantActor {
        action: [0.0; 7],
        chunk_len: 8,
    };
    let prompts = prompts(1);
    let err = pool.execute(&actor, &requests(&prompts)).unwrap_err();
    let message = err.to_string();
    assert!(message.contains("no robot available"), "{message}");
    assert!(message.contains("panda-v2"), "{message}");
    assert!(message.contains("protocol version mismatch"), "{message}");
}

/// A real arm's shape: the scene is reset by a person and success is judged by one.
struct OperatorArm(wmrl_robots::driver::SimDriver);

impl wmrl_robots::driver::RobotDriver for OperatorArm {
    fn info(&self) -> wmrl_robots::driver::DriverInfo {
        wmrl_robots::driver::DriverInfo {
            driver: "operator-arm".into(),
            automatic_success: false,
            ..self.0.info()
        }
    }
    fn reset(
        &mut self,
        task: usize,
        state: usize,
    ) -> Result<wmrl_robots::driver::ResetStatus, wmrl_robots::driver::DriverError> {
        self.0.reset(task, state)?;
        Ok(wmrl_robots::driver::ResetStatus::NeedsOperator)
    }
    fn observe(&mut self) -> Result<wmrl_sim::Observation, wmrl_robots::driver::DriverError> {
        self.0.observe()
    }
    fn step(
        &mut self,
        action: &[f32; 7],
    ) -> Result<wmrl_robots::driver::StepReport, wmrl_robots::driver::DriverError> {
        self.0
            .step(action)
            .map(|r| wmrl_robots::driver::StepReport {
                success: false,
                ..r
            })
    }
    fn hold(&mut self) -> Result<(), wmrl_robots::driver::DriverError> {
        self.0.hold()
    }
    fn emergency_stop(&mut self) {
        self.0.emergency_stop()
    }
    fn end_effector_position(&self) -> [f32; 3] {
        self.0.end_effector_position()
    }
}

#[test]
fn an_operator_run_robot_waits_for_the_reset_and_the_verdict() {
    let endpoint = endpoint();
    let session = NetOptions::listen_on(&endpoint).open().unwrap();
    let robot_session = NetOptions::connect_to(&endpoint).open().unwrap();
    let id = RobotId::new("panda-op").unwrap();
    let _robot = wmrl_robots::daemon::RobotDaemon::spawn(
        robot_session,
        Box::new(OperatorArm(wmrl_robots::driver::SimDriver::new(
            common::sim_options(16),
        ))),
        wmrl_robots::daemon::DaemonOptions::new(id.clone()),
    )
    .unwrap();
    let trainer = RawTrainer::new(session, "panda-op");
    trainer.put(Leaf::Episode, start(&id, 4, 8));
    let (_, waiting) = trainer.status_until(5 * SECOND, |e| {
        matches!(e, StatusEvent::AwaitingReset { .. })
    });
    assert!(waiting.is_some());
    assert!(
        trainer.observation(Duration::from_millis(300)).is_none(),
        "no episode before the reset is confirmed"
    );
    trainer.put(Leaf::Operator, Message::Operator(OperatorEvent::ResetDone));
    let obs = trainer
        .observation(10 * SECOND)
        .expect("starts after reset_done");
    assert_eq!(obs.seq, 0);
    trainer.put(
        Leaf::Action,
        chunk(&id, 4, 0, vec![wmrl_sim::NOOP_ACTION.to_vec(); 8]),
    );
    let (_, verdict) = trainer.status_until(5 * SECOND, |e| {
        matches!(e, StatusEvent::AwaitingVerdict { .. })
    });
    assert!(verdict.is_some());
    assert!(trainer.outcome(Duration::from_millis(200)).is_none());
    trainer.put(
        Leaf::Operator,
        Message::Operator(OperatorEvent::SuccessConfirmed { success: true }),
    );
    let outcome = trainer
        .outcome(10 * SECOND)
        .expect("outcome after the verdict");
    assert!(outcome.success);
    assert_eq!((outcome.steps, outcome.execution_error), (8, None));
}
