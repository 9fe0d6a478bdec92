//! Scene format: the shipped scenes and catalog parse and round-trip, each of
//! LIBERO's ten BDDL files parses to the same scene as our TOML for that task,
//! and malformed input fails with the file, line and what was expected.

use std::path::PathBuf;

use wmrl_sim::scene::{Catalog, Scene, check_file, parse_bddl};
use wmrl_sim::{NUM_TASKS, SimError, libero_long_tasks};

fn bddl_dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/reference/libero-bddl"
    ))
}

fn bddl_for(name: &str) -> PathBuf {
    bddl_dir().join(format!("{name}.bddl"))
}

#[test]
fn shipped_scenes_parse_and_round_trip() {
    let tasks = libero_long_tasks();
    assert_eq!(tasks.len(), NUM_TASKS);
    let catalog = Catalog::builtin();
    for t in &tasks {
        let again = Scene::from_toml(&t.scene.to_toml(), "roundtrip").unwrap();
        assert_eq!(again, t.scene, "{} round-trips", t.name);
        for e in t.scene.entities() {
            assert!(
                catalog.knows(&e.kind),
                "{}: type {} is modelled",
                t.name,
                e.kind
            );
        }
        assert!(!t.instruction.is_empty());
    }
    assert_eq!(
        tasks[2].instruction,
        "turn on the stove and put the moka pot on it"
    );
}

#[test]
fn each_bddl_file_parses_to_our_scene() {
    for t in libero_long_tasks() {
        let path = bddl_for(&t.name);
        let bddl = Scene::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let ours = &t.scene;
        assert_eq!(bddl.name, ours.name);
        assert_eq!(bddl.problem, ours.problem);
        assert_eq!(bddl.language, ours.language, "{}", t.name);
        assert_eq!(bddl.fixtures, ours.fixtures, "{}", t.name);
        assert_eq!(bddl.objects, ours.objects, "{}", t.name);
        assert_eq!(bddl.init, ours.init, "{}", t.name);
        assert_eq!(bddl.goal, ours.goal, "{}", t.name);
        assert_eq!(bddl.regions.len(), ours.regions.len(), "{}", t.name);
        for (a, b) in bddl.regions.iter().zip(&ours.regions) {
            assert_eq!((&a.name, &a.target), (&b.name, &b.target), "{}", t.name);
            assert_eq!(a.ranges.len(), b.ranges.len());
            for (ra, rb) in a.ranges.iter().zip(&b.ranges) {
                for i in 0..4 {
                    assert!(
                        (ra[i] - rb[i]).abs() < 1e-9,
                        "{} region {}: {ra:?} vs {rb:?}",
                        t.name,
                        a.name
                    );
                }
            }
            match (a.yaw, b.yaw) {
                (Some(x), Some(y)) => {
                    assert!((x[0] - y[0]).abs() < 1e-9 && (x[1] - y[1]).abs() < 1e-9)
                }
                (x, y) => assert_eq!(x, y),
            }
        }
    }
}

#[test]
fn check_reports_unmodelled_types_as_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other_suite.bddl");
    let text = std::fs::read_to_string(bddl_for(&libero_long_tasks()[0].name)).unwrap();
    std::fs::write(
        &path,
        text.replace("ketchup_1 - ketchup", "ketchup_1 - flux_capacitor"),
    )
    .unwrap();
    let report = check_file(&path).unwrap();
    assert!(!report.simulable);
    assert!(
        report.warnings[0].contains("flux_capacitor"),
        "{:?}",
        report.warnings
    );
    assert!(
        report.warnings[0].contains("alphabet_soup"),
        "lists the known types"
    );
    assert!(
        report
            .objects
            .iter()
            .any(|o| o == "ketchup_1: flux_capacitor")
    );
}

#[test]
fn malformed_toml_names_line_and_expectation() {
    let text = "name = \"x\"\nproblem = \"LIBERO_Kitchen_Tabletop_Manipulation\"\nlanguage = \"x\"\ngoal = []\ncolour = 3\n";
    let err = Scene::from_toml(text, "bad.toml").unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("bad.toml:5:"), "{msg}");
    assert!(msg.contains("colour"), "{msg}");

    let text = "name = \"x\"\nproblem = \"p\"\nlanguage = \"x\"\ngoal = [\"On a\"]\n";
    let msg = Scene::from_toml(text, "bad.toml").unwrap_err().to_string();
    assert!(msg.contains("expects 2 argument"), "{msg}");
}

#[test]
fn malformed_bddl_names_line() {
    let text = "(define (problem P)\n  (:domain robosuite)\n  (:objects a - bowl\n)\n";
    match parse_bddl(text, "bad.bddl", "bad") {
        Err(SimError::Parse {
            file,
            line,
            message,
            ..
        }) => {
            assert_eq!(file, "bad.bddl");
            assert_eq!(line, 1, "the unclosed `(define` opens on line 1");
            assert!(message.contains("expected `)`"), "{message}");
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
    let text = "(define (problem P)\n  (:objects a b)\n)";
    let msg = parse_bddl(text, "bad.bddl", "bad").unwrap_err().to_string();
    assert!(
        msg.contains("bad.bddl:2") && msg.contains("a - TYPE") || msg.contains("has no type"),
        "{msg}"
    );
}

#[test]
fn unknown_type_in_a_world_lists_known_types() {
    let mut scene = libero_long_tasks()[0].scene.clone();
    scene.objects[0].kind = "teapot".into();
    let err = wmrl_sim::physics::SimWorld::build(
        &scene,
        &wmrl_sim::robot::RobotModel::panda(),
        Default::default(),
    )
    .err()
    .expect("unknown type fails");
    let msg = err.to_string();
    assert!(msg.contains("teapot") && msg.contains("moka_pot"), "{msg}");
}
