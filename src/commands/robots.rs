//! `wmrl robots serve` (serve one robot over zenoh) and `wmrl robots …` (TLS
//! certificates and configs, a router, emergency stop, discovery).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use zenoh::Wait;

use wmrl_robots::certs::{self, Identities};
use wmrl_robots::daemon::{DaemonOptions, RobotDaemon};
use wmrl_robots::driver::{SimDriver, SimDriverOptions};
use wmrl_robots::net::NetOptions;
use wmrl_robots::pool::{PoolOptions, ZenohExecutorPool};
use wmrl_robots::protocol::{self, ESTOP_KEY, Leaf, Message, OperatorEvent, RobotId};
use wmrl_robots::safety::SafetyLimits;

use crate::cli::GlobalArgs;

/// How to join the zenoh network (shared by every command that does).
#[derive(Debug, Clone, Default, Args)]
pub struct ZenohArgs {
    /// zenoh JSON5 config file (TLS, access control); see `wmrl robots certs`.
    #[arg(long, value_name = "FILE")]
    pub zenoh_config: Option<PathBuf>,
    /// Endpoint to connect to, e.g. tcp/192.168.1.10:7447 (repeatable).
    #[arg(long, value_name = "ENDPOINT")]
    pub connect: Vec<String>,
    /// Endpoint to listen on, e.g. tcp/0.0.0.0:7447 (repeatable).
    #[arg(long, value_name = "ENDPOINT")]
    pub listen: Vec<String>,
    /// zenoh mode: peer (default), client or router.
    #[arg(long)]
    pub zenoh_mode: Option<String>,
}

impl ZenohArgs {
    /// The session options, checking that the network is reachable somehow.
    pub fn net(&self) -> anyhow::Result<NetOptions> {
        if self.zenoh_config.is_none() && self.connect.is_empty() && self.listen.is_empty() {
            anyhow::bail!(
                "say how to reach the robots: --connect tcp/HOST:PORT, --listen tcp/HOST:PORT or --zenoh-config FILE"
            );
        }
        Ok(NetOptions {
            config_file: self.zenoh_config.clone(),
            mode: self.zenoh_mode.clone(),
            listen: self.listen.clone(),
            connect: self.connect.clone(),
        })
    }
}

/// Arguments of `wmrl robots serve`.
#[derive(Debug, Args)]
pub struct RobotdArgs {
    /// The robot's id (its key `wmrl/robots/<id>/…`).
    #[arg(long)]
    pub id: String,
    #[command(flatten)]
    pub zenoh: ZenohArgs,
    /// Driver: `sim` (the built-in simulator; the only one shipped).
    #[arg(long, default_value = "sim")]
    pub driver: String,
    /// Camera size in pixels (sim driver).
    #[arg(long, default_value_t = 128)]
    pub camera_size: u32,
    /// Pace the simulator at 20 Hz like a real arm.
    #[arg(long)]
    pub realtime: bool,
    /// Hold the arm when no action arrives within this many milliseconds.
    #[arg(long, default_value_t = 200)]
    pub watchdog_ms: u64,
    /// End an episode as an execution error after this many seconds without actions.
    #[arg(long, default_value_t = 30.0)]
    pub abandon_after_s: f64,
    /// Safety limits (TOML: workspace_min, workspace_max, max_step_translation, max_step_rotation).
    #[arg(long, value_name = "FILE")]
    pub limits: Option<PathBuf>,
}

/// `wmrl robots serve`: serve one robot until interrupted.
pub fn robotd(_global: &GlobalArgs, args: RobotdArgs) -> anyhow::Result<()> {
    let id = RobotId::new(&args.id)?;
    if args.driver != "sim" {
        anyhow::bail!(
            "unknown driver `{}`: this build ships `sim`; add a vendor driver by implementing wmrl_robots::driver::RobotDriver",
            args.driver
        );
    }
    let limits = match &args.limits {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading safety limits {}", path.display()))?;
            let limits: SafetyLimits = toml::from_str(&text)
                .with_context(|| format!("parsing safety limits {}", path.display()))?;
            limits
                .validate()
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            limits
        }
        None => SafetyLimits::default(),
    };
    let session = args.zenoh.net()?.open()?;
    let mut sim = SimDriverOptions {
        realtime: args.realtime,
        ..Default::default()
    };
    sim.env.camera.width = args.camera_size;
    sim.env.camera.height = args.camera_size;
    sim.env.camera.enabled = args.camera_size > 0;
    let mut options = DaemonOptions::new(id.clone());
    options.limits = limits;
    options.watchdog = Duration::from_millis(args.watchdog_ms);
    options.abandon_after = Duration::from_secs_f64(args.abandon_after_s);
    let daemon = RobotDaemon::spawn(session, Box::new(SimDriver::new(sim)), options)?;
    eprintln!("robot `{id}` serving (sim driver); Ctrl-C to stop");
    daemon.join()?;
    Ok(())
}

