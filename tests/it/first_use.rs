//! A first-time user's and a task author's path (issue 17): output paths
//! that cannot collide, reading commands that never create a database,
//! `promote` that shows before it writes, `run --json` with every
//! candidate, every JSON field documented, and the bad input fuzzing found.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;

use common::{assert_refused, edit, repo, tiny, Scratch};
use serde_json::Value;

/// Runs `assay args` and checks the refusal: exit 2, one line holding
/// every fragment of `want`, nothing on stdout.
fn refused(scratch: &Scratch, args: &[&str], want: &[&str]) -> String {
    assert_refused(&scratch.assay(args), args, want)
}

/// Issue 17, item 6: `batches --db typo.db` created an empty database.
#[test]
fn reading_commands_never_create_a_database() {
    let scratch = Scratch::new();
    for args in [
        &["batches"][..],
        &["batches", "--json"],
        &["show", "1"],
        &["show", "1", "--json"],
        &["export", "1"],
        &["compare", "1", "2"],
        &["replay", "1"],
        &["promote", "1", "0", "--yes"],
        &["run", "--resume", "1"],
    ] {
        let mut with_db = args.to_vec();
        with_db.extend(["--db", "typo.db"]);
        refused(&scratch, &with_db, &["typo.db: no such database"]);
        assert!(
            !scratch.path().join("typo.db").exists(),
            "{args:?} created it"
        );
        // And through ASSAY_DB.
        refused(&scratch, args, &["assay.db: no such database"]);
        assert!(!scratch.db().exists(), "{args:?} created it");
    }
    assert!(!scratch.path().join("assay-out").exists());
    assert!(!scratch.path().join("typo-out").exists());
}

