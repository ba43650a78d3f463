//! Crash safety: `assay run` killed with SIGKILL at ten points across every
//! stage, then `--resume`d; Ctrl-C once and twice; a live batch of another
//! process left alone; two processes on one database.
//!
//! The process is held at a named point with the test-only
//! `ASSAY_TEST_POINT=pause@NAME#K` (see src/support/testpoint.rs) and killed from
//! here. Each resumed batch must hold every reply exactly once, every
//! candidate its verdicts and score, pass `PRAGMA integrity_check`, and
//! come to exactly what an uninterrupted run of the same corpus comes to.

use crate::common;

use std::sync::OnceLock;
use std::time::Duration;

use common::{tiny, Scratch};
use serde_json::Value;

/// What an uninterrupted run of the tiny corpus comes to: its summary and
/// its candidates, run once for all tests.
fn reference() -> &'static (Value, Value) {
    static REFERENCE: OnceLock<(Value, Value)> = OnceLock::new();
    REFERENCE.get_or_init(|| {
        let scratch = Scratch::new();
        let summary = scratch.json(&["run", &tiny(), "--json"]);
        let shown = scratch.json(&["show", "1", "--json"]);
        (summary, shown)
    })
}

/// The fields of a summary that say what a batch came to (not how long).
const SUMMARY_FIELDS: &[&str] = &[
    "replies",
    "extracted",
    "unique",
    "compiled",
    "admitted",
    "best",
    "committed",
    "status",
];

/// The fields of a candidate line that are its verdicts.
const CANDIDATE_FIELDS: &[&str] = &["extract", "dup_of", "probe", "score", "admitted"];

/// Checks a finished batch against the reference and the database itself.
fn check_complete(scratch: &Scratch, batch: i64, what: &str) {
    let (ref_summary, ref_shown) = reference();
    let shown = scratch.json(&["show", &batch.to_string(), "--json"]);
    for field in SUMMARY_FIELDS {
        assert_eq!(
            shown[field], ref_summary[field],
            "{what}: summary field {field}"
        );
    }
    let got = shown["candidates"].as_array().unwrap();
    let want = ref_shown["candidates"].as_array().unwrap();
    assert_eq!(got.len(), want.len(), "{what}: one candidate per reply");
    for (g, w) in got.iter().zip(want) {
        for field in CANDIDATE_FIELDS {
            assert_eq!(
                g[field], w[field],
                "{what}: candidate {} field {field}",
                w["candidate_id"]
            );
        }
        // Every unique candidate has its probe verdict, every compiled one
        // its score.
        if g["extract"] == "extracted" && g["dup_of"].is_null() {
            assert!(!g["probe"].is_null(), "{what}: {g}");
        }
        if g["probe"] == "compiled" {
            assert!(!g["score"].is_null(), "{what}: {g}");
        }
    }

    let n = ref_summary["replies"].as_i64().unwrap();
    let (per_idx, integrity, probe_rows, score_rows, unique_compiled): (
        Vec<(i64, i64)>,
        String,
        i64,
        i64,
        i64,
    ) = scratch.sql(async |db| {
        let per_idx = sqlx::query_as(
            "SELECT idx, COUNT(*) FROM replies WHERE batch_id = ? GROUP BY idx ORDER BY idx",
        )
        .bind(batch)
        .fetch_all(db)
        .await
        .unwrap();
        let integrity = sqlx::query_scalar("PRAGMA integrity_check")
            .fetch_one(db)
            .await
            .unwrap();
        let probe_rows =
            sqlx::query_scalar("SELECT COUNT(*) FROM probe_verdicts WHERE batch_id = ?")
                .bind(batch)
                .fetch_one(db)
                .await
                .unwrap();
        let score_rows = sqlx::query_scalar("SELECT COUNT(*) FROM scores WHERE batch_id = ?")
            .bind(batch)
            .fetch_one(db)
            .await
            .unwrap();
        let unique_compiled = sqlx::query_scalar(
            "SELECT COUNT(*) FROM probe_verdicts WHERE batch_id = ? AND verdict = 'compiled'",
        )
        .bind(batch)
        .fetch_one(db)
        .await
        .unwrap();
        (per_idx, integrity, probe_rows, score_rows, unique_compiled)
    });
    let want_idx: Vec<(i64, i64)> = (0..n).map(|i| (i, 1)).collect();
    assert_eq!(per_idx, want_idx, "{what}: every reply exactly once");
    assert_eq!(integrity, "ok", "{what}: integrity_check");
    assert_eq!(
        probe_rows, ref_summary["unique"],
        "{what}: one probe verdict per unique candidate"
    );
    assert_eq!(
        score_rows, unique_compiled,
        "{what}: one score per compiled candidate"
    );
}

