//! What a repair prompt says about its parent, section by section: one
//! summary line, the first compiler errors, the failed visible cases. Each
//! section is capped ([`FeedbackLimits`]), so a parent with a thousand
//! errors or a megabyte of output costs a bounded prompt.

use std::fmt::Write as _;

use super::{Attempt, AttemptState, ShownCase};
use crate::score::CaseOutcome;
use crate::spec::{Feedback as FeedbackMode, FeedbackLimits};

/// The filled-in sections of one parent's feedback. A section that is not
/// empty starts with a blank line, so a template can put them side by side.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Feedback {
    /// One line: how the parent fared.
    pub summary: String,
    /// The first compiler errors in a `text` fence, or empty.
    pub errors: String,
    /// The failed visible cases, or empty.
    pub cases: String,
}

impl Feedback {
    /// The feedback on `parent`. `shown` are the task's visible cases
    /// (the only case text this function can put anywhere).
    pub fn of(
        parent: &Attempt,
        shown: &[ShownCase],
        mode: FeedbackMode,
        limits: FeedbackLimits,
    ) -> Feedback {
        match &parent.state {
            AttemptState::Broken {
                verdict,
                diagnostics,
            } => broken(verdict, diagnostics, limits),
            AttemptState::Ran {
                verdict,
                cases,
                outputs,
            } => {
                let failed: Vec<&ShownCase> = shown
                    .iter()
                    .filter(|c| cases.get(c.pos).is_some_and(|o| *o != CaseOutcome::Pass))
                    .collect();
                let visible = match mode {
                    FeedbackMode::Full => Some((failed.len(), shown.len())),
                    FeedbackMode::ErrorsOnly => None,
                };
                Feedback {
                    summary: ran_summary(verdict, cases, visible),
                    errors: String::new(),
                    cases: match mode {
                        FeedbackMode::Full => cases_section(&failed, cases, outputs, limits),
                        FeedbackMode::ErrorsOnly => String::new(),
                    },
                }
            }
            AttemptState::Other => Feedback::default(),
        }
    }
}

fn broken(verdict: &str, diagnostics: &str, limits: FeedbackLimits) -> Feedback {
    let errors = compiler_errors(diagnostics);
    let summary = if verdict.starts_with("forbidden") {
        format!("It was refused before any build ({verdict}): it uses something the task's policy forbids.")
    } else if verdict.starts_with("compile_timeout") {
        "Its compile was stopped at the time limit.".to_owned()
    } else if verdict.starts_with("compile_out_of_memory") {
        "Its compile was stopped at the memory limit.".to_owned()
    } else {
        errors_summary(errors.len()).unwrap_or_else(|| format!("It did not build ({verdict})."))
    };
    let section = if errors.is_empty() {
        // The policy's own rendering, or a limit's note: no rustc error.
        let text = diagnostics.trim();
        if text.is_empty() {
            String::new()
        } else {
            fenced("What the build said:", &cap(text, limits.error_chars))
        }
    } else {
        let shown: Vec<&str> = errors.iter().take(limits.errors).copied().collect();
        errors_section(&shown, errors.len(), limits)
    };
    Feedback {
        summary,
        errors: section,
        cases: String::new(),
    }
}

/// `visible`: the failed visible cases and the visible ones, when cases
/// are shown at all.
fn ran_summary(verdict: &str, cases: &[CaseOutcome], visible: Option<(usize, usize)>) -> String {
    let total = cases.len();
    let passed = cases.iter().filter(|c| **c == CaseOutcome::Pass).count();
    let count = |o: CaseOutcome| cases.iter().filter(|c| **c == o).count();
    let mut line = format!("It compiled and passed {passed} of {total} cases");
    let ended = match verdict {
        v if v.starts_with("scored") => None,
        v => Some(v),
    };
    if let Some(v) = ended {
        let _ = write!(line, "; its run ended early ({v})");
    }
    let mut how = Vec::new();
    for (outcome, word) in [
        (CaseOutcome::Panic, "panicked"),
        (CaseOutcome::Timeout, "timed out"),
        (CaseOutcome::Crash, "crashed"),
    ] {
        match count(outcome) {
            0 => {}
            1 => how.push(format!("1 case {word}")),
            n => how.push(format!("{n} cases {word}")),
        }
    }
    if !how.is_empty() {
        let _ = write!(line, " ({})", how.join(", "));
    }
    line.push('.');
    let failed = total - passed;
    if failed > 0 {
        let _ = match visible {
            None => write!(line, " Cases are not shown."),
            Some((_, 0)) => write!(
                line,
                " The task shows no cases: fix it from the task's text."
            ),
            Some((0, _)) => write!(line, " Every failed case is hidden."),
            Some((shown, _)) => write!(
                line,
                " {shown} of the failed cases can be shown, {} are hidden.",
                failed - shown
            ),
        };
    }
    line
}

/// "It did not compile" with its count of errors; `None` for none.
pub(super) fn errors_summary(errors: usize) -> Option<String> {
    match errors {
        0 => None,
        1 => Some("It did not compile: 1 error.".to_owned()),
        n => Some(format!("It did not compile: {n} errors.")),
    }
}

