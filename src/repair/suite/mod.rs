//! A suite program's repair feedback. A suite's oracle is its tests, which
//! a model sees in full mode: the failed assert's line and its panic
//! message go back, as Reflexion and LiveCodeBench's self-repair do (and
//! make later rounds' pass@1 optimistic, since the same asserts score).
//! `errors_only` sends no test text at all: compiler errors without their
//! source snippets (which may quote the tests), and how many asserts
//! failed.

pub(super) mod rounds;

use std::fmt::Write as _;

use super::feedback::{
    cap, compiler_errors, errors_section, errors_summary, failed_heading, Feedback,
};
use crate::spec::{Feedback as FeedbackMode, FeedbackLimits, Template};
use crate::suite::module::tests_part;
use crate::suite::{chat_prompt, split_cases, CaseEnd, CompletionOutcome, Problem, Split};

/// Characters of a panic's message kept with its run's outcome.
pub const KEPT_MESSAGE_CHARS: usize = 1000;

/// What a failed assert is called when the tests' `main` was not split.
const WHOLE_MAIN: &str = "fn main() (its asserts were run as one)";

/// What a suite completion's program came to, as repair sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgramState {
    /// It did not build: rustc's rendered words.
    Broken { diagnostics: String },
    /// It ran: how many asserts it has, and the ones that failed, in
    /// order.
    Ran {
        asserts: usize,
        failed: Vec<FailedAssert>,
    },
}

/// One failed assert: its source line and, where the run kept it, the
/// panic message it ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedAssert {
    pub text: String,
    /// How it ended (`failed(101)`, `timed_out`, ...).
    pub end: String,
    pub message: Option<String>,
}

impl ProgramState {
    /// What a suite completion's stored outcome says, for repair:
    /// `diagnostics` are rustc's words when it did not build, `messages`
    /// each case's panic message. `None`: nothing to repair, it passed.
    pub fn of_outcome(
        problem: &Problem,
        outcome: &CompletionOutcome,
        diagnostics: &str,
        messages: &[Option<String>],
    ) -> Option<ProgramState> {
        if outcome.status() == crate::suite::Status::Ok {
            return None;
        }
        Some(match outcome {
            CompletionOutcome::Ran { cases, .. } => {
                let texts: Vec<String> = match split_cases(tests_part(problem)).split {
                    Split::Cases { cases: split, .. } if split.len() == cases.len() => {
                        split.into_iter().map(|c| c.text).collect()
                    }
                    _ => vec![WHOLE_MAIN.to_owned(); cases.len()],
                };
                let failed = cases
                    .iter()
                    .enumerate()
                    .filter(|(_, end)| **end != CaseEnd::Passed)
                    .map(|(i, end)| FailedAssert {
                        text: texts[i].clone(),
                        end: end.to_string(),
                        message: messages.get(i).cloned().flatten(),
                    })
                    .collect();
                ProgramState::Ran {
                    asserts: cases.len(),
                    failed,
                }
            }
            // Built as it stands (syn could not read it) or not built:
            // rustc's words if it said any, else why assay would not run it.
            CompletionOutcome::Refused { .. } if diagnostics.trim().is_empty() => {
                ProgramState::Broken {
                    diagnostics: "error: the code does not parse as Rust, so its tests cannot be run apart from it\n".into(),
                }
            }
            _ => ProgramState::Broken {
                diagnostics: diagnostics.to_owned(),
            },
        })
    }
}

/// The repair prompt of a suite completion: the default template with the
/// problem's chat prompt, the completion's own code (never the tests) and
/// what went wrong with it.
pub fn suite_repair_prompt(
    problem: &Problem,
    solution: &str,
    state: &ProgramState,
    mode: FeedbackMode,
) -> String {
    let feedback = Feedback::of_program(state, mode, FeedbackLimits::default());
    super::fill(
        &Template::default(),
        &chat_prompt(problem),
        solution,
        &feedback,
    )
}

/// The code a model wrote in a suite program (the prompt and its
/// completion, or a chat reply's code): the program without the problem's
/// tests. `None` when the program does not end with them.
pub fn solution_of<'a>(problem: &Problem, program: &'a str) -> Option<&'a str> {
    program.strip_suffix(tests_part(problem))
}

/// The message a panic left on a run's stderr: the lines after its
/// `panicked at` line, without Rust's note on backtraces, capped. `None`
/// when the run did not panic (a signal, a timeout) or said nothing.
pub fn panic_message(stderr: &str) -> Option<String> {
    let at = stderr.rfind("panicked at")?;
    let rest = stderr[at..].split_once('\n').map_or("", |(_, r)| r);
    let message: Vec<&str> = rest
        .lines()
        .take_while(|l| {
            !l.starts_with("note: run with `RUST_BACKTRACE") && !l.starts_with("stack backtrace:")
        })
        .collect();
    let message = message.join("\n");
    let message = message.trim();
    (!message.is_empty()).then(|| cap(message, KEPT_MESSAGE_CHARS))
}