/// Runs the tiny batch until `point`, SIGKILLs it, checks that the next
/// `assay` finds the batch interrupted, resumes it and checks the result.
fn kill_and_resume(point: &str) {
    let scratch = Scratch::new();
    let stopped = scratch.start_at(&format!("pause@{point}"), &["run", &tiny()]);
    stopped.kill9();
    if let Some(k) = point.strip_prefix("draw.reply#") {
        // Held with exactly K replies stored: the kill is in the draw.
        let stored: i64 = scratch.sql(async |db| {
            sqlx::query_scalar("SELECT COUNT(*) FROM replies WHERE batch_id = 1")
                .fetch_one(db)
                .await
                .unwrap()
        });
        assert_eq!(stored.to_string(), k, "{point}: replies stored at the kill");
    }

    let listed = scratch.json(&["batches", "--json"]);
    assert_eq!(listed[0]["batch_id"], 1, "{point}: {listed}");
    assert_eq!(listed[0]["status"], "interrupted", "{point}: {listed}");
    assert!(
        listed[0]["failure"]
            .as_str()
            .unwrap()
            .contains("stopped without finishing"),
        "{point}: {listed}"
    );

    let text = scratch.assay_ok(&["run", "--resume", "1"]);
    assert!(text.contains("resume 1 at "), "{point}: {text}");
    let shown = scratch.json(&["show", "1", "--json"]);
    assert_eq!(shown["resumes"].as_array().unwrap().len(), 1, "{point}");
    check_complete(&scratch, 1, point);
}

#[test]
fn sigkill_during_draw_after_the_second_reply() {
    kill_and_resume("draw.reply#2");
}

#[test]
fn sigkill_during_draw_after_the_fifth_reply() {
    kill_and_resume("draw.reply#5");
}

#[test]
fn sigkill_between_draw_and_extraction() {
    kill_and_resume("draw.done");
}

#[test]
fn sigkill_during_extraction() {
    kill_and_resume("extract.candidate#3");
}

#[test]
fn sigkill_during_the_probe_build() {
    kill_and_resume("probe.target#1");
}

#[test]
fn sigkill_after_the_probe_run_began_before_its_verdicts() {
    kill_and_resume("probe.begun");
}

#[test]
fn sigkill_after_the_probe_verdicts_were_stored() {
    kill_and_resume("probe.stored");
}

#[test]
fn sigkill_after_the_scorer_was_built() {
    kill_and_resume("score.built");
}

#[test]
fn sigkill_during_scoring() {
    kill_and_resume("score.run#2");
}

#[test]
fn sigkill_during_persist() {
    kill_and_resume("persist");
}

