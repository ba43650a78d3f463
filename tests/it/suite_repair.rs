//! Repair rounds of suites (issue 28) end to end: the real binary on two
//! problems of the fixture suite (tests/fixtures/suite), against the test
//! gateway's scripted model, which answers a repair prompt carrying a given
//! failed assert or compiler error with fixed code and each problem's
//! first prompt with broken code, and records every request body.

use crate::common;

use std::path::{Path, PathBuf};

use assay_gateway::{Dialect, Model};
use serde_json::Value;

use common::scripted::{asked, pools_file, reply, serve, FIXER};
use common::{repo, Scratch};

/// `add_two` compiles and fails two of its three asserts; `is_even` calls
/// a function nobody defines.
const BROKEN_ADD: &str = "```rust\nfn add_two(a: i32, b: i32) -> i32 {\n    a - b\n}\n```";
const BROKEN_EVEN: &str = "```rust\nfn is_even(n: i64) -> bool {\n    is_odd(n) == false\n}\n```";
const FIXED_ADD: &str = "```rust\nfn add_two(a: i32, b: i32) -> i32 {\n    a + b\n}\n```";
const FIXED_EVEN: &str = "```rust\nfn is_even(n: i64) -> bool {\n    n % 2 == 0\n}\n```";
/// What a full repair prompt shows of `add_two`'s first failed assert, and
/// what rustc says of `is_even` (shown in either mode).
const FAILED_ASSERT: &str = "assert_eq!(candidate(2, 3), 5);";
const COMPILE_ERROR: &str = "cannot find function `is_odd`";

/// The scripted model: a repair prompt with the failure it can fix gets
/// the fix (these rules come first: a repair prompt also holds the
/// problem's own prompt), each problem's prompt its broken code.
fn scripted() -> Model {
    Model::new(Dialect::LlamaCpp, vec![reply("no code here")])
        .answer_when(FAILED_ASSERT, reply(FIXED_ADD))
        .answer_when(COMPILE_ERROR, reply(FIXED_EVEN))
        .answer_when("fn add_two", reply(BROKEN_ADD))
        .answer_when("fn is_even", reply(BROKEN_EVEN))
}

/// The fixture suite's first two problems (`fx_add_two`, `fx_is_even`).
fn problems(s: &Scratch) -> PathBuf {
    let all = std::fs::read_to_string(repo().join("tests/fixtures/suite/problems.jsonl")).unwrap();
    let two: Vec<&str> = all.lines().take(2).collect();
    s.write("problems.jsonl", &(two.join("\n") + "\n"))
}

/// Every assert line of those problems' tests: the test text.
fn assert_lines(problems: &PathBuf) -> Vec<String> {
    std::fs::read_to_string(problems)
        .unwrap()
        .lines()
        .flat_map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["tests"]
                .as_str()
                .unwrap()
                .lines()
                .filter(|t| t.contains("assert"))
                .map(|t| t.trim().to_owned())
                .collect::<Vec<_>>()
        })
        .collect()
}

fn arg(p: &Path) -> String {
    p.display().to_string()
}

/// Each stored completion: problem position, index, round, parent, status
/// (`None`: no outcome yet).
type Row = (i64, i64, i64, Option<i64>, Option<String>);

fn completions(s: &Scratch) -> Vec<Row> {
    s.sql(async |pool| {
        sqlx::query_as(
            "SELECT p.pos, r.idx, r.round, r.parent, o.status FROM suite_problems p
             JOIN replies r ON r.batch_id = p.batch_id
             LEFT JOIN suite_outcomes o ON o.batch_id = r.batch_id AND o.idx = r.idx
             ORDER BY p.pos, r.idx",
        )
        .fetch_all(pool)
        .await
        .unwrap()
    })
}

/// The suite's rounds: number, why the rounds stopped there.
fn rounds(s: &Scratch) -> Vec<(i64, Option<String>)> {
    s.sql(async |pool| {
        sqlx::query_as("SELECT round, stopped FROM suite_rounds ORDER BY round")
            .fetch_all(pool)
            .await
            .unwrap()
    })
}

fn ok(s: &str) -> Option<String> {
    Some(s.to_owned())
}

fn run_args<'a>(problems: &'a str, pools: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "suite", "run", problems, "--pool", FIXER, "-n", "2", "--pools", pools,
    ];
    args.extend_from_slice(extra);
    args
}