impl Feedback {
    /// The feedback on a suite program.
    pub fn of_program(
        state: &ProgramState,
        mode: FeedbackMode,
        limits: FeedbackLimits,
    ) -> Feedback {
        match state {
            ProgramState::Broken { diagnostics } => {
                let errors = compiler_errors(diagnostics);
                let shown: Vec<String> = errors
                    .iter()
                    .take(limits.errors)
                    .map(|e| match mode {
                        FeedbackMode::Full => (*e).to_owned(),
                        FeedbackMode::ErrorsOnly => without_snippets(e),
                    })
                    .collect();
                let shown: Vec<&str> = shown.iter().map(String::as_str).collect();
                Feedback {
                    summary: errors_summary(errors.len())
                        .unwrap_or_else(|| "It did not build.".to_owned()),
                    errors: if shown.is_empty() {
                        String::new()
                    } else {
                        errors_section(&shown, errors.len(), limits)
                    },
                    cases: String::new(),
                }
            }
            ProgramState::Ran { asserts, failed } => Feedback {
                summary: ran_summary(*asserts, failed.len(), mode),
                errors: String::new(),
                cases: match mode {
                    FeedbackMode::Full => failed_asserts(failed, limits),
                    FeedbackMode::ErrorsOnly => String::new(),
                },
            },
        }
    }
}

fn ran_summary(asserts: usize, failed: usize, mode: FeedbackMode) -> String {
    let mut line = if failed == 0 {
        "It compiled, but its tests did not pass.".to_owned()
    } else {
        format!("It compiled and failed {failed} of its {asserts} tests.")
    };
    if mode == FeedbackMode::ErrorsOnly {
        line.push_str(" The tests are not shown.");
    }
    line
}

fn failed_asserts(failed: &[FailedAssert], limits: FeedbackLimits) -> String {
    if failed.is_empty() || limits.cases == 0 {
        return String::new();
    }
    let shown = &failed[..failed.len().min(limits.cases)];
    let mut out = failed_heading("tests", shown.len(), failed.len());
    for a in shown {
        let _ = writeln!(
            out,
            "- `{}` ({})",
            cap(a.text.trim(), limits.case_chars),
            a.end
        );
        if let Some(message) = &a.message {
            let _ = writeln!(
                out,
                "  panicked: {}",
                cap(message.trim(), limits.case_chars)
            );
        }
    }
    out
}

