//! End-to-end: what happens before and during the build of hostile
//! candidates, through the real `assay run`.
//!
//! - tests/fixtures/policy: one candidate per construct the default policy
//!   forbids, spelled as a model might (plainly, through a macro, as a raw
//!   identifier, inside `cfg_attr`, in a nested module), with honest
//!   controls. Each refused candidate gets `forbidden(rule)` and an error
//!   file showing its line, and is never written into the package.
//! - tests/fixtures/buildtrust: the policy relaxed (`include`, `path`), so
//!   only the build's confinement stands: two const-eval loops (one per CPU
//!   here) and a macro whose expansion doubles without end, in the same wide
//!   build as the controls; `#[path]` and `include_str!` of a sibling's
//!   file; `include_*!` of the cargo home's `env`, `credentials.toml` and
//!   `config.toml`, of a file in `/opt`, `/proc` and `/sys`, and of the
//!   package's manifest. Each canary placed for the run must be in no
//!   artifact: the database, the out directory (error files, the scorer),
//!   the generated package, assay's stdout and stderr.
//!
//! Both check that `assay run` exits 0, that the committed candidate keeps
//! its honest score (computed here from the cases), that every control
//! keeps its clean-run verdict, and that no process or temporary directory
//! is left behind.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use common::{repo, shared_work_dir, Scratch};

fn fixture(name: &str) -> PathBuf {
    repo().join("tests/fixtures").join(name)
}

/// A scratch directory whose `tmp/` is assay's TMPDIR, so anything assay
/// leaves in its temporary directory is found.
struct Run {
    scratch: Scratch,
}

impl Run {
    fn new() -> Run {
        let scratch = Scratch::new();
        std::fs::create_dir(scratch.join("tmp")).unwrap();
        Run { scratch }
    }

    fn path(&self) -> &Path {
        self.scratch.path()
    }

    fn tmp(&self) -> PathBuf {
        self.scratch.join("tmp")
    }

    fn assay(&self, args: &[&str]) -> Output {
        self.scratch
            .command(args)
            .env("TMPDIR", self.tmp())
            .output()
            .unwrap()
    }

    /// `assay run FIXTURE --json`, which must exit 0 and finish; then the
    /// batch as `assay show` has it, and assay's own output.
    fn run(&self, name: &str) -> (Value, String) {
        let out = self.assay(&["run", &fixture(name).display().to_string(), "--json"]);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "assay run failed: {stderr}\n{stdout}");
        let summary: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(summary["status"], "finished", "{summary}");
        let batch = summary["batch_id"].as_i64().unwrap().to_string();
        let shown = self.assay(&["show", &batch, "--json"]);
        assert!(shown.status.success());
        (
            serde_json::from_slice(&shown.stdout).unwrap(),
            format!("{stdout}\n{stderr}"),
        )
    }

    /// Nothing left in assay's temporary directory.
    fn assert_no_temporary_left(&self) {
        let left: Vec<_> = std::fs::read_dir(self.tmp())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert!(left.is_empty(), "temporary files left behind: {left:?}");
    }
}

/// The committed candidate's honest score: it answers `x` above 7 and
/// `2x` otherwise, so it passes the cases whose answer is that.
fn committed_honest_score() -> String {
    let text = std::fs::read_to_string(fixture("hostile").join("cases.jsonl")).unwrap();
    let cases: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let passed = cases
        .iter()
        .filter(|c| {
            let x = c["input"].as_u64().unwrap();
            let answer = if x > 7 { x } else { x * 2 };
            c["expected"].as_u64() == Some(answer)
        })
        .count();
    format!("scored({passed}/{})", cases.len())
}

fn expected(name: &str) -> Vec<Value> {
    std::fs::read_to_string(fixture(name).join("expected.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn candidates(shown: &Value) -> &Vec<Value> {
    shown["candidates"].as_array().unwrap()
}

/// The verdict a control gets in a clean run (the fixture's `control`
/// field): `x * 2` and its spellings pass every case, `x + 2` only the
/// case whose input is 2.
fn control_score(want: &Value) -> Option<&str> {
    want["control"].as_str()
}

/// Candidate `idx`'s source, from the fixture's replies (the text inside
/// its Rust fence).
fn source_of(name: &str, idx: usize) -> String {
    let text = std::fs::read_to_string(fixture(name).join("replies.jsonl")).unwrap();
    let reply: Value = serde_json::from_str(text.lines().nth(idx).unwrap()).unwrap();
    let content = reply["content"].as_str().unwrap();
    content
        .trim_start_matches("```rust\n")
        .trim_end()
        .trim_end_matches("```")
        .to_owned()
}

/// No process runs from the package's directory (a rustc left behind).
fn assert_no_process_in(dir: &Path) {
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cwd) = std::fs::read_link(entry.path().join("cwd")) else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        assert!(
            !(cwd.starts_with(dir) && cmdline.contains("rustc")),
            "process {:?} ({cmdline}) still runs in {}",
            entry.file_name(),
            dir.display()
        );
    }
}