/// Round 0 passes nothing; round 1 repairs both problems from their
/// feedback (the failed assert's line, the compiler's error), each
/// completion names the one it repairs, the suite stops at the first
/// round where every problem passes, and `suite show` gives pass@1 after
/// each round.
#[test]
fn a_repair_round_lifts_pass_at_1_on_the_fixture_suite() {
    let gw = serve(scripted());
    let s = Scratch::new();
    let problems = problems(&s);
    let pools = pools_file(&s, &gw);
    let (p, q) = (arg(&problems), arg(&pools));
    let summary = s.json(&run_args(&p, &q, &["--rounds", "2", "--json"]));
    assert_eq!(summary["status"], "finished", "{summary}");
    // The problems' table is the first draw's: nothing passed there.
    assert_eq!(summary["pass_at_1"].as_f64(), Some(0.0), "{summary}");
    let repair = &summary["rounds"];
    assert_eq!(
        repair["pass_at_1"],
        serde_json::json!([0.0, 1.0]),
        "{summary}"
    );
    assert_eq!(repair["stopped"], "all_pass");
    assert_eq!(repair["feedback"], "full");
    let r1 = &repair["rounds"][1];
    assert_eq!(
        (
            r1["completions"].as_u64(),
            r1["compiled"].as_u64(),
            r1["passing"].as_u64()
        ),
        (Some(4), Some(4), Some(4))
    );
    let r0 = &repair["rounds"][0];
    assert_eq!(
        (
            r0["completions"].as_u64(),
            r0["compiled"].as_u64(),
            r0["passing"].as_u64()
        ),
        (Some(4), Some(2), Some(0))
    );
    for r in repair["rounds"].as_array().unwrap() {
        assert!(r["output_tokens"].as_u64().is_some_and(|t| t > 0), "{r}");
        assert!(r["input_tokens"].as_u64().is_some_and(|t| t > 0), "{r}");
        assert!(r["wall_s"].as_f64().is_some(), "{r}");
    }
    let exception = ok("Exception");
    let syntax = ok("SyntaxError");
    assert_eq!(
        completions(&s),
        [
            (0, 0, 0, None, exception.clone()),
            (0, 1, 0, None, exception),
            (0, 2, 1, Some(0), ok("OK")),
            (0, 3, 1, Some(1), ok("OK")),
            (1, 0, 0, None, syntax.clone()),
            (1, 1, 0, None, syntax),
            (1, 2, 1, Some(0), ok("OK")),
            (1, 3, 1, Some(1), ok("OK")),
        ]
    );
    assert_eq!(rounds(&s), [(0, None), (1, ok("all_pass"))]);
    // Each repair prompt was answered by the rule of its failure.
    let served: Vec<Option<String>> = gw.served().iter().map(|g| g.rule.clone()).collect();
    assert_eq!(
        served[4..],
        [
            ok(FAILED_ASSERT),
            ok(FAILED_ASSERT),
            ok(COMPILE_ERROR),
            ok(COMPILE_ERROR)
        ]
    );
    // Full feedback shows the failed assert with its panic message, and
    // never the tests file's other text as code to fix.
    let prompts = asked(&gw);
    let add_repair = &prompts[4];
    assert!(
        add_repair.contains("panicked: assertion `left == right` failed")
            && add_repair.contains("left: -1"),
        "{add_repair}"
    );
    assert!(
        add_repair.contains("failed 2 of its 3 tests"),
        "{add_repair}"
    );
    // The text report has the same.
    let shown = s.assay_ok(&["suite", "show", "1"]);
    assert!(
        shown.contains("pass@1 after each round: 0.000 -> 1.000"),
        "{shown}"
    );
    assert!(shown.contains("rounds stopped: all_pass"), "{shown}");
    // `suite export` says each completion's round and parent, after the
    // columns it always had, in stored order (by problem, then index).
    let lineage: Vec<(i64, Option<i64>)> = completions(&s)
        .iter()
        .map(|(_, _, round, parent, _)| (*round, *parent))
        .collect();
    let exported = s.json(&["suite", "export", "1", "--format", "json"]);
    let rows = exported["completions"].as_array().unwrap();
    let got: Vec<(i64, Option<i64>)> = rows
        .iter()
        .map(|r| (r["round"].as_i64().unwrap(), r["parent"].as_i64()))
        .collect();
    assert_eq!(got, lineage);
    let csv = s.assay_ok(&["suite", "export", "1", "--format", "csv"]);
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].ends_with(",error_file,round,parent"), "{csv}");
    let tail = |line: &str| {
        let cells: Vec<&str> = line.rsplitn(3, ',').collect();
        (cells[1].to_owned(), cells[0].to_owned())
    };
    let want: Vec<(String, String)> = lineage
        .iter()
        .map(|(r, p)| (r.to_string(), p.map_or(String::new(), |p| p.to_string())))
        .collect();
    let got: Vec<(String, String)> = lines[1..].iter().map(|l| tail(l)).collect();
    assert_eq!(got, want, "{csv}");
}

