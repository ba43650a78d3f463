//! Two hosts that share nothing but the database (issue 36). Host A (this
//! test process) queues a batch of each bundled task and a suite part
//! from a folder of its own; host B, a lane in a mount namespace of its
//! own where that folder, the test's scratch folders and the whole
//! checkout (target directory and binary included) are hidden under empty
//! tmpfs mounts (`common::hosts`), runs them all with its own copy of the
//! binary and its own work directory, reaching PostgreSQL on 127.0.0.1.
//! Back on A: the verdicts are a one-machine run's, `show --errors` prints
//! the errors B's builds found, and a batch B ran is promoted on A from
//! what the store carries.

use crate::common;
use crate::common::hosts::HostB;
use crate::common::json;
use crate::common::pg;
use crate::lanes::ok_json;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use common::{repo, Scratch};
use serde_json::Value;

fn assay(db: &str, work_dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_assay"))
        .args(args)
        .env("ASSAY_DB", db)
        .env("ASSAY_WORK_DIR", work_dir)
        .env_remove("ASSAY_TEST_POINT")
        .env_remove("RUST_LOG")
        .output()
        .expect("assay starts")
}

fn ok_text(db: &str, work_dir: &Path, args: &[&str]) -> String {
    let out = assay(db, work_dir, args);
    assert!(
        out.status.success(),
        "assay {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The text `show --errors` prints for a batch whose error files are
/// these (in candidate order), as `views` builds it.
fn joined_error_files(shown: &Value) -> String {
    shown["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["error_file"].as_str())
        .map(|file| {
            let text = std::fs::read_to_string(file)
                .unwrap_or_else(|e| panic!("host b's error file {file}: {e}"));
            format!("{}\n", text.trim_end_matches('\n'))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn issue_36_a_lane_that_sees_nothing_of_the_queueing_host_runs_its_batches_and_suite() {
    let schema = pg::PgSchema::new();
    let db = schema.url.as_str();

    // Host A's queueing folder: a copy of each bundled task, and a suite.
    let queueing = Scratch::new();
    let mut tasks = Vec::new();
    for name in ["absolute", "shellwords"] {
        let dir = queueing.join(name);
        common::copy_dir(&repo().join("specs").join(name), &dir);
        tasks.push(dir);
    }
    let (problems, completions) = queueing.small_suite();
    for task in &tasks {
        let queued = ok_json(
            db,
            &["run", &task.display().to_string(), "--queue", "--json"],
        );
        assert!(queued["work_item"].as_i64().is_some(), "{queued}");
    }
    let suite = ok_json(
        db,
        &[
            "suite",
            "run",
            &problems,
            "--completions",
            &completions,
            "--queue",
            "--json",
        ],
    );
    let suite_id = suite["suite_id"].as_i64().unwrap().to_string();

    // Host B drains the queue, seeing none of A's folders. Meanwhile A
    // makes the one-machine reference of each.
    let local = Scratch::new();
    let promoting = Scratch::with_own_work_dir();
    let mut b = HostB::start(db, &[queueing.path(), local.path(), promoting.path()]);
    let want: Vec<_> = tasks
        .iter()
        .map(|task| {
            json::batch_verdicts(
                local.json(&["run", &task.display().to_string(), "--json"]),
                local.path(),
            )
        })
        .collect();
    let want_suite = json::comparable(
        local.json(&[
            "suite",
            "run",
            &problems,
            "--completions",
            &completions,
            "--json",
        ]),
        local.path(),
    );
    b.wait(Duration::from_secs(1800));

    // Every item finished on B, each batch as on one machine.
    let items = ok_json(db, &["queue", "--json"]);
    let items = items.as_array().unwrap();
    assert_eq!(items.len(), 3, "{items:#?}");
    for w in items {
        assert_eq!(
            (w["state"].as_str(), w["lane"].as_str()),
            (Some("done"), Some("b")),
            "{w:#}"
        );
    }
    let mut batches = Vec::new();
    for (w, want) in items[..2].iter().zip(&want) {
        let id = w["batch_id"].as_i64().unwrap().to_string();
        let shown = ok_json(db, &["show", &id, "--json"]);
        assert_eq!(shown["status"], "finished", "{shown:#}");
        assert_eq!(
            &json::batch_verdicts(shown.clone(), &b.out()),
            want,
            "batch {id}"
        );
        // Its task ran from B's own copy, placed from the store.
        let spec = schema.value(&format!("SELECT spec_path FROM batches WHERE id = {id}"));
        let carried = b.path().join("work/carried").display().to_string();
        assert!(spec.starts_with(&carried), "{spec}");
        batches.push((id, shown));
    }
    let shown_suite = json::comparable(
        ok_json(db, &["suite", "show", &suite_id, "--json"]),
        &b.out(),
    );
    for key in ["problems", "pass_at_1", "completions", "status"] {
        assert_eq!(shown_suite[key], want_suite[key], "suite {key}");
    }
    assert_eq!(shown_suite["lanes"], serde_json::json!(["b"]));

    // `show --errors` on A prints what B's builds wrote on B's disk.
    let a_work = promoting.work_dir();
    for (id, shown) in &batches {
        let files = joined_error_files(shown);
        assert!(files.contains("error"), "batch {id} has compile errors");
        assert_eq!(ok_text(db, &a_work, &["show", id, "--errors"]), files);
    }

    // No stored row names a folder of A's that B would have needed: the
    // tasks, the checkout. (The suite records the problems file it was
    // queued from, as provenance; its problems are in the store.)
    let dump = Command::new("pg_dump")
        .args(["-d", pg::server(), "--schema", schema.name(), "--data-only"])
        .output()
        .expect("pg_dump runs");
    assert!(
        dump.status.success(),
        "{}",
        String::from_utf8_lossy(&dump.stderr)
    );
    let dump = String::from_utf8_lossy(&dump.stdout);
    for folder in tasks.iter().map(|t| t.as_path()).chain([repo()]) {
        let folder = folder.display().to_string();
        let naming: Vec<&str> = dump.lines().filter(|l| l.contains(&folder)).collect();
        assert!(naming.is_empty(), "the store names {folder}: {naming:#?}");
    }

    // Promotion on A of B's absolute batch: A no longer has the task's
    // folder, so the task comes from the store, placed in A's work dir.
    let (absolute, shown) = &batches[0];
    let best = ranked_first(shown);
    std::fs::remove_dir_all(&tasks[0]).unwrap();
    let said = ok_text(db, &a_work, &["promote", absolute, &best, "--yes"]);
    let placed = a_work.join("promoted").join(format!("batch-{absolute}"));
    let committed = placed.join("committed.rs");
    assert!(
        said.contains(&format!(
            "promoted candidate {best} of batch {absolute} over {}",
            committed.display()
        )),
        "{said}"
    );
    let promoted = std::fs::read_to_string(&committed).unwrap();
    assert!(
        promoted.starts_with("// Promoted by assay on ")
            && promoted.contains(&format!("batch {absolute}, candidate {best}, pool replay")),
        "{promoted}"
    );
    // The rest of the placed task is the task as queued.
    for file in ["spec.toml", "cases.jsonl", "harness/src/lib.rs"] {
        assert_eq!(
            std::fs::read(placed.join(file)).unwrap(),
            std::fs::read(repo().join("specs/absolute").join(file)).unwrap(),
            "{file}"
        );
    }
    // Promoted once: the placed copy's committed file is no longer what
    // the batch scored.
    let again = assay(db, &a_work, &["promote", absolute, &best, "--yes"]);
    common::assert_refused(
        &again,
        &["promote"],
        &["committed.rs: changed since batch", "run a new batch"],
    );

    // B's shellwords batch, promoted into the folder A queued it from.
    let (shellwords, shown) = &batches[1];
    let best = ranked_first(shown);
    let task = tasks[1].display().to_string();
    ok_text(
        db,
        &a_work,
        &["promote", shellwords, &best, "--task", &task, "--yes"],
    );
    let promoted = std::fs::read_to_string(tasks[1].join("committed.rs")).unwrap();
    assert!(
        promoted.contains(&format!("batch {shellwords}, candidate {best}")),
        "{promoted}"
    );
}

/// A batch whose task is not on this machine, with no queued copy in the
/// store: promotion says to name the folder, on one line; a named folder
/// is taken only if it holds what the batch scored.
#[test]
fn issue_36_promotion_takes_a_named_folder_only_if_it_is_the_task_scored() {
    let s = Scratch::new();
    let task = s.tiny_copy();
    let batch = s.run_batch(&task);
    let spec = task.join("spec.toml").display().to_string();
    std::fs::remove_dir_all(&task).unwrap();
    let args = ["promote", &batch, "0", "--yes"];
    common::assert_refused(
        &s.assay(&args),
        &args,
        &[
            &format!("batch {batch}: its task is not on this machine ({spec})"),
            "name the task's folder with --task DIR",
        ],
    );

    // The folder again, but its cases changed: not the task scored.
    let task = s.tiny_copy();
    let dir = task.display().to_string();
    let cases = task.join("cases.jsonl");
    let text = std::fs::read_to_string(&cases).unwrap();
    std::fs::write(&cases, format!("{text}{}", text.lines().next().unwrap())).unwrap();
    let args = ["promote", &batch, "0", "--task", &dir, "--yes"];
    common::assert_refused(
        &s.assay(&args),
        &args,
        &[&format!("{dir}: not the task batch {batch} scored")],
    );
    // As it was: promoted there.
    std::fs::write(&cases, text).unwrap();
    let said = s.assay_ok(&args);
    assert!(
        said.contains(&format!("over {}", task.join("committed.rs").display())),
        "{said}"
    );
    let promoted = std::fs::read_to_string(task.join("committed.rs")).unwrap();
    assert!(
        promoted.contains("pub fn double(x: u64) -> u64 { x * 2 }"),
        "{promoted}"
    );
}

/// The candidate a batch ranked first (the one `promote` writes), as its
/// id's text.
fn ranked_first(shown: &Value) -> String {
    shown["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["rank"] == 1)
        .expect("an admitted candidate")["candidate_id"]
        .to_string()
}