/// Issue 17, item 5: two databases with the default `--out` wrote into the
/// same `assay-out/batch-1/errors/`.
#[test]
fn two_databases_never_share_a_batch_folder() {
    let scratch = Scratch::new();
    let errors_dir = |db: &str| -> String {
        let v = scratch.json(&["run", &tiny(), "--db", db, "--json"]);
        v["errors_dir"].as_str().unwrap().to_owned()
    };
    let a = errors_dir("a.db");
    let b = errors_dir("b.db");
    let root = scratch.path().canonicalize().unwrap();
    assert_eq!(Path::new(&a), root.join("a-out/batch-1/errors"));
    assert_eq!(Path::new(&b), root.join("b-out/batch-1/errors"));
    // Told to share one output folder, they still do not share a batch's.
    let shared = |db: &str| -> String {
        let v = scratch.json(&["run", &tiny(), "--db", db, "--out", "shared", "--json"]);
        v["errors_dir"].as_str().unwrap().to_owned()
    };
    let c = shared("c.db");
    let d = shared("d.db");
    assert_eq!(Path::new(&c), root.join("shared/batch-1/errors"));
    assert_eq!(Path::new(&d), root.join("shared/batch-1.2/errors"));
    // Each candidate's error file is in its own batch's folder.
    let shown = scratch.json(&["show", "1", "--db", "d.db", "--json"]);
    let files: Vec<&str> = shown["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["error_file"].as_str())
        .collect();
    assert!(
        !files.is_empty(),
        "tiny has a candidate that does not compile"
    );
    for f in files {
        assert!(f.starts_with(&d), "{f} is outside {d}");
        assert!(Path::new(f).is_file(), "{f}");
    }
}

/// Issue 17, item 7: `promote 1 0` overwrote committed.rs with no preview.
#[test]
fn promote_shows_the_change_and_writes_only_when_told() {
    let scratch = Scratch::new();
    let task = scratch.tiny_copy();
    // The harness stays where it is (as in tests/it/admission.rs): one task
    // name, one harness path in the shared work directory.
    edit(
        &task.join("spec.toml"),
        "harness = \"harness\"",
        &format!("harness = \"{}/harness\"", tiny()),
    );
    let task_arg = task.display().to_string();
    let committed = task.join("committed.rs");
    let before = std::fs::read_to_string(&committed).unwrap();
    scratch.json(&["run", &task_arg, "--json"]);

    // No terminal to confirm on and no --yes: the diff, then a refusal.
    let out = scratch
        .command(&["promote", "1", "0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("pass --yes"), "{stderr}");
    assert!(
        stdout.contains(&format!("--- {}", committed.display())),
        "{stdout}"
    );
    assert!(stdout.contains("+// Promoted by assay on "), "{stdout}");
    assert!(stdout.contains("batch 1, candidate 0"), "{stdout}");
    // The committed lines that go, and the candidate's that come.
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with('-') && !l.starts_with("---")),
        "{stdout}"
    );
    assert!(
        stdout.contains("+pub fn double(x: u64) -> u64 { x * 2 }"),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(&committed).unwrap(),
        before,
        "written without --yes"
    );
    let shown = scratch.json(&["show", "1", "--json"]);
    assert!(shown["promotions"].as_array().unwrap().is_empty());

    // With --yes: the same diff, then the file.
    let out = scratch.assay(&["promote", "1", "0", "--yes"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = std::fs::read_to_string(&committed).unwrap();
    assert!(after.starts_with("// Promoted by assay on "), "{after}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("promoted candidate 0 of batch 1"));
}

/// Issue 17, item 8: `run --json` had no per-candidate verdicts.
#[test]
fn run_json_carries_every_candidates_verdicts() {
    let scratch = Scratch::new();
    let run = scratch.json(&["run", &tiny(), "--json"]);
    let show = scratch.json(&["show", "1", "--json"]);
    assert_eq!(run["candidates"], show["candidates"]);
    assert_eq!(run["candidates"].as_array().unwrap().len(), 6);
    assert!(run["candidates"][0]["score"].is_string(), "{run}");
    assert_eq!(run["figures"], show["figures"]);
}

/// Every key of a JSON value, at every depth.
fn keys(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                out.insert(k.clone());
                keys(v, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|i| keys(i, out)),
        _ => {}
    }
}

/// Issue 17: docs/reports.md documents every field of every JSON report.
/// A field added to a report without its line (the field's name in
/// backticks) fails here.
#[test]
fn every_json_field_is_documented_in_reports_md() {
    let scratch = Scratch::new();
    // --promote writes the task's committed file: a copy's, never the
    // fixture's.
    let task = scratch.tiny_copy();
    edit(
        &task.join("spec.toml"),
        "harness = \"harness\"",
        &format!("harness = \"{}/harness\"", tiny()),
    );
    let mut all = BTreeSet::new();
    for v in [
        scratch.json(&["run", &task.display().to_string(), "--json", "--promote"]),
        scratch.json(&["run", &tiny(), "--json", "-n", "4"]),
        scratch.json(&["show", "1", "--json"]),
        scratch.json(&["batches", "--json"]),
        scratch.json(&["export", "1", "--format", "json"]),
        scratch.json(&["compare", "1", "2", "--json"]),
    ] {
        keys(&v, &mut all);
    }
    let doc = std::fs::read_to_string(repo().join("docs/reports.md")).unwrap();
    let missing: Vec<&String> = all
        .iter()
        .filter(|k| !doc.contains(&format!("`{k}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/reports.md has no line for {missing:?}"
    );
}

/// Fuzzing found bad paths that failed with exit 1 after writing, or left
/// an empty database behind.
#[test]
fn bad_paths_are_refused_before_anything_is_written() {
    let scratch = Scratch::new();
    let file = scratch.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let file = file.display().to_string();
    let under_file = format!("{file}/work");
    for (args, want) in [
        (
            vec!["--work-dir", &file],
            vec!["--work-dir", "not a folder"],
        ),
        (
            vec!["--work-dir", &under_file],
            vec!["--work-dir", "is not a folder"],
        ),
        (
            vec!["--work-dir", "/proc/assay-work"],
            vec!["--work-dir", "/proc/assay-work"],
        ),
        (
            vec!["--work-dir", "/sys/assay-work"],
            vec!["--work-dir", "/sys/assay-work"],
        ),
        (vec!["--out", &file], vec!["--out", "not a folder"]),
        (
            vec!["--out", "/dev/null"],
            vec!["--out /dev/null", "not a folder"],
        ),
        (
            vec!["--db", "/dev/full"],
            vec!["--db /dev/full", "not a regular file"],
        ),
        (
            vec!["--db", "/sys/x.db"],
            vec!["--db /sys/x.db", "not writable"],
        ),
    ] {
        let task = tiny();
        let mut full = vec!["run", task.as_str()];
        full.extend(&args);
        refused(&scratch, &full, &want);
        assert!(!scratch.db().exists(), "{args:?} left a database");
        assert!(
            !scratch.path().join("assay-out").exists(),
            "{args:?} left a folder"
        );
    }
    assert!(!Path::new("/dev/full-journal").exists());
}

/// Fuzzing: `--pools /dev/zero` grew to 4 GB and was killed.
#[test]
fn an_endless_input_file_is_refused() {
    let scratch = Scratch::new();
    refused(
        &scratch,
        &["run", &tiny(), "--pools", "/dev/zero", "--pool", "a"],
        &["/dev/zero", "larger than 256 MiB"],
    );
    assert!(!scratch.db().exists());
}

/// Fuzzing: limits out of range wrapped (memory_mb = 2^44) or were taken.
#[test]
fn limits_out_of_range_are_refused_with_the_file_and_key() {
    let scratch = Scratch::new();
    let task = scratch.tiny_copy();
    let spec = task.join("spec.toml");
    let text = std::fs::read_to_string(&spec).unwrap();
    for (add, key) in [
        (
            "memory_mb = 17592186044416",
            "`limits.memory_mb`: must be between 16 and",
        ),
        (
            "processes = 99999999",
            "`limits.processes`: must be between 1 and",
        ),
    ] {
        std::fs::write(
            &spec,
            text.replacen("[limits]", &format!("[limits]\n{add}"), 1),
        )
        .unwrap();
        refused(
            &scratch,
            &["run", &task.display().to_string()],
            &["spec.toml", key],
        );
        assert!(!scratch.db().exists());
    }
}

/// Fuzzing: `--pool replay=0` ran; negative numbers did not name the flag;
/// an empty key variable was reported as not set.
#[test]
fn bad_flags_name_the_flag() {
    let scratch = Scratch::new();
    refused(
        &scratch,
        &["run", &tiny(), "--pool", "replay=0"],
        &["--pool", "`replay`: a share must be at least 1"],
    );
    for (flag, value) in [
        ("-n", "-1"),
        ("--build-timeout", "-1"),
        ("--wave-size", "-3"),
        ("--max-in-flight", "-1"),
    ] {
        let out = scratch.assay(&["run", &tiny(), flag, value]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {err}");
        assert!(err.contains(flag), "{flag} {value}: {err}");
    }
    let pools = scratch.path().join("pools.toml");
    std::fs::write(
        &pools,
        "[pools.a]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n\
         api_key_env = \"ASSAY_TEST_EMPTY_KEY\"\n\n[pools.a.sampling]\ntemperature = 0.7\n",
    )
    .unwrap();
    let out = scratch
        .command(&[
            "run",
            &tiny(),
            "--pools",
            &pools.display().to_string(),
            "--pool",
            "a",
        ])
        .env("ASSAY_TEST_EMPTY_KEY", "")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("ASSAY_TEST_EMPTY_KEY, which is set but empty"),
        "{err}"
    );
    assert!(!scratch.db().exists());
}

/// Fuzzing: log lines carried colour codes into a file; `-v` logs go to a
/// pipe here, never a terminal.
#[test]
fn logs_to_a_pipe_have_no_colour_codes() {
    let scratch = Scratch::new();
    let out = scratch.assay(&["-v", "run", &tiny()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("INFO"), "-v logs at info: {err}");
    assert!(!err.contains('\u{1b}'), "colour codes in a log: {err}");
}

/// Issue 17, items 9 and 11: the sandbox line names the memory limit; the
/// text report says how failed cases failed.
#[test]
fn the_text_report_names_the_memory_limit_and_panics() {
    let scratch = Scratch::new();
    let task = scratch.tiny_copy();
    // A candidate that passes small inputs and panics (overflow checks are
    // on in the scorer) on the large ones.
    let replies = task.join("replies.jsonl");
    let panicking = serde_json::json!({
        "content": "```rust\npub fn double(x: u64) -> u64 { if x > 6 { panic!(\"big\") } x * 2 }\n```"
    });
    std::fs::write(&replies, format!("{panicking}\n")).unwrap();
    edit(
        &task.join("spec.toml"),
        "[limits]",
        "[limits]\nmemory_mb = 300",
    );
    let text = scratch.assay_ok(&["run", &task.display().to_string(), "-n", "1"]);
    let sandbox = text.lines().find(|l| l.starts_with("sandbox: ")).unwrap();
    if sandbox.contains("memory cgroup v") {
        assert!(sandbox.contains("max 300 MB"), "{sandbox}");
    }
    assert!(!sandbox.contains("memory_mb"), "{sandbox}");
    let cases: Vec<Value> = std::fs::read_to_string(task.join("cases.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let shown = scratch.json(&["show", "1", "--json"]);
    let letters = shown["candidates"][0]["cases"].as_str().unwrap().to_owned();
    let panics = letters.matches('x').count();
    assert!(
        panics > 0,
        "the candidate panics on some of {} cases: {letters}",
        cases.len()
    );
    let table = scratch.assay_ok(&["show", "1"]);
    assert!(table.contains(&format!("({panics} panicked)")), "{table}");
}

/// Issue 30, item 4: after Ctrl-C in `run TASK --db r2.db` the hint said
/// `assay run --resume 1`, which opens `assay.db`. The printed command
/// names the database, quoted, and does what it says when pasted.
#[test]
fn the_resume_hint_reaches_the_same_database() {
    let scratch = Scratch::new();
    std::fs::create_dir(scratch.join("my runs")).unwrap();
    let task = tiny();
    // As a user runs it: no ASSAY_DB, the database named by the flag.
    let mut cmd = scratch.command(&["run", &task, "--db", "my runs/r2.db"]);
    cmd.env_remove("ASSAY_DB");
    let stopped = Scratch::start_command_at(cmd, "pause@score.run#1");
    stopped.signal(libc::SIGINT);
    let (status, stderr) = stopped.wait(std::time::Duration::from_secs(60));
    assert_eq!(status.code(), Some(130), "{stderr}");
    let hint = stderr
        .split("finish it with `")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap_or_else(|| panic!("no resume hint: {stderr}"));
    assert_eq!(hint, "assay run --resume 1 --db 'my runs/r2.db'");
    // Pasted into a shell, in the same folder, it finishes the batch.
    let out = scratch
        .prepare(&mut std::process::Command::new("/bin/sh"))
        .env_remove("ASSAY_DB")
        .env("ASSAY_BIN", env!("CARGO_BIN_EXE_assay"))
        .args([
            "-c",
            &format!("assay() {{ \"$ASSAY_BIN\" \"$@\"; }}; {hint} --json"),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{hint}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["batch_id"], 1);
    assert_eq!(summary["status"], "finished");
    assert!(!scratch.db().exists(), "the hint opened another database");
}

/// Issue 30, item 4, every other printed command: a suite stopped by
/// Ctrl-C, an unfinished suite as `suite show` reports it, a suite that is
/// not there, and a queued run each name the command to type next with the
/// database that holds the data, quoted; pasted, the resume finishes the
/// suite in that database.
#[test]
fn every_printed_command_reaches_the_same_database() {
    let scratch = Scratch::new();
    std::fs::create_dir(scratch.join("my runs")).unwrap();
    let db = "my runs/s.db";
    let quoted = "--db 'my runs/s.db'";
    let (problems, completions) = scratch.small_suite();
    // As a user runs them: no ASSAY_DB, the database named by the flag.
    let as_user = |args: &[&str]| {
        let mut cmd = scratch.command(args);
        cmd.env_remove("ASSAY_DB");
        cmd
    };

    let cmd = as_user(&[
        "suite",
        "run",
        &problems,
        "--completions",
        &completions,
        "--db",
        db,
    ]);
    let stopped = Scratch::start_command_at(cmd, "pause@suite.outcome#1");
    stopped.signal(libc::SIGINT);
    let (status, stderr) = stopped.wait(std::time::Duration::from_secs(60));
    assert_eq!(status.code(), Some(130), "{stderr}");
    let resume = format!("assay suite run --resume 1 {quoted}");
    assert!(
        stderr.contains(&format!("finish it with `{resume}`")),
        "{stderr}"
    );

    let shown = as_user(&["suite", "show", "1", "--db", db])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout).into_owned();
    let pending = shown
        .lines()
        .find(|l| l.starts_with("pending: "))
        .unwrap_or_else(|| panic!("no pending line: {shown}"));
    assert!(pending.ends_with(&format!("(`{resume}`)")), "{pending}");

    // Pasted into a shell, in the same folder, it finishes the suite.
    let out = scratch
        .prepare(&mut std::process::Command::new("/bin/sh"))
        .env_remove("ASSAY_DB")
        .env("ASSAY_BIN", env!("CARGO_BIN_EXE_assay"))
        .args([
            "-c",
            &format!("assay() {{ \"$ASSAY_BIN\" \"$@\"; }}; {resume} --json"),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{resume}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["status"], "finished");
    assert_eq!(summary["pending"], 0);
    assert!(!scratch.db().exists(), "the hint opened another database");

    let args = ["suite", "show", "9", "--db", db];
    assert_refused(
        &as_user(&args).output().unwrap(),
        &args,
        &[&format!(
            "my runs/s.db: no suite 9 (`assay suite list {quoted}` names them)"
        )],
    );

    let task = tiny();
    let queued = as_user(&["run", &task, "--queue", "--db", db])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&queued.stdout);
    assert!(queued.status.success(), "{said}");
    assert_eq!(
        said.trim_end(),
        format!("queued as item 1: `assay lane {quoted}` runs it")
    );
}

/// Issue 30, item 10: the default work directory followed the database
/// (`DB-out/work`), so every new database built the harness's
/// dependencies again. It is the toolchain's folder in the user's cache
/// folder, shared: a second database's first batch builds nothing, and
/// an assay holds a shared lock on it while it works there. Reached
/// through a symlink (here the cache's folder is one), the work directory
/// builds on what its real path built, and the other way round: cargo
/// fingerprints the dependencies by the path of their sources, which once
/// followed the link, so each way rebuilt all of them.
#[test]
fn a_second_database_builds_nothing_again() {
    // One build slot: every batch here builds in the target directory's
    // slot 0, where the one before it built.
    let scratch = Scratch::new().one_build_slot();
    let cache = scratch.join("cache");
    // The toolchain's folder of this cache is the tests' warm work
    // directory, so the first batch here is not a cold build either: what
    // is checked is where each database's batch builds.
    let key = assay::build::work_dir::toolchain_key(&cache).unwrap();
    let work = cache.join("assay/work").join(&key);
    std::fs::create_dir_all(work.parent().unwrap()).unwrap();
    std::fs::create_dir_all(common::shared_work_dir()).unwrap();
    std::os::unix::fs::symlink(common::shared_work_dir(), &work).unwrap();
    let task = tiny();
    // A batch with the default work directory (through the link), or
    // with the shared one by its real path; its log, and the dependencies
    // its probe rebuilt.
    let batch = |db: &str, default_work: bool| {
        let mut cmd = scratch.command(&["-v", "run", &task, "--db", db, "--json"]);
        if default_work {
            cmd.env_remove("ASSAY_WORK_DIR")
                .env("XDG_CACHE_HOME", &cache);
        }
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{db}: {stderr}");
        let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
        (stderr, summary["probe_run"]["deps_rebuilt"].clone())
    };
    batch("a.db", true);
    let (second, rebuilt) = batch("b.db", true);
    assert_eq!(rebuilt, serde_json::json!([]), "b.db's batch rebuilt");
    let (_, rebuilt) = batch("real.db", false);
    assert_eq!(
        rebuilt,
        serde_json::json!([]),
        "a batch by the work directory's real path rebuilt what one through the link built"
    );
    // The task's check passed in this work directory before: not built.
    let stamp = second
        .lines()
        .find(|l| l.contains("task check: passed before"))
        .unwrap_or_else(|| panic!("b.db's batch checked the task again: {second}"));
    let warm = work.canonicalize().unwrap();
    assert!(stamp.contains(&warm.display().to_string()), "{stamp}");
    for db in ["a", "b"] {
        assert!(!scratch.join(&format!("{db}-out/work")).exists());
        assert!(scratch.join(&format!("{db}-out/batch-1")).is_dir());
    }

    // While a batch works there, its assay holds a shared lock on it, as
    // the kernel records it.
    let lock = std::fs::metadata(work.join(assay::build::work_dir::LOCK_FILE)).unwrap();
    let mut cmd = scratch.command(&["run", &task, "--db", "c.db"]);
    cmd.env_remove("ASSAY_WORK_DIR")
        .env("XDG_CACHE_HOME", &cache);
    let stopped = Scratch::start_command_at(cmd, "pause@draw.done");
    // `N: FLOCK  ADVISORY  READ PID MAJ:MIN:INODE 0 EOF`
    let (pid, inode) = (
        stopped.pid().to_string(),
        format!(":{}", std::os::unix::fs::MetadataExt::ino(&lock)),
    );
    let locks = std::fs::read_to_string("/proc/locks").unwrap();
    let held = |line: &str| {
        let words: Vec<&str> = line.split_whitespace().collect();
        words.len() > 5
            && words[1..4] == ["FLOCK", "ADVISORY", "READ"]
            && words[4] == pid
            && words[5].ends_with(&inode)
    };
    assert!(
        locks.lines().any(held),
        "no shared lock of {} on {}: {locks}",
        stopped.pid(),
        work.display()
    );
    stopped.kill9();
}
