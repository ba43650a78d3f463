//! Harness faults: harness code that panics on a case. They are the task's
//! fault, never a candidate's verdict, and they are only ever decided in a
//! process that runs no candidate's code: the judge (for `judge`), and the
//! task check's input probe (for `run_input`, `task::inputs`). Nothing a
//! candidate's run reports can make one.

use std::fmt;

use crate::build::package::ModuleKey;

/// The most characters of a panic's message or of an answer a fault keeps.
const KEPT: usize = 300;

/// The harness function that panicked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HarnessFn {
    /// Decoding a case's input, before the candidate's entry is called.
    RunInput,
    /// Comparing an answer with the case's expected one.
    Judge,
}

impl fmt::Display for HarnessFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HarnessFn::RunInput => "run_input",
            HarnessFn::Judge => "judge",
        })
    }
}

/// Harness code panicked on one case, whichever run met it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct HarnessFault {
    pub function: HarnessFn,
    /// The case's index in the cases file (0-based, blank lines skipped).
    pub case: usize,
    /// The panic as the harness's process saw it: `panicked at FILE:LINE:COL: MESSAGE`.
    pub panic: String,
    /// What the harness was given: the case's encoded input (`run_input`),
    /// or the answer it judged and whose it was (`judge`).
    pub given: Given,
}

/// What the harness function was given when it panicked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Given {
    /// The case's input, as `input_line` encoded it.
    Input(String),
    /// A run's answer to the case.
    Answer { whose: ModuleKey, answer: String },
}

impl HarnessFault {
    pub fn new(function: HarnessFn, case: usize, panic: &str, given: Given) -> HarnessFault {
        HarnessFault {
            function,
            case,
            panic: kept(panic),
            given: match given {
                Given::Input(input) => Given::Input(kept(&input)),
                Given::Answer { whose, answer } => Given::Answer {
                    whose,
                    answer: kept(&answer),
                },
            },
        }
    }
}

/// One line, at most [`KEPT`] characters.
fn kept(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(KEPT) {
        Some((at, _)) => format!("{}...", &line[..at]),
        None => line,
    }
}

impl fmt::Display for Given {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Given::Input(input) => write!(f, "its input `{input}`"),
            Given::Answer {
                whose: ModuleKey::Committed,
                answer,
            } => write!(f, "the committed candidate's answer `{answer}`"),
            Given::Answer {
                whose: ModuleKey::Candidate(idx),
                answer,
            } => write!(f, "candidate {idx}'s answer `{answer}`"),
        }
    }
}

impl fmt::Display for HarnessFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the harness's `{}` panics on case {} ({}): {}",
            self.function,
            self.case + 1,
            self.given,
            self.panic
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_keeps_one_short_line() {
        let fault = HarnessFault::new(
            HarnessFn::Judge,
            4,
            "panicked at h/src/lib.rs:3:5:\nno expected value",
            Given::Answer {
                whose: ModuleKey::Candidate(3),
                answer: "x".repeat(400),
            },
        );
        let Given::Answer { answer, .. } = &fault.given else {
            unreachable!()
        };
        assert_eq!(answer.chars().count(), KEPT + 3);
        assert_eq!(
            fault.panic,
            "panicked at h/src/lib.rs:3:5: no expected value"
        );
        let line = fault.to_string();
        assert!(
            line.starts_with("the harness's `judge` panics on case 5 (candidate 3's answer `xxx")
        );
        assert!(!line.contains('\n'));
    }
}
