//! Issue 38.3: `suite run --edition`. MultiPL-E builds each program with a
//! plain `rustc`, edition 2015; assay's default is 2021. Programs whose
//! status depends on the edition (`try_into` outside the 2015 and 2018
//! preludes, `dyn` as a name, 2015's crate-root paths, which inside a
//! shared image's module must still name the program's own items) get, in
//! each edition, the status the reference method gives in that edition;
//! the edition is stored, shown, kept by `--build isolated` and by a
//! resume, and `suite compare` says when two runs differ in it.

use crate::common::Scratch;
use crate::multiple_ref;

use assay::suite::{completion_program, load_problems, Problem, Status};
use serde_json::{json, Value};

const TESTS_MAIN: &str = "}\n\nfn main() {\n    let candidate = f;\n";

/// (problem name, prompt, tests, completions).
fn fixture() -> Vec<(&'static str, String, String, Vec<&'static str>)> {
    let tests = |asserts: &str| format!("{TESTS_MAIN}{asserts}}}\n");
    vec![
        (
            "narrow",
            "fn f(x: i64) -> i32 {\n".into(),
            tests("    assert_eq!(candidate(7), 7);\n"),
            // `TryInto` is in the prelude from 2021 on.
            vec!["    x.try_into().unwrap()"],
        ),
        (
            "dyn_name",
            "fn f(x: i64) -> i64 {\n".into(),
            tests("    assert_eq!(candidate(7), 8);\n"),
            // `dyn` and `async` are keywords from 2018 on.
            vec!["    let dyn = x + 1;\n    let async = 0;\n    dyn + async"],
        ),
        (
            "root_paths",
            "fn f(x: i64) -> i64 {\n".into(),
            tests("    assert_eq!(candidate(9), 1);\n    assert_eq!(candidate(1), 0);\n"),
            vec![
                // The completion closes the entry and goes on at the top
                // level: a `use` of its own enum, which in 2015 starts at
                // the crate root, the program's top level. Every edition.
                "    helper(x) }\nuse Kind::*;\nenum Kind { Big, Small }\nfn helper(x: i64) -> i64 {\n    \
                 match if x > 5 { Big } else { Small } { Big => 1, Small => 0 }",
                // `::Kind` is the crate root's in 2015, an extern crate's
                // from 2018 on.
                "    helper(x) }\nenum Kind { Big, Small }\nfn helper(x: i64) -> i64 {\n    \
                 match if x > 5 { ::Kind::Big } else { ::Kind::Small } { ::Kind::Big => 1, _ => 0 }",
            ],
        ),
    ]
}

/// Each completion's status, in input order, per edition.
const EXPECTED: [(&str, [Status; 4]); 4] = {
    use Status::{Ok, SyntaxError as Err};
    [
        ("2015", [Err, Ok, Ok, Ok]),
        ("2018", [Err, Err, Ok, Err]),
        ("2021", [Ok, Err, Ok, Err]),
        ("2024", [Ok, Err, Ok, Err]),
    ]
};

/// Writes the problems and completions; returns their paths and the
/// programs as MultiPL-E builds them, in input order.
fn write_suite(s: &Scratch) -> (String, String, Vec<String>) {
    let mut problems = String::new();
    let mut completions = String::new();
    for (name, prompt, tests, cs) in fixture() {
        let line = json!({"name": name, "language": "rs", "prompt": prompt, "tests": tests,
                          "stop_tokens": ["\n}"]});
        problems.push_str(&format!("{line}\n"));
        for c in cs {
            completions.push_str(&format!("{}\n", json!({"name": name, "completion": c})));
        }
    }
    let problems = s.write("problems.jsonl", &problems);
    let completions = s.write("completions.jsonl", &completions);
    let loaded: Vec<Problem> = load_problems(&problems).unwrap();
    let programs = problems_and_completions()
        .map(|(p, c)| completion_program(&loaded[p], c))
        .collect();
    (
        problems.display().to_string(),
        completions.display().to_string(),
        programs,
    )
}