/// The compiler's errors `shown` (the first of `total`), capped, fenced.
pub(super) fn errors_section(shown: &[&str], total: usize, limits: FeedbackLimits) -> String {
    let title = if total > shown.len() {
        format!("The compiler's first {} of {total} errors:", shown.len())
    } else {
        "The compiler's errors:".to_owned()
    };
    fenced(
        &title,
        &cap(shown.join("\n").trim_end(), limits.error_chars),
    )
}

/// The line over the failed `noun` (cases, tests) shown of those failed.
pub(super) fn failed_heading(noun: &str, shown: usize, failed: usize) -> String {
    if shown < failed {
        format!("\nThe first {shown} failed {noun} of {failed}:\n\n")
    } else {
        format!("\nThe failed {noun}:\n\n")
    }
}

/// The failed visible cases, first ones first, each value capped.
fn cases_section(
    failed: &[&ShownCase],
    outcomes: &[CaseOutcome],
    outputs: &std::collections::BTreeMap<usize, String>,
    limits: FeedbackLimits,
) -> String {
    if failed.is_empty() || limits.cases == 0 {
        return String::new();
    }
    let shown = &failed[..failed.len().min(limits.cases)];
    let mut out = failed_heading("cases", shown.len(), failed.len());
    for case in shown {
        match &case.name {
            Some(name) => {
                let _ = writeln!(out, "- case `{name}`");
            }
            None => {
                let _ = writeln!(out, "- case {}", case.pos + 1);
            }
        }
        for (field, value) in &case.fields {
            let _ = writeln!(out, "  {field}: {}", cap(value, limits.case_chars));
        }
        let got = match outcomes[case.pos] {
            CaseOutcome::Fail => match outputs.get(&case.pos) {
                Some(out) => cap(out, limits.case_chars),
                None => "a wrong answer (not kept)".to_owned(),
            },
            CaseOutcome::Panic => "nothing: it panicked".to_owned(),
            CaseOutcome::Timeout => "nothing: it ran out of time".to_owned(),
            CaseOutcome::Crash => "nothing: the process crashed".to_owned(),
            CaseOutcome::NotRun => "nothing: an earlier case ended the run".to_owned(),
            CaseOutcome::Pass => unreachable!("only failed cases are shown"),
        };
        let _ = writeln!(out, "  got: {got}");
    }
    out
}

/// The error messages of rendered rustc output, in order: each starts at
/// a line `error...` and runs to the next message's first line. Warnings,
/// notes and rustc's closing `aborting due to` line are left out.
pub fn compiler_errors(rendered: &str) -> Vec<&str> {
    let starts_message = |line: &str| {
        [
            "error",
            "warning",
            "note:",
            "help:",
            "For more information",
            "Some errors have",
        ]
        .iter()
        .any(|p| line.starts_with(p))
    };
    let mut messages = Vec::new();
    let mut start = None;
    let mut offset = 0;
    for line in rendered.split_inclusive('\n') {
        if starts_message(line) {
            if let Some(s) = start {
                messages.push(&rendered[s..offset]);
            }
            start = Some(offset);
        }
        offset += line.len();
    }
    if let Some(s) = start {
        messages.push(&rendered[s..]);
    }
    messages
        .into_iter()
        .filter(|m| m.starts_with("error") && !m.starts_with("error: aborting due to"))
        .map(|m| m.trim_end_matches('\n'))
        .collect()
}

/// `text` cut to at most `max` characters, on a character boundary, with
/// a note of what was cut.
pub(super) fn cap(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((at, _)) => {
            let cut = text[at..].chars().count();
            format!("{} [... {cut} more characters cut]", &text[..at])
        }
    }
}

