//! The bundled fixture suite (tests/fixtures/suite) against the reference
//! method (bench/multiple_ref.rs: MultiPL-E's evaluation, one `rustc` per
//! program): the program text assay builds is the reference's byte for
//! byte, the reference's statuses are the expected file's, and the dispatch
//! programs of the case split, built and run case by case, give the same
//! statuses except where assay is stricter on purpose (an early exit).
//!
//! `ASSAY_BLESS=1 cargo test --release --test suite` rewrites
//! tests/fixtures/suite/expected.jsonl from the reference method.

#[path = "../bench/multiple_ref.rs"]
mod multiple_ref;

use std::path::{Path, PathBuf};
use std::process::Command;

use assay::suite::cases::case_finished;
use assay::suite::{
    completion_program, load_problems, split_cases, CaseEnd, CompletionOutcome, Completions,
    Problem, Split, Status,
};
use multiple_ref::{End, RUN_TIMEOUT};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/suite")
}

/// (problem, completion) in input order, with each completion's index
/// within its problem.
struct Fixture {
    problems: Vec<Problem>,
    rows: Vec<(usize, usize, String)>,
}

fn load() -> Fixture {
    let problems = load_problems(&fixture().join("problems.jsonl")).unwrap();
    let completions = Completions::load(&fixture().join("completions.jsonl"), &problems).unwrap();
    let mut seen = vec![0; problems.len()];
    let rows = completions
        .rows
        .iter()
        .map(|r| {
            let p = problems.iter().position(|p| p.name == r.name).unwrap();
            seen[p] += 1;
            (p, seen[p] - 1, r.completion.clone())
        })
        .collect();
    Fixture { problems, rows }
}

fn programs(f: &Fixture) -> Vec<String> {
    f.rows
        .iter()
        .map(|(p, _, c)| completion_program(&f.problems[*p], c))
        .collect()
}

