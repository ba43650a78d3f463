//! Repair rounds (issue 28): a round's failures go back to the pools as
//! the next round's prompts.
//!
//! One repair for both kinds: the settings and the one stop rule
//! (`settings.rs`), a task's next round planned from what the store holds
//! (`planner.rs`), the flags resolved before a run starts (`setup.rs`).
//! The rest is pure, no IO: what the store holds of a round comes in (its
//! rows, read by the caller) and is seen as [`Attempt`]s; prompts and
//! figures go out.
//!
//! - `parents.rs`: which failing candidates are repaired next, and how a
//!   round's candidates are spread over them.
//! - `feedback.rs`: what a prompt says of a parent: its first compiler
//!   errors (capped), how its run ended, its failed *visible* cases.
//! - `prompt.rs`: the template filled in.
//! - `budget.rs`: output tokens spent against `--max-tokens`, and the
//!   equal-budget comparison of runs.
//! - `chart.rs`: that comparison as an SVG chart.
//! - `rounds.rs`: a batch's stored rows as attempts, and each round's
//!   figures.
//! - `suite/`: a suite program's feedback (compiler errors, or the failed
//!   assert's line and panic; `errors_only`: no test text) and its prompt
//!   (`mod.rs`), and a suite's rounds as figures, pass@1 after each
//!   (`rounds.rs`). A task's are `feedback.rs` and `rounds.rs`.
//!
//! Invariant: hidden cases never reach a prompt. The only case text this
//! module is ever given is [`ShownCase`]s, which [`ShownCase::visible`]
//! makes from the spec's visible cases alone; a parent's hidden cases are
//! known here only as counts of outcomes.

mod budget;
mod chart;
mod feedback;
mod parents;
pub mod planner;
mod prompt;
mod rounds;
pub mod settings;
pub mod setup;
mod suite;

use std::collections::BTreeMap;

use crate::score::CaseOutcome;
use crate::spec::Spec;

pub use budget::{best_within, Budget, BudgetRow, BudgetTable, Curve, CurvePoint, RunCurve, Spent};
pub use chart::budget_svg;
pub use feedback::{compiler_errors, Feedback};
pub use parents::{choose_parents, spread, Parent};
pub use prompt::{fill, repair_prompt, PromptContext};
pub use rounds::{attempts, RoundFigures, RoundsTable};
pub use settings::{stop_rule, Next, RepairFlags, RepairSettings, Stopped};
pub use suite::rounds::{
    of_problem, pass_at_1_after, suite_round_figures, SuiteRoundFigures, SuiteRounds,
};
pub use suite::{
    panic_message, solution_of, suite_repair_prompt, FailedAssert, ProgramState, KEPT_MESSAGE_CHARS,
};

/// One stored candidate of a batch as repair sees it: a representative of
/// its dedup group, with code.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    pub idx: usize,
    /// 0 for the first draw, r for the r-th repair round.
    pub round: u32,
    pub source: String,
    pub state: AttemptState,
}

/// How far an attempt got.
#[derive(Debug, Clone, PartialEq)]
pub enum AttemptState {
    /// It did not build: refused by the policy, a compile error, a compile
    /// stopped at its limit, or a scoring image that did not build.
    /// `verdict` is the stored verdict's string, `diagnostics` what rustc
    /// (or the policy) said.
    Broken {
        verdict: String,
        diagnostics: String,
    },
    /// It built and ran: the run's verdict string, each case's outcome in
    /// file order, and the outputs kept of its failed visible cases, by
    /// case position.
    Ran {
        verdict: String,
        cases: Vec<CaseOutcome>,
        outputs: BTreeMap<usize, String>,
    },
    /// Nothing repair can use: a probe that failed on the host's account,
    /// a candidate not yet scored.
    Other,
}

/// A case a model may be shown: only the spec's visible cases become one.
#[derive(Debug, Clone, PartialEq)]
pub struct ShownCase {
    /// Its position in the cases file (0-based, non-blank lines).
    pub pos: usize,
    pub name: Option<String>,
    /// The case's `input` and `expected` fields, as compact JSON, when the
    /// line has them; otherwise the whole line (`name` removed) as `case`.
    pub fields: Vec<(String, String)>,
}