/// Arguments of `wmrl robots`.
#[derive(Debug, Args)]
pub struct RobotsArgs {
    #[command(subcommand)]
    pub command: RobotsCommand,
}

/// Robot-network tools.
#[derive(Debug, Subcommand)]
pub enum RobotsCommand {
    /// Serve one robot over zenoh on the arm's computer (the simulator driver is built in).
    Serve(RobotdArgs),
    /// Write a private CA, certificates and zenoh configs (router with access control, clients).
    Certs {
        /// Output folder.
        #[arg(long)]
        out: PathBuf,
        /// Router TLS port on localhost.
        #[arg(long, default_value_t = 7447)]
        port: u16,
        /// Robot ids, comma-separated.
        #[arg(long, value_delimiter = ',', required = true)]
        robots: Vec<String>,
        /// Read-only identities (dashboards), comma-separated.
        #[arg(long, value_delimiter = ',')]
        observers: Vec<String>,
    },
    /// Run a zenoh router (e.g. with the router.json5 that `certs` wrote).
    Router {
        #[command(flatten)]
        zenoh: ZenohArgs,
    },
    /// Emergency stop: every robot, or one with --robot; --clear lifts it on one robot.
    Estop {
        #[command(flatten)]
        zenoh: ZenohArgs,
        /// Only this robot.
        #[arg(long)]
        robot: Option<String>,
        /// Send `clear_stop` instead (needs --robot).
        #[arg(long)]
        clear: bool,
    },
    /// List the robots that announce themselves.
    List {
        #[command(flatten)]
        zenoh: ZenohArgs,
        /// Seconds to listen.
        #[arg(long, default_value_t = 2.0)]
        wait_s: f64,
    },
}

/// `wmrl robots …`.
pub fn robots(global: &GlobalArgs, args: RobotsArgs) -> anyhow::Result<()> {
    match args.command {
        RobotsCommand::Serve(args) => robotd(global, args),
        RobotsCommand::Certs {
            out,
            port,
            robots,
            observers,
        } => {
            let who = Identities {
                robots: robots
                    .iter()
                    .map(|r| RobotId::new(r))
                    .collect::<Result<_, _>>()?,
                observers,
            };
            let setup = certs::generate(&out, port, &who)?;
            if global.json {
                let configs: Vec<_> = setup
                    .client_configs
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect();
                println!(
                    "{}",
                    serde_json::json!({
                        "ca": setup.ca,
                        "router_config": setup.router_config,
                        "client_configs": configs,
                    })
                );
            } else {
                println!("CA: {}", setup.ca.display());
                println!(
                    "router: wmrl robots router --zenoh-config {}",
                    setup.router_config.display()
                );
                for config in &setup.client_configs {
                    println!("client config: {}", config.display());
                }
            }
            Ok(())
        }
        RobotsCommand::Router { zenoh } => {
            let mut net = zenoh.net()?;
            net.mode.get_or_insert_with(|| "router".into());
            let session = net.open()?;
            eprintln!("zenoh router {} running; Ctrl-C to stop", session.zid());
            loop {
                std::thread::park();
            }
        }
        RobotsCommand::Estop {
            zenoh,
            robot,
            clear,
        } => {
            let session = zenoh.net()?.open()?;
            std::thread::sleep(Duration::from_millis(500));
            let (key, event) = match (&robot, clear) {
                (Some(robot), clear) => (
                    RobotId::new(robot)?.key(Leaf::Operator),
                    if clear {
                        OperatorEvent::ClearStop
                    } else {
                        OperatorEvent::EmergencyStop
                    },
                ),
                (None, false) => (ESTOP_KEY.to_string(), OperatorEvent::EmergencyStop),
                (None, true) => {
                    anyhow::bail!("--clear needs --robot ID: stops are lifted one robot at a time")
                }
            };
            session
                .put(&key, protocol::encode(&Message::Operator(event)))
                .wait()
                .map_err(|e| anyhow::anyhow!("publishing on {key}: {e}"))?;
            session.close().wait().map_err(|e| anyhow::anyhow!("{e}"))?;
            println!("sent on {key}");
            Ok(())
        }
        RobotsCommand::List { zenoh, wait_s } => {
            let session = zenoh.net()?.open()?;
            let mut pool = ZenohExecutorPool::new(session, PoolOptions::default())?;
            pool.wait_for_robots(usize::MAX, Duration::from_secs_f64(wait_s));
            let robots: Vec<String> = pool.robots().iter().map(|r| r.to_string()).collect();
            if global.json {
                println!("{}", serde_json::json!({ "robots": robots }));
            } else if robots.is_empty() {
                println!("no robots seen in {wait_s} s");
            } else {
                for robot in robots {
                    println!("{robot}");
                }
            }
            Ok(())
        }
    }
}
