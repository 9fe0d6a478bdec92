//! TLS with client certificates and the router's access control: the trainer
//! runs an episode through the router; an observer's certificate is valid but
//! may not move the robot; a peer without a certificate cannot connect.

mod common;

use std::time::Duration;

use common::{ConstantActor, RawTrainer};
use wmrl_core::seams::{AnchorExecutor, EpisodeRequest, Execution};
use wmrl_robots::certs::{self, Identities};
use wmrl_robots::daemon::{DaemonOptions, RobotDaemon};
use wmrl_robots::driver::SimDriver;
use wmrl_robots::net::NetOptions;
use wmrl_robots::pool::{PoolOptions, ZenohExecutorPool};
use wmrl_robots::protocol::{ActionChunkMsg, EpisodeStart, Leaf, Message, RobotId};
use wmrl_vla::rollout::TaskPrompt;

fn config(path: &std::path::Path) -> NetOptions {
    NetOptions {
        config_file: Some(path.to_path_buf()),
        ..Default::default()
    }
}

#[test]
fn only_the_trainer_identity_can_move_the_robot() {
    let dir = tempfile::tempdir().unwrap();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let robot = RobotId::new("panda-1").unwrap();
    let who = Identities {
        robots: vec![robot.clone()],
        observers: vec!["dashboard".into()],
    };
    let setup = certs::generate(dir.path(), port, &who).unwrap();
    let client = |name: &str| {
        setup
            .client_configs
            .iter()
            .find(|p| p.file_name().unwrap().to_str().unwrap() == name)
            .unwrap()
            .clone()
    };
    let _router = config(&setup.router_config).open().unwrap();
    let daemon = RobotDaemon::spawn(
        config(&client("robot-panda-1.json5")).open().unwrap(),
        Box::new(SimDriver::new(common::sim_options(32))),
        DaemonOptions::new(robot.clone()),
    )
    .unwrap();

    // An observer holds a valid certificate but no right to command robots.
    let observer = RawTrainer::new(
        config(&client("observer-dashboard.json5")).open().unwrap(),
        "panda-1",
    );
    observer.put(
        Leaf::Episode,
        Message::EpisodeStart(EpisodeStart {
            robot_id: robot.clone(),
            episode_id: 1,
            task: 5,
            initial_state: 0,
            instruction: "intrude".into(),
            max_steps: 50,
        }),
    );
    observer.put(
        Leaf::Action,
        Message::ActionChunk(ActionChunkMsg {
            robot_id: robot.clone(),
            episode_id: 1,
            seq: 0,
            actions: vec![vec![0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]; 8],
        }),
    );
    std::thread::sleep(Duration::from_millis(800));
    let counters = daemon.counters();
    assert_eq!(
        (
            counters.episodes_started,
            counters.steps,
            counters.rejected_messages
        ),
        (0, 0, 0),
        "the observer's commands never reached the robot"
    );

    // A peer without a client certificate cannot even connect.
    let no_cert = dir.path().join("no-cert.json5");
    std::fs::write(
        &no_cert,
        format!(
            r#"{{ mode: "client", connect: {{ endpoints: ["tls/localhost:{port}"] }},
                 scouting: {{ multicast: {{ enabled: false }} }},
                 transport: {{ link: {{ tls: {{ root_ca_certificate: {:?} }} }} }} }}"#,
            setup.ca.display().to_string()
        ),
    )
    .unwrap();
    assert!(
        config(&no_cert).open().is_err(),
        "mTLS refuses a peer without a certificate"
    );

    // The trainer's identity runs an episode through the router.
    let mut pool = ZenohExecutorPool::new(
        config(&client("trainer.json5")).open().unwrap(),
        PoolOptions {
            max_steps: 24,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(pool.wait_for_robots(1, Duration::from_secs(10)), 1);
    let prompt = TaskPrompt {
        task_index: 5,
        state_index: 0,
        instruction: "pick up the book".into(),
    };
    let request = EpisodeRequest {
        group: 0,
        sample: 0,
        prompt: &prompt,
        seed: 1,
        attempt: 0,
    };
    let actor = ConstantActor {
        action: [0.0, 0.0, 0.2, 0.0, 0.0, 0.0, -1.0],
        chunk_len: 8,
    };
    let results = pool.execute(&actor, &[request]).unwrap();
    assert!(
        matches!(&results[0], Execution::Completed { rollout, .. } if rollout.steps == 24),
        "{results:?}"
    );
    assert_eq!(daemon.counters().episodes_started, 1);
    // The observer was connected all along: it may watch, just not command.
    assert!(
        observer.observation(Duration::from_secs(5)).is_some(),
        "the observer sees the trainer's episode"
    );
}
