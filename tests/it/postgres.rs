//! The store's second backend end to end: every command, run by the real
//! binary against a real PostgreSQL server (scripts/pg-test-server), gives
//! what it gives on SQLite. The same work goes into both stores; what is
//! compared is everything but measurements (times, CPU, busy figures) and
//! the paths that name each store's own folder.

use crate::common;
use crate::common::json;
use crate::common::net;
use crate::common::pg;

use std::path::Path;
use std::process::Output;

use common::{tiny, FixtureSuite, Scratch};
use serde_json::Value;

/// One store, and the scratch folder its outputs go to.
struct Side {
    scratch: Scratch,
    db: String,
    task: String,
}

impl Side {
    fn sqlite() -> Side {
        let scratch = Scratch::new().one_build_slot();
        let db = scratch.db().display().to_string();
        Side::new(scratch, db)
    }

    fn postgres(schema: &pg::PgSchema) -> Side {
        Side::new(Scratch::new().one_build_slot(), schema.url.clone())
    }

    /// Both sides build in slot 0 of the shared work directory, so a
    /// side's warm-up finds what the other's left (`replay` says how many
    /// dependencies its warm-up rebuilt).
    fn new(scratch: Scratch, db: String) -> Side {
        // Each side promotes into its own copy of the task.
        let task = scratch.tiny_copy().display().to_string();
        Side { scratch, db, task }
    }

