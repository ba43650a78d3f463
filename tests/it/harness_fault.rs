//! Issue 30, item 2: harness faults were blamed on candidates. A `judge`
//! that panicked on a case made that case a wrong answer for every
//! candidate (exit 0); a `run_input` that panicked on a case's input was
//! the committed candidate's panic. Both are the task's fault: `task
//! check` (and so every batch, first) refuses the task naming the harness
//! function, the case and the panic, and a batch that meets one fails
//! with that line instead of making it any candidate's verdict. A
//! candidate that panics in harness code of its own accord is still its
//! own panic.

use crate::common;

use std::path::Path;

use common::{assert_refused, edit, Scratch};

/// Gives case 6 of the tiny task (input 5) a name.
fn name_case_five(task: &Path) {
    edit(
        &task.join("cases.jsonl"),
        "{\"input\": 5,",
        "{\"name\": \"five\", \"input\": 5,",
    );
}

/// Replaces the task's replay corpus with one reply per source.
fn replies(task: &Path, sources: &[&str]) {
    let lines: Vec<String> = sources
        .iter()
        .map(|source| {
            serde_json::json!({
                "content": format!("```rust\n{source}\n```"),
                "finish_reason": "stop",
            })
            .to_string()
        })
        .collect();
    std::fs::write(task.join("replies.jsonl"), lines.join("\n") + "\n").unwrap();
}

/// `task check` and `run` both refuse the task with exit 2 and the same
/// one line holding every fragment of `want`; `run` stores nothing.
fn refused_by_check_and_run(scratch: &Scratch, task: &Path, want: &[&str]) -> String {
    let task = task.display().to_string();
    let mut lines = Vec::new();
    for args in [&["task", "check", &task][..], &["run", &task]] {
        lines.push(assert_refused(&scratch.assay(args), args, want));
    }
    assert_eq!(lines[0], lines[1], "check and run say different things");
    assert!(!scratch.db().exists(), "run created a database");
    lines.remove(0)
}

#[test]
fn issue_30_2_a_judge_that_panics_on_one_case_is_the_harness_s() {
    let scratch = Scratch::new();
    let task = scratch.tiny_copy();
    name_case_five(&task);
    edit(
        &task.join("harness/src/lib.rs"),
        "pub fn judge(case: &Case, output: &str) -> bool {",
        "pub fn judge(case: &Case, output: &str) -> bool {\n    \
         if case.input == 5 {\n        panic!(\"no rule for five\");\n    }",
    );
    let line = refused_by_check_and_run(
        &scratch,
        &task,
        &[
            "task/cases.jsonl:6: the harness's `judge` panics on case `five` \
             (the committed candidate's answer `10`): panicked at ",
            "harness/src/lib.rs:",
            "no rule for five; a fault of the harness, not of any candidate: fix `judge`",
        ],
    );
    assert!(!line.contains("wrong answer"), "{line}");
}

#[test]
fn issue_30_2_a_run_input_that_panics_on_one_input_is_the_harness_s() {
    let scratch = Scratch::new();
    let task = scratch.tiny_copy();
    name_case_five(&task);
    edit(
        &task.join("harness/src/lib.rs"),
        "    Ok(entry(input).to_string())",
        "    if input == 5 {\n        panic!(\"five does not decode\");\n    }\n    \
         Ok(entry(input).to_string())",
    );
    let line = refused_by_check_and_run(
        &scratch,
        &task,
        &[
            "task/cases.jsonl:6: the harness's `run_input` panics on case `five` \
             (its input `5`): panicked at ",
            "harness/src/lib.rs:",
            "five does not decode; a fault of the harness, not of any candidate: fix `run_input`",
        ],
    );
    assert!(!line.contains("committed candidate"), "{line}");
}

/// A judge that panics only on an answer the committed candidate never
/// gives passes the check; the batch that meets it fails naming it, and the
/// candidate whose answer it was gets no verdict.
#[test]
fn issue_30_2_a_judge_panic_in_a_batch_fails_the_batch_not_the_candidate() {
    let scratch = Scratch::new();
    let task = scratch.tiny_copy();
    edit(
        &task.join("harness/src/lib.rs"),
        "pub fn judge(case: &Case, output: &str) -> bool {",
        "pub fn judge(case: &Case, output: &str) -> bool {\n    \
         if output.trim() == \"99\" {\n        panic!(\"99 is out of range\");\n    }",
    );
    replies(
        &task,
        &[
            "pub fn double(x: u64) -> u64 { x * 2 }",
            "pub fn double(x: u64) -> u64 { if x == 4 { 99 } else { x * 2 } }",
        ],
    );
    let task_arg = task.display().to_string();
    let out = scratch.assay(&["run", &task_arg, "-n", "2"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("batch 1 failed: ")
            && err.contains(
                "task/cases.jsonl:5: the harness's `judge` panics on this case \
                 (candidate 1's answer `99`): panicked at "
            )
            && err.contains("99 is out of range; a fault of the harness, not of any candidate"),
        "{err}"
    );
    let shown = scratch.json(&["show", "1", "--json"]);
    let blamed = &shown["candidates"][1];
    assert_eq!(blamed["candidate_id"], 1, "{shown}");
    assert!(
        blamed["score"].is_null(),
        "a verdict for a harness fault: {shown}"
    );
}

/// A candidate that panics inside `run_input`, called on an input the
/// harness cannot decode, makes the panic of a harness fault: the harness's
/// code, its file and its words. It is still that candidate's own panic:
/// harness faults are decided where no candidate runs.
#[test]
fn a_candidate_that_fakes_a_harness_panic_is_still_its_own() {
    let scratch = Scratch::new();
    let task = scratch.tiny_copy();
    edit(
        &task.join("harness/src/lib.rs"),
        "let input: u64 = line.trim().parse().map_err(|e| format!(\"{e}\"))?;",
        "let input: u64 = line.trim().parse().expect(\"an input is a number\");",
    );
    replies(
        &task,
        &[
            "pub fn double(x: u64) -> u64 {\n    \
             if x == 3 {\n        let _ = run_input(double, \"three\");\n    }\n    x * 2\n}",
            "pub fn double(x: u64) -> u64 { x + x }",
        ],
    );
    let task_arg = task.display().to_string();
    let check = scratch.assay(&["task", "check", &task_arg]);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let run = scratch.json(&["run", &task_arg, "-n", "2", "--json"]);
    let candidate = &run["candidates"][0];
    assert_eq!(candidate["score"], "scored(9/10)", "{run}");
    assert_eq!(candidate["cases"], "pppxpppppp", "{run}");
    assert_eq!(run["candidates"][1]["score"], "scored(10/10)", "{run}");
}
