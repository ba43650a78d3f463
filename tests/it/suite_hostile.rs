//! The hostile fixture suite (tests/fixtures/suite-hostile, issue 26): the
//! classes of completion that try to forge `OK` for wrong code, or to cost
//! an honest build-mate its status, when programs share one image, each
//! beside honest controls. The fixture's README lists the classes and
//! expected.jsonl's fields.
//!
//! The real binary runs the suite with `--build shared` and with `--build
//! isolated`; for both, every hostile completion is not `OK`, every
//! completion's status (and its probe verdict, where expected.jsonl names
//! one) is its expected one, and the two builds give every completion the
//! same status. All mismatches are reported together, by class.
//!
//! Each attack is checked to be real, so a fixture that no longer attacks
//! anything fails here rather than passing quietly: the unparsed program is
//! one that the syn in Cargo.lock cannot parse while rustc builds it and it
//! exits 0 (MultiPL-E's method scores it `OK`).

use crate::multiple_ref;

use crate::common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use assay::suite::{completion_program, load_problems, Completions, Problem, Status};
use common::{repo, Scratch};
use serde::Deserialize;

fn fixture() -> PathBuf {
    repo().join("tests/fixtures/suite-hostile")
}

/// The classes issue 26 names, each with at least one hostile completion
/// in the fixture; and the other attacks the fixture adds.
const ISSUE_CLASSES: [&str; 9] = [
    "cross_program_reach",
    "shadowing",
    "symbol_attributes",
    "crate_attributes",
    "compile_bomb",
    "oversized_image",
    "unparsed",
    "early_exit",
    "flood",
];
const OTHER_CLASSES: [&str; 5] = ["build_mate", "nonce", "siblings", "sleep", "state"];
const CONTROL: &str = "control";
/// The file the `siblings` completion plants outside its own directory;
/// no run may leave it.
const PLANTED: &str = "/tmp/assay-suite-hostile-planted";

/// One line of expected.jsonl: a completion (by problem and index within
/// it), its class, and the statuses it may have, in both builds.
#[derive(Debug, Deserialize)]
struct Expected {
    name: String,
    completion: usize,
    class: String,
    what: String,
    status: OneOrMore,
    /// The probe verdict, exactly, where the rules decide it.
    probe: Option<String>,
}

/// A status, or the statuses the rules leave open (a policy that may or
/// may not refuse an attribute that is harmless either way).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMore {
    One(String),
    More(Vec<String>),
}

impl Expected {
    fn statuses(&self) -> Vec<Status> {
        let strings = match &self.status {
            OneOrMore::One(s) => vec![s.clone()],
            OneOrMore::More(v) => v.clone(),
        };
        strings.iter().map(|s| s.parse().unwrap()).collect()
    }

    fn label(&self) -> String {
        format!(
            "{} #{} [{}: {}]",
            self.name, self.completion, self.class, self.what
        )
    }
}

struct Fixture {
    problems: Vec<Problem>,
    /// (problem index, completion text), in input order.
    rows: Vec<(usize, String)>,
    expected: Vec<Expected>,
}

fn load() -> Fixture {
    let problems = load_problems(&fixture().join("problems.jsonl")).unwrap();
    let completions = Completions::load(&fixture().join("completions.jsonl"), &problems).unwrap();
    let rows: Vec<(usize, String)> = completions
        .rows
        .iter()
        .map(|r| {
            let p = problems.iter().position(|p| p.name == r.name).unwrap();
            (p, r.completion.clone())
        })
        .collect();
    let text = std::fs::read_to_string(fixture().join("expected.jsonl")).unwrap();
    let expected: Vec<Expected> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("expected.jsonl: {e}: {l}")))
        .collect();
    assert_eq!(
        expected.len(),
        rows.len(),
        "one expected line per completion"
    );
    let mut seen = vec![0; problems.len()];
    for ((p, _), want) in rows.iter().zip(&expected) {
        assert_eq!(want.name, problems[*p].name, "{}", want.label());
        assert_eq!(want.completion, seen[*p], "{}", want.label());
        seen[*p] += 1;
    }
    Fixture {
        problems,
        rows,
        expected,
    }
}

impl Fixture {
    fn program(&self, i: usize) -> String {
        let (p, completion) = &self.rows[i];
        completion_program(&self.problems[*p], completion)
    }
}

