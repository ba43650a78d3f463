//! The bundled fixture suite (tests/fixtures/suite) against the reference
//! method (bench/multiple_ref.rs: MultiPL-E's evaluation, one `rustc` per
//! program): the program text assay builds is the reference's byte for
//! byte, the reference's statuses are the expected file's, and the dispatch
//! programs of the case split, built and run case by case, give the same
//! statuses except where assay is stricter on purpose (an early exit).
//!
//! The end-to-end tests run the real binary on the fixture: `assay suite
//! run --completions` gives every completion the reference's status except
//! the two early exits, `show`, `export` and `compare` read what it stored,
//! a killed suite is finished by `--resume`, and bad input is one line and
//! exit 2 with nothing stored.
//!
//! `ASSAY_BLESS=1 cargo test --profile ci --test it suite::` rewrites
//! tests/fixtures/suite/expected.jsonl from the reference method.

use crate::multiple_ref;

use crate::common;
use crate::common::json;
use crate::common::llama;

use std::path::{Path, PathBuf};
use std::process::Command;

use assay::suite::cases::case_finished;
use assay::suite::{
    completion_program, load_problems, split_cases, CaseEnd, CompletionOutcome, Completions,
    Problem, Split, Status,
};
use common::{repo, FixtureSuite, Scratch};
use multiple_ref::{End, RUN_TIMEOUT};
use serde_json::Value;

fn fixture() -> PathBuf {
    repo().join("tests/fixtures/suite")
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
    let scratch = Scratch::new();
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
    let scratch = Scratch::new();
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

// ---------------------------------------------------------------------------
// The real binary on the fixture.

fn arg(p: PathBuf) -> String {
    p.display().to_string()
}

/// The two completions where assay is stricter than MultiPL-E on purpose
/// (docs/suites.md): they call `std::process::exit(0)`.
const STRICTER: [(&str, usize); 2] = [("fx_is_even", 1), ("fx_nth_odd", 0)];

/// assay's expected status of every completion, in input order: the
/// reference's, except the early exits.
fn assay_expected(f: &Fixture) -> Vec<Status> {
    expected(f)
        .into_iter()
        .zip(&f.rows)
        .map(|(status, (p, i, _))| {
            if STRICTER.contains(&(f.problems[*p].name.as_str(), *i)) {
                assert_eq!(status, Status::Ok);
                Status::Exception
            } else {
                status
            }
        })
        .collect()
}

/// Every completion's status in a `suite run/show --json`, flattened in
/// the problems' order (the fixture lists completions problem by problem).
fn statuses_of(report: &Value, key: &str) -> Vec<Status> {
    report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p[key].as_array().unwrap().clone())
        .map(|s| s.as_str().unwrap().parse().unwrap())
        .collect()
}

/// The text elements of an SVG: (y, text), in document order.
fn svg_texts(svg: &str) -> Vec<(f64, String)> {
    svg.split("<text")
        .skip(1)
        .map(|t| {
            let y = t.split(" y=\"").nth(1).unwrap().split('"').next().unwrap();
            let body = &t[t.find('>').unwrap() + 1..t.find("</text>").unwrap()];
            (y.parse().unwrap(), body.trim().replace("&apos;", "'"))
        })
        .collect()
}

fn run_fixture(s: &Scratch, completions: &str) -> Value {
    s.json(&[
        "suite",
        "run",
        &arg(fixture().join("problems.jsonl")),
        "--completions",
        completions,
        "--json",
    ])
}

