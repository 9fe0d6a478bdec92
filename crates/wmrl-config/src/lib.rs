//! Config files for every WMRL crate, loaded one way.
//!
//! A config is named either by a shipped name (`demo`, `tiny`, compiled into
//! the crate that owns it) or by a path to a TOML file (JSON5 for `.json` and
//! `.json5` files). `--set KEY=VALUE` overrides are applied to the parsed
//! table before it is deserialised, so an override is checked as strictly as
//! the file: an unknown key or an ill-typed value is an error naming it.
//!
//! Errors keep their causes as [`std::error::Error::source`]s; print them
//! with `{:#}` through `anyhow`, or with [`chain`].
//!
//! ```
//! #[derive(serde::Deserialize)]
//! #[serde(deny_unknown_fields)]
//! struct Run { steps: u32 }
//! const SHIPPED: &[(&str, &str)] = &[("short", "steps = 3")];
//! let run: Run = wmrl_config::load("short", SHIPPED, &["steps=5".into()]).unwrap();
//! assert_eq!(run.steps, 5);
//! ```

mod error;
mod overrides;
mod source;

pub use error::{Error, ParseError, Result, chain};
pub use overrides::{apply_override, with_overrides};
pub use source::{Format, Source, load, parse};