fn expected(f: &Fixture) -> Vec<Status> {
    let text = std::fs::read_to_string(fixture().join("expected.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines.len(),
        f.rows.len(),
        "one expected status per completion"
    );
    lines
        .iter()
        .zip(&f.rows)
        .map(|(line, (p, i, _))| {
            assert_eq!(line["name"], f.problems[*p].name.as_str());
            assert_eq!(line["completion"], *i);
            line["status"].as_str().unwrap().parse().unwrap()
        })
        .collect()
}

#[test]
fn program_text_is_the_reference_methods() {
    let f = load();
    assert_eq!(f.problems.len(), 20);
    for ((p, i, completion), program) in f.rows.iter().zip(programs(&f)) {
        let problem = &f.problems[*p];
        let reference = multiple_ref::multiple_program(
            &problem.prompt,
            completion,
            &problem.tests,
            &problem.stop_tokens,
        );
        assert_eq!(program, reference, "{} #{i}", problem.name);
    }
}

#[test]
fn reference_method_gives_the_expected_statuses() {
    let f = load();
    let scratch = tempfile::tempdir().unwrap();
    let got = multiple_ref::evaluate_all(&programs(&f), scratch.path());
    if std::env::var_os("ASSAY_BLESS").is_some() {
        let mut out = String::new();
        for ((p, i, _), status) in f.rows.iter().zip(&got) {
            let line = serde_json::json!({"name": f.problems[*p].name, "completion": i, "status": status.as_str()});
            out.push_str(&format!("{line}\n"));
        }
        std::fs::write(fixture().join("expected.jsonl"), out).unwrap();
    }
    let want = expected(&f);
    for (((p, i, _), got), want) in f.rows.iter().zip(&got).zip(&want) {
        assert_eq!(got, want, "{} #{i}", f.problems[*p].name);
    }
    for status in Status::ALL {
        assert!(want.contains(&status), "the fixture covers {status}");
    }
}

/// What a runner of the case split learns: the dispatch program built once
/// (as the reference builds), then `whole` and every case run alone.
fn run_split(program: &str, scratch: &Path) -> (CompletionOutcome, usize) {
    let split = split_cases(program);
    let dir = tempfile::tempdir_in(scratch).unwrap();
    std::fs::write(dir.path().join("main.rs"), split.dispatch_program()).unwrap();
    let mut rustc = Command::new("rustc");
    rustc
        .args(["--edition", "2021", "main.rs", "-o", "main"])
        .current_dir(dir.path());
    match multiple_ref::run_limited(&mut rustc, b"", multiple_ref::COMPILE_TIMEOUT).0 {
        End::Exited(0) => {}
        End::TimedOut => return (CompletionOutcome::CompileTimeout, split.case_count()),
        _ => return (CompletionOutcome::CompileError, split.case_count()),
    }
    let run = |which: &str| {
        let nonce = format!("n{}x{which}", std::process::id());
        let mut main = Command::new(dir.path().join("main"));
        main.arg(which).current_dir(dir.path());
        let (end, stdout) =
            multiple_ref::run_limited(&mut main, format!("{nonce}\n").as_bytes(), RUN_TIMEOUT);
        match end {
            End::Exited(0) if !split.marks_completion() || case_finished(&stdout, &nonce) => {
                CaseEnd::Passed
            }
            End::Exited(0) => CaseEnd::ExitedEarly,
            End::Exited(code) => CaseEnd::Failed { code },
            End::Signalled(signal) => CaseEnd::Signalled { signal },
            End::TimedOut => CaseEnd::TimedOut,
        }
    };
    let whole = run("whole");
    let cases = match split.split {
        Split::Cases { .. } => (0..split.case_count())
            .map(|i| run(&i.to_string()))
            .collect(),
        Split::Whole { .. } => vec![whole],
    };
    (CompletionOutcome::Ran { whole, cases }, split.case_count())
}

#[test]
fn case_split_runs_give_the_reference_statuses_except_early_exits() {
    let f = load();
    let want = expected(&f);
    let scratch = tempfile::tempdir().unwrap();
    let programs = programs(&f);
    let outcomes = multiple_ref::pool(&programs, multiple_ref::cpus(), |p| {
        run_split(p, scratch.path())
    });
    let mut early_exits = Vec::new();
    for (((p, i, _), (outcome, _)), want) in f.rows.iter().zip(&outcomes).zip(&want) {
        let label = format!("{} #{i}", f.problems[*p].name);
        assert_eq!(outcome.multiple_status(), *want, "{label}: {outcome:?}");
        if outcome.status() != *want {
            assert_eq!(
                (*want, outcome.status()),
                (Status::Ok, Status::Exception),
                "{label}"
            );
            early_exits.push(label);
        }
    }
    // Exactly the two completions that call std::process::exit(0).
    assert_eq!(early_exits, ["fx_is_even #1", "fx_nth_odd #0"]);

    let by_name = |name: &str, index: usize| {
        let at = f
            .rows
            .iter()
            .position(|(p, i, _)| f.problems[*p].name == name && *i == index)
            .unwrap();
        &outcomes[at]
    };
    use CaseEnd::*;
    let cases = |name, index| match &by_name(name, index).0 {
        CompletionOutcome::Ran { cases, .. } => cases.clone(),
        other => panic!("{name} #{index}: {other:?}"),
    };
    // The panic on one assert costs that case only.
    assert_eq!(
        cases("fx_fib", 0),
        [Passed, Passed, Failed { code: 101 }, Passed]
    );
    // The early exit that skips one assert is caught on that case.
    assert_eq!(
        cases("fx_nth_odd", 0),
        [Passed, Passed, ExitedEarly, Passed]
    );
    // Asserts spanning lines split; a loop or a computed binding does not.
    assert_eq!(by_name("fx_gcd", 1).1, 3);
    assert_eq!(cases("fx_gcd", 1), [Passed, Passed, Failed { code: 101 }]);
    assert_eq!(by_name("fx_clamp", 0).1, 1);
    assert_eq!(by_name("fx_first_word", 0).1, 1);
    assert_eq!(by_name("fx_add_two", 0).1, 3);
    assert_eq!(by_name("fx_add_two", 1).0.cases_passed(), (1, 3));
}
