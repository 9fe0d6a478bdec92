//! Opening zenoh sessions: from a JSON5 config file (TLS, access control,
//! routers; see `robots/zenoh/`) or from explicit endpoints.
//!
//! Without a config file, multicast and gossip scouting are off and peers
//! reach each other only through the listed `tcp/HOST:PORT` endpoints:
//! explicit, reproducible, and what the loopback tests use.

use std::path::{Path, PathBuf};

use zenoh::{Config, Session, Wait};

use crate::{Error, Result};

/// How to join the zenoh network.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NetOptions {
    /// A zenoh JSON5 config file; endpoints below are added to it.
    pub config_file: Option<PathBuf>,
    /// `peer` (default without a file), `client` or `router`.
    pub mode: Option<String>,
    /// Endpoints to listen on (e.g. `tcp/127.0.0.1:7447`).
    pub listen: Vec<String>,
    /// Endpoints to connect to.
    pub connect: Vec<String>,
}

impl NetOptions {
    /// A peer that connects to `endpoint` only.
    pub fn connect_to(endpoint: &str) -> Self {
        NetOptions {
            connect: vec![endpoint.to_string()],
            ..Default::default()
        }
    }

    /// A peer that listens on `endpoint` only.
    pub fn listen_on(endpoint: &str) -> Self {
        NetOptions {
            listen: vec![endpoint.to_string()],
            ..Default::default()
        }
    }

    /// The zenoh config these options describe.
    pub fn config(&self) -> Result<Config> {
        let mut config = match &self.config_file {
            Some(path) => load_config(path)?,
            None => {
                let mut config = Config::default();
                set(
                    &mut config,
                    "scouting/multicast/enabled",
                    "false",
                    "defaults",
                )?;
                set(&mut config, "scouting/gossip/enabled", "false", "defaults")?;
                config
            }
        };
        let origin = "command line";
        if let Some(mode) = &self.mode {
            set(&mut config, "mode", &format!("{mode:?}"), origin)?;
        } else if self.config_file.is_none() {
            set(&mut config, "mode", "\"peer\"", origin)?;
        }
        if !self.listen.is_empty() {
            let list = serde_json::to_string(&self.listen).expect("strings serialise");
            set(&mut config, "listen/endpoints", &list, origin)?;
        }
        if !self.connect.is_empty() {
            let list = serde_json::to_string(&self.connect).expect("strings serialise");
            set(&mut config, "connect/endpoints", &list, origin)?;
        }
        Ok(config)
    }

    /// Opens a session.
    pub fn open(&self) -> Result<Session> {
        let config = self.config()?;
        zenoh::open(config).wait().map_err(|e| Error::Zenoh {
            context: format!(
                "opening a zenoh session (listen {:?}, connect {:?})",
                self.listen, self.connect
            ),
            message: e.to_string(),
        })
    }
}

/// Publishes one protocol message reliably: control messages and
/// observations are never dropped under congestion (the publisher waits).
pub fn publish(session: &Session, key: &str, message: &crate::protocol::Message) -> Result<()> {
    session
        .put(key, crate::protocol::encode(message))
        .congestion_control(zenoh::qos::CongestionControl::Block)
        .wait()
        .map_err(|e| Error::zenoh(format!("publishing on {key}"), e))
}

/// Loads a zenoh JSON5 config file, naming the file in any error.
pub fn load_config(path: &Path) -> Result<Config> {
    if !path.exists() {
        return Err(Error::Config {
            path: path.to_path_buf(),
            message: "no such file".into(),
        });
    }
    Config::from_file(path).map_err(|e| Error::Config {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

fn set(config: &mut Config, key: &str, value: &str, origin: &str) -> Result<()> {
    config.insert_json5(key, value).map_err(|e| Error::Config {
        path: PathBuf::from(origin),
        message: format!("setting `{key}` to {value}: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_malformed_config_files_are_named() {
        let err = load_config(Path::new("/no/such/zenoh.json5")).unwrap_err();
        assert!(err.to_string().contains("/no/such/zenoh.json5"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.json5");
        std::fs::write(&path, "{ mode: \"submarine\" }").unwrap();
        let err = load_config(&path).unwrap_err();
        assert!(err.to_string().contains("bad.json5"), "{err}");
    }

    #[test]
    fn explicit_endpoints_turn_scouting_off() {
        let config = NetOptions::connect_to("tcp/127.0.0.1:7999")
            .config()
            .unwrap();
        let endpoints = config.get_json("connect/endpoints").unwrap();
        assert!(endpoints.contains("tcp/127.0.0.1:7999"), "{endpoints}");
        assert_eq!(
            config.get_json("scouting/multicast/enabled").unwrap(),
            "false"
        );
    }
}
