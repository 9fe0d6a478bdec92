//! Sandbox set-up shared by the research tests that run solutions (not a
//! test target itself).

/// The project venv's python (`cargo xtask` creates it), if there.
pub fn venv_python() -> Option<std::path::PathBuf> {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|d| d.join(".venv/bin/python"))
        .find(|p| p.is_file())
}

/// The tests' isolation policy: an explicit opt-out, since CI machines
/// (containers without CAP_SYS_ADMIN or user namespaces) may allow no
/// isolation; the tests that need it check `isolation()` themselves and say
/// `skipped:` without it. `WMRL_REQUIRE_ISOLATION=1` fails closed instead,
/// as `wmrl research` does.
pub fn test_isolation() -> wmrl_research::python::IsolationPolicy {
    if std::env::var_os("WMRL_REQUIRE_ISOLATION").is_some_and(|v| v == "1") {
        wmrl_research::python::IsolationPolicy::Required
    } else {
        wmrl_research::python::IsolationPolicy::AllowUnisolated
    }
}

/// Says on stderr, once per sandbox, when it runs unisolated under the opt-out.
pub fn say_if_unisolated(sandbox: &wmrl_sandbox::Sandbox) {
    if !sandbox.isolation().is_isolated() {
        eprintln!(
            "SANDBOX NOT ISOLATED: this machine allows no namespaces; the research tests run \
             under their explicit opt-out (IsolationPolicy::AllowUnisolated; \
             WMRL_REQUIRE_ISOLATION=1 refuses instead)"
        );
    }
}