#[test]
fn suite_run_show_export_and_compare_on_the_fixture() {
    let f = load();
    let s = Scratch::with_own_work_dir();
    let run = run_fixture(&s, &arg(fixture().join("completions.jsonl")));
    assert_eq!(run["suite_id"], 1);
    assert_eq!(run["status"], "finished", "{run}");
    assert_eq!(run["pending"], 0);
    assert_eq!(run["completions"], 40);
    // Done when: completion for completion, the reference's status, except
    // where assay is stricter on purpose; MultiPL-E's reading of the same
    // runs is the reference's everywhere.
    let want = assay_expected(&f);
    let got = statuses_of(&run, "statuses");
    for (((p, i, _), got), want) in f.rows.iter().zip(&got).zip(&want) {
        assert_eq!(got, want, "{} #{i}", f.problems[*p].name);
    }
    assert_eq!(got.len(), 40);
    assert_eq!(statuses_of(&run, "multiple_statuses"), expected(&f));

    let problems = run["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 20);
    let mut mean = 0.0;
    for p in problems {
        let statuses = p["statuses"].as_array().unwrap();
        let passed = statuses.iter().filter(|s| *s == "OK").count();
        let built = statuses.iter().filter(|s| *s != "SyntaxError").count();
        assert_eq!(p["n"], 2, "{p}");
        assert_eq!(p["passed"], passed, "{p}");
        assert_eq!(p["compiled"], built, "{p}");
        mean += passed as f64 / 2.0 / 20.0;
    }
    let pass_at_1 = run["pass_at_1"].as_f64().unwrap();
    assert!((pass_at_1 - mean).abs() < 1e-12, "{pass_at_1} vs {mean}");
    // Two completions each: pass@k is reported for k = 1 only.
    assert_eq!(run["pass_at_k"], serde_json::json!({ "1": pass_at_1 }));
    let fib = problems.iter().find(|p| p["name"] == "fx_fib").unwrap();
    // fx_fib #0 panics on one of four asserts: three cases pass alone.
    assert_eq!(
        (fib["cases_passed"].as_u64(), fib["cases"].as_u64()),
        (Some(7), Some(8))
    );

    // `show` reads back what `run` printed.
    assert_eq!(s.json(&["suite", "show", "1", "--json"]), run);
    let text = s.assay_ok(&["suite", "show", "1"]);
    assert!(
        text.starts_with("suite 1: finished; 20 problems, 40 completions"),
        "{text}"
    );
    assert!(
        text.contains("stricter than MultiPL-E on 2 completion(s): fx_is_even #1 (Exception, MultiPL-E OK), fx_nth_odd #0 (Exception, MultiPL-E OK)"),
        "{text}"
    );
    // Issue 30: each k once, and each completion's cases beside its
    // status (a column summed over completions read as the problem's).
    assert!(
        text.contains(&format!(
            "\npass@1: {pass_at_1:.3}   (pass@10 needs 10 completions of every problem; the fewest here: 2)\n"
        )),
        "{text}"
    );
    assert!(!text.contains("pass@k"), "{text}");
    assert!(
        text.contains("pass@1  each completion: status, cases passed/cases\n"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("fx_add_two ") && l.ends_with("  OK 3/3, Exception 1/3")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("fx_reverse_words ") && l.ends_with("  SyntaxError, OK 3/3")),
        "{text}"
    );
    let listed = s.assay_ok(&["suite", "list"]);
    assert!(
        listed
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("1      finished"),
        "{listed}"
    );
    // A suite's problems are not listed among the batches.
    assert_eq!(s.json(&["batches", "--json"]), serde_json::json!([]));

    // Export: one row per completion, the statuses as stored.
    let csv = s.assay_ok(&["suite", "export", "1", "--format", "csv"]);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 41, "{csv}");
    assert!(lines[0].starts_with("problem,completion,pool,model,completion_tokens,ttft_ms,dup_of,probe,status,multiple_status,whole,cases,"), "{}", lines[0]);
    assert!(
        lines[1].starts_with(
            "fx_add_two,0,completions,,,,,compiled,OK,OK,passed,passed;passed;passed,3,3,"
        ),
        "{}",
        lines[1]
    );
    assert!(lines[2].starts_with("fx_add_two,1,completions,,,,,compiled,Exception,Exception,failed(101),failed(101);failed(101);passed,1,3,"), "{}", lines[2]);
    // Issue 30: milliseconds to the microsecond, without float noise
    // (`24.450785999999997`).
    let header: Vec<&str> = lines[0].split(',').collect();
    for column in ["run_wall_ms", "run_cpu_ms"] {
        let at = header.iter().position(|h| *h == column).unwrap();
        for line in &lines[1..] {
            let cell = line.split(',').nth(at).unwrap();
            let decimals = cell.split('.').nth(1).map_or(0, str::len);
            assert!(
                decimals <= 3 && cell.parse::<f64>().is_ok(),
                "{column}: {line}"
            );
        }
    }
    let exported = s.json(&["suite", "export", "1", "--format", "json"]);
    let rows = exported["completions"].as_array().unwrap();
    assert_eq!(rows.len(), 40);
    assert_eq!(exported["summary"], run);
    for (row, want) in rows.iter().zip(&want) {
        assert_eq!(row["status"], want.as_str());
        assert!(
            row["program"].as_str().unwrap().contains("fn main()"),
            "{row}"
        );
    }
    let syntax = rows.iter().find(|r| r["status"] == "SyntaxError").unwrap();
    let error_file = syntax["error_file"].as_str().unwrap();
    assert!(
        std::fs::read_to_string(error_file)
            .unwrap()
            .contains("error"),
        "{error_file}"
    );

    errors_come_from_the_store(&s);

    // A second run over the same problems: each problem's first completion
    // twice, so the copy shares its program (one program per problem).
    let second = s.path().join("first-twice.jsonl");
    let firsts: String = std::fs::read_to_string(fixture().join("completions.jsonl"))
        .unwrap()
        .lines()
        .step_by(2)
        .map(|l| format!("{l}\n{l}\n"))
        .collect();
    std::fs::write(&second, firsts).unwrap();
    let run2 = run_fixture(&s, &arg(second));
    assert_eq!(run2["suite_id"], 2);
    assert_eq!(
        (run2["completions"].as_u64(), run2["programs"].as_u64()),
        (Some(40), Some(20))
    );
    let got2 = statuses_of(&run2, "statuses");
    for (k, pair) in got2.chunks(2).enumerate() {
        assert_eq!(pair[0], pair[1], "a duplicate has its program's status");
        assert_eq!(pair[0], want[2 * k], "{}", f.problems[k].name);
    }

    let svg = s.path().join("compare.svg");
    let compared = s.json(&[
        "suite",
        "compare",
        "1",
        "2",
        "--json",
        "--svg",
        &arg(svg.clone()),
    ]);
    let c = &compared["comparison"];
    let (mean_a, mean_b) = (c["mean_a"].as_f64().unwrap(), c["mean_b"].as_f64().unwrap());
    assert!((mean_a - pass_at_1).abs() < 1e-12);
    assert!((mean_b - run2["pass_at_1"].as_f64().unwrap()).abs() < 1e-12);
    let d = &c["difference"];
    let diff = d["diff"].as_f64().unwrap();
    assert!((diff - (mean_b - mean_a)).abs() < 1e-12);
    assert!(
        d["low"].as_f64().unwrap() <= diff && diff <= d["high"].as_f64().unwrap(),
        "{d}"
    );
    assert_eq!(
        (d["resamples"].as_u64(), d["seed"].as_u64()),
        (Some(10_000), Some(14))
    );
    // Largest differences first; the problems named as differing most do.
    let rows = c["problems"].as_array().unwrap();
    assert_eq!(rows.len(), 20);
    let gap = |r: &Value| (r[2].as_f64().unwrap() - r[1].as_f64().unwrap()).abs();
    assert!(rows.windows(2).all(|w| gap(&w[0]) >= gap(&w[1])));
    let most = compared["differ_most"].as_array().unwrap();
    assert!(!most.is_empty() && most.len() <= 5);
    assert_eq!(most[0], rows[0][0]);
    // Completions read from files have no draw figures: unknown, not zero.
    assert_eq!(compared["a"]["draw"]["output_tokens"], Value::Null);
    // Issue 30: the chart names every problem, in the table's order, and
    // says how many problems share each point of the scatter.
    let texts = svg_texts(&std::fs::read_to_string(&svg).unwrap());
    let y_of = |name: &Value| {
        let at: Vec<f64> = texts
            .iter()
            .filter(|(_, t)| Some(t.as_str()) == name.as_str())
            .map(|(y, _)| *y)
            .collect();
        assert_eq!(at.len(), 1, "{name}: {texts:?}");
        at[0]
    };
    let ys: Vec<f64> = rows.iter().map(|r| y_of(&r[0])).collect();
    assert!(ys.windows(2).all(|w| w[0] < w[1]), "{ys:?}");
    let mut points: Vec<((String, String), usize)> = Vec::new();
    for r in rows {
        let point = (r[1].to_string(), r[2].to_string());
        match points.iter_mut().find(|(p, _)| *p == point) {
            Some((_, n)) => *n += 1,
            None => points.push((point, 1)),
        }
    }
    assert!(points.len() < rows.len(), "the fixture has shared points");
    for (point, n) in &points {
        let count = n.to_string();
        assert!(texts.iter().any(|(_, t)| *t == count), "{point:?} x{n}");
    }
    assert!(texts.iter().all(|(_, t)| t != "-0.0"), "{texts:?}");
    let text = s.assay_ok(&["suite", "compare", "1", "2"]);
    assert!(text.contains("95% interval ["), "{text}");
    assert!(text.contains("differ most: "), "{text}");
}

