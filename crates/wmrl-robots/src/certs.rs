//! A private certificate authority and zenoh configs for a secured robot
//! network: TLS with client certificates (mTLS) to a router whose access
//! control lets only the trainer's identity start episodes and send actions.
//!
//! Identities are certificate common names: `trainer`, `operator`, one per
//! robot, and `router`. The router denies by default; an identity with no
//! policy (a valid certificate with another name) may do nothing at all, and a
//! peer without a certificate from the CA cannot connect. `wmrl robots certs`
//! writes everything below into one folder.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

use crate::protocol::{ESTOP_KEY, Leaf, RobotId};
use crate::{Error, Result};

/// The trainer's certificate common name.
pub const TRAINER: &str = "trainer";
/// The operator console's certificate common name.
pub const OPERATOR: &str = "operator";
/// The router's certificate common name (its DNS name is `localhost`).
pub const ROUTER: &str = "router";

/// Who gets a certificate.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Identities {
    /// Robots (their ids are their common names).
    pub robots: Vec<RobotId>,
    /// Read-only identities (dashboards, loggers): may subscribe and query,
    /// may publish nothing.
    pub observers: Vec<String>,
}

/// One identity's files.
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    /// Certificate common name.
    pub name: String,
    /// PEM certificate.
    pub certificate: PathBuf,
    /// PEM private key.
    pub key: PathBuf,
}

/// What [`generate`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct SecureSetup {
    /// The CA certificate every party trusts.
    pub ca: PathBuf,
    /// Router, trainer, operator, robot and observer identities, in that order.
    pub identities: Vec<Identity>,
    /// The router's config (listens on the endpoint, enforces access control).
    pub router_config: PathBuf,
    /// Client configs: `trainer.json5`, `operator.json5`, `robot-<id>.json5`,
    /// `observer-<name>.json5`, in identity order.
    pub client_configs: Vec<PathBuf>,
}

fn cert_error(what: &str, e: rcgen::Error) -> Error {
    Error::Certificates(format!("{what}: {e}"))
}

fn write(path: &Path, text: &str) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })
}