impl ShownCase {
    /// The spec's visible cases, in file order. Hidden lines are skipped
    /// without being parsed or copied.
    pub fn visible(spec: &Spec) -> Vec<ShownCase> {
        let visible = &spec.repair.visible;
        spec.cases
            .text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .enumerate()
            .filter(|(pos, _)| visible.contains(*pos))
            .map(|(pos, line)| ShownCase::of_line(pos, line))
            .collect()
    }

    fn of_line(pos: usize, line: &str) -> ShownCase {
        // Lines are known to be JSON objects once the spec loaded.
        let mut object = match serde_json::from_str::<serde_json::Value>(line) {
            Ok(serde_json::Value::Object(o)) => o,
            _ => serde_json::Map::new(),
        };
        let name = match object.remove("name") {
            Some(serde_json::Value::String(s)) => Some(s),
            _ => None,
        };
        let fields = match (object.get("input"), object.get("expected")) {
            (Some(input), Some(expected)) => vec![
                ("input".to_owned(), input.to_string()),
                ("expected".to_owned(), expected.to_string()),
            ],
            _ => vec![(
                "case".to_owned(),
                serde_json::Value::Object(object).to_string(),
            )],
        };
        ShownCase { pos, name, fields }
    }
}

impl Attempt {
    /// Cases passed, for a run; `None` for anything else.
    pub fn passed(&self) -> Option<usize> {
        match &self.state {
            AttemptState::Ran { cases, .. } => {
                Some(cases.iter().filter(|c| **c == CaseOutcome::Pass).count())
            }
            _ => None,
        }
    }

    /// Passed every case.
    pub fn passes_all(&self) -> bool {
        match &self.state {
            AttemptState::Ran { cases, .. } => {
                !cases.is_empty() && cases.iter().all(|c| *c == CaseOutcome::Pass)
            }
            _ => false,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn ran(idx: usize, letters: &str) -> Attempt {
        Attempt {
            idx,
            round: 0,
            source: format!("fn f() -> u32 {{ {idx} }}"),
            state: AttemptState::Ran {
                verdict: "scored".into(),
                cases: crate::score::parse_case_letters(letters).unwrap(),
                outputs: BTreeMap::new(),
            },
        }
    }

    pub(crate) fn broken(idx: usize, errors: usize) -> Attempt {
        let diagnostics = (0..errors)
            .map(|i| format!("error[E0308]: mismatched types {i}\n --> cands/c{idx}.rs:1:1\n\n"))
            .collect::<String>();
        Attempt {
            idx,
            round: 0,
            source: format!("fn f() -> u32 {{ \"{idx}\" }}"),
            state: AttemptState::Broken {
                verdict: "compile_error(E0308)".into(),
                diagnostics,
            },
        }
    }

    #[test]
    fn shown_cases_split_input_and_expected_or_keep_the_line() {
        let case = ShownCase::of_line(3, r#"{"name": "a", "input": [1, 2], "expected": {"x": 1}}"#);
        assert_eq!(case.name.as_deref(), Some("a"));
        assert_eq!(
            case.fields,
            [
                ("input".to_owned(), "[1,2]".to_owned()),
                ("expected".to_owned(), "{\"x\":1}".to_owned())
            ]
        );
        let case = ShownCase::of_line(0, r#"{"name": "b", "left": 1, "want": 2}"#);
        assert_eq!(
            case.fields,
            [("case".to_owned(), "{\"left\":1,\"want\":2}".to_owned())]
        );
    }

    #[test]
    fn only_visible_cases_are_shown() {
        let dir = crate::spec::tests::task_dir();
        std::fs::write(
            dir.path().join("cases.jsonl"),
            "{\"name\":\"one\",\"input\":1,\"expected\":1}\n\n{\"name\":\"two\",\"input\":2,\"expected\":4}\n{\"name\":\"three\",\"input\":3,\"expected\":9}\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("spec.toml"),
            format!(
                "{}\n[repair]\nvisible = [\"three\", \"one\"]\n",
                crate::spec::tests::GOOD
            ),
        )
        .unwrap();
        let spec = Spec::load(dir.path()).unwrap();
        let shown = ShownCase::visible(&spec);
        let names: Vec<_> = shown.iter().map(|c| (c.pos, c.name.as_deref())).collect();
        assert_eq!(names, [(0, Some("one")), (2, Some("three"))]);
        assert!(!format!("{shown:?}").contains("two"));
    }
}