#[test]
fn the_fixture_covers_every_class_and_its_attacks_are_real() {
    let f = load();
    let classes: BTreeSet<&str> = f.expected.iter().map(|e| e.class.as_str()).collect();
    for class in ISSUE_CLASSES.iter().chain(&OTHER_CLASSES) {
        assert!(classes.contains(class), "no completion of class {class}");
    }
    for class in &classes {
        assert!(
            *class == CONTROL || ISSUE_CLASSES.contains(class) || OTHER_CLASSES.contains(class),
            "unknown class {class}"
        );
    }
    for e in &f.expected {
        if e.class != CONTROL {
            assert!(
                !e.statuses().contains(&Status::Ok),
                "{}: a hostile completion is never expected OK",
                e.label()
            );
        } else {
            assert_eq!(
                e.statuses().len(),
                1,
                "{}: a control's status is exact",
                e.label()
            );
        }
    }
    // Honest controls beside the attacks: every problem has a passing and
    // a failing one, so a build that broke them all would show.
    for problem in &f.problems {
        let controls: Vec<Status> = f
            .expected
            .iter()
            .filter(|e| e.name == problem.name && e.class == CONTROL)
            .flat_map(|e| e.statuses())
            .collect();
        assert!(controls.contains(&Status::Ok), "{}", problem.name);
        assert!(controls.contains(&Status::Exception), "{}", problem.name);
    }

    assert!(
        f.rows.iter().any(|(_, c)| c.contains(PLANTED)),
        "a completion plants {PLANTED}"
    );
    // The forged marker lines are today's marker: an attack on an old one
    // would fail for the wrong reason.
    for class in ["nonce", "flood"] {
        assert!(
            f.rows
                .iter()
                .zip(&f.expected)
                .any(|((_, c), e)| e.class == class
                    && c.contains(assay::suite::cases::DONE_MARKER.trim_end())),
            "no {class} completion prints the marker {:?}",
            assay::suite::cases::DONE_MARKER
        );
    }

    // The unparsed program: syn (the version assay parses with) refuses
    // it, rustc builds it, and it exits 0 before any assert, so MultiPL-E
    // scores it OK. A syn upgrade that parses it turns this fixture into a
    // plain early exit: find another spelling then.
    let scratch = Scratch::new();
    let unparsed: Vec<usize> = (0..f.rows.len())
        .filter(|i| f.expected[*i].class == "unparsed")
        .collect();
    assert!(!unparsed.is_empty());
    for i in unparsed {
        let program = f.program(i);
        assert!(
            syn::parse_file(&program).is_err(),
            "{}: syn parses it",
            f.expected[i].label()
        );
        assert_eq!(
            multiple_ref::evaluate(&program, scratch.path()),
            Status::Ok,
            "{}: rustc does not build it, or it does not exit 0",
            f.expected[i].label()
        );
    }
}

/// How one completion came out of a run: its status and probe verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Got {
    status: Status,
    probe: Option<String>,
}

// ISSUE-26 (lead): `--build shared|isolated` is the flag issue 26 asks for;
// main has none, so this test fails there on the flag (clap's "unexpected
// argument"), loudly, never skipped. Adjust the arguments here if the flag
// lands under another spelling.
/// Runs the fixture with `--build BUILD`; returns each completion's outcome
/// and the run's sandbox line. In a work directory of its own: a suite's
/// package has no dependency, so nothing warm is lost, and the two builds'
/// runs need not wait on one cargo lock (or on other tests' suites).
fn run_built(f: &Fixture, build: &str) -> (Vec<Got>, String) {
    let s = Scratch::with_own_work_dir();
    let problems = fixture().join("problems.jsonl").display().to_string();
    let completions = fixture().join("completions.jsonl").display().to_string();
    let run = s.json(&[
        "suite",
        "run",
        &problems,
        "--completions",
        &completions,
        "--build",
        build,
        "--json",
    ]);
    assert_eq!(run["status"], "finished", "--build {build}: {run}");
    assert!(
        !std::path::Path::new(PLANTED).exists(),
        "--build {build} (or the other build, beside it): a run wrote {PLANTED}; sandbox: {}",
        run["sandbox"]
    );
    let exported = s.json(&["suite", "export", "1", "--format", "json"]);
    let rows = exported["completions"].as_array().unwrap();
    assert_eq!(rows.len(), f.rows.len(), "--build {build}");
    let got = rows
        .iter()
        .zip(&f.expected)
        .map(|(row, want)| {
            assert_eq!(row["problem"], want.name.as_str());
            assert_eq!(row["completion"], want.completion);
            Got {
                status: row["status"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{}: no status: {row}", want.label()))
                    .parse()
                    .unwrap(),
                probe: row["probe"].as_str().map(str::to_owned),
            }
        })
        .collect();
    (got, run["sandbox"].as_str().unwrap_or_default().to_owned())
}

/// Every way `got` (one build's outcomes) breaks the expected file.
fn mismatches(f: &Fixture, build: &str, got: &[Got]) -> Vec<String> {
    let mut out = Vec::new();
    for (want, got) in f.expected.iter().zip(got) {
        let statuses = want.statuses();
        if want.class != CONTROL && got.status == Status::Ok {
            out.push(format!("{build}: FORGED OK: {}", want.label()));
        } else if !statuses.contains(&got.status) {
            out.push(format!(
                "{build}: {}: status {} (probe {:?}), expected one of {statuses:?}",
                want.label(),
                got.status,
                got.probe
            ));
        }
        if let Some(probe) = &want.probe {
            if got.probe.as_deref() != Some(probe.as_str()) {
                out.push(format!(
                    "{build}: {}: probe {:?}, expected {probe}",
                    want.label(),
                    got.probe
                ));
            }
        }
    }
    out
}

#[test]
fn hostile_suite_forges_nothing_and_both_builds_agree() {
    let f = load();
    let _ = std::fs::remove_file(PLANTED);
    // Side by side: each build is a run of its own, in a work directory
    // of its own.
    let ((shared, sandbox), (isolated, _)) = std::thread::scope(|scope| {
        let shared = scope.spawn(|| run_built(&f, "shared"));
        let isolated = run_built(&f, "isolated");
        (shared.join().expect("the shared build's run"), isolated)
    });
    let mut failures = mismatches(&f, "shared", &shared);
    failures.extend(mismatches(&f, "isolated", &isolated));
    for ((want, s), i) in f.expected.iter().zip(&shared).zip(&isolated) {
        if s.status != i.status {
            failures.push(format!(
                "builds differ: {}: shared {} (probe {:?}), isolated {} (probe {:?})",
                want.label(),
                s.status,
                s.probe,
                i.status,
                i.probe
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatch(es) (sandbox: {sandbox}):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