/// Writes a CA, certificates for the router, trainer, operator, robots and observers,
/// and zenoh configs for a router listening on `tls/localhost:<port>` and
/// clients connecting to it, into `dir`. Paths inside the configs are absolute.
pub fn generate(dir: &Path, port: u16, who: &Identities) -> Result<SecureSetup> {
    for name in &who.observers {
        RobotId::new(name).map_err(|_| {
            Error::Certificates(format!(
                "observer name `{name}` must be 1-64 characters from [A-Za-z0-9_-]"
            ))
        })?;
    }
    std::fs::create_dir_all(dir).map_err(|source| Error::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let dir = dir.canonicalize().map_err(|source| Error::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let ca_key = KeyPair::generate().map_err(|e| cert_error("CA key", e))?;
    let mut ca_params =
        CertificateParams::new(Vec::<String>::new()).map_err(|e| cert_error("CA", e))?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "WMRL robots CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = ca_params
        .self_signed(&ca_key)
        .map_err(|e| cert_error("signing the CA", e))?;
    let ca_path = dir.join("ca.pem");
    write(&ca_path, &ca.pem())?;

    let mut names = vec![ROUTER.to_string(), TRAINER.into(), OPERATOR.into()];
    names.extend(who.robots.iter().map(|r| r.as_str().to_string()));
    names.extend(who.observers.iter().cloned());
    let mut identities = Vec::new();
    for name in names {
        let key = KeyPair::generate().map_err(|e| cert_error(&name, e))?;
        let mut params = CertificateParams::new(vec!["localhost".to_string(), name.clone()])
            .map_err(|e| cert_error(&name, e))?;
        params.distinguished_name.push(DnType::CommonName, &name);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let cert = params
            .signed_by(&key, &ca, &ca_key)
            .map_err(|e| cert_error(&format!("signing {name}"), e))?;
        let identity = Identity {
            certificate: dir.join(format!("{name}.pem")),
            key: dir.join(format!("{name}.key")),
            name,
        };
        write(&identity.certificate, &cert.pem())?;
        write(&identity.key, &key.serialize_pem())?;
        identities.push(identity);
    }

    let router_config = dir.join("router.json5");
    write(
        &router_config,
        &router_json5(&ca_path, &identities[0], port, who),
    )?;
    let mut client_configs = Vec::new();
    for identity in &identities[1..] {
        let file = if identity.name == TRAINER || identity.name == OPERATOR {
            format!("{}.json5", identity.name)
        } else if who.observers.contains(&identity.name) {
            format!("observer-{}.json5", identity.name)
        } else {
            format!("robot-{}.json5", identity.name)
        };
        let path = dir.join(file);
        write(&path, &client_json5(&ca_path, identity, port))?;
        client_configs.push(path);
    }
    Ok(SecureSetup {
        ca: ca_path,
        identities,
        router_config,
        client_configs,
    })
}

fn quoted(path: &Path) -> String {
    serde_json::to_string(&path.display().to_string()).expect("strings serialise")
}

/// A client (trainer, operator or robot) that connects to the router with its certificate.
pub fn client_json5(ca: &Path, identity: &Identity, port: u16) -> String {
    format!(
        r#"// zenoh client config for `{name}`: connects to the WMRL router over TLS
// with its own certificate (mTLS); the router's access control decides what
// this identity may publish.
{{
  mode: "client",
  connect: {{ endpoints: ["tls/localhost:{port}"] }},
  scouting: {{ multicast: {{ enabled: false }}, gossip: {{ enabled: false }} }},
  transport: {{
    link: {{
      tls: {{
        root_ca_certificate: {ca},
        connect_private_key: {key},
        connect_certificate: {cert},
        enable_mtls: true,
        verify_name_on_connect: true,
      }},
    }},
  }},
}}
"#,
        name = identity.name,
        ca = quoted(ca),
        key = quoted(&identity.key),
        cert = quoted(&identity.certificate),
    )
}

/// The router: listens on TLS, requires client certificates, and enforces
/// who may command robots.
pub fn router_json5(ca: &Path, router: &Identity, port: u16, who: &Identities) -> String {
    let list = |items: &[String]| {
        items
            .iter()
            .map(|s| serde_json::to_string(s).expect("strings serialise"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let robot_names: Vec<String> = who.robots.iter().map(|r| r.as_str().to_string()).collect();
    // A subject property may not be an empty list: absent roles match a name no certificate has.
    let or_nobody = |names: Vec<String>| {
        if names.is_empty() {
            vec!["(nobody)".to_string()]
        } else {
            names
        }
    };
    let robot_names = or_nobody(robot_names);
    let observer_names = or_nobody(who.observers.clone());
    let commands = list(&[
        Leaf::Episode.every_robot(),
        Leaf::Action.every_robot(),
        Leaf::Abort.every_robot(),
    ]);
    let operator = list(&[Leaf::Operator.every_robot(), ESTOP_KEY.to_string()]);
    let reports = list(&[
        Leaf::Obs.every_robot(),
        Leaf::Outcome.every_robot(),
        Leaf::Status.every_robot(),
    ]);
    format!(
        r#"// zenoh router config for a WMRL robot network: TLS only, client
// certificates required (mTLS), and access control that denies by default.
// Identities are certificate common names:
//   trainer   may start and abort episodes and send action chunks;
//   operator  may send operator events and the emergency stop;
//   robots    may publish observations, outcomes and status, declare their
//             liveliness token and answer info queries;
//   observers may only subscribe and query;
// every identity may subscribe and query under wmrl/**. A certificate with any
// other name may do nothing; a peer without a certificate cannot connect.
{{
  mode: "router",
  listen: {{ endpoints: ["tls/localhost:{port}"] }},
  scouting: {{ multicast: {{ enabled: false }}, gossip: {{ enabled: false }} }},
  transport: {{
    link: {{
      tls: {{
        root_ca_certificate: {ca},
        listen_private_key: {key},
        listen_certificate: {cert},
        enable_mtls: true,
      }},
    }},
  }},
  access_control: {{
    enabled: true,
    default_permission: "deny",
    rules: [
      {{
        id: "command-robots",
        messages: ["put"],
        flows: ["ingress"],
        permission: "allow",
        key_exprs: [{commands}],
      }},
      {{
        id: "operate-robots",
        messages: ["put"],
        flows: ["ingress"],
        permission: "allow",
        key_exprs: [{operator}],
      }},
      {{
        id: "report",
        messages: ["put"],
        flows: ["ingress"],
        permission: "allow",
        key_exprs: [{reports}],
      }},
      {{
        id: "announce",
        messages: ["liveliness_token", "declare_queryable", "reply"],
        flows: ["ingress"],
        permission: "allow",
        key_exprs: ["wmrl/robots/*/alive", "wmrl/robots/*/info"],
      }},
      {{
        id: "observe",
        messages: ["declare_subscriber", "declare_liveliness_subscriber", "liveliness_query", "query"],
        flows: ["ingress"],
        permission: "allow",
        key_exprs: ["wmrl/**"],
      }},
      {{
        id: "deliver",
        messages: ["put", "delete", "query", "reply", "liveliness_token", "declare_subscriber", "declare_queryable", "declare_liveliness_subscriber", "liveliness_query"],
        flows: ["egress"],
        permission: "allow",
        key_exprs: ["wmrl/**"],
      }},
    ],
    subjects: [
      {{ id: "trainer", cert_common_names: ["{trainer}"] }},
      {{ id: "operator", cert_common_names: ["{operator_name}"] }},
      {{ id: "robots", cert_common_names: [{robot_names}] }},
      {{ id: "observers", cert_common_names: [{observer_names}] }},
    ],
    policies: [
      {{ id: "trainer", subjects: ["trainer"], rules: ["command-robots", "observe", "deliver"] }},
      {{ id: "operator", subjects: ["operator"], rules: ["operate-robots", "observe", "deliver"] }},
      {{ id: "robots", subjects: ["robots"], rules: ["report", "announce", "observe", "deliver"] }},
      {{ id: "observers", subjects: ["observers"], rules: ["observe", "deliver"] }},
    ],
  }},
}}
"#,
        ca = quoted(ca),
        key = quoted(&router.key),
        cert = quoted(&router.certificate),
        trainer = TRAINER,
        operator_name = OPERATOR,
        robot_names = list(&robot_names),
        observer_names = list(&observer_names),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_configs_parse_as_zenoh_configs() {
        let dir = tempfile::tempdir().unwrap();
        let who = Identities {
            robots: vec![RobotId::new("panda-1").unwrap()],
            observers: vec!["dashboard".into()],
        };
        let setup = generate(dir.path(), 7447, &who).unwrap();
        assert_eq!(setup.identities.len(), 5);
        assert!(setup.client_configs[3].ends_with("observer-dashboard.json5"));
        crate::net::load_config(&setup.router_config).unwrap();
        for config in &setup.client_configs {
            crate::net::load_config(config).unwrap();
        }
        let pem = std::fs::read_to_string(&setup.ca).unwrap();
        assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"));
    }

    #[test]
    fn the_shipped_example_configs_match_the_generator() {
        let dir = tempfile::tempdir().unwrap();
        let who = Identities {
            robots: vec![
                RobotId::new("panda-1").unwrap(),
                RobotId::new("panda-2").unwrap(),
            ],
            observers: vec!["dashboard".into()],
        };
        let setup = generate(dir.path(), 7447, &who).unwrap();
        let prefix = format!("{}/", dir.path().canonicalize().unwrap().display());
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../robots/zenoh");
        let mut files = vec![setup.router_config.clone()];
        files.extend(setup.client_configs.iter().cloned());
        for file in files {
            let generated = std::fs::read_to_string(&file)
                .unwrap()
                .replace(&prefix, "certs/");
            let name = file.file_name().unwrap();
            let example = std::fs::read_to_string(shipped.join(name))
                .unwrap_or_else(|e| panic!("robots/zenoh/{}: {e}", name.to_string_lossy()));
            assert_eq!(
                example,
                generated,
                "robots/zenoh/{} differs from `wmrl robots certs` output",
                name.to_string_lossy()
            );
        }
    }
}
