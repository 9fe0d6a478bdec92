//! `wmrl calibrate` end to end: a user's anchor log in, the isotonic map and
//! a reliability plot out; malformed files are named with their line.

use std::path::Path;
use std::process::{Command, Output};

fn wmrl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wmrl"))
        .args(args)
        .output()
        .expect("wmrl runs")
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn fits_prints_json_and_writes_the_plot() {
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from("# anchor log\nstep,score,reward,weight\n");
    for i in 0..200 {
        let s = i as f64 / 200.0;
        let r = if (i * 37) % 100 < (s * s * 100.0) as usize {
            1
        } else {
            0
        };
        csv.push_str(&format!("{},{s},{r},{}\n", i / 20, 1 + i % 2));
    }
    let pairs = write(dir.path(), "pairs.csv", &csv);
    let plot = dir.path().join("rel.png");
    let out = wmrl(&[
        "calibrate",
        "--json",
        "--pairs",
        &pairs,
        "--plot",
        plot.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["pairs"], 200);
    assert_eq!(v["total_weight"], 300.0);
    let blocks = v["blocks"].as_array().unwrap();
    assert!(blocks.len() >= 2);
    let values: Vec<f64> = blocks
        .iter()
        .map(|b| b["value"].as_f64().unwrap())
        .collect();
    assert!(
        values.windows(2).all(|w| w[0] < w[1]),
        "monotone: {values:?}"
    );
    assert!(std::fs::metadata(&plot).unwrap().len() > 10_000);

    // Headerless two-column file, default plot path, text output.
    let pairs = write(dir.path(), "plain.csv", "0.1,0\n0.2,1\n0.3,0\n0.9,1\n");
    let out = wmrl(&["calibrate", "--pairs", &pairs]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("4 pairs") && text.contains("3 blocks"),
        "{text}"
    );
    assert!(dir.path().join("plain.reliability.png").exists());
}

#[test]
fn malformed_pairs_name_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "bad-number.csv",
            "score,reward\n0.1,1\n0.2,abc\n",
            ":3: column `reward`: expected a number, got `abc`",
        ),
        (
            "nan.csv",
            "0.1,1\nNaN,0\n",
            ":2: column `score`: NaN is not a finite number",
        ),
        ("short.csv", "0.1,1\n0.2\n", ":2: missing column `reward`"),
        (
            "header.csv",
            "s,r\n0.1,1\n",
            ":1: header must name columns `score` and `reward`",
        ),
        (
            "negative.csv",
            "score,reward,weight\n0.1,1,-2\n",
            ":2: column `weight`: -2 is negative",
        ),
        ("empty.csv", "# nothing\n", "no anchor pairs"),
    ];
    for (name, text, expected) in cases {
        let path = write(dir.path(), name, text);
        let out = wmrl(&["calibrate", "--pairs", &path]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name} accepted");
        assert!(
            err.contains(name) && err.contains(expected),
            "{name}: {err}"
        );
        assert!(
            !dir.path()
                .join(name.replace(".csv", ".reliability.png"))
                .exists(),
            "{name}: plot written"
        );
    }
    let out = wmrl(&["calibrate", "--pairs", "/nonexistent/pairs.csv"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/pairs.csv"));
}
