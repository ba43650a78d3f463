//! The probe end to end: the edge-case corpus in every mode, the replay tool
//! on both bundled batches, and a warm target directory that stays warm when
//! `assay` runs under `cargo run`. Every run shares the warm work directory
//! (tests/common).

use crate::common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use common::{repo, shared_target_dir, shared_work_dir, Scratch};

fn replay_json(scratch: &Scratch, batch: &str, modes: &str) -> (Option<i32>, Value) {
    let out = scratch.assay(&["replay", batch, "--modes", modes, "--json"]);
    let value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "replay printed no JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        )
    });
    (out.status.code(), value)
}

/// Each edge case gets its expected verdict in the batch, and the same
/// verdict again in both modes. The corpus relaxes the policy, so the shared
/// mode gives each candidate an image of its own (in one cargo build), and
/// stores exactly the diagnostics serial (one build per candidate) stores.
#[tokio::test]
async fn edge_corpus_gets_the_same_verdicts_in_every_mode() {
    let scratch = Scratch::new();
    let fixture = repo().join("tests/fixtures/edge");
    let batch = scratch.run_batch(&fixture);
    let shown = scratch.json(&["show", &batch, "--json"]);
    let expected: Vec<Value> = std::fs::read_to_string(fixture.join("expected.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let candidates = shown["candidates"].as_array().unwrap();
    assert_eq!(candidates.len(), expected.len());
    let mut wrong = Vec::new();
    for (got, want) in candidates.iter().zip(&expected) {
        if got["probe"] != want["probe"] {
            wrong.push(format!(
                "candidate {} ({}): {} expected {}",
                want["idx"], want["why"], got["probe"], want["probe"]
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    let (code, report) = replay_json(&scratch, &batch, "shared,serial");
    assert_eq!(report["differences"], serde_json::json!([]), "{report}");
    assert_eq!(code, Some(0), "{report}");
    // A relaxed policy never shares an image: no pass over a shared crate,
    // nothing narrowed, one cargo build for every candidate (plus retries).
    let shared = &report["runs"][0];
    assert_eq!(shared["mode"], "shared");
    assert_eq!(shared["passes"], 0, "{report}");
    assert_eq!(shared["fallbacks"], 0, "{report}");
    assert_eq!(
        shared["builds"].as_u64().unwrap(),
        1 + shared["retries"].as_u64().unwrap(),
        "{report}"
    );

    let store = scratch.store().await;
    let batch: i64 = batch.parse().unwrap();
    let runs = store.probe_runs(batch).await.unwrap();
    let run_of = |mode: &str| {
        runs.iter()
            .find(|r| r.mode == mode && r.origin == "replay")
            .unwrap()
            .id
    };
    let shared_rows = store.probe_verdicts(batch, run_of("shared")).await.unwrap();
    let serial_rows = store.probe_verdicts(batch, run_of("serial")).await.unwrap();
    assert_eq!(shared_rows.len(), expected.len());
    for (w, s) in shared_rows.iter().zip(&serial_rows) {
        assert_eq!(w.idx, s.idx);
        assert_eq!(w.verdict, s.verdict, "candidate {}", w.idx);
        assert_eq!(w.warnings, s.warnings, "candidate {}", w.idx);
        assert_eq!(
            without_temp_dirs(&w.diagnostics),
            without_temp_dirs(&s.diagnostics),
            "candidate {}",
            w.idx
        );
    }
    let dead_post_mono = shared_rows.iter().find(|r| r.idx == 15).unwrap();
    assert!(dead_post_mono.warnings >= 1, "{dead_post_mono:?}");
    assert!(
        dead_post_mono.diagnostics.contains("never constructed"),
        "{dead_post_mono:?}"
    );
}

/// A message that names a registry crate's file names the cargo home of
/// the target slot the build ran in (`target/cargo-home/...`,
/// `target.slot1/cargo-home/...`): the same file, seen from another slot.
fn without_slots(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(".slot") {
        out.push_str(&rest[..at]);
        let tail = &rest[at + ".slot".len()..];
        let digits = tail.len() - tail.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits > 0 && tail[digits..].starts_with('/') {
            rest = &tail[digits..];
        } else {
            out.push_str(".slot");
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// A linker's message names rustc's temporary directory
/// (`deps/rustcylKUNu/symbols.o`), different in every build.
fn without_temp_dirs(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("/rustc") {
        let (head, tail) = rest.split_at(at + "/rustc".len());
        out.push_str(head);
        let name: String = tail
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        if name.len() == 6 && tail[6..].starts_with('/') {
            out.push_str("XXXXXX");
            rest = &tail[6..];
        } else {
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

#[tokio::test]
async fn warnings_are_kept_with_the_verdict() {
    let scratch = Scratch::new();
    let batch = scratch.run_batch(&repo().join("tests/fixtures/edge"));
    let store = scratch.store().await;
    let batch: i64 = batch.parse().unwrap();
    let runs = store.probe_runs(batch).await.unwrap();
    let rows = store.probe_verdicts(batch, runs[0].id).await.unwrap();
    let warned = rows.iter().find(|r| r.idx == 13).unwrap();
    assert!(warned.verdict.compiled());
    assert!(warned.warnings >= 1, "{warned:?}");
    assert!(warned.diagnostics.contains("unused variable"), "{warned:?}");
    let errored = rows.iter().find(|r| r.idx == 9).unwrap();
    assert!(errored.diagnostics.contains("error[E0277]"), "{errored:?}");
}

/// Both bundled batches, both modes: identical verdicts and identical
/// compiler error files (the shared build's, attributed per module, against
/// serial's, each candidate built alone); each mode's run is stored as a
/// probe run.
#[tokio::test]
async fn replay_of_both_bundled_batches_is_identical_in_all_modes() {
    for task in ["absolute", "shellwords"] {
        let scratch = Scratch::new();
        let batch = scratch.run_batch(&repo().join("specs").join(task));
        let (code, report) = replay_json(&scratch, &batch, "shared,serial");
        assert_eq!(
            report["differences"],
            serde_json::json!([]),
            "{task}: {report}"
        );
        assert_eq!(code, Some(0), "{task}: {report}");
        assert_eq!(report["identical"], true);
        let runs = report["runs"].as_array().unwrap();
        let modes: Vec<&str> = runs.iter().map(|r| r["mode"].as_str().unwrap()).collect();
        assert_eq!(modes, ["shared", "serial"]);
        for r in runs {
            assert_eq!(r["compiled"], runs[0]["compiled"], "{task}: {report}");
            assert!(r["wall_s"].as_f64().unwrap() > 0.0);
            assert!(r["cpu_s"].as_f64().unwrap() > 0.0);
            assert!(r["peak_busy"].as_f64().unwrap() >= r["avg_busy"].as_f64().unwrap());
        }
        // The shared build: one pass per compiler phase that found errors,
        // so a handful of builds, never one per candidate.
        let shared = |field: &str| runs[0][field].as_u64().unwrap();
        assert!(shared("passes") >= 1, "{task}: {report}");
        assert!(
            shared("builds") < report["candidates"].as_u64().unwrap() / 2,
            "{task}: {report}"
        );
        // Serial builds each candidate once, plus once more for each build
        // that failed for a reason that can be transient (a killed rustc on
        // a loaded machine; src/build/probe/mod.rs retries those by design).
        let serial = |field: &str| runs[1][field].as_u64().unwrap();
        assert_eq!(
            serial("builds"),
            report["candidates"].as_u64().unwrap() + serial("retries"),
            "serial: one build each, plus retries: {report}"
        );

        let store = scratch.store().await;
        let batch_id: i64 = batch.parse().unwrap();
        let stored = store.probe_runs(batch_id).await.unwrap();
        let origins: Vec<(&str, &str)> = stored
            .iter()
            .map(|r| (r.mode.as_str(), r.origin.as_str()))
            .collect();
        assert!(stored[0].waves.unwrap() >= 1, "{:?}", stored[0]);
        assert_eq!(
            stored[0].probed,
            report["candidates"].as_u64().unwrap() as usize
        );
        assert_eq!(
            origins,
            [
                ("shared", "batch"),
                ("shared", "replay"),
                ("serial", "replay")
            ]
        );
        let rows = |run: usize| store.probe_verdicts(batch_id, stored[run].id);
        let (batch_rows, serial_rows) = (rows(0).await.unwrap(), rows(2).await.unwrap());
        for (b, s) in batch_rows.iter().zip(&serial_rows) {
            assert_eq!((b.idx, &b.verdict), (s.idx, &s.verdict), "{task}");
            // rustc names an item by the shortest path that is unique in
            // its crate: in a shared image, where other candidates define
            // the same names, that is `c15::absolute_width`; alone,
            // `absolute_width`. And it lists a trait's other implementors
            // in an order of the crate's own (`SliceIndex<ByteStr>` before
            // or after `SliceIndex<[T]>`). So the error files are compared
            // as the same lines, each once as often, with the candidate's
            // own module path dropped: a line about a build-mate (an import
            // suggested from `crate::c0`) still fails it. A replay may build
            // in another target slot than the batch did.
            let lines = |text: &str| {
                let text =
                    without_slots(&without_temp_dirs(text)).replace(&format!("c{}::", b.idx), "");
                let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
                lines.sort();
                lines
            };
            assert_eq!(
                lines(&b.diagnostics),
                lines(&s.diagnostics),
                "{task}: candidate {}'s error file",
                b.idx
            );
        }
    }
}

/// A stored verdict that no mode reproduces is a difference: exit code 1,
/// and the candidate is named.
#[tokio::test]
async fn a_differing_verdict_is_reported_with_exit_code_1() {
    let scratch = Scratch::new();
    let batch = scratch.run_batch(&repo().join("tests/fixtures/tiny"));
    {
        let pool = scratch.connect().await;
        // Candidate 2 of tiny fails to compile; pretend it had compiled.
        let changed = sqlx::query("UPDATE probe_verdicts SET verdict = 'compiled' WHERE idx = 2")
            .execute(&pool)
            .await
            .unwrap()
            .rows_affected();
        assert_eq!(changed, 1);
        pool.close().await;
    }
    let (code, report) = replay_json(&scratch, &batch, "shared");
    assert_eq!(code, Some(1), "{report}");
    let diffs = report["differences"].as_array().unwrap();
    assert_eq!(diffs.len(), 1, "{report}");
    assert_eq!(diffs[0]["idx"], 2);
    assert_eq!(diffs[0]["stored"], "compiled");
    assert!(diffs[0]["verdicts"]["shared#1"]
        .as_str()
        .unwrap()
        .starts_with("compile_error"));

    let text = scratch.assay(&["replay", &batch, "--modes", "serial"]);
    assert_eq!(text.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        stdout.contains("candidate 2: stored compiled, serial#1 compile_error"),
        "{stdout}"
    );
}

/// A batch probed in `serial` gets the recorded verdicts too; the retired
/// modes are named as such.
#[test]
fn a_batch_probed_in_each_mode_matches_its_recorded_verdicts() {
    let fixture = repo().join("tests/fixtures/tiny");
    let expected: Vec<Value> = std::fs::read_to_string(fixture.join("expected.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for mode in ["serial"] {
        let scratch = Scratch::new();
        let summary = scratch.json(&[
            "run",
            &fixture.display().to_string(),
            "--probe",
            mode,
            "--json",
        ]);
        let batch = summary["batch_id"].as_i64().unwrap().to_string();
        let shown = scratch.json(&["show", &batch, "--json"]);
        for (got, want) in shown["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .zip(&expected)
        {
            assert_eq!(
                got["probe"], want["probe"],
                "{mode}: candidate {}",
                want["idx"]
            );
            assert_eq!(
                got["score"], want["score"],
                "{mode}: candidate {}",
                want["idx"]
            );
        }
    }
    let out = Scratch::new().assay(&["run", &fixture.display().to_string(), "--probe", "narrow"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--probe: unknown probe mode `narrow`"));
    let out = Scratch::new().assay(&["run", &fixture.display().to_string(), "--probe", "wide"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("--probe: probe mode `wide` was replaced by `shared`"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn replay_bad_input_is_one_line_and_exit_2() {
    let scratch = Scratch::new();
    let cases: &[(&[&str], &str)] = &[
        (&["replay", "7"], "no such database"),
        (
            &["replay", "1", "--modes", "shared,narrow"],
            "--modes: unknown probe mode `narrow`",
        ),
        (
            &["replay", "1", "--runs", "0"],
            "--runs: must be at least 1",
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

/// The warm target directory stays warm when `assay` runs under `cargo run`
/// (here `cargo +stable run` of a wrapper that execs `assay`, so cargo and
/// rustup set every variable they set for a real `cargo run`), and when the
/// environment carries make flags, a compiler wrapper and a key: the task's
/// harness has a build script that tracks all of them, and cargo's `fresh`
/// flags say nothing was rebuilt.
#[tokio::test]
async fn the_probe_stays_warm_under_cargo_run() {
    let fresh = repo().join("tests/fixtures/fresh");
    let spec = fresh.display().to_string();
    // Every build in slot 0 of the shared work directory: what is checked
    // is that one target directory stays warm.
    let scratch = Scratch::new().one_build_slot();
    // The first batch may build the harness.
    scratch.run_batch(&fresh);
    // Another task's package builds the same registry dependencies into
    // the shared target directory in between; they must stay fresh for
    // this one (cargo fingerprints their source path, so every package's
    // cargo must see the registry at one path).
    Scratch::new()
        .one_build_slot()
        .run_batch(&repo().join("tests/fixtures/tiny"));

    // Under `cargo +stable run`.
    let wrapper = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cargo-run-wrapper");
    std::fs::create_dir_all(wrapper.join("src")).unwrap();
    std::fs::write(
        wrapper.join("Cargo.toml"),
        "[package]\nname = \"run-assay\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(
        wrapper.join("src/main.rs"),
        "fn main() {\n    let status = std::process::Command::new(env!(\"ASSAY_EXE\"))\n        .args(std::env::args_os().skip(1))\n        .status()\n        .unwrap();\n    std::process::exit(status.code().unwrap_or(1));\n}\n",
    )
    .unwrap();
    let out = scratch
        .prepare(&mut Command::new("cargo"))
        .args(["+stable", "run", "--quiet", "--manifest-path"])
        .arg(wrapper.join("Cargo.toml"))
        .args(["--", "run", &spec, "--json"])
        .env("ASSAY_EXE", env!("CARGO_BIN_EXE_assay"))
        .env("CARGO_TARGET_DIR", wrapper.join("target"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // With everything a build script or a shell might hand down.
    let out = scratch
        .command(&["run", &spec, "--json"])
        .env("CARGO", "/nonexistent/cargo")
        .env("CARGO_MANIFEST_DIR", "/elsewhere")
        .env("CARGO_PKG_NAME", "other")
        .env("CARGO_TARGET_DIR", "/nonexistent/target")
        .env("CARGO_MAKEFLAGS", "-j --jobserver-fds=3,4")
        .env("MAKEFLAGS", "-j4")
        .env("OUT_DIR", "/elsewhere/out")
        .env("RUSTUP_TOOLCHAIN", "stable")
        .env("RUST_RECURSION_COUNT", "1")
        .env("RUSTC_WRAPPER", "/bin/false")
        .env("RUSTC_WORKSPACE_WRAPPER", "/bin/false")
        .env("OPENAI_API_KEY", "sk-test-not-a-key")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let store = scratch.store().await;
    for batch in [2, 3] {
        let runs = store.probe_runs(batch).await.unwrap();
        let run = &runs[0];
        assert_eq!(
            run.deps_rebuilt.as_deref(),
            Some(&[][..]),
            "batch {batch} rebuilt dependencies"
        );
        assert!(run.deps_fresh.unwrap() >= 3, "batch {batch}: {run:?}");
    }

    // The control: a build script that tracks those variables does rerun
    // when one of them changes, so the check above can fail. Two builds
    // that differ only in one variable, in the debug profile the probe
    // never uses, so neither the probe's state nor an earlier control's
    // decides the outcome.
    let control = |manifest_dir: &str| {
        let out = Command::new("cargo")
            .args([
                "build",
                "--message-format=json",
                "-p",
                "fresh-harness",
                "--manifest-path",
            ])
            .arg(shared_work_dir().join("fresh/Cargo.toml"))
            .arg("--target-dir")
            .arg(shared_target_dir())
            .env("CARGO_MANIFEST_DIR", manifest_dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).lines().any(|line| {
            let v: Value = serde_json::from_str(line).unwrap_or_default();
            v["reason"] == "compiler-artifact"
                && v["package_id"]
                    .as_str()
                    .is_some_and(|p| p.contains("fresh-harness"))
                && v["fresh"] == false
        })
    };
    control("/somewhere/a");
    assert!(
        control("/somewhere/b"),
        "the control build should rebuild the harness"
    );
}