/// (problem's index, completion) in input order.
fn problems_and_completions() -> impl Iterator<Item = (usize, &'static str)> {
    fixture()
        .into_iter()
        .enumerate()
        .flat_map(|(p, (_, _, _, cs))| cs.into_iter().map(move |c| (p, c)))
}

fn statuses(report: &Value) -> Vec<Status> {
    report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["statuses"].as_array().unwrap().clone())
        .map(|s| s.as_str().unwrap().parse().unwrap())
        .collect()
}

#[test]
fn issue_38_3_each_edition_reads_its_programs_as_the_reference_does() {
    let s = Scratch::new();
    let (problems, completions, programs) = write_suite(&s);
    // The expectations are the reference method's, edition for edition.
    for (edition, want) in EXPECTED {
        let reference: Vec<Status> = programs
            .iter()
            .map(|p| multiple_ref::evaluate_in(p, s.path(), edition))
            .collect();
        assert_eq!(reference, want, "the reference method in {edition}");
    }

    let run = |extra: &[&str]| {
        let mut args = vec!["suite", "run", &problems, "--completions", &completions];
        args.extend_from_slice(extra);
        args.push("--json");
        s.json(&args)
    };
    for (suite, (edition, want)) in (1..).zip(EXPECTED) {
        let report = run(&["--edition", edition]);
        assert_eq!(report["suite_id"], suite);
        assert_eq!(report["status"], "finished", "{report}");
        assert_eq!(report["edition"], edition, "{report}");
        assert_eq!(statuses(&report), want, "{edition}: {report}");
    }
    // The default is 2021, as before editions were a flag.
    let default = run(&[]);
    assert_eq!(default["edition"], "2021");
    assert_eq!(statuses(&default), EXPECTED[2].1);
    // Every program is its own image: the same reading.
    let isolated = run(&["--edition", "2015", "--build", "isolated"]);
    assert_eq!(statuses(&isolated), EXPECTED[0].1, "{isolated}");

    // Stored and shown.
    let shown = s.assay_ok(&["suite", "show", "1"]);
    assert!(
        shown
            .lines()
            .next()
            .unwrap()
            .ends_with("completion mode, edition 2015"),
        "{shown}"
    );
    assert_eq!(s.json(&["suite", "show", "2", "--json"])["edition"], "2018");
    let doc = std::fs::read_to_string(crate::common::repo().join("docs/suites.md")).unwrap();
    assert!(
        doc.contains("`edition`"),
        "docs/suites.md documents `edition`"
    );

    // compare says so when the editions differ, and only then.
    let differ = s.assay_ok(&["suite", "compare", "1", "3"]);
    assert!(
        differ.contains("editions differ: suite 1 was built as edition 2015, suite 3 as 2021"),
        "{differ}"
    );
    let same = s.assay_ok(&["suite", "compare", "3", "5"]);
    assert!(!same.contains("editions differ"), "{same}");
    let json = s.json(&["suite", "compare", "1", "3", "--json"]);
    assert_eq!(
        (&json["a"]["edition"], &json["b"]["edition"]),
        (&json!("2015"), &json!("2021"))
    );
}

#[test]
fn issue_38_3_a_resumed_suite_keeps_its_edition() {
    let s = Scratch::new();
    let (problems, completions, _) = write_suite(&s);
    let held = s.start_at(
        "pause@suite.outcome#1",
        &[
            "suite",
            "run",
            &problems,
            "--completions",
            &completions,
            "--edition",
            "2015",
        ],
    );
    held.kill9();
    let shown = s.json(&["suite", "show", "1", "--json"]);
    assert_eq!(shown["status"], "interrupted", "{shown}");
    assert_eq!(shown["edition"], "2015");
    assert!(shown["pending"].as_i64().unwrap() > 0, "{shown}");

    // A resume names no edition: it is the suite's.
    let refused = s.assay(&["suite", "run", "--resume", "1", "--edition", "2021"]);
    assert_eq!(refused.status.code(), Some(2));
    let resumed = s.json(&["suite", "run", "--resume", "1", "--json"]);
    assert_eq!(resumed["status"], "finished", "{resumed}");
    assert_eq!(resumed["edition"], "2015");
    assert_eq!(statuses(&resumed), EXPECTED[0].1, "{resumed}");
}