    fn assay(&self, args: &[&str]) -> Output {
        self.scratch
            .command(args)
            .env("ASSAY_DB", &self.db)
            .output()
            .expect("assay starts")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.assay(args);
        assert!(
            out.status.success(),
            "{} assay {args:?}: {}",
            self.db,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let text = self.ok(args);
        let value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        json::comparable(value, self.scratch.path())
    }
}

#[test]
fn every_command_gives_on_postgresql_what_it_gives_on_sqlite() {
    let schema = pg::PgSchema::new();
    let sides = [Side::sqlite(), Side::postgres(&schema)];
    let fixture = FixtureSuite::new();

    let results: Vec<Vec<(String, Value)>> = sides
        .iter()
        .map(|side| {
            let mut seen = Vec::new();
            let mut keep = |what: &str, v: Value| seen.push((what.to_owned(), v));
            keep("run 1", side.json(&["run", &side.task, "--json"]));
            keep("run 2", side.json(&["run", &tiny(), "--json"]));
            keep("batches", side.json(&["batches", "--json"]));
            keep("show 1", side.json(&["show", "1", "--json"]));
            keep("compare", side.json(&["compare", "1", "2", "--json"]));
            keep(
                "export json",
                side.json(&["export", "1", "--format", "json"]),
            );
            let csv = side.ok(&["export", "2", "--format", "csv"]);
            keep(
                "export csv header",
                Value::String(csv.lines().next().unwrap().into()),
            );
            keep("export csv rows", Value::from(csv.lines().count()));
            keep(
                "replay",
                side.json(&["replay", "1", "--modes", "shared", "--json"]),
            );
            side.ok(&["promote", "1", "0", "--yes"]);
            keep("shown after promote", side.json(&["show", "1", "--json"]));
            keep("suite run", side.json(&fixture.run(&["--json"])));
            keep("suite show", side.json(&["suite", "show", "1", "--json"]));
            keep("suite list", side.json(&["suite", "list", "--json"]));
            seen
        })
        .collect();

    // What is compared holds the verdicts, not only their absence.
    let got = |what: &str| {
        results[0]
            .iter()
            .find(|(w, _)| w == what)
            .unwrap()
            .1
            .to_string()
    };
    assert!(got("run 1").contains("scored(10/10)"), "{}", got("run 1"));
    assert!(
        got("suite run").contains("pass_at_1"),
        "{}",
        got("suite run")
    );
    assert!(
        got("suite show").contains("SyntaxError"),
        "{}",
        got("suite show")
    );
    for ((what, sqlite), (_, postgres)) in results[0].iter().zip(&results[1]) {
        assert_eq!(sqlite, postgres, "{what}: SQLite and PostgreSQL differ");
    }
    // The promotion went into each side's own task copy, and both stores
    // recorded it.
    for side in &sides {
        let committed =
            std::fs::read_to_string(Path::new(&side.task).join("committed.rs")).unwrap_or_default();
        assert!(committed.contains("batch 1"), "{}: {committed}", side.db);
    }
    assert!(
        got("shown after promote").contains("promot"),
        "{}",
        got("shown after promote")
    );
}

/// Issue 25: the fixture suite queued in one-problem parts, every part run
/// at once against PostgreSQL, each in folders of its own as on machines
/// of its own. Parts ending together numbered their phase rows alike and
/// one failed on the key ("duplicate key value violates unique constraint
/// suite_phases_pkey"); now every part finishes, the suite gives the
/// fixture's statuses, and its phases read part by part.
#[test]
fn parts_of_a_suite_ending_together_on_postgresql_all_finish() {
    let schema = pg::PgSchema::new();
    let db = schema.url.as_str();
    let fixture = FixtureSuite::new();
    let queue = Scratch::new();
    let assay = |s: &Scratch, args: &[&str]| {
        let mut cmd = s.command(args);
        cmd.env("ASSAY_DB", db);
        cmd
    };
    let out = assay(&queue, &fixture.run(&["--queue", "--chunk", "1", "--json"]))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let queued: Value = serde_json::from_slice(&out.stdout).unwrap();
    let suite = queued["suite_id"].as_i64().unwrap().to_string();
    let parts = queued["work_items"].as_array().unwrap().len();
    assert_eq!(parts, 20, "{queued}");

    // Each part in an output and a work folder of its own, so no package
    // lock lines them up: they build, run and record at once.
    let runs: Vec<(Scratch, std::process::Child)> = (0..parts)
        .map(|i| {
            let part = Scratch::new();
            let child = assay(
                &part,
                &[
                    "suite",
                    "run",
                    "--resume",
                    &suite,
                    "--part",
                    &format!("{i}..{}", i + 1),
                ],
            )
            .env("ASSAY_OUT", part.join("out"))
            .env("ASSAY_WORK_DIR", part.join("work"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
            (part, child)
        })
        .collect();
    for (i, (_part, child)) in runs.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "part {i}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let out = assay(&queue, &["suite", "show", &suite, "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["status"], "finished", "{shown:#}");
    // The fixture's expected statuses are MultiPL-E's reading.
    let statuses: Vec<(String, String)> = shown["problems"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| {
            let name = p["name"].as_str().unwrap().to_owned();
            p["multiple_statuses"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |s| (name.clone(), s.as_str().unwrap().to_owned()))
        })
        .collect();
    let expected: Vec<(String, String)> = std::fs::read_to_string(&fixture.expected)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (
                v["name"].as_str().unwrap().into(),
                v["status"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(statuses, expected);
    // Each part's phases together, in the order it recorded them.
    let phases: Vec<&str> = shown["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(phases.len(), parts * 3, "{phases:?}");
    for part in phases.chunks(3) {
        assert_eq!(part, ["prepare", "probe", "score run"], "{phases:?}");
    }
}

#[test]
fn a_password_on_the_command_line_is_refused_and_never_echoed() {
    let s = Scratch::new();
    for db in [
        "postgres://assay:hunter2@127.0.0.1:1/runs",
        "postgres://assay@127.0.0.1:1/runs?password=hunter2",
    ] {
        for args in [
            vec!["batches", "--db", db],
            vec!["run", &tiny(), "--db", db],
        ] {
            let out = s.assay(&args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert!(err.contains("PGPASSWORD"), "{err}");
            assert!(!err.contains("hunter2"), "the password was echoed: {err}");
        }
    }
}

/// Issue 30: a port nobody listens on is refused at once, in one line
/// that names the store and says why, exit 2 (the user's input). sqlx's
/// pool took a refused connection for a server starting up and retried it
/// for 30 s, then said only "pool timed out".
#[test]
fn an_unreachable_server_is_one_line_naming_it() {
    let s = Scratch::new();
    // Bound but never listening: connecting is refused.
    let (_held, port) = net::bound_not_listening();
    let db = format!("postgres://assay@127.0.0.1:{port}/runs");
    for args in [
        vec!["batches", "--db", &db],
        vec!["run", &tiny(), "--db", &db],
    ] {
        let out = s.assay(&args);
        let why = format!("{db}: cannot connect: connection refused");
        common::assert_refused(&out, &args, &[&why]);
    }
}

/// Issue 30, item 8, a host that never answers (down, or behind a
/// firewall that drops packets): the store waits for it a short while,
/// states how long, and refuses it in one line, exit 2. Here the "server"
/// is a socket that listens and never reads: the kernel completes the
/// connection and the startup message gets no answer.
#[test]
fn a_server_that_never_answers_is_one_line_naming_the_wait() {
    let s = Scratch::new();
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let db = format!("postgres://assay@127.0.0.1:{port}/runs");
    let args = ["batches", "--db", &db];
    let out = s.assay(&args);
    let why = format!("{db}: cannot connect: no answer within 10 s");
    common::assert_refused(&out, &args, &[&why]);
    drop(silent);
}
