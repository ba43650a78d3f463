//! Build slots (issue 36): batches on one work directory build side by
//! side, of one task or of two, and one that must wait says so once.
//! Every assertion is on the order of events, never on a duration.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

use crate::common::{copy_dir, edit, Scratch};
use crate::probe_ops::spinning_task;

/// The variable that sizes the pools (`build::package::SLOTS_VAR`); the
/// tests' commands set it to 1 (`common::Scratch::prepare`).
const SLOTS: &str = "ASSAY_BUILD_SLOTS";

/// Each batch's one candidate (the spinning task's good one) compiled and
/// passed every case, whatever slot built it.
fn assert_compiled_and_passed(scratch: &Scratch, batch: &Value, what: &str) {
    let id = batch["batch_id"].as_i64().unwrap().to_string();
    let shown = scratch.json(&["show", &id, "--json"]);
    let candidates = shown["candidates"].as_array().unwrap();
    assert_eq!(candidates.len(), 1, "{what}: {shown}");
    assert_eq!(candidates[0]["probe"], "compiled", "{what}: {shown}");
    assert_eq!(candidates[0]["score"], "scored(10/10)", "{what}: {shown}");
}

/// Batch A is held inside its build (its cargo stopped, holding its
/// package folder and a target directory); meanwhile a second batch of
/// the same task and a batch of another task both run to the end, each in
/// a free slot. A run allowed one slot waits instead, says so once naming
/// A's pid, and goes on when A is gone. The verdicts are the same
/// whatever the slot. In a work directory of its own, with a harness that
/// has no dependency, so no other test's build takes a slot and every
/// slot builds the harness in a second.
#[test]
fn issue_36_batches_on_one_work_directory_build_side_by_side() {
    let scratch = Scratch::with_own_work_dir();
    let task = spinning_task(&scratch).display().to_string();
    let two_slots = |args: &[&str]| {
        let mut cmd = scratch.command(args);
        cmd.env(SLOTS, "2");
        cmd
    };
    let run = |spec: &str| ["run", spec, "-n", "1", "--json"].map(str::to_owned);

    let mut held =
        Scratch::start_command_at(two_slots(&["run", &task, "-n", "1"]), "hold@probe.build");
    held.wait_for_line("assay-test: holding build", Duration::from_secs(300));

    // A batch of `task` run to its end while A still holds its build.
    let mut beside = |task: &str| -> Value {
        let out = two_slots(&run(task).each_ref().map(String::as_str))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            held.child.try_wait().unwrap().is_none(),
            "A ended before the batch beside it"
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };

    // The same task: its folder is held by A, so another slot's.
    let same = beside(&task);

    // Another task: its own folder, and a target directory A does not hold.
    let other = scratch.path().join("other");
    copy_dir(Path::new(&task), &other);
    edit(
        &other.join("spec.toml"),
        "name = \"tiny-spin\"",
        "name = \"tiny-spin-other\"",
    );
    let another = beside(&other.display().to_string());

    // One slot only: it waits for A's slot, and says so once.
    let mut one = scratch.command(&["-v", "run", &task, "-n", "1", "--json"]);
    one.env(SLOTS, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut waiting = one.spawn().unwrap();
    let (tx, lines) = mpsc::channel();
    let stderr = waiting.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let mut before = Vec::new();
    let said = loop {
        match lines.recv_timeout(Duration::from_secs(300)) {
            Ok(line) if line.contains("waiting for a build slot") => break line,
            Ok(line) => before.push(line),
            Err(e) => {
                let _ = waiting.kill();
                panic!("it never said it waits ({e}): {before:?}");
            }
        }
    };
    let a_pid = held.child.id();
    assert!(said.contains(&format!("(pid {a_pid})")), "{said}");
    assert!(said.contains("--work-dir"), "{said}");
    assert!(
        waiting.try_wait().unwrap().is_none(),
        "it went on while A held its slot: {said}"
    );

    // Interrupted: A closes its store cleanly while the waiting run holds
    // the same database open, whose locks must survive it (a run that lost
    // them had its WAL deleted under it: see
    // crash::a_running_batch_keeps_its_database_locks_while_others_come_and_go).
    held.signal(libc::SIGINT);
    let (a_status, a_stderr) = held.wait(Duration::from_secs(60));
    assert_eq!(a_status.code(), Some(130), "{a_stderr}");
    let mut stdout = String::new();
    waiting
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let status = waiting.wait().unwrap();
    reader.join().unwrap();
    let after: Vec<String> = lines.try_iter().collect();
    assert!(status.success(), "{before:?}\n{said}\n{after:?}");
    assert!(
        !after.iter().any(|l| l.contains("waiting for a build slot")),
        "said more than once: {after:?}"
    );
    let waited: Value = serde_json::from_str(&stdout).unwrap();

    assert_compiled_and_passed(&scratch, &same, "the same task beside A");
    assert_compiled_and_passed(&scratch, &another, "another task beside A");
    assert_compiled_and_passed(&scratch, &waited, "the batch that waited");
    // Side by side means in other slots: A's folder and target are slot 0.
    let work = scratch.work_dir();
    for slot in ["tiny-spin.slot1", "target.slot1"] {
        assert!(work.join(slot).is_dir(), "no {slot} in {}", work.display());
    }
}
