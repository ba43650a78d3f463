//! End-to-end: the real `assay` binary on the bundled tasks and the tiny
//! fixture, each in a fresh directory with a fresh database. All runs share
//! one warm work directory (generated packages and their cargo target) under
//! cargo's test tmpdir, so no test rebuilds the dependency tree.

use crate::common;

use std::path::Path;

use serde_json::Value;

use common::{repo, Scratch};

fn spec(task: &str) -> String {
    repo().join("specs").join(task).display().to_string()
}

/// Runs a task, then checks every candidate of the batch against the
/// expected verdicts recorded with its corpus.
fn check_task(task: &str, spec_path: &str, expected_file: &Path) {
    let scratch = Scratch::new();
    let summary = scratch.json(&["run", spec_path, "--json"]);
    let batch = summary["batch_id"].as_i64().unwrap().to_string();
    let shown = scratch.json(&["show", &batch, "--json"]);
    let candidates = shown["candidates"].as_array().unwrap();

    let expected: Vec<Value> = std::fs::read_to_string(expected_file)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        candidates.len(),
        expected.len(),
        "{task}: one candidate per reply"
    );
    let mut mismatches = Vec::new();
    for (got, want) in candidates.iter().zip(&expected) {
        for field in ["extract", "dup_of", "alpha_dup_of", "probe", "score"] {
            // Expected files written before alpha grouping have no such field.
            if want.get(field).is_none() {
                continue;
            }
            if got[field] != want[field] {
                mismatches.push(format!(
                    "{task} candidate {}: {field} is {}, expected {} ({})",
                    want["idx"], got[field], want[field], want["why"]
                ));
            }
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));

    // The summary's counts agree with the expectations.
    let count = |pred: &dyn Fn(&Value) -> bool| expected.iter().filter(|e| pred(e)).count();
    assert_eq!(summary["replies"], expected.len());
    assert_eq!(
        summary["extracted"],
        count(&|e| e["extract"] == "extracted")
    );
    assert_eq!(
        summary["unique"],
        count(&|e| e["extract"] == "extracted" && e["dup_of"].is_null())
    );
    assert_eq!(summary["compiled"], count(&|e| e["probe"] == "compiled"));
    assert_eq!(summary["status"], "finished");
    // The top admitted candidate is the one the candidate list ranks first.
    let ranked_first: Vec<&Value> = candidates
        .iter()
        .filter(|c| c["rank"] == 1)
        .map(|c| &c["candidate_id"])
        .collect();
    if summary["admitted"] == 0 {
        assert!(ranked_first.is_empty(), "{task}");
        assert!(summary["top_admitted"].is_null(), "{task}");
    } else {
        assert_eq!(ranked_first.len(), 1, "{task}: one candidate ranked first");
        assert_eq!(&summary["top_admitted"], ranked_first[0], "{task}");
    }
    for key in ["best", "committed", "phases", "errors_dir"] {
        assert!(
            !summary[key].is_null(),
            "{task}: summary lacks {key}: {summary}"
        );
    }
    let phases: Vec<&str> = summary["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(
        phases,
        [
            "prepare",
            "draw",
            "extract+dedup",
            "probe",
            "score build",
            "score run",
            "persist"
        ]
    );

    // Every candidate that failed to compile has its errors in a file.
    for c in candidates {
        if c["probe"].as_str().is_some_and(|p| p != "compiled") {
            let file = c["error_file"].as_str().expect("error file recorded");
            let text = std::fs::read_to_string(file).unwrap();
            assert!(text.contains("error"), "{file} holds no error");
        }
    }
}

#[test]
fn absolute_batch_matches_its_recorded_verdicts() {
    check_task(
        "absolute",
        &spec("absolute"),
        &repo().join("tests/expected/absolute.jsonl"),
    );
}

#[test]
fn shellwords_batch_matches_its_recorded_verdicts() {
    check_task(
        "shellwords",
        &spec("shellwords"),
        &repo().join("tests/expected/shellwords.jsonl"),
    );
}

#[test]
fn tiny_batch_matches_its_recorded_verdicts() {
    let dir = repo().join("tests/fixtures/tiny");
    check_task(
        "tiny",
        &dir.display().to_string(),
        &dir.join("expected.jsonl"),
    );
}