#[test]
fn the_policy_refuses_each_forbidden_construct_before_any_build() {
    let run = Run::new();
    let (shown, _) = run.run("policy");
    let want = expected("policy");
    let got = candidates(&shown);
    assert_eq!(got.len(), want.len());
    let mut mismatches = Vec::new();
    for (g, w) in got.iter().zip(&want) {
        if g["probe"] != w["probe"] {
            mismatches.push(format!(
                "candidate {} ({}): probe is {}, expected {}",
                w["idx"], w["why"], g["probe"], w["probe"]
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));

    let package = shared_work_dir().join("policy");
    for (i, (c, w)) in got.iter().zip(&want).enumerate() {
        let verdict = c["probe"].as_str().unwrap();
        let source = source_of("policy", i);
        if verdict.starts_with("forbidden(") {
            // Never built: not even written into the package.
            assert!(
                !package.join(format!("cands/c{i}.rs")).exists(),
                "refused candidate {i} was written into the package"
            );
            assert!(c["score"].is_null(), "refused candidate {i} was scored");
            let file = c["error_file"].as_str().expect("an error file");
            let text = std::fs::read_to_string(run.path().join(file))
                .or_else(|_| std::fs::read_to_string(file))
                .unwrap();
            assert!(
                text.contains("forbidden by the task's policy"),
                "candidate {i}: {text}"
            );
            // The offending line is shown.
            let shown_line = text
                .lines()
                .find(|l| l.contains(" | ") && !l.trim_end().ends_with('|'))
                .unwrap_or_default();
            let code = shown_line
                .split_once(" | ")
                .map(|(_, code)| code)
                .unwrap_or("");
            assert!(
                !code.trim().is_empty() && source.contains(code.trim()),
                "candidate {i}: the error file does not show its line: {text}"
            );
        } else {
            let clean = control_score(w).expect("a control");
            assert_eq!(c["score"], clean, "control {i}: {c}");
        }
    }
    assert_eq!(
        shown["committed"]["verdict"],
        committed_honest_score().as_str()
    );
    assert_no_process_in(&package);
    run.assert_no_temporary_left();
}

/// A file with a canary placed for one test, removed afterwards unless it
/// was there before (then only read).
struct Canary {
    path: PathBuf,
    needle: Vec<u8>,
    created: bool,
}

impl Canary {
    fn place(path: PathBuf, text: &str) -> Canary {
        if path.exists() {
            let needle = std::fs::read(&path).unwrap();
            return Canary {
                path,
                needle,
                created: false,
            };
        }
        std::fs::write(&path, text).unwrap();
        Canary {
            path,
            needle: text.as_bytes().to_vec(),
            created: true,
        }
    }
}

impl Drop for Canary {
    fn drop(&mut self) {
        if self.created {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                out.push(entry.path());
            }
        }
    }
    out
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn one_candidates_build_costs_only_itself_and_reads_nothing_outside() {
    let home = PathBuf::from(std::env::var_os("HOME").expect("HOME"));
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".cargo"));
    assert_eq!(
        cargo_home,
        home.join(".cargo"),
        "the fixture names the cargo home as $HOME/.cargo"
    );
    let tag = format!("assay-build-trust-canary-{}", std::process::id());
    let canaries = [
        Canary::place(
            cargo_home.join("credentials.toml"),
            &format!("# {tag} credentials\n"),
        ),
        Canary::place(cargo_home.join("config.toml"), &format!("# {tag} config\n")),
        Canary::place(
            PathBuf::from("/opt/assay-build-trust-canary.txt"),
            &format!("{tag} opt\n"),
        ),
        Canary::place(cargo_home.join("env"), &format!("# {tag} env\n")),
    ];

    let run = Run::new();
    let (shown, output) = run.run("buildtrust");
    let got = candidates(&shown);
    let verdict = |i: usize| got[i]["probe"].as_str().unwrap().to_owned();

    // The compile bombs are stopped for themselves; their build-mates keep
    // their verdicts.
    assert_eq!(verdict(1), "compile_timeout", "{}", got[1]);
    assert_eq!(verdict(3), "compile_timeout", "{}", got[3]);
    assert_eq!(verdict(5), "compile_out_of_memory", "{}", got[5]);
    let want = expected("buildtrust");
    assert_eq!(got.len(), want.len());
    for i in [0, 2, 4] {
        assert_eq!(verdict(i), "compiled", "control {i}");
        assert_eq!(
            got[i]["score"],
            control_score(&want[i]).expect("a control"),
            "control {i}"
        );
    }
    // Every file read outside the candidate's own is a compile error.
    for (i, wanted) in want.iter().enumerate().skip(6) {
        assert!(
            verdict(i).starts_with("compile_error"),
            "candidate {i} ({}) got {}",
            wanted["why"],
            verdict(i)
        );
    }
    assert_eq!(
        shown["committed"]["verdict"],
        committed_honest_score().as_str()
    );

    // No byte of any canary in any artifact.
    let package = shared_work_dir().join("buildtrust");
    let mut scanned = files_under(run.path());
    scanned.extend(files_under(&package));
    assert!(scanned.len() > 10, "too little was scanned: {scanned:?}");
    for canary in &canaries {
        let needle = &canary.needle;
        for file in &scanned {
            let bytes = std::fs::read(file).unwrap_or_default();
            assert!(
                !contains(&bytes, needle),
                "{} holds {}",
                file.display(),
                canary.path.display()
            );
        }
        assert!(
            !contains(output.as_bytes(), needle),
            "assay's output holds {}",
            canary.path.display()
        );
    }
    // The sibling's and the package's files did not leak either: the
    // error files say "Permission denied", not their text.
    for i in [6, 7, 14] {
        let file = got[i]["error_file"].as_str().expect("an error file");
        let text = std::fs::read_to_string(run.path().join(file))
            .or_else(|_| std::fs::read_to_string(file))
            .unwrap();
        assert!(!text.contains("[package]"), "candidate {i}: {text}");
        assert!(
            text.contains("Permission denied") || text.contains("os error 13"),
            "candidate {i}: {text}"
        );
    }
    assert_no_process_in(&package);
    run.assert_no_temporary_left();
}