#[test]
fn a_killed_suite_is_finished_by_resume() {
    let f = load();
    let s = Scratch::new();
    let held = s.start_at("pause@suite.outcome#10", &FixtureSuite::new().run(&[]));
    held.kill9();
    let kept: i64 = s.sql(async |db| {
        sqlx::query_scalar("SELECT COUNT(*) FROM suite_outcomes")
            .fetch_one(db)
            .await
            .unwrap()
    });
    assert!(
        (10..40).contains(&kept),
        "{kept} outcomes stored before the kill"
    );
    // The next command finds the owner dead.
    let shown = s.json(&["suite", "show", "1", "--json"]);
    assert_eq!(shown["status"], "interrupted", "{shown}");
    assert_eq!(shown["pending"].as_i64(), Some(40 - kept));

    // Outcomes are inserted, never replaced: a resume that redid a stored
    // one would fail on its primary key.
    let resumed = s.json(&["suite", "run", "--resume", "1", "--json"]);
    assert_eq!(resumed["status"], "finished", "{resumed}");
    assert_eq!(resumed["pending"], 0);
    assert_eq!(statuses_of(&resumed, "statuses"), assay_expected(&f));
    let again = s.assay(&["suite", "run", "--resume", "1"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("nothing to resume"));
}

#[test]
fn bad_suite_input_is_one_line_exit_2_and_nothing_stored() {
    let s = Scratch::new();
    let problems = fixture().join("problems.jsonl");
    let text = std::fs::read_to_string(&problems).unwrap();
    let bad_problems = s.path().join("bad.jsonl");
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines[2] = lines[2].replace("\"stop_tokens\": [\"\\n}\"]", "\"stop_tokens\": \"\\n}\"");
    std::fs::write(&bad_problems, lines.join("\n")).unwrap();
    let unknown = s.path().join("unknown.jsonl");
    std::fs::write(
        &unknown,
        "{\"name\": \"fx_add_two\", \"completion\": \"a + b\\n}\"}\n{\"name\": \"fx_nope\", \"completion\": \"\"}\n",
    )
    .unwrap();
    let completions = arg(fixture().join("completions.jsonl"));
    let cases: [(Vec<String>, String); 4] = [
        (
            vec![
                arg(problems.clone()),
                "--completions".into(),
                completions.clone(),
                "--queue".into(),
                "--chunk".into(),
                "0".into(),
            ],
            "error: --chunk: at least 1 problem".into(),
        ),
        (
            vec![
                arg(bad_problems.clone()),
                "--completions".into(),
                completions.clone(),
            ],
            format!(
                "error: {}:3: `stop_tokens`: is not a list of strings",
                bad_problems.display()
            ),
        ),
        (
            vec![
                arg(problems.clone()),
                "--completions".into(),
                arg(unknown.clone()),
            ],
            format!(
                "error: {}:2: `name`: `fx_nope` is not a problem of the set",
                unknown.display()
            ),
        ),
        (
            vec![
                arg(problems.clone()),
                "--completions".into(),
                arg(s.path().join("missing.jsonl")),
            ],
            format!(
                "error: {}: cannot read: ",
                s.path().join("missing.jsonl").display()
            ),
        ),
    ];
    let one = s.path().join("one.jsonl");
    std::fs::write(
        &one,
        "{\"name\": \"fx_add_two\", \"completion\": \"    a + b\\n}\"}\n",
    )
    .unwrap();
    for (args, want) in &cases {
        let mut all = vec!["suite".to_owned(), "run".to_owned()];
        all.extend(args.iter().cloned());
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let out = s.assay(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with(want.as_str()), "{stderr}\nwanted {want}");
    }
    // A problem without a completion: its line and name.
    let out = s.assay(&[
        "suite",
        "run",
        &arg(problems.clone()),
        "--completions",
        &arg(one),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        format!(
            "error: {}:2: `name`: problem `fx_is_even` has no completion in {}",
            problems.display(),
            s.path().join("one.jsonl").display()
        )
    );
    assert!(!s.db().exists(), "bad input created the database");
    // Reading commands name the suite that is not there.
    s.create_empty_db();
    let out = s.assay(&["suite", "show", "7"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no suite 7"));
    let out = s.assay(&["suite", "compare", "1", "2"]);
    assert_eq!(out.status.code(), Some(2));
}

// ---------------------------------------------------------------------------
// A live draw from a real llama.cpp server (tests/common/llama.rs): a GBNF
// grammar in the pool's `extra_body` forces the tiny model to write the text
// the test chooses, so both modes see real engine replies.

#[test]
fn a_live_draw_in_completion_and_chat_mode() {
    let server = llama::shared();
    let s = Scratch::new();
    let problems = s.path().join("problems.jsonl");
    std::fs::write(&problems, llama::LIVE_PROBLEMS).unwrap();
    let completion_pools = s.path().join("completion.toml");
    std::fs::write(
        &completion_pools,
        llama::forced_pool(&server.url(), "    x + 1\n}\n"),
    )
    .unwrap();
    let chat_pools = s.path().join("chat.toml");
    std::fs::write(
        &chat_pools,
        llama::forced_pool(
            &server.url(),
            "```rust\nfn inc(x: i32) -> i32 {\n    x + 1\n}\n```\n",
        ),
    )
    .unwrap();
    let draw = |mode: &str, pools: &Path| {
        s.json(&[
            "suite",
            "run",
            &arg(problems.clone()),
            "--pool",
            "tiny",
            "-n",
            "2",
            "--mode",
            mode,
            "--pools",
            &arg(pools.to_path_buf()),
            "--json",
        ])
    };

    // Completion mode: `/v1/completions` with the stop tokens; the same
    // text twice is one program per problem.
    let completion = draw("completion", &completion_pools);
    assert_eq!(completion["status"], "finished", "{completion}");
    assert_eq!(
        (completion["origin"].as_str(), completion["source"].as_str()),
        (Some("pool"), Some("tiny"))
    );
    assert_eq!(
        (
            completion["completions"].as_u64(),
            completion["programs"].as_u64()
        ),
        (Some(4), Some(2))
    );
    assert_eq!(
        json::statuses(&completion),
        [["OK", "OK"], ["Exception", "Exception"]]
    );
    let exported = s.json(&["suite", "export", "1", "--format", "json"]);
    let first = &exported["completions"][0];
    assert!(
        first["completion_text"]
            .as_str()
            .unwrap()
            .starts_with("    x + 1"),
        "{first}"
    );

    // Chat mode: the reply's fence is the program's function; `dec`'s tests
    // call a function the reply does not define.
    let chat = draw("chat", &chat_pools);
    assert_eq!(
        json::statuses(&chat),
        [["OK", "OK"], ["SyntaxError", "SyntaxError"]]
    );
    let tokens = chat["draw"]["output_tokens"].as_u64();
    assert!(
        tokens.is_some_and(|t| t > 0),
        "tokens from the server's usage: {chat}"
    );
    assert!(
        chat["draw"]["completions_per_s"].as_f64().is_some(),
        "{chat}"
    );
    assert_eq!(chat["draw"]["solved_problems"], 1);

    let compared = s.json(&["suite", "compare", "1", "2", "--json"]);
    assert_eq!(
        compared["comparison"]["difference"]["diff"].as_f64(),
        Some(0.0)
    );
    assert!(compared["b"]["draw"]["mean_ttft_ms"].as_f64().is_some());
}

/// A chat reply that defines `inc`: `live_inc` passes, `live_dec` does not
/// compile (its tests call `dec`).
const CHAT_INC: &str = "Sure:\n```rust\nfn inc(x: i32) -> i32 {\n    x + 1\n}\n```\n";

#[test]
fn a_live_draw_splits_retries_races_and_resumes_after_a_kill() {
    use assay_gateway::{Config, Dialect, Fault, Gateway, Model, Recorded};
    let reply = Recorded {
        content: CHAT_INC.into(),
        reasoning: None,
    };
    let gw = Gateway::start_on_thread(
        Config::new()
            .model(
                "fast",
                Model::new(
                    Dialect::Vllm {
                        tokens_per_chunk: 4,
                    },
                    vec![reply.clone()],
                ),
            )
            .model(
                "flaky",
                Model::new(Dialect::LlamaCpp, vec![reply]).fault(
                    Fault::ServerError {
                        body: "{\"error\": {\"message\": \"overloaded\"}}".into(),
                    },
                    2,
                ),
            ),
    )
    .unwrap();
    let s = Scratch::new();
    let problems = s.path().join("problems.jsonl");
    std::fs::write(&problems, llama::LIVE_PROBLEMS).unwrap();
    let pools = s.path().join("pools.toml");
    let pool = |name: &str| {
        format!(
            "[pools.{name}]\nbase_url = \"{}\"\nmodel = \"{name}\"\nmax_in_flight = 2\n\
             sampling = {{ temperature = 0.2 }}\n",
            gw.base_url()
        )
    };
    std::fs::write(&pools, pool("fast") + &pool("flaky")).unwrap();
    let problems = arg(problems);
    let pools = arg(pools);
    let statuses = |run: &Value| -> Vec<Value> {
        run["problems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["statuses"].clone())
            .collect()
    };
    let want = [
        serde_json::json!(["OK", "OK", "OK"]),
        serde_json::json!(["SyntaxError", "SyntaxError", "SyntaxError"]),
    ];

    // Fixed shares (1:2 of each problem's three), one pool answering its
    // first two requests with a server error: the draw retries them, every
    // attempt is stored, and every reply arrives.
    let shared = s.json(&[
        "suite", "run", &problems, "--pool", "fast=1", "--pool", "flaky=2", "-n", "3", "--pools",
        &pools, "--json",
    ]);
    assert_eq!(shared["source"], "fast+flaky", "{shared}");
    assert_eq!(
        (shared["completions"].as_u64(), shared["programs"].as_u64()),
        (Some(6), Some(2))
    );
    assert_eq!(statuses(&shared), want);
    let exported = s.json(&["suite", "export", "1", "--format", "json"]);
    let pools_of: Vec<&str> = exported["completions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["pool"].as_str().unwrap())
        .collect();
    assert_eq!(
        pools_of.iter().filter(|p| **p == "fast").count(),
        2,
        "{pools_of:?}"
    );
    assert_eq!(
        pools_of.iter().filter(|p| **p == "flaky").count(),
        4,
        "{pools_of:?}"
    );
    let failed_attempts: i64 = s.sql(async |db| {
        sqlx::query_scalar("SELECT COUNT(*) FROM draw_attempts WHERE outcome = 'http_error(500)'")
            .fetch_one(db)
            .await
            .unwrap()
    });
    assert_eq!(failed_attempts, 2, "both server errors are stored attempts");

    // A race of both pools, killed with two replies stored: the resume
    // needs the pools again, draws only the four missing replies, and
    // finishes.
    let held = s.start_at(
        "pause@suite.reply#2",
        &[
            "suite", "run", &problems, "--pool", "fast", "--pool", "flaky", "--split", "race",
            "-n", "3", "--pools", &pools,
        ],
    );
    held.kill9();
    let refused = s.assay(&["suite", "run", "--resume", "2"]);
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("lacks 4 completions"), "{stderr}");
    let resumed = s.json(&[
        "suite", "run", "--resume", "2", "--pool", "fast", "--pool", "flaky", "--split", "race",
        "--pools", &pools, "--json",
    ]);
    assert_eq!(resumed["source"], "race(fast+flaky)");
    assert_eq!(resumed["status"], "finished", "{resumed}");
    assert_eq!(resumed["completions"], 6);
    assert_eq!(statuses(&resumed), want);
    // Each problem's replies are 0, 1 and 2, each stored once (a reply
    // asked again would fail on the replies' primary key).
    assert_eq!(resumed["problems"][0]["n"], 3);
    assert_eq!(resumed["problems"][1]["n"], 3);
}

/// A request the server fails inside its stream (llama.cpp's error event
/// after a few tokens) is the server's failure: stored with its sentence,
/// left out of each problem's n and of pass@k, never `SyntaxError`.
#[test]
fn a_servers_error_inside_the_stream_is_no_completion_of_the_model() {
    use assay_gateway::{Config, Dialect, Fault, Gateway, Model, Recorded};
    let reply = Recorded {
        content: CHAT_INC.into(),
        reasoning: None,
    };
    let broken = Fault::StreamError {
        after_tokens: 2,
        event: r#"{"error":{"code":500,"message":"The model produced output that does not match the expected peg-native format","type":"server_error"}}"#.into(),
    };
    let gw = Gateway::start_on_thread(
        Config::new()
            .model("fast", Model::new(Dialect::LlamaCpp, vec![reply.clone()]))
            .model(
                "broken",
                Model::new(Dialect::LlamaCpp, vec![reply]).fault(broken, usize::MAX),
            ),
    )
    .unwrap();
    let s = Scratch::new();
    let problems = s.path().join("problems.jsonl");
    std::fs::write(&problems, llama::LIVE_PROBLEMS).unwrap();
    let pools = s.path().join("pools.toml");
    let pool = |name: &str| {
        format!(
            "[pools.{name}]\nbase_url = \"{}\"\nmodel = \"{name}\"\nmax_attempts = 2\n",
            gw.base_url()
        )
    };
    std::fs::write(&pools, pool("fast") + &pool("broken")).unwrap();
    let run = s.json(&[
        "suite",
        "run",
        &arg(problems),
        "--pool",
        "fast=1",
        "--pool",
        "broken=1",
        "-n",
        "2",
        "--pools",
        &arg(pools),
        "--json",
    ]);
    assert_eq!(run["status"], "finished", "{run}");
    assert_eq!(run["completions"], 4);
    assert_eq!(run["server_errors"], 2, "{run}");
    assert_eq!(run["pending"], 0, "{run}");
    assert_eq!(json::statuses(&run), [["OK"], ["SyntaxError"]]);
    assert_eq!(
        (
            run["problems"][0]["n"].as_u64(),
            run["problems"][1]["n"].as_u64()
        ),
        (Some(1), Some(1))
    );
    assert_eq!(run["pass_at_1"].as_f64(), Some(0.5), "{run}");

    let stored: Vec<(String, Option<String>)> = s.sql(async |db| {
        sqlx::query_as(
            "SELECT outcome, error_message FROM replies WHERE pool = 'broken' ORDER BY batch_id",
        )
        .fetch_all(db)
        .await
        .unwrap()
    });
    let format = "The model produced output that does not match the expected peg-native format";
    assert_eq!(
        stored,
        vec![("stream_error(500)".to_owned(), Some(format.to_owned())); 2]
    );
    let outcomes: i64 = s.sql(async |db| {
        sqlx::query_scalar("SELECT COUNT(*) FROM suite_outcomes")
            .fetch_one(db)
            .await
            .unwrap()
    });
    assert_eq!(outcomes, 2, "the server's failures get no status");
    let shown = s.assay(&["suite", "show", "1"]);
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(
        text.contains("server errors: 2 requests got no reply from the server"),
        "{text}"
    );
}

/// Issue 36: `suite show --errors` prints the text of each error file the
/// run wrote, from the store: the same texts once the files are gone.
fn errors_come_from_the_store(s: &Scratch) {
    let mut files = Vec::new();
    let mut dirs = vec![s.path().to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if dir.file_name().is_some_and(|n| n == "errors") {
                files.push(std::fs::read_to_string(&path).unwrap());
                std::fs::remove_file(&path).unwrap();
            }
        }
    }
    assert!(
        !files.is_empty(),
        "the fixture has programs that do not build"
    );
    let units = s.json(&["suite", "show", "1", "--errors", "--json"]);
    let mut stored: Vec<String> = units
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            format!(
                "{}: {}\n\n{}",
                u["unit"].as_str().unwrap(),
                u["verdict"].as_str().unwrap(),
                u["diagnostics"].as_str().unwrap()
            )
        })
        .collect();
    files.sort();
    stored.sort();
    assert_eq!(stored, files);
    // One problem's only, by name; a name the suite does not hold is refused.
    let name = units[0]["unit"]
        .as_str()
        .unwrap()
        .split(" #")
        .next()
        .unwrap();
    let text = s.assay_ok(&["suite", "show", "1", "--errors", name]);
    assert!(text.starts_with(&format!("{name} #")), "{text}");
    let out = s.assay(&["suite", "show", "1", "--errors", "no_such_problem"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("suite 1 has no problem `no_such_problem`")
    );
}