/// `--feedback errors-only` sends no test text: no request body holds any
/// assert line of the problems' tests. The compile error is still shown
/// (so `is_even` is fixed), the failed asserts are not (so `add_two` is
/// not), and the rounds run out.
#[test]
fn errors_only_feedback_sends_no_test_text() {
    let gw = serve(scripted());
    let s = Scratch::new();
    let problems = problems(&s);
    let pools = pools_file(&s, &gw);
    let (p, q) = (arg(&problems), arg(&pools));
    let summary = s.json(&run_args(
        &p,
        &q,
        &["--rounds", "2", "--feedback", "errors-only", "--json"],
    ));
    assert_eq!(summary["status"], "finished", "{summary}");
    let repair = &summary["rounds"];
    assert_eq!(repair["feedback"], "errors_only");
    assert_eq!(
        repair["pass_at_1"],
        serde_json::json!([0.0, 0.5, 0.5]),
        "{summary}"
    );
    assert_eq!(repair["stopped"], "rounds_done");
    let asserts = assert_lines(&problems);
    assert_eq!(asserts.len(), 6, "{asserts:?}");
    let bodies: Vec<String> = gw.received().iter().map(|r| r.body.to_string()).collect();
    // Round 0's four, round 1's four, round 2's two (add_two's chains).
    assert_eq!(bodies.len(), 10);
    for body in &bodies {
        for line in &asserts {
            // As JSON text: a body escapes quotes, so search both forms.
            let escaped = serde_json::to_string(line).unwrap();
            let escaped = escaped.trim_matches('"');
            assert!(
                !body.contains(line.as_str()) && !body.contains(escaped),
                "a request carried the test line {line}: {body}"
            );
        }
    }
    // The search could have found one: the full mode's prompts do carry
    // assert lines (the test above), and these carry the error.
    let prompts = asked(&gw);
    assert!(prompts[6].contains(COMPILE_ERROR), "{}", prompts[6]);
    assert!(
        prompts[4].contains("The tests are not shown."),
        "{}",
        prompts[4]
    );
}

/// A suite killed in the middle of its repair round resumes in that round,
/// asks nothing of round 0 again, and ends as an uninterrupted one.
#[test]
fn a_suite_killed_mid_round_resumes_in_that_round_and_ends_the_same() {
    let reference = {
        let gw = serve(scripted());
        let s = Scratch::new();
        let problems = problems(&s);
        let pools = pools_file(&s, &gw);
        let (p, q) = (arg(&problems), arg(&pools));
        s.json(&run_args(&p, &q, &["--rounds", "2", "--json"]));
        (completions(&s), rounds(&s))
    };
    let gw = serve(scripted());
    let s = Scratch::new();
    let problems = problems(&s);
    let pools = pools_file(&s, &gw);
    let (p, q) = (arg(&problems), arg(&pools));
    // The fifth completion stored is round 1's first.
    s.start_at("pause@suite.reply#5", &run_args(&p, &q, &["--rounds", "2"]))
        .kill9();
    let stored = completions(&s);
    assert_eq!(stored.len(), 5, "{stored:?}");
    assert_eq!(stored.iter().filter(|r| r.2 == 1).count(), 1, "{stored:?}");
    assert_eq!(rounds(&s).len(), 2);
    let resumed = s.json(&[
        "suite", "run", "--resume", "1", "--pool", FIXER, "--pools", &q, "--json",
    ]);
    assert_eq!(resumed["status"], "finished", "{resumed}");
    assert_eq!((completions(&s), rounds(&s)), reference);
    // Round 0's four prompts were asked once each; of round 1's, only the
    // one in flight at the kill may have been asked twice.
    let prompts = asked(&gw);
    let first_draw = prompts
        .iter()
        .filter(|p| !p.contains("An earlier answer"))
        .count();
    assert_eq!(first_draw, 4, "{prompts:#?}");
    assert!(prompts.len() <= 9, "{}", prompts.len());
}

/// Repair flags the run cannot honour are refused with one line, exit 2,
/// before anything is written.
#[test]
fn bad_repair_flag_combinations_are_refused() {
    let s = Scratch::new();
    let problems = problems(&s);
    let p = arg(&problems);
    let completions = repo().join("tests/fixtures/suite/completions.jsonl");
    let c = completions.display().to_string();
    for (args, want) in [
        (vec!["suite", "run", &p, "--rounds", "1"], "--pool NAME"),
        (
            vec!["suite", "run", &p, "--completions", &c, "--rounds", "1"],
            "a completions file cannot answer a repair prompt",
        ),
        (
            vec![
                "suite",
                "run",
                &p,
                "--pool",
                "x",
                "-n",
                "1",
                "--feedback",
                "full",
            ],
            "--feedback: ",
        ),
        (
            vec![
                "suite",
                "run",
                &p,
                "--pool",
                "x",
                "-n",
                "1",
                "--repair-pool",
                "y",
            ],
            "--repair-pool: ",
        ),
        (
            vec![
                "suite", "run", &p, "--pool", "x", "-n", "1", "--rounds", "1", "--queue",
            ],
            "lanes",
        ),
        (
            vec!["suite", "run", "--resume", "1", "--rounds", "1"],
            "--resume",
        ),
    ] {
        let out = s.assay(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    }
    assert!(!s.db().exists(), "nothing is written");
}
