//! Reports compared across stores and runs: measurements left out.

#![allow(dead_code)]

use std::path::Path;

use serde_json::Value;

/// A batch's verdicts (its candidates', its committed candidate's, its
/// best), comparable: as a lane's batch is compared with a run on one
/// machine.
pub fn batch_verdicts(report: Value, own: &Path) -> (Value, Value, Value) {
    let v = comparable(report, own);
    (
        v["candidates"].clone(),
        v["committed"].clone(),
        v["best"].clone(),
    )
}

/// Measurements and this side's own paths left out.
pub fn comparable(value: Value, own: &Path) -> Value {
    const MEASURED_SUFFIX: [&str; 4] = ["_at", "_ms", "_s", "minute"];
    const MEASURED: [&str; 9] = [
        "wall",
        "cpu",
        "busy",
        "ttft",
        "latency",
        "deps_fresh",
        "peak_processes",
        "_dir",
        "_file",
    ];
    let measured = |k: &str| {
        MEASURED_SUFFIX.iter().any(|m| k.ends_with(m)) || MEASURED.iter().any(|m| k.contains(m))
    };
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(k, _)| !measured(k))
                .map(|(k, v)| (k, comparable(v, own)))
                .collect(),
        ),
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|v| comparable(v, own)).collect())
        }
        Value::String(s) => Value::String(s.replace(&own.display().to_string(), "SCRATCH")),
        other => other,
    }
}

/// Each problem's `statuses` in a suite report, in the problems' order.
pub fn statuses(report: &Value) -> Vec<Vec<String>> {
    report["problems"]
        .as_array()
        .unwrap_or_else(|| panic!("no problems: {report}"))
        .iter()
        .map(|p| {
            p["statuses"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_owned())
                .collect()
        })
        .collect()
}