#[test]
fn text_summary_has_counts_phases_and_errors_dir() {
    let scratch = Scratch::new();
    let text = scratch.assay_ok(&[
        "run",
        &repo().join("tests/fixtures/tiny").display().to_string(),
    ]);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("batch 1  task tiny  pool replay  6 replies"),
        "{text}"
    );
    assert!(
        lines[1].starts_with("extracted 5/6  unique 4  compiled 3/4  admitted 1 (ranked first: candidate 0)  most passed 10/10 (candidate 0)  committed 8/10"),
        "{text}"
    );
    assert!(lines[2].starts_with("phase"), "{text}");
    assert!(
        lines.last().unwrap().starts_with("compiler errors: "),
        "{text}"
    );
    assert!(scratch
        .dir
        .path()
        .join("assay-out/batch-1/errors/c2.txt")
        .is_file());

    // The stored batch reads back the same, and is listed.
    let shown = scratch.assay_ok(&["show", "1"]);
    assert!(shown.starts_with(&lines[..2].join("\n")), "{shown}");
    let listed = scratch.json(&["batches", "--json"]);
    assert_eq!(listed[0]["batch_id"], 1);
    assert_eq!(listed[0]["task"], "tiny");
    assert_eq!(listed[0]["status"], "finished");

    // A batch whose every candidate compiled left no error file: its
    // summary names no folder to look in.
    let clean = scratch.assay_ok(&[
        "run",
        &repo().join("tests/fixtures/tiny").display().to_string(),
        "-n",
        "1",
    ]);
    assert!(clean.contains("compiled 1/1"), "{clean}");
    assert!(!clean.contains("compiler errors"), "{clean}");
}

#[test]
fn n_limits_the_batch_and_too_many_is_refused() {
    let scratch = Scratch::new();
    let tiny = repo().join("tests/fixtures/tiny").display().to_string();
    let summary = scratch.json(&["run", &tiny, "-n", "2", "--json"]);
    assert_eq!(summary["replies"], 2);

    let out = scratch.assay(&["run", &tiny, "-n", "7"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("replies.jsonl: the replay corpus holds 6 replies, 7 were asked for"),
        "{err}"
    );
    // Nothing was written for the refused batch.
    assert_eq!(
        scratch
            .json(&["batches", "--json"])
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let scratch = Scratch::new();
    let cases: &[(&[&str], &str)] = &[
        (
            &["run", "no/such/spec"],
            "no/such/spec/spec.toml: cannot read",
        ),
        (&["show", "9"], "no such database"),
        (
            &["run", "nope", "--db", "/no/such/dir/a.db"],
            "nope/spec.toml",
        ),
    ];
    for (args, want) in cases {
        let out = scratch.assay(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
}

/// A warm batch's score build runs no cargo while the judge and the
/// committed image are as their last build left them (`score::fresh`),
/// and builds again, from the new files, as soon as one they read changes.
#[test]
fn a_score_build_skips_cargo_only_while_what_it_reads_is_unchanged() {
    const NO_CARGO: &str = "as their last build left them; no cargo";
    // Each batch in slot 0, where the one before it built.
    let scratch = Scratch::new().one_build_slot();
    let task = scratch.tiny_copy();
    // A package of its own, so no other test's batch of `tiny` meets it.
    common::edit(
        &task.join("spec.toml"),
        "name = \"tiny\"",
        "name = \"tiny-fresh\"",
    );
    let spec = task.display().to_string();
    let batch = || -> (String, Value) {
        let out = scratch
            .command(&["run", &spec, "--json"])
            .env("RUST_LOG", "assay::score=debug")
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{log}");
        (log, serde_json::from_slice(&out.stdout).unwrap())
    };
    batch();
    let (log, warm) = batch();
    assert!(log.contains(NO_CARGO), "{log}");
    assert_eq!(warm["committed"]["passed"], 8, "{warm}");

    // The judge now takes any number: the committed candidate's two wrong
    // answers pass, which only a judge built from the new harness says.
    common::edit(
        &task.join("harness/src/lib.rs"),
        "output.trim().parse::<u64>() == Ok(case.expected)",
        "output.trim().parse::<u64>().is_ok()",
    );
    let (log, changed) = batch();
    assert!(!log.contains(NO_CARGO), "{log}");
    assert_eq!(changed["committed"]["passed"], 10, "{changed}");
    let (log, again) = batch();
    assert!(log.contains(NO_CARGO), "{log}");
    assert_eq!(again["committed"]["passed"], 10, "{again}");
}
