//! The probe's operational edges, end to end: a build killed under the
//! probe is retried and the batch ends with the right verdicts; a build
//! that runs past `--build-timeout` is a timeout and is not retried; the
//! toolchain is recorded on every probe run and shown; the probe's flags
//! refuse zero and absurd values in one line naming the flag. Every run
//! shares the warm work directory (tests/common), but the timed one's,
//! which has a work directory of its own.

use crate::common;

use std::path::{Path, PathBuf};

use serde_json::Value;

use common::{repo, tiny, Scratch};

fn expected_tiny() -> Vec<Value> {
    std::fs::read_to_string(repo().join("tests/fixtures/tiny/expected.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Every candidate of a shown batch has the tiny corpus's expected probe
/// and score verdicts.
fn assert_tiny_verdicts(shown: &Value) {
    let candidates = shown["candidates"].as_array().unwrap();
    let expected = expected_tiny();
    assert_eq!(candidates.len(), expected.len(), "{shown}");
    for (got, want) in candidates.iter().zip(&expected) {
        for field in ["probe", "score"] {
            assert_eq!(
                got[field], want[field],
                "candidate {} ({}): {field}",
                want["idx"], want["why"]
            );
        }
    }
}

/// The first cargo build of the probe is SIGKILLed (a test point, the way
/// the OOM killer would): its candidates are probed again, the batch ends
/// with the verdicts an undisturbed batch gets, and the retries are
/// recorded with the probe run, logged and shown.
#[test]
fn a_killed_probe_build_is_retried_and_the_verdicts_are_right() {
    let scratch = Scratch::new();
    let out = scratch
        .command(&["run", &tiny(), "--json"])
        .env("ASSAY_TEST_POINT", "kill@probe.build")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("assay-test: kill at probe.build#1"),
        "{stderr}"
    );
    let warned: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("probing again"))
        .collect();
    assert_eq!(
        warned.len(),
        1,
        "one warning for the killed build: {stderr}"
    );
    assert!(warned[0].contains("\"killed\""), "{}", warned[0]);

    let shown = scratch.json(&["show", "1", "--json"]);
    assert_tiny_verdicts(&shown);
    let run = &shown["probe_run"];
    let retries = run["retries"].as_array().unwrap();
    assert!(!retries.is_empty(), "{run}");
    for r in retries {
        assert_eq!(r["after"], "killed", "{run}");
        assert_eq!(r["attempt"], 1, "one retry was enough: {run}");
        let idx = r["idx"].as_u64().unwrap() as usize;
        // Only unique, extracted candidates are probed.
        assert!(
            expected_tiny()[idx]["probe"].is_string(),
            "candidate {idx} was never probed: {run}"
        );
    }
    // The killed build, then at least the retry.
    assert!(run["builds"].as_u64().unwrap() >= 2, "{run}");

    let text = scratch.assay_ok(&["show", "1"]);
    let line = text
        .lines()
        .find(|l| l.starts_with("probe: shared"))
        .unwrap_or_else(|| panic!("no probe line: {text}"));
    assert!(line.contains(" after killed"), "{line}");
}

/// Without the test point, nothing is retried and the run says so.
#[test]
fn an_undisturbed_batch_records_no_retries_and_its_toolchain() {
    let scratch = Scratch::new();
    scratch.assay_ok(&["run", &tiny(), "--json"]);
    let shown = scratch.json(&["show", "1", "--json"]);
    assert_tiny_verdicts(&shown);
    let run = &shown["probe_run"];
    assert_eq!(run["retries"], serde_json::json!([]), "{run}");
    assert_eq!(run["origin"], "batch");
    let rustc = run["rustc_version"].as_str().unwrap();
    assert!(rustc.starts_with("rustc "), "{rustc}");
    assert!(
        rustc.contains("\nhost: ") && rustc.contains("\nrelease: "),
        "{rustc}"
    );
    let cargo = run["cargo_version"].as_str().unwrap();
    assert!(cargo.starts_with("cargo "), "{cargo}");

    let text = scratch.assay_ok(&["show", "1"]);
    let release = rustc.lines().next().unwrap();
    assert!(
        text.lines()
            .any(|l| l.starts_with("toolchain: ") && l.contains(release) && l.contains(cargo)),
        "{text}"
    );

    // A replay records the same toolchain with its runs, and says it.
    let replay = scratch.json(&["replay", "1", "--modes", "shared", "--json"]);
    assert_eq!(replay["toolchain"]["rustc"], rustc, "{replay}");
    assert_eq!(replay["toolchain"]["cargo"], cargo, "{replay}");
    assert_eq!(replay["runs"][0]["retries"], 0, "{replay}");
    let stored: Vec<(Option<String>, Option<String>)> = scratch.sql(async |db| {
        sqlx::query_as("SELECT rustc_version, cargo_version FROM probe_runs ORDER BY id")
            .fetch_all(db)
            .await
            .unwrap()
    });
    assert_eq!(stored.len(), 2);
    for (r, c) in stored {
        assert_eq!(r.as_deref(), Some(rustc));
        assert_eq!(c.as_deref(), Some(cargo));
    }
}

/// A harness with tiny's contract (candidates double a number) and no
/// dependency, so a work directory of its own builds it in a second: the
/// spinning task's builds then wait on no other test's cargo lock, and
/// `--build-timeout` times its own builds only.
const SPIN_HARNESS_TOML: &str = "[package]\nname = \"spin-harness\"\nversion = \"0.1.0\"\n\
                                 edition = \"2021\"\npublish = false\n";
const SPIN_HARNESS_LIB: &str = r#"//! tiny's harness without serde.
pub type Entry = fn(u64) -> u64;

#[derive(Debug, Clone)]
pub struct Case {
    pub input: u64,
    pub expected: u64,
}

/// Parses tiny's cases file: `{"input": N, "expected": M}` a line.
pub fn load_cases(text: &str) -> Result<Vec<Case>, String> {
    let field = |line: &str, key: &str| -> Result<u64, String> {
        let at = line.find(key).ok_or(format!("no {key}: {line}"))? + key.len();
        let digits: String = line[at..]
            .trim_start_matches([' ', ':', '"'])
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        digits.parse().map_err(|e| format!("{key}: {e}: {line}"))
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| Ok(Case { input: field(l, "\"input\"")?, expected: field(l, "\"expected\"")? }))
        .collect()
}

pub fn input_line(case: &Case) -> String {
    case.input.to_string()
}

pub fn run_input(entry: Entry, line: &str) -> Result<String, String> {
    let input: u64 = line.trim().parse().map_err(|e| format!("{e}"))?;
    Ok(entry(input).to_string())
}

pub fn judge(case: &Case, output: &str) -> bool {
    output.trim().parse::<u64>() == Ok(case.expected)
}
"#;

/// A task with tiny's cases and a dependency-free harness whose replies
/// are tiny's correct candidate and one whose constant takes forever to
/// evaluate.
pub(crate) fn spinning_task(scratch: &Scratch) -> PathBuf {
    let tiny = PathBuf::from(tiny());
    let dir = scratch.path().join("spin");
    std::fs::create_dir_all(dir.join("harness/src")).unwrap();
    std::fs::write(dir.join("harness/Cargo.toml"), SPIN_HARNESS_TOML).unwrap();
    std::fs::write(dir.join("harness/src/lib.rs"), SPIN_HARNESS_LIB).unwrap();
    let abs = |name: &str| tiny.join(name).display().to_string();
    std::fs::write(
        dir.join("spec.toml"),
        format!(
            "name = \"tiny-spin\"\nprompt = {:?}\nharness = \"harness\"\nentry = \"double\"\n\
             cases = {:?}\ncommitted = {:?}\n\n[draw]\nn = 2\nreplay = \"replies.jsonl\"\n\n\
             [admit]\nmin_score = 0.9\n\n[limits]\nwall_ms = 5000\n\n\
             [probe]\ncompile_cpu_s = 3600\n",
            abs("prompt.md"),
            abs("cases.jsonl"),
            abs("committed.rs"),
        ),
    )
    .unwrap();
    let reply = |code: &str| {
        serde_json::json!({
            "content": format!("```rust\n{code}\n```"),
            "finish_reason": "stop",
            "usage": {"prompt_tokens": 20, "completion_tokens": 15},
            "model": "tiny-model",
        })
        .to_string()
    };
    let spin = "#![allow(long_running_const_eval)]\n\
                const SPIN: u64 = {\n    let mut i: u64 = 0;\n    \
                while i < u64::MAX {\n        i += 1;\n    }\n    2\n};\n\
                pub fn double(x: u64) -> u64 {\n    x * SPIN\n}";
    std::fs::write(
        dir.join("replies.jsonl"),
        format!(
            "{}\n{}\n",
            reply("pub fn double(x: u64) -> u64 { x * 2 }"),
            reply(spin)
        ),
    )
    .unwrap();
    dir
}

/// `--build-timeout` reaches the probe: the candidate whose build never
/// ends is `probe_failure(timeout)` after the limit instead of ten
/// minutes, is not retried (it would time out again), and the batch goes
/// on to score the other.
#[test]
fn a_build_past_the_time_limit_is_a_timeout_and_is_not_retried() {
    // A work directory of its own: no other test's build holds its cargo
    // lock while a build of this one is timed, and the spin holds up no
    // other test's build.
    let scratch = Scratch::with_own_work_dir();
    let task = spinning_task(&scratch).display().to_string();
    // Batch 1, the good candidate alone (`-n 1`) under the default limit,
    // checks the task and builds the harness in every profile, so that
    // every build of batch 2 but the spin compiles one small candidate:
    // a second of CPU at most, where the limit gives 20 s of wall. The
    // compile CPU limit is raised past it so that the wall limit, the one
    // under test, is what ends the spinning build.
    let out = scratch
        .command(&["run", &task, "-n", "1", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = scratch
        .command(&[
            "run",
            &task,
            "--build-timeout",
            "20",
            "--wave-size",
            "2",
            "--json",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("probing again"), "{stderr}");
    let shown = scratch.json(&["show", "2", "--json"]);
    let candidates = shown["candidates"].as_array().unwrap();
    assert_eq!(candidates[1]["probe"], "probe_failure(timeout)", "{shown}");
    assert_eq!(candidates[0]["probe"], "compiled", "{shown}");
    assert_eq!(candidates[0]["score"], "scored(10/10)", "{shown}");
    assert_eq!(shown["probe_run"]["retries"], serde_json::json!([]));
    let errors =
        std::fs::read_to_string(Path::new(candidates[1]["error_file"].as_str().unwrap())).unwrap();
    assert!(errors.contains("killed at its time limit"), "{errors}");
}

/// Runs `assay args` and checks the refusal: exit 2, one line holding
/// `want`, nothing on stdout.
fn refused(scratch: &Scratch, args: &[&str], want: &str) {
    common::assert_refused(&scratch.assay(args), args, &[want]);
}

#[test]
fn zero_or_absurd_probe_flags_are_refused_naming_the_flag() {
    let scratch = Scratch::new();
    let tiny = tiny();
    let cases: &[(&[&str], &str)] = &[
        (
            &["run", &tiny, "--wave-size", "0"],
            "--wave-size: must be between 1 and 100000",
        ),
        (
            &["run", &tiny, "--wave-size", "1000000"],
            "--wave-size: must be between 1 and 100000",
        ),
        (
            &["run", &tiny, "--wave-wait", "0"],
            "--wave-wait: must be between 0.001 and 3600 seconds",
        ),
        (
            &["run", &tiny, "--wave-wait=-2"],
            "--wave-wait: must be between",
        ),
        (
            &["run", &tiny, "--build-timeout", "0"],
            "--build-timeout: must be between 1 and 86400 seconds",
        ),
        (
            &["run", &tiny, "--build-timeout", "1e9"],
            "--build-timeout: must be between 1 and 86400 seconds",
        ),
        (
            &["run", &tiny, "--build-timeout", "inf"],
            "--build-timeout: must be between 1 and 86400 seconds",
        ),
        (
            &["replay", "1", "--build-timeout", "0"],
            "--build-timeout: must be between 1 and 86400 seconds",
        ),
    ];
    for (args, want) in cases {
        refused(&scratch, args, want);
    }
    assert!(!scratch.db().exists(), "a database was created");
    assert!(!scratch.path().join("assay-out").exists());
}

/// A spec's `[probe]` value out of range is bad input naming file, line
/// and key, before anything is written.
#[test]
fn a_spec_probe_value_out_of_range_is_refused() {
    let scratch = Scratch::new();
    let task = spinning_task(&scratch);
    let spec = task.join("spec.toml");
    let text = std::fs::read_to_string(&spec).unwrap();
    // Into the spec's own [probe] table, as its last line.
    std::fs::write(&spec, format!("{text}wave_size = 0\n")).unwrap();
    let line = text.lines().count() + 1;
    refused(
        &scratch,
        &["run", &task.display().to_string()],
        &format!("spec.toml:{line}: `probe.wave_size`: must be between 1 and 100000"),
    );
    assert!(!scratch.db().exists(), "a database was created");
}