/// An error message without rustc's source snippets (the gutter lines
/// `12 |     code`, which may quote the tests): its headline, location,
/// notes and help remain.
fn without_snippets(error: &str) -> String {
    error
        .lines()
        .filter(|line| {
            let t = line.trim_start();
            let gutter = t
                .trim_start_matches(|c: char| c.is_ascii_digit())
                .trim_start();
            !(gutter.starts_with('|') || t == "...")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const ERROR: &str = "error[E0308]: mismatched types\n  --> p.rs:9:26\n   |\n9  |     assert_eq!(candidate(vec![1, 2]), 3);\n   |                          ^^^^^^^^^^ expected `i64`, found `Vec<{integer}>`\n   |\n   = note: expected type `i64`\n\n";

    fn problem() -> Problem {
        Problem {
            name: "p".into(),
            prompt: "fn inc(x: i32) -> i32 {\n".into(),
            tests: "}\n\nfn main() {\n    let candidate = inc;\n    assert_eq!(candidate(1), 2);\n    assert_eq!(candidate(2), 3);\n}\n".into(),
            stop_tokens: vec!["\n}".into()],
        }
    }

    #[test]
    fn a_panic_s_message_is_its_lines_after_the_location() {
        let stderr = "noise\nthread 'main' panicked at cands/c3.tests.rs:9:5:\nassertion `left == right` failed\n  left: 5\n right: 4\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(
            panic_message(stderr).as_deref(),
            Some("assertion `left == right` failed\n  left: 5\n right: 4")
        );
        assert_eq!(panic_message("killed\n"), None);
        assert_eq!(panic_message("thread 'main' panicked at x.rs:1:1:\n"), None);
    }

    #[test]
    fn the_solution_is_the_program_without_its_tests_in_either_mode() {
        let p = problem();
        let completion = crate::suite::completion_program(&p, "    x + 1\n}");
        assert_eq!(
            solution_of(&p, &completion),
            Some("fn inc(x: i32) -> i32 {\n    x + 1\n}")
        );
        let chat = crate::suite::chat_program(&p, "fn inc(x: i32) -> i32 { x }");
        assert_eq!(
            solution_of(&p, &chat),
            Some("fn inc(x: i32) -> i32 { x }\n")
        );
        assert_eq!(solution_of(&p, "fn main() {}"), None);
    }

    #[test]
    fn a_stored_outcome_names_its_failed_asserts_and_their_messages() {
        let p = problem();
        let failed = CaseEnd::Failed { code: 101 };
        let outcome = CompletionOutcome::Ran {
            whole: failed,
            cases: vec![CaseEnd::Passed, failed],
        };
        let state =
            ProgramState::of_outcome(&p, &outcome, "", &[None, Some("boom".into())]).unwrap();
        assert_eq!(
            state,
            ProgramState::Ran {
                asserts: 2,
                failed: vec![FailedAssert {
                    text: "assert_eq!(candidate(2), 3);".into(),
                    end: "failed(101)".into(),
                    message: Some("boom".into()),
                }],
            }
        );
        let passed = CompletionOutcome::Ran {
            whole: CaseEnd::Passed,
            cases: vec![CaseEnd::Passed, CaseEnd::Passed],
        };
        assert_eq!(ProgramState::of_outcome(&p, &passed, "", &[]), None);
        assert_eq!(
            ProgramState::of_outcome(&p, &CompletionOutcome::CompileError, ERROR, &[]),
            Some(ProgramState::Broken {
                diagnostics: ERROR.into()
            })
        );
    }

    #[test]
    fn an_errors_only_prompt_holds_no_test_text() {
        let p = problem();
        let state = ProgramState::Ran {
            asserts: 2,
            failed: vec![FailedAssert {
                text: "assert_eq!(candidate(2), 3);".into(),
                end: "failed(101)".into(),
                message: Some("left: 2".into()),
            }],
        };
        let full = suite_repair_prompt(
            &p,
            "fn inc(x: i32) -> i32 { x }",
            &state,
            FeedbackMode::Full,
        );
        assert!(
            full.contains("assert_eq!(candidate(2), 3);") && full.contains("left: 2"),
            "{full}"
        );
        let bare = suite_repair_prompt(
            &p,
            "fn inc(x: i32) -> i32 { x }",
            &state,
            FeedbackMode::ErrorsOnly,
        );
        assert!(
            !bare.contains("assert") && !bare.contains("left: 2"),
            "{bare}"
        );
        assert!(
            bare.contains("failed 1 of its 2 tests. The tests are not shown."),
            "{bare}"
        );
    }

    #[test]
    fn errors_only_leaves_the_snippets_out() {
        let state = ProgramState::Broken {
            diagnostics: ERROR.into(),
        };
        let full = Feedback::of_program(&state, FeedbackMode::Full, FeedbackLimits::default());
        assert!(full.errors.contains("assert_eq!(candidate(vec![1, 2]), 3)"));
        let bare =
            Feedback::of_program(&state, FeedbackMode::ErrorsOnly, FeedbackLimits::default());
        assert_eq!(
            bare.errors,
            "\nThe compiler's errors:\n\n```text\nerror[E0308]: mismatched types\n  --> p.rs:9:26\n   = note: expected type `i64`\n```\n"
        );
        assert_eq!(bare.summary, "It did not compile: 1 error.");
    }

    #[test]
    fn failed_asserts_show_their_line_and_panic_in_full_mode_only() {
        let state = ProgramState::Ran {
            asserts: 3,
            failed: vec![FailedAssert {
                text: "    assert_eq!(candidate(2), 4);".into(),
                end: "failed(101)".into(),
                message: Some("assertion `left == right` failed\n  left: 5\n right: 4".into()),
            }],
        };
        let full = Feedback::of_program(&state, FeedbackMode::Full, FeedbackLimits::default());
        assert_eq!(full.summary, "It compiled and failed 1 of its 3 tests.");
        assert_eq!(
            full.cases,
            "\nThe failed tests:\n\n- `assert_eq!(candidate(2), 4);` (failed(101))\n  panicked: assertion `left == right` failed\n  left: 5\n right: 4\n"
        );
        let bare =
            Feedback::of_program(&state, FeedbackMode::ErrorsOnly, FeedbackLimits::default());
        assert_eq!(
            bare,
            Feedback {
                summary: "It compiled and failed 1 of its 3 tests. The tests are not shown.".into(),
                errors: String::new(),
                cases: String::new(),
            }
        );
    }
}
