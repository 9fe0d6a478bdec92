//! Submission validation and scoring against a task's hidden answers.
//!
//! A submission is a CSV with the task's id and target columns. It is valid
//! when every test id appears exactly once, no other id appears, and every
//! target is of the metric's kind: a class label of the task (`1.0` is
//! accepted for `1`), a probability in [0, 1], or a finite number. The first
//! problem found is reported with its line.

use std::collections::HashMap;

use crate::metric::TargetKind;
use crate::task::Task;

/// Why a submission is invalid (shown to people and stored with outcomes).
pub type Invalid = String;

/// Parses, validates and scores `bytes` as a submission for `task`.
pub fn score_submission(task: &Task, bytes: &[u8]) -> Result<f64, Invalid> {
    let predicted = validate(task, bytes)?;
    let truth: Vec<String> = task
        .test_ids
        .iter()
        .map(|id| {
            task.answer(id)
                .expect("answers cover the test ids")
                .to_string()
        })
        .collect();
    let positive = task.spec.classes.get(1).map(String::as_str);
    let score = task.metric.score(&truth, &predicted, positive);
    if score.is_finite() {
        Ok(score)
    } else {
        Err(format!(
            "the {} of this submission is not finite",
            task.metric
        ))
    }
}

/// A value from the submission as it may be shown in a reason: bounded and
/// with control characters escaped (the terminal is not the solution's).
fn shown(text: &str) -> String {
    wmrl_sandbox::printable(text, 48)
}

/// Returns the predictions in test-id order, or the first problem.
pub fn validate(task: &Task, bytes: &[u8]) -> Result<Vec<String>, Invalid> {
    let spec = &task.spec;
    let mut reader = csv::ReaderBuilder::new().flexible(false).from_reader(bytes);
    let headers: Vec<String> = reader
        .headers()
        .map_err(|e| format!("line 1: cannot read the header: {e}"))?
        .iter()
        .map(|h| h.trim().to_string())
        .collect();
    let column = |name: &str| {
        headers.iter().position(|h| h == name).ok_or_else(|| {
            format!(
                "line 1: no `{name}` column in header `{}`",
                shown(&headers.join(","))
            )
        })
    };
    let (id_col, target_col) = (column(&spec.id_column)?, column(&spec.target_column)?);
    let expected: HashMap<&str, usize> = task
        .test_ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    let mut predicted: Vec<Option<String>> = vec![None; task.test_ids.len()];
    let kind = task.metric.target_kind();
    for (row, record) in reader.records().enumerate() {
        let line = row + 2;
        let record = record.map_err(|e| format!("line {line}: {e}"))?;
        let id = record.get(id_col).unwrap_or("").trim();
        let value = record.get(target_col).unwrap_or("").trim();
        let Some(&slot) = expected.get(id) else {
            return Err(format!("line {line}: id `{}` is not a test id", shown(id)));
        };
        if predicted[slot].is_some() {
            return Err(format!("line {line}: id `{}` appears twice", shown(id)));
        }
        predicted[slot] =
            Some(check_value(kind, &spec.classes, value).map_err(|m| format!("line {line}: {m}"))?);
    }
    let missing: Vec<&str> = task
        .test_ids
        .iter()
        .zip(&predicted)
        .filter(|(_, p)| p.is_none())
        .map(|(id, _)| id.as_str())
        .collect();
    if let Some(first) = missing.first() {
        return Err(format!(
            "{} test ids missing (first: `{first}`)",
            missing.len()
        ));
    }
    Ok(predicted.into_iter().map(|p| p.expect("checked")).collect())
}

/// Checks one target value; returns it normalised (labels as the task spells them).
fn check_value(kind: TargetKind, classes: &[String], value: &str) -> Result<String, String> {
    let number = || value.parse::<f64>().ok();
    match kind {
        TargetKind::Label => {
            if classes.iter().any(|c| c == value) {
                return Ok(value.to_string());
            }
            if let Some(x) = number()
                && let Some(c) = classes.iter().find(|c| c.parse::<f64>().ok() == Some(x))
            {
                return Ok(c.clone());
            }
            Err(format!(
                "`{}` is not a class label (expected one of {})",
                shown(value),
                classes.join(", ")
            ))
        }
        TargetKind::Probability => match number() {
            Some(p) if (0.0..=1.0).contains(&p) => Ok(value.to_string()),
            Some(p) if p.is_nan() => Err("probability is NaN".into()),
            Some(p) => Err(format!("probability {p} is outside [0, 1]")),
            None => Err(format!("`{}` is not a number", shown(value))),
        },
        TargetKind::Value => match number() {
            Some(x) if x.is_finite() => Ok(value.to_string()),
            Some(_) => Err(format!("value `{}` is not finite", shown(value))),
            None => Err(format!("`{}` is not a number", shown(value))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_by_kind() {
        let classes = vec!["0".to_string(), "1".to_string()];
        assert_eq!(
            check_value(TargetKind::Label, &classes, "1.0").unwrap(),
            "1"
        );
        assert!(
            check_value(TargetKind::Label, &classes, "2")
                .unwrap_err()
                .contains("not a class label")
        );
        assert!(
            check_value(TargetKind::Probability, &classes, "nan")
                .unwrap_err()
                .contains("NaN")
        );
        assert!(
            check_value(TargetKind::Probability, &classes, "1.5")
                .unwrap_err()
                .contains("outside")
        );
        assert!(
            check_value(TargetKind::Value, &[], "inf")
                .unwrap_err()
                .contains("not finite")
        );
        assert!(
            check_value(TargetKind::Value, &[], "abc")
                .unwrap_err()
                .contains("not a number")
        );
    }
}