/// What the resumed attempt kept is what was stored before the kill, and
/// nothing stored is drawn again.
#[test]
fn a_resume_says_what_it_kept() {
    let scratch = Scratch::new();
    scratch
        .start_at("pause@draw.reply#4", &["run", &tiny()])
        .kill9();
    let summary = scratch.json(&["run", "--resume", "1", "--json"]);
    let resumes = summary["resumes"].as_array().unwrap();
    assert_eq!(resumes.len(), 1);
    assert_eq!(resumes[0]["attempt"], 1);
    // Replies are stored in batches of whatever has arrived together, so
    // the point fires once at least 4 are stored (with a replay pool, often
    // all 6 of the batch).
    let kept = resumes[0]["replies_kept"].as_u64().unwrap();
    assert!((4..=6).contains(&kept), "replies_kept {kept}");
    assert_eq!(resumes[0]["extracted_kept"], 0);
    assert_eq!(resumes[0]["committed_kept"], false);
    // The first attempt recorded its prepare phase and died in draw; the
    // resumed attempt's seven phases start at row 1.
    assert_eq!(resumes[0]["first_phase"], 1);
    assert_eq!(summary["phases"].as_array().unwrap().len(), 8);
    check_complete(&scratch, 1, "kept");

    // A finished batch is not resumed.
    let out = scratch.assay(&["run", "--resume", "1"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("batch 1 is finished; nothing to resume"),
        "{err}"
    );
}

#[test]
fn ctrl_c_keeps_what_was_stored_and_marks_the_batch_interrupted() {
    let scratch = Scratch::new();
    let stopped = scratch.start_at("pause@score.run#1", &["run", &tiny()]);
    stopped.signal(libc::SIGINT);
    let (status, stderr) = stopped.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("batch 1 interrupted by SIGINT") && stderr.contains("assay run --resume 1"),
        "{stderr}"
    );
    let shown = scratch.json(&["show", "1", "--json"]);
    assert_eq!(shown["status"], "interrupted");
    assert_eq!(shown["failure"], "interrupted by SIGINT");
    let scored = shown["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| !c["score"].is_null())
        .count();
    let committed = usize::from(!shown["committed"].is_null());
    // The first score to arrive may be the committed candidate's.
    assert_eq!(
        scored + committed,
        1,
        "the score stored before Ctrl-C is kept"
    );

    scratch.assay_ok(&["run", "--resume", "1"]);
    check_complete(&scratch, 1, "after Ctrl-C");
}

/// Issue 38: a batch interrupted in its draw records the draw, measured up
/// to the interrupt, so the resumed batch's table shows what its first
/// attempt spent drawing (a SIGKILL can record nothing; the resume's
/// `first_phase` then says where the next attempt starts).
#[test]
fn an_interrupted_draw_is_recorded_up_to_the_interrupt() {
    let scratch = Scratch::new();
    let stopped = scratch.start_at("pause@draw.reply#2", &["run", &tiny()]);
    stopped.signal(libc::SIGINT);
    let (status, stderr) = stopped.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(130), "{stderr}");
    let phases = |shown: &serde_json::Value| -> Vec<String> {
        shown["phases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["phase"].as_str().unwrap().to_owned())
            .collect()
    };
    let shown = scratch.json(&["show", "1", "--json"]);
    assert_eq!(phases(&shown), ["prepare", "draw"], "{shown}");

    let summary = scratch.json(&["run", "--resume", "1", "--json"]);
    assert_eq!(summary["resumes"][0]["first_phase"], 2, "{summary}");
    assert_eq!(phases(&summary)[..3], ["prepare", "draw", "prepare"]);
    let text = scratch.assay_ok(&["show", "1"]);
    let first = text.find("first attempt").expect(&text);
    let resumed = text.find("resume 1 at").expect(&text);
    let drew = text[first..resumed].lines().any(|l| l.starts_with("draw "));
    assert!(drew, "the first attempt's draw row: {text}");
}

#[test]
fn sigterm_stops_cleanly_too() {
    let scratch = Scratch::new();
    let stopped = scratch.start_at("pause@draw.done", &["run", &tiny()]);
    stopped.signal(libc::SIGTERM);
    let (status, stderr) = stopped.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(130), "{stderr}");
    let listed = scratch.json(&["batches", "--json"]);
    assert_eq!(listed[0]["status"], "interrupted");
    assert_eq!(listed[0]["failure"], "interrupted by SIGTERM");
}

/// Issue 30, item 9, on every way out: a command that ends with any of
/// assay's exit classes has closed its store, all of it, so SQLite has
/// deleted `DB-wal` and `DB-shm` (tests/it/bad_input.rs tries the refusals
/// many times over).
/// SQLite's locks are POSIX locks, which a process loses when it closes
/// any descriptor of the file (sqlite.org/howtocorrupt.html, 2.2): a run
/// that opened the database file itself once its store was open (its
/// check that the file can be written did) held no lock from then on, so
/// the next process to close the database cleanly found itself alone and
/// deleted `DB-wal` and `DB-shm` under the run, whose next write failed
/// with "disk I/O error" (found beside issue 36's build slots, where a
/// batch interrupted beside a waiting one did it).
#[test]
fn a_running_batch_keeps_its_database_locks_while_others_come_and_go() {
    let scratch = Scratch::new();
    let task = tiny();
    // An existing database: the run opens its store before its checks.
    scratch.assay_ok(&["run", &task]);
    let running = scratch.start_at("pause@draw.reply#1", &["run", &task]);
    // Another process opens the database, reads, and closes it cleanly.
    scratch.assay_ok(&["batches"]);
    let mut wal = scratch.db().into_os_string();
    wal.push("-wal");
    assert!(
        std::path::Path::new(&wal).exists(),
        "the WAL of a database a run holds open was deleted by another process's close"
    );
    running.signal(libc::SIGINT);
    let (status, stderr) = running.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(!stderr.contains("disk I/O error"), "{stderr}");
    scratch.assay_ok(&["run", "--resume", "2"]);
    check_complete(&scratch, 2, "after others came and went");
}