pub(super) fn fenced(title: &str, body: &str) -> String {
    format!("\n{title}\n\n```text\n{body}\n```\n")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::tests::{broken, ran};
    use super::*;

    const RENDERED: &str = "warning: unused variable: `x`\n --> cands/c3.rs:2:9\n\nerror[E0308]: mismatched types\n --> cands/c3.rs:3:5\n  |\n3 |     \"a\"\n  |     ^^^ expected `u32`, found `&str`\n\nerror[E0425]: cannot find value `y` in this scope\n --> cands/c3.rs:4:5\n\nerror: aborting due to 2 previous errors\n\nSome errors have detailed explanations: E0308, E0425.\nFor more information about an error, try `rustc --explain E0308`.\n";

    fn shown(pos: usize, name: &str) -> ShownCase {
        ShownCase {
            pos,
            name: Some(name.into()),
            fields: vec![
                ("input".into(), format!("\"in{pos}\"")),
                ("expected".into(), format!("\"out{pos}\"")),
            ],
        }
    }

    #[test]
    fn compiler_errors_are_the_error_messages_in_order() {
        let errors = compiler_errors(RENDERED);
        assert_eq!(errors.len(), 2);
        assert!(errors[0].starts_with("error[E0308]: mismatched types"));
        assert!(errors[0].ends_with("found `&str`"), "{:?}", errors[0]);
        assert!(errors[1].starts_with("error[E0425]"));
        assert!(compiler_errors("").is_empty());
        assert!(compiler_errors("warning: x\n").is_empty());
    }

    #[test]
    fn broken_parents_show_their_first_errors_capped() {
        let mut parent = broken(3, 0);
        parent.state = AttemptState::Broken {
            verdict: "compile_error(E0308,E0425)".into(),
            diagnostics: RENDERED.into(),
        };
        let limits = FeedbackLimits {
            errors: 1,
            ..FeedbackLimits::default()
        };
        let fb = Feedback::of(&parent, &[], FeedbackMode::Full, limits);
        assert_eq!(fb.summary, "It did not compile: 2 errors.");
        assert!(fb
            .errors
            .starts_with("\nThe compiler's first 1 of 2 errors:\n\n```text\nerror[E0308]"));
        assert!(!fb.errors.contains("E0425") && !fb.errors.contains("warning"));
        assert!(fb.cases.is_empty());
        // The character cap holds whatever the errors' length.
        let limits = FeedbackLimits {
            error_chars: 100,
            ..FeedbackLimits::default()
        };
        let many = broken(4, 1000);
        let fb = Feedback::of(&many, &[], FeedbackMode::Full, limits);
        assert!(fb.errors.len() < 300, "{}", fb.errors.len());
        assert!(fb.errors.contains("more characters cut]"));
        assert!(fb.summary.contains("1000 errors"));
    }

    #[test]
    fn a_policy_refusal_shows_the_policy_s_words() {
        let parent = Attempt {
            state: AttemptState::Broken {
                verdict: "forbidden(unsafe_code)".into(),
                diagnostics: "line 1: `unsafe` is forbidden\n".into(),
            },
            ..broken(0, 0)
        };
        let fb = Feedback::of(&parent, &[], FeedbackMode::Full, FeedbackLimits::default());
        assert!(fb.summary.contains("forbidden(unsafe_code)"));
        assert!(fb.errors.contains("`unsafe` is forbidden"));
    }

    #[test]
    fn failed_visible_cases_show_input_expected_and_actual() {
        let mut parent = ran(1, "pfxpf-");
        if let AttemptState::Ran { outputs, .. } = &mut parent.state {
            *outputs = BTreeMap::from([(1, "\"wrong\"".to_owned())]);
        }
        let visible = [shown(0, "zero"), shown(1, "one"), shown(2, "two")];
        let fb = Feedback::of(
            &parent,
            &visible,
            FeedbackMode::Full,
            FeedbackLimits::default(),
        );
        assert_eq!(
            fb.summary,
            "It compiled and passed 2 of 6 cases (1 case panicked). 2 of the failed cases can be shown, 2 are hidden."
        );
        assert_eq!(
            fb.cases,
            "\nThe failed cases:\n\n- case `one`\n  input: \"in1\"\n  expected: \"out1\"\n  got: \"wrong\"\n- case `two`\n  input: \"in2\"\n  expected: \"out2\"\n  got: nothing: it panicked\n"
        );
        // Errors only: no case text at all.
        let fb = Feedback::of(
            &parent,
            &visible,
            FeedbackMode::ErrorsOnly,
            FeedbackLimits::default(),
        );
        assert!(fb.cases.is_empty());
        assert!(fb
            .summary
            .ends_with("(1 case panicked). Cases are not shown."));
    }

    #[test]
    fn case_values_and_counts_are_capped() {
        let mut parent = ran(1, "fff");
        let long = "x".repeat(5000);
        if let AttemptState::Ran { outputs, .. } = &mut parent.state {
            *outputs = BTreeMap::from([(0, long.clone()), (1, long), (2, "y".into())]);
        }
        let visible = [shown(0, "a"), shown(1, "b"), shown(2, "c")];
        let limits = FeedbackLimits {
            cases: 2,
            case_chars: 20,
            ..FeedbackLimits::default()
        };
        let fb = Feedback::of(&parent, &visible, FeedbackMode::Full, limits);
        assert!(fb.cases.starts_with("\nThe first 2 failed cases of 3:"));
        assert!(!fb.cases.contains("case `c`"));
        assert_eq!(
            fb.cases.matches("[... 4980 more characters cut]").count(),
            2
        );
    }

    #[test]
    fn a_task_without_visible_cases_says_so_and_a_crash_is_named() {
        let mut parent = ran(1, "ppc--");
        if let AttemptState::Ran { verdict, .. } = &mut parent.state {
            *verdict = "crashed(signal 11)".into();
        }
        let fb = Feedback::of(&parent, &[], FeedbackMode::Full, FeedbackLimits::default());
        assert_eq!(
            fb.summary,
            "It compiled and passed 2 of 5 cases; its run ended early (crashed(signal 11)) (1 case crashed). The task shows no cases: fix it from the task's text."
        );
        assert!(fb.cases.is_empty());
    }

    #[test]
    fn cap_cuts_on_character_boundaries() {
        assert_eq!(cap("abc", 3), "abc");
        assert_eq!(cap("ééé", 1), "é [... 2 more characters cut]");
    }
}
