//! End-to-end: the forgery corpus (tests/fixtures/forgery) through the real
//! `assay run`: candidates that attack the score itself (issue 13, classes
//! 1-4) in one batch with two honest controls. The batch must finish (exit
//! 0) with the committed candidate's honest score, no attacker above it,
//! each control's verdict as a batch of the controls alone gives it, and no
//! process or temporary directory left behind.
//!
//! The corpus's candidates use `unsafe`, `#[no_mangle]`, `#[link_section]`
//! and extern blocks: what a task's policy may allow. Isolation must hold
//! whatever the policy lets through, so these reach the build here.
//!
//! The cases file is made large here (its inputs are more than a pipe or a
//! socket buffer holds), so that a candidate that exits before reading stdin
//! leaves assay writing into a closed channel, as issue 13 found.

use crate::common;

use std::path::{Path, PathBuf};

use common::{repo, shared_work_dir, Scratch};
use serde_json::Value;

/// Cases in the test's copy of the corpus.
const CASES: u64 = 40_000;

/// Indices of the honest controls in replies.jsonl (the first two).
const CONTROLS: [usize; 2] = [0, 1];

/// The task folder: the fixture with a large cases file; the harness stays
/// where it is.
fn task(scratch: &Scratch) -> PathBuf {
    let fixture = repo().join("tests/fixtures/forgery");
    let task = scratch.path().join("forgery");
    std::fs::create_dir_all(&task).unwrap();
    for file in ["prompt.md", "committed.rs", "replies.jsonl"] {
        std::fs::copy(fixture.join(file), task.join(file)).unwrap();
    }
    let spec = std::fs::read_to_string(fixture.join("spec.toml")).unwrap();
    let harness = fixture.join("harness").display().to_string();
    let spec = spec.replace("harness = \"harness\"", &format!("harness = {harness:?}"));
    std::fs::write(task.join("spec.toml"), spec).unwrap();
    let cases: String = (0..CASES)
        .map(|x| {
            format!(
                "{{\"name\": \"c{x}\", \"input\": {{\"x\": {x}}}, \"expected\": {}}}\n",
                2 * x
            )
        })
        .collect();
    std::fs::write(task.join("cases.jsonl"), cases).unwrap();
    task
}

/// Runs a batch of the first `n` replies with its own temporary directory;
/// returns the summary of `assay show` and that directory's leftovers.
fn run(scratch: &Scratch, task: &Path, n: usize) -> (Value, Vec<PathBuf>) {
    let tmp = scratch.path().join(format!("tmp-{n}"));
    std::fs::create_dir_all(&tmp).unwrap();
    let out = scratch
        .command(&[
            "run",
            &task.display().to_string(),
            "-n",
            &n.to_string(),
            "--json",
        ])
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "assay run exited with {}: {stderr}",
        out.status
    );
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["status"], "finished", "{summary}");
    let batch = summary["batch_id"].as_i64().unwrap().to_string();
    let shown = scratch.json(&["show", &batch, "--json"]);
    let left: Vec<PathBuf> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    (shown, left)
}

fn verdict(shown: &Value, idx: usize) -> String {
    shown["candidates"][idx]["score"].to_string()
}

fn passed(shown: &Value, idx: usize) -> u64 {
    let letters = shown["candidates"][idx]["cases"].as_str().unwrap_or("");
    letters.chars().filter(|c| *c == 'p').count() as u64
}

