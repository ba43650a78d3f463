//! Issue 17, items 1-4: mistakes in a task that passed silently or were
//! reported late, each now refused by `assay task check` and by `assay
//! run` before anything is stored (exit 2, one line naming the file and
//! what to fix, with rustc's first error); `assay task new` writes a task
//! that passes both; a passing check is not done again.

use crate::common;

use std::path::{Path, PathBuf};

use common::{assert_refused, edit, Scratch};

/// The 1-based line of the first line of `path` that contains `what`.
fn line_of(path: &Path, what: &str) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().position(|l| l.contains(what)).unwrap() + 1
}

/// `task check` and `run` both refuse the task with exit 2 and the same
/// one line holding every fragment of `want`; `run` writes nothing (no
/// database, no output folder).
fn refused_by_check_and_run(scratch: &Scratch, task: &Path, want: &[&str]) {
    let task = task.display().to_string();
    let mut lines = Vec::new();
    for args in [&["task", "check", &task][..], &["run", &task]] {
        lines.push(assert_refused(&scratch.assay(args), args, want));
    }
    assert_eq!(lines[0], lines[1], "check and run say different things");
    assert!(!scratch.db().exists(), "run created a database");
    assert!(
        !scratch.path().join("assay-out").exists(),
        "run created an output folder"
    );
}

/// Issue 17, item 1: an `entry` that committed.rs does not define finished
/// with exit 0, `compiled 0/8`, `committed score_build_failed`.
#[test]
fn issue_17_1_an_entry_the_committed_candidate_does_not_define() {
    let scratch = Scratch::new();
    let task = scratch.tiny_copy();
    edit(
        &task.join("spec.toml"),
        "entry = \"double\"",
        "entry = \"twice\"",
    );
    refused_by_check_and_run(
        &scratch,
        &task,
        &[
            "task/committed.rs: no function `twice` (the spec's `entry`)",
            "define `pub fn twice`",
            "error[E0425]",
        ],
    );
}

/// Issue 17, item 2: a committed.rs that does not compile finished with
/// exit 0 and `committed score_build_failed`, its error written nowhere.
#[test]
fn issue_17_2_a_committed_candidate_that_does_not_compile() {
    let scratch = Scratch::new();
    let task = scratch.tiny_copy();
    let committed = task.join("committed.rs");
    edit(&committed, "x * 2", "x * \"2\"");
    let line = line_of(&committed, "x * \"2\"");
    refused_by_check_and_run(
        &scratch,
        &task,
        &[
            &format!("task/committed.rs:{line}: the committed candidate does not compile"),
            "error[E0277]: cannot multiply `u64` by `&str`",
        ],
    );
}

/// Issue 17, item 3: a harness without `Entry` was said not to provide
/// `load_cases`.
#[test]
fn issue_17_3_a_harness_without_the_entry_type() {
    let scratch = Scratch::new();
    let task = scratch.tiny_copy();
    // The harness still compiles: `run_input` spells the type out.
    let lib = task.join("harness/src/lib.rs");
    edit(&lib, "pub type Entry = fn(u64) -> u64;", "");
    edit(
        &lib,
        "run_input(entry: Entry,",
        "run_input(entry: fn(u64) -> u64,",
    );
    refused_by_check_and_run(
        &scratch,
        &task,
        &[
            "task/harness/src/lib.rs: no type `Entry`",
            // Read from the committed candidate's `double`.
            "add `pub type Entry = fn(u64) -> u64;` as docs/tasks.md shows",
            "cannot find type `Entry`",
        ],
    );
}

/// Issue 17, item 4: a harness whose `run_input` takes its arguments in
/// the wrong order failed only at the score build, with exit 1, pointing
/// into generated code.
#[test]
fn issue_17_4_run_input_with_its_arguments_swapped() {
    let scratch = Scratch::new();
    let task = scratch.tiny_copy();
    let lib = task.join("harness/src/lib.rs");
    edit(
        &lib,
        "pub fn run_input(entry: Entry, line: &str)",
        "pub fn run_input(line: &str, entry: Entry)",
    );
    let line = line_of(&lib, "pub fn run_input");
    refused_by_check_and_run(
        &scratch,
        &task,
        &[
            &format!(
                "task/harness/src/lib.rs:{line}: `run_input` does not have the contract's signature"
            ),
            "make it `pub fn run_input(entry: Entry, line: &str) -> Result<String, String>`",
            "error[E0308]: mismatched types",
        ],
    );
}