#[test]
fn every_exit_class_leaves_no_wal_files() {
    let scratch = Scratch::new();
    let db = scratch.db();
    let left = |db: &std::path::Path| -> Vec<String> {
        ["-wal", "-shm"]
            .into_iter()
            .filter(|suffix| {
                let mut name = db.as_os_str().to_owned();
                name.push(suffix);
                std::path::Path::new(&name).exists()
            })
            .map(str::to_owned)
            .collect()
    };
    let task = tiny();
    let exits = |args: &[&str], code: i32| {
        let out = scratch.assay(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(
            left(&db).is_empty(),
            "{args:?} (exit {code}) left {:?}",
            left(&db)
        );
    };

    // 0: a batch that finished, and the reading commands.
    exits(&["run", &task], 0);
    for args in [
        &["batches"][..],
        &["show", "1"],
        &["export", "1"],
        &["compare", "1", "1"],
    ] {
        exits(args, 0);
    }
    // 2: bad input, with the store open.
    exits(&["show", "9"], 2);
    // 130: Ctrl-C in the middle of scoring.
    let stopped = scratch.start_at("pause@score.run#1", &["run", &task]);
    stopped.signal(libc::SIGINT);
    let (status, stderr) = stopped.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(left(&db).is_empty(), "Ctrl-C left {:?}", left(&db));
    // 1: a batch that fails (its harness's judge panics on an answer).
    let harness_fault = scratch.tiny_copy();
    common::edit(
        &harness_fault.join("harness/src/lib.rs"),
        "pub fn judge(case: &Case, output: &str) -> bool {",
        "pub fn judge(case: &Case, output: &str) -> bool {\n    \
         if output.trim() == \"99\" {\n        panic!(\"99 is out of range\");\n    }",
    );
    let reply = serde_json::json!({
        "content": "```rust\npub fn double(x: u64) -> u64 { if x == 4 { 99 } else { x * 2 } }\n```",
        "finish_reason": "stop",
    });
    std::fs::write(harness_fault.join("replies.jsonl"), format!("{reply}\n")).unwrap();
    exits(&["run", &harness_fault.display().to_string(), "-n", "1"], 1);
    // 3: a lane's run whose store went away (here: is no database).
    let text = scratch.write("text.db", "not a database\n");
    let args = ["run", &task, "--work-item", "4", "--db", "text.db"];
    let out = scratch.assay(&args);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(left(&text).is_empty(), "exit 3 left {:?}", left(&text));
}

/// Gone, or a zombie nobody has reaped yet: either way it runs no more.
fn stopped_running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            state.starts_with('Z') || state.starts_with('X')
        }
    }
}

/// Processes still running in the process group `pgid`.
fn group_members(pgid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                let rest: Vec<&str> = stat
                    .rsplit(')')
                    .next()
                    .unwrap_or("")
                    .split_whitespace()
                    .collect();
                // state ppid pgrp ...
                rest.first()
                    .is_some_and(|s| !s.starts_with('Z') && !s.starts_with('X'))
                    && rest.get(2) == Some(&pgid.to_string().as_str())
            })
        })
        .collect()
}

/// Ctrl-C while cargo builds: cargo is killed, the batch is interrupted,
/// and the resume builds again what had no verdict.
#[test]
fn ctrl_c_during_a_cargo_build_kills_it() {
    let scratch = Scratch::new();
    // The probe's build, held stopped: it cannot end by itself.
    let mut stopped = scratch.start_at("hold@probe.build", &["run", &tiny()]);
    let line = stopped.wait_for_line("assay-test: holding build", Duration::from_secs(300));
    let cargo: u32 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(!stopped_running(cargo), "the held build is not running");
    stopped.signal(libc::SIGINT);
    let (status, stderr) = stopped.wait(Duration::from_secs(120));
    assert_eq!(status.code(), Some(130), "{stderr}");
    // assay kills cargo's process group and waits for cargo to die before
    // it exits: nothing of the build runs once assay has ended (a stopped
    // cargo left behind would be listed here forever).
    assert!(
        stopped_running(cargo),
        "cargo ({cargo}) still runs after assay stopped"
    );
    assert_eq!(
        group_members(cargo),
        Vec::<u32>::new(),
        "the build's processes outlived assay"
    );
    assert_eq!(
        scratch.json(&["batches", "--json"])[0]["status"],
        "interrupted"
    );
    scratch.assay_ok(&["run", "--resume", "1"]);
    check_complete(&scratch, 1, "after Ctrl-C during cargo");
}