#[test]
fn candidates_cannot_forge_their_score_or_take_others_down() {
    let scratch = Scratch::new();
    let task = task(&scratch);

    // The controls alone: the verdicts they get in a clean batch.
    let (clean, left) = run(&scratch, &task, CONTROLS.len());
    assert!(left.is_empty(), "temporary files left: {left:?}");
    let committed = clean["committed"].clone();
    assert_eq!(
        committed["verdict"],
        format!("scored({}/{CASES})", CASES - 1),
        "the committed candidate's honest score: {clean}"
    );

    let replies = std::fs::read_to_string(task.join("replies.jsonl")).unwrap();
    let n = replies.lines().count();
    let (shown, left) = run(&scratch, &task, n);
    assert!(left.is_empty(), "temporary files left: {left:?}");

    // The committed candidate keeps its honest score.
    assert_eq!(shown["committed"], committed, "{shown}");
    // Every control keeps its clean verdict and case outcomes.
    for idx in CONTROLS {
        assert_eq!(verdict(&shown, idx), verdict(&clean, idx), "control {idx}");
        assert_eq!(
            shown["candidates"][idx]["cases"], clean["candidates"][idx]["cases"],
            "control {idx}"
        );
    }
    assert_eq!(verdict(&clean, 0), format!("\"scored({CASES}/{CASES})\""));
    // No attacker scores at or above the committed candidate, and none is
    // admitted.
    let reference = committed["passed"].as_u64().unwrap();
    for idx in CONTROLS.len()..n {
        let candidate = &shown["candidates"][idx];
        assert!(
            passed(&shown, idx) < reference,
            "candidate {idx} passed {} cases: {candidate}",
            passed(&shown, idx)
        );
        assert_ne!(candidate["admitted"], true, "candidate {idx}: {candidate}");
    }
    // Each attack is its own candidate's verdict.
    let expected = [
        (2, "\"protocol_error\""),
        (3, "\"crashed(signal 6)\""),
        (10, "\"exited_early(code 0 after 0)\""),
    ];
    for (idx, want) in expected {
        assert_eq!(verdict(&shown, idx), want, "candidate {idx}");
    }
    // Release-only build failures are found by the probe, each its own.
    for idx in [6, 7, 8, 9] {
        let probe = shown["candidates"][idx]["probe"].as_str().unwrap();
        assert!(
            probe.starts_with("compile_error"),
            "candidate {idx}: {probe}"
        );
    }
    // The static too big to map: not run, and nobody else affected.
    let ballast = verdict(&shown, 11);
    assert!(!ballast.contains("scored"), "candidate 11: {ballast}");

    // Nothing left running from this batch's images.
    let batch = shown["batch_id"].as_i64().unwrap();
    let images = scratch
        .path()
        .join(format!("assay-out/batch-{batch}/images"));
    assert!(images.join("judge").is_file());
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(exe) = std::fs::read_link(entry.path().join("exe")) {
            assert!(
                !exe.starts_with(&images),
                "process {:?} still runs {}",
                entry.file_name(),
                exe.display()
            );
        }
    }
    let _ = shared_work_dir();
}

/// The tiny task with a judge that breaks on two outputs, as a harness bug
/// that a candidate's output reaches would: `4242` aborts it (as a stack
/// overflow or a failed allocation would, which `catch_unwind` cannot
/// catch), `4343` makes it print to stdout, its answer channel. On `4444`
/// it reads a host file and aborts if it could: the judge is confined like
/// every child (Landlock, as tests/it/hostile.rs requires of this machine).
fn task_with_a_breakable_judge(scratch: &Scratch) -> PathBuf {
    let task = scratch.tiny_copy();
    common::edit(
        &task.join("harness/src/lib.rs"),
        "pub fn judge(case: &Case, output: &str) -> bool {\n",
        "pub fn judge(case: &Case, output: &str) -> bool {\n\
         \x20   match output.trim() {\n\
         \x20       \"4242\" => std::process::abort(),\n\
         \x20       \"4343\" => println!(\"debug: {output}\"),\n\
         \x20       \"4444\" if std::fs::read(\"/etc/passwd\").is_ok() => std::process::abort(),\n\
         \x20       _ => {}\n\
         \x20   }\n",
    );
    let reply = |body: &str| {
        serde_json::json!({
            "content": format!("```rust\npub fn double(x: u64) -> u64 {{ {body} }}\n```"),
            "finish_reason": "stop",
            "usage": {"prompt_tokens": 20, "completion_tokens": 15},
            "model": "tiny-model",
        })
        .to_string()
    };
    let replies = [
        reply("x * 2"),
        reply("if x == 3 { 4242 } else { x * 2 }"),
        reply("x + x"),
        reply("if x == 5 { 4343 } else { x * 2 }"),
        reply("if x == 6 { 4444 } else { x * 2 }"),
    ];
    std::fs::write(task.join("replies.jsonl"), replies.join("\n") + "\n").unwrap();
    task
}

#[test]
fn a_judge_that_breaks_over_one_candidates_outputs_costs_only_that_candidate() {
    let scratch = Scratch::new();
    let task = task_with_a_breakable_judge(&scratch);
    let (shown, left) = run(&scratch, &task, 5);
    assert!(left.is_empty(), "temporary files left: {left:?}");
    assert_eq!(shown["committed"]["verdict"], "scored(8/10)", "{shown}");
    for control in [0, 2] {
        assert_eq!(verdict(&shown, control), "\"scored(10/10)\"", "{shown}");
    }
    for breaker in [1, 3] {
        assert_eq!(verdict(&shown, breaker), "\"judge_failed\"", "{shown}");
        assert_ne!(shown["candidates"][breaker]["admitted"], true, "{shown}");
    }
    // A judge that could read /etc/passwd would have aborted.
    assert_eq!(verdict(&shown, 4), "\"scored(9/10)\"", "{shown}");
    // Why is kept with the candidate's run.
    let why: Vec<String> = scratch.sql(async |pool| {
        sqlx::query_scalar("SELECT stderr FROM scores WHERE idx IN (1, 3) ORDER BY idx")
            .fetch_all(pool)
            .await
            .unwrap()
    });
    assert!(
        why[0].contains("the judge (compare) was killed by signal 6"),
        "{why:?}"
    );
    assert!(
        why[1].contains("the judge answered `debug: 4343`"),
        "{why:?}"
    );
}
