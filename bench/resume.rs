//! What a crash costs: an uninterrupted batch of the bundled `absolute` task
//! against the same batch SIGKILLed at a point and finished with
//! `assay run --resume`, measured side by side in one run.
//!
//! For each kill point it prints the wall time of the resumed attempt alone,
//! of the first attempt up to the kill plus the resume (the whole batch),
//! and their ratios to the uninterrupted run; and it checks what the resume
//! kept (replies are never drawn twice) and that the finished batch comes
//! to the uninterrupted run's counts.
//!
//! cargo bench --bench resume

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const ROUNDS: usize = 3;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn work_dir() -> PathBuf {
    repo().join("target/tmp/assay-work")
}

fn assay(dir: &Path, args: &[&str], point: Option<&str>) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_assay"));
    cmd.args(args)
        .current_dir(dir)
        .env("ASSAY_DB", dir.join("assay.db"))
        .env("ASSAY_WORK_DIR", work_dir())
        .env_remove("RUST_LOG")
        .env_remove("ASSAY_OUT");
    match point {
        Some(p) => cmd.env("ASSAY_TEST_POINT", format!("pause@{p}")),
        None => cmd.env_remove("ASSAY_TEST_POINT"),
    };
    cmd
}

fn json(dir: &Path, args: &[&str]) -> Value {
    let out = assay(dir, args, None).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn spec() -> String {
    repo().join("specs/absolute").display().to_string()
}

/// An uninterrupted batch: (wall, summary).
fn full_run() -> (Duration, Value) {
    let dir = tempfile::tempdir().unwrap();
    let start = Instant::now();
    let summary = json(dir.path(), &["run", &spec(), "--json"]);
    (start.elapsed(), summary)
}

/// A batch killed at `point` and resumed: (wall to the kill, wall of the
/// resume, summary).
fn killed_and_resumed(point: &str) -> (Duration, Duration, Value) {
    let dir = tempfile::tempdir().unwrap();
    let start = Instant::now();
    let mut child = assay(dir.path(), &["run", &spec()], Some(point))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    for line in BufReader::new(stderr).lines() {
        if line.unwrap().starts_with("assay-test: ") {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let to_kill = start.elapsed();
    let start = Instant::now();
    let summary = json(dir.path(), &["run", "--resume", "1", "--json"]);
    (to_kill, start.elapsed(), summary)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

const COUNTS: &[&str] = &[
    "replies",
    "extracted",
    "unique",
    "compiled",
    "admitted",
    "best",
];

fn main() {
    // Warm the work directory so no round pays for building dependencies.
    let (_, reference) = full_run();
    let points = [
        ("draw.reply#22", "half the replies drawn"),
        ("probe.target#10", "during the probe build"),
        ("probe.stored", "probe stored"),
        ("score.run#12", "half the candidates scored"),
        ("persist", "all stored, status not written"),
    ];
    let mut full = Vec::new();
    let mut rows: Vec<(Vec<f64>, Vec<f64>, Value)> =
        vec![(vec![], vec![], Value::Null); points.len()];
    // Interleaved rounds, so load from other processes hits every column alike.
    for _ in 0..ROUNDS {
        let (wall, summary) = full_run();
        for key in COUNTS {
            assert_eq!(
                summary[key], reference[key],
                "uninterrupted runs differ in {key}"
            );
        }
        full.push(wall.as_secs_f64());
        for (i, (point, _)) in points.iter().enumerate() {
            let (to_kill, resume, summary) = killed_and_resumed(point);
            for key in COUNTS {
                assert_eq!(summary[key], reference[key], "{point}: {key} differs");
            }
            rows[i].0.push(resume.as_secs_f64());
            rows[i].1.push((to_kill + resume).as_secs_f64());
            rows[i].2 = summary;
        }
    }
    let full = median(full);
    println!(
        "absolute task, {} replies; median of {ROUNDS} rounds; uninterrupted batch {full:.2} s",
        reference["replies"]
    );
    println!(
        "{:<18} {:<32} {:>10} {:>8} {:>10} {:>8}  kept by the resume",
        "killed at", "", "resume s", "/full", "total s", "/full"
    );
    for ((point, what), (resume, total, summary)) in points.iter().zip(rows) {
        let (resume, total) = (median(resume), median(total));
        let r = &summary["resumes"][0];
        println!(
            "{point:<18} {what:<32} {resume:>10.2} {:>8.2} {total:>10.2} {:>8.2}  {}/{} replies, {} probe verdicts, {} scores",
            resume / full,
            total / full,
            r["replies_kept"],
            summary["replies"],
            r["probed_kept"],
            r["scored_kept"],
        );
    }
}