/// `task new` writes a task that `task check` passes without a warning and
/// `run` runs, its committed candidate scoring full; it never writes over a
/// folder.
#[test]
fn a_new_task_passes_its_check_and_runs() {
    let scratch = Scratch::new();
    let out = scratch.assay_ok(&["task", "new", "word-count"]);
    assert!(out.contains("wrote task `word-count`"), "{out}");
    let dir = scratch.path().join("word-count");
    assert!(dir.join("harness/src/lib.rs").is_file());

    let out = scratch.assay(&["task", "check", "word-count"]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.trim().is_empty(), "warnings: {stderr}");
    assert!(stdout.contains("task `word-count` is ready"), "{stdout}");
    assert!(
        stdout.contains("`word_count` compiles and passes 5 of 5 cases"),
        "{stdout}"
    );

    let run = scratch.json(&["run", "word-count", "--json"]);
    assert_eq!(run["committed"]["verdict"], "scored(5/5)", "{run}");
    assert_eq!(run["candidates"].as_array().unwrap().len(), 4, "{run}");
    assert_eq!(run["candidates"][0]["score"], "scored(5/5)", "{run}");
    assert_eq!(run["candidates"][1]["dup_of"], 0, "{run}");
    assert!(
        run["candidates"][2]["probe"]
            .as_str()
            .unwrap()
            .starts_with("compile_error("),
        "{run}"
    );
    assert_eq!(run["candidates"][3]["score"], "scored(4/5)", "{run}");

    let out = scratch.assay(&["task", "new", "word-count"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("word-count: already exists"), "{err}");
    let out = scratch.assay(&["task", "new", "fn"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!scratch.path().join("fn").exists());
}

/// A passing check leaves a stamp; the next batch of the same files finds
/// it and builds nothing for the check (its -v log says which it did),
/// in whichever build slot its check package opens. `task check` always
/// checks afresh, and warns about a committed
/// candidate that fails cases (tiny's fails two, on purpose).
#[test]
fn a_passing_check_is_not_done_again() {
    let scratch = Scratch::new();
    let task = scratch.tiny_copy();
    // Files no other test has: this test's first check cannot be stamped.
    let prompt = task.join("prompt.md");
    let mut text = std::fs::read_to_string(&prompt).unwrap();
    text.push_str(&format!("\n(asked from {})\n", scratch.path().display()));
    std::fs::write(&prompt, text).unwrap();
    let task = task.display().to_string();
    const BUILT: &str = "task check: building";
    const STAMPED: &str = "task check: passed before with these files, not built again";

    let stderr = |args: &[&str]| {
        let out = scratch.assay(args);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{args:?}: {err}");
        err
    };
    let first = stderr(&["-v", "run", &task, "-n", "1"]);
    assert!(first.contains(BUILT) && !first.contains(STAMPED), "{first}");
    let second = stderr(&["-v", "run", &task, "-n", "1"]);
    assert!(
        second.contains(STAMPED) && !second.contains(BUILT),
        "{second}"
    );
    let stamp = second
        .lines()
        .find(|l| l.contains(STAMPED))
        .and_then(|l| l.split("stamp=").nth(1))
        .map(|s| PathBuf::from(s.split_whitespace().next().unwrap()))
        .expect("the log names the stamp");
    let stamped = std::fs::read_to_string(&stamp).unwrap();
    assert!(
        stamped.contains("task `tiny`") && stamped.contains("passed its check"),
        "{stamped}"
    );

    // A batch whose check package opens in another build slot, slot 0
    // being held, finds the same stamp: it is kept in slot 0's folder.
    // Two slots whatever the tests' count, or the batch would wait for
    // this test to let go of slot 0.
    let held = common::shared_work_dir().join("taskcheck/tiny");
    let lock = std::fs::File::open(held.join(".assay-lock")).unwrap();
    lock.lock().unwrap();
    let out = scratch
        .command(&["-v", "run", &task, "-n", "1"])
        .env("ASSAY_BUILD_SLOTS", "2")
        .output()
        .unwrap();
    drop(lock);
    let beside = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{beside}");
    assert!(
        beside.contains("the package's folder is in use; building in another slot")
            && beside.contains("taskcheck/tiny.slot1"),
        "{beside}"
    );
    assert!(
        beside.contains(STAMPED) && !beside.contains(BUILT),
        "{beside}"
    );
    assert!(
        beside.contains(&format!("stamp={}", stamp.display())),
        "{beside}"
    );

    let check = stderr(&["-v", "task", "check", &task]);
    assert!(check.contains(BUILT), "{check}");
    let warning = check
        .lines()
        .find(|l| l.starts_with("warning: "))
        .unwrap_or_default();
    assert!(
        warning.contains("task/committed.rs: the committed candidate passes 8 of 10 cases")
            && warning.contains(&format!(
                "the first it fails is {}/cases.jsonl:9, a wrong answer",
                task
            )),
        "{check}"
    );
}