/// A stage stuck where it cannot be cancelled: the first Ctrl-C cannot stop
/// it, the second exits at once.
#[test]
fn a_second_ctrl_c_exits_at_once() {
    let scratch = Scratch::new();
    let mut stopped = scratch.start_at("stall@probe.begun", &["run", &tiny()]);
    stopped.signal(libc::SIGINT);
    // Two signals sent before the first is handled would coalesce into one.
    stopped.wait_for_line("a second signal exits at once", Duration::from_secs(120));
    stopped.signal(libc::SIGINT);
    let (status, stderr) = stopped.wait(Duration::from_secs(120));
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("stopped at once"), "{stderr}");
    // It had no time to say so itself; its owner being gone says it.
    let listed = scratch.json(&["batches", "--json"]);
    assert_eq!(listed[0]["status"], "interrupted");
    scratch.assay_ok(&["run", "--resume", "1"]);
    check_complete(&scratch, 1, "after a second Ctrl-C");
}

/// A batch being written by a live process is neither marked interrupted
/// nor resumable from another process; a `show` and a `batches` work
/// beside it.
#[test]
fn a_live_batch_of_another_process_is_left_alone() {
    let scratch = Scratch::new();
    let stopped = scratch.start_at("pause@score.run#1", &["run", &tiny()]);
    let listed = scratch.json(&["batches", "--json"]);
    assert_eq!(listed[0]["status"], "running", "{listed}");
    let shown = scratch.json(&["show", "1", "--json"]);
    assert_eq!(shown["replies"], 6);

    let out = scratch.assay(&["run", "--resume", "1"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("batch 1 is running in process {}", stopped.pid())),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");

    stopped.kill9();
    assert_eq!(
        scratch.json(&["batches", "--json"])[0]["status"],
        "interrupted"
    );
}

/// Ctrl-C stops a run that is waiting for another batch to release the
/// task's package.
#[test]
fn ctrl_c_stops_a_run_waiting_for_the_package_lock() {
    // One slot: B has no other to build in while A holds it.
    let scratch = Scratch::new().one_build_slot();
    // A holds the package from the probe to the end of its scorer build.
    let a = scratch.start_at("pause@probe.stored", &["run", &tiny()]);
    // `-v`: B says in its log that it waits for a build slot.
    let mut b = scratch
        .command(&["-v", "run", &tiny()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (said_tx, said) = std::sync::mpsc::channel();
    let stderr = b.stderr.take().unwrap();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if line.contains("waiting for a build slot") {
                let _ = said_tx.send(line);
            }
        }
    });
    // B has stored its sandbox, the last thing before it opens the package
    // (before its draw, for the streaming probe), so it is at (or about to
    // be at) the lock.
    let start = std::time::Instant::now();
    loop {
        let set_up: i64 = scratch.sql(async |db| {
            sqlx::query_scalar("SELECT COUNT(*) FROM batches WHERE id = 2 AND sandbox IS NOT NULL")
                .fetch_one(db)
                .await
                .unwrap()
        });
        if set_up == 1 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "B never got there"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // And waits there, saying so, naming A.
    let line = said
        .recv_timeout(Duration::from_secs(120))
        .expect("B never waited on the package lock");
    assert!(line.contains(&format!("(pid {})", a.child.id())), "{line}");
    assert!(b.try_wait().unwrap().is_none(), "B did not wait for A");
    // SAFETY: kill only sends a signal to our own child.
    assert_eq!(unsafe { libc::kill(b.id() as i32, libc::SIGINT) }, 0);
    let stopped_at = std::time::Instant::now();
    let status = loop {
        if let Some(status) = b.try_wait().unwrap() {
            break status;
        }
        if stopped_at.elapsed() > Duration::from_secs(10) {
            let _ = b.kill();
            panic!("B did not stop within 10 s of Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130));
    let listed = scratch.json(&["batches", "--json"]);
    assert_eq!(listed[0]["status"], "running", "A is untouched: {listed}");
    assert_eq!(listed[1]["status"], "interrupted", "{listed}");

    a.kill9();
    scratch.assay_ok(&["run", "--resume", "1"]);
    scratch.assay_ok(&["run", "--resume", "2"]);
    check_complete(&scratch, 1, "A");
    check_complete(&scratch, 2, "B");
}

/// Two runs of the same task at once, on one database and one work
/// directory (so one probe package): both finish with the same verdicts.
#[test]
fn two_runs_on_one_database_share_the_probe_package() {
    // One slot, so one package folder for both.
    let scratch = Scratch::new().one_build_slot();
    let spawn = || {
        scratch
            .command(&["run", &tiny(), "--json"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    for child in [a, b] {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let listed = scratch.json(&["batches", "--json"]);
    assert_eq!(listed.as_array().unwrap().len(), 2);
    for batch in [1, 2] {
        check_complete(&scratch, batch, &format!("concurrent batch {batch}"));
    }
}

/// A batch SIGKILLed while a candidate runs leaves that run's directory
/// (and, as root, the scorer copies) behind: nothing in a killed process
/// can remove them. The next `assay` removes them, and leaves nothing of
/// its own. The temporary directory is the test's own, so what is found
/// there is this test's alone.
#[test]
fn a_killed_batchs_scratch_directories_are_removed_by_the_next_assay() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = Scratch::new();
    let tmp = scratch.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    // Like /tmp: the run's unprivileged user must reach its directory.
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let in_tmp = |args: &[&str]| {
        let mut cmd = scratch.command(args);
        cmd.env("TMPDIR", &tmp);
        cmd
    };
    let listed = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&tmp)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("assay-"))
            .collect();
        names.sort();
        names
    };

    let stopped = Scratch::start_command_at(in_tmp(&["run", &tiny()]), "pause@score.child#1");
    stopped.kill9();
    let left = listed();
    assert!(
        left.iter().any(|n| n.starts_with("assay-run.")),
        "the killed run's directory is left: {left:?}"
    );
    // A child the killed assay forked before it died holds the inherited
    // descriptors of these directories' locks until it execs or exits (its
    // confinement runs before it asks to die with its parent), and a sweep
    // leaves a locked directory alone: wait until the kernel records no
    // lock on them, as every process of the killed batch is gone.
    wait_until_unlocked(&tmp, &left);
    // A sweep leaves young directories alone (one may be between its
    // mkdir and its lock): age these past that.
    let old = std::time::SystemTime::now() - Duration::from_secs(3600);
    for name in &left {
        std::fs::File::open(tmp.join(name))
            .unwrap()
            .set_modified(old)
            .unwrap();
    }

    let out = in_tmp(&["run", "--resume", "1"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        listed(),
        Vec::<String>::new(),
        "nothing left after {left:?}"
    );
    check_complete(&scratch, 1, "resumed after the kill");
}

/// Waits (at most 60 s) until /proc/locks lists no `flock` on the
/// directories `names` in `dir` (a holder's line is
/// `N: FLOCK  ADVISORY  WRITE PID MAJ:MIN:INODE 0 EOF`).
fn wait_until_unlocked(dir: &std::path::Path, names: &[String]) {
    use std::os::unix::fs::MetadataExt;
    let inodes: Vec<String> = names
        .iter()
        .map(|n| format!(":{}", std::fs::metadata(dir.join(n)).unwrap().ino()))
        .collect();
    let locked = || {
        std::fs::read_to_string("/proc/locks")
            .unwrap()
            .lines()
            .any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.get(1) == Some(&"FLOCK")
                    && f.get(5)
                        .is_some_and(|file| inodes.iter().any(|i| file.ends_with(i.as_str())))
            })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while locked() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs start as their images are built, not after the score build as a
/// whole: held at the end of the score build, the batch still scores every
/// compiled candidate. (Before runs overlapped the build, nothing was
/// scored at this point.) Killed there, it resumes to the reference.
#[test]
fn runs_go_on_while_the_score_build_is_held_at_its_end() {
    let scratch = Scratch::new();
    let compiled = reference().0["compiled"].as_i64().unwrap();
    let stopped = scratch.start_at("pause@score.built", &["run", &tiny()]);
    let scored = || -> i64 {
        scratch.sql(async |db| {
            sqlx::query_scalar("SELECT COUNT(*) FROM scores WHERE batch_id = 1")
                .fetch_one(db)
                .await
                .unwrap()
        })
    };
    // Every run ends within its wall limit; a generous bound for a loaded
    // machine, checked often so a quiet one does not wait.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while scored() < compiled && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        scored(),
        compiled,
        "every compiled candidate scored while held"
    );
    stopped.kill9();
    scratch.assay_ok(&["run", "--resume", "1"]);
    check_complete(&scratch, 1, "resumed after the held score build");
}
