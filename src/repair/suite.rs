//! A suite program's repair feedback. A suite's oracle is its tests, which
//! a model sees in full mode: the failed assert's line and its panic
//! message go back, as Reflexion and LiveCodeBench's self-repair do (and
//! make later rounds' pass@1 optimistic, since the same asserts score).
//! `errors_only` sends no test text at all: compiler errors without their
//! source snippets (which may quote the tests), and how many asserts
//! failed.

use std::fmt::Write as _;

use super::feedback::{cap, compiler_errors, fenced, Feedback};
use crate::spec::{Feedback as FeedbackMode, FeedbackLimits};

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
                let summary = match errors.len() {
                    0 => "It did not build.".to_owned(),
                    1 => "It did not compile: 1 error.".to_owned(),
                    n => format!("It did not compile: {n} errors."),
                };
                let title = if errors.len() > shown.len() {
                    format!(
                        "The compiler's first {} of {} errors:",
                        shown.len(),
                        errors.len()
                    )
                } else {
                    "The compiler's errors:".to_owned()
                };
                Feedback {
                    summary,
                    errors: if shown.is_empty() {
                        String::new()
                    } else {
                        fenced(
                            &title,
                            &cap(shown.join("\n").trim_end(), limits.error_chars),
                        )
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
    let mut out = if shown.len() < failed.len() {
        format!(
            "\nThe first {} failed tests of {}:\n\n",
            shown.len(),
            failed.len()
        )
    } else {
        "\nThe failed tests:\n\n".to_owned()
    };
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
