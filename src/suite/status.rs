//! What a completion's program came to: MultiPL-E's status, and assay's.
//!
//! MultiPL-E's Rust evaluator (`eval_rust.py`) says `SyntaxError` when
//! rustc fails, `Timeout` when the build or the run passes its time limit,
//! `OK` when the program exits 0 and `Exception` for any other exit. So a
//! candidate that calls `std::process::exit(0)` before the asserts is `OK`
//! there. assay runs each case through a dispatch `main` that prints a
//! marker only after the case returned ([`super::cases`]), and a run that
//! exits 0 without it left early: `Exception` in assay's status, `OK` in
//! MultiPL-E's. Both are kept for every completion.

use std::fmt;
use std::str::FromStr;

use strum::{Display, EnumString, IntoStaticStr};

use super::module::Unlaid;

/// MultiPL-E's status strings, stable in the store and in reports: the
/// variants' names, `Ok` spelled as MultiPL-E does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Display, EnumString, IntoStaticStr)]
#[strum(parse_err_ty = String, parse_err_fn = not_a_status)]
pub enum Status {
    #[strum(to_string = "OK")]
    Ok,
    SyntaxError,
    Exception,
    Timeout,
}

impl Status {
    pub const ALL: [Status; 4] = [
        Status::Ok,
        Status::SyntaxError,
        Status::Exception,
        Status::Timeout,
    ];

    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

fn not_a_status(s: &str) -> String {
    format!("`{s}` is not a status (OK, SyntaxError, Exception, Timeout)")
}

/// How one run of a built program (the whole `main`, or one case) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaseEnd {
    /// Exit 0, and the dispatch marker was printed: the case returned.
    Passed,
    /// Exit 0 without the marker: the candidate ended the process early.
    ExitedEarly,
    /// Any other exit code (a failed assert or a panic exits 101).
    Failed {
        code: i32,
    },
    /// Killed by a signal (an abort, a stack overflow, the memory limit).
    Signalled {
        signal: i32,
    },
    TimedOut,
}

impl CaseEnd {
    /// MultiPL-E's reading of the same run: only the exit status counts.
    fn multiple_status(self) -> Status {
        match self {
            CaseEnd::Passed | CaseEnd::ExitedEarly => Status::Ok,
            CaseEnd::Failed { .. } | CaseEnd::Signalled { .. } => Status::Exception,
            CaseEnd::TimedOut => Status::Timeout,
        }
    }

    fn status(self) -> Status {
        match self {
            CaseEnd::Passed => Status::Ok,
            CaseEnd::ExitedEarly | CaseEnd::Failed { .. } | CaseEnd::Signalled { .. } => {
                Status::Exception
            }
            CaseEnd::TimedOut => Status::Timeout,
        }
    }
}

// The unit variants' strings; `failed(CODE)` and `signalled(SIGNAL)`
// carry their number.
const PASSED: &str = "passed";
const EXITED_EARLY: &str = "exited_early";
const TIMED_OUT: &str = "timed_out";

/// Stable strings in the store: `passed`, `exited_early`, `failed(101)`,
/// `signalled(6)`, `timed_out`.
impl fmt::Display for CaseEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CaseEnd::Passed => f.write_str(PASSED),
            CaseEnd::ExitedEarly => f.write_str(EXITED_EARLY),
            CaseEnd::Failed { code } => write!(f, "failed({code})"),
            CaseEnd::Signalled { signal } => write!(f, "signalled({signal})"),
            CaseEnd::TimedOut => f.write_str(TIMED_OUT),
        }
    }
}

impl FromStr for CaseEnd {
    type Err = String;
    fn from_str(s: &str) -> Result<CaseEnd, String> {
        let number = |prefix: &str| {
            s.strip_prefix(prefix)
                .and_then(|rest| rest.strip_suffix(')'))
                .and_then(|n| n.parse::<i32>().ok())
        };
        match s {
            PASSED => Ok(CaseEnd::Passed),
            EXITED_EARLY => Ok(CaseEnd::ExitedEarly),
            TIMED_OUT => Ok(CaseEnd::TimedOut),
            _ => number("failed(")
                .map(|code| CaseEnd::Failed { code })
                .or_else(|| number("signalled(").map(|signal| CaseEnd::Signalled { signal }))
                .ok_or_else(|| format!("`{s}` is not how a run ends")),
        }
    }
}

/// Everything assay learned about one completion's program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompletionOutcome {
    /// rustc refused the program.
    CompileError,
    /// The build passed its time limit.
    CompileTimeout,
    /// Built; `whole` is the run of the original `main`, `cases` how each
    /// case ended: alone when the whole `main` failed (or every case was
    /// asked for), else `passed` each, as each returned within the whole
    /// `main` (for a `main` that is one case, that one run again).
    Ran { whole: CaseEnd, cases: Vec<CaseEnd> },
    /// assay would not run the program for a verdict (`reason`): its status
    /// is `SyntaxError`. `reading` is what MultiPL-E's build of the program
    /// as it stands came to, for MultiPL-E's status beside it.
    Refused {
        reason: Unlaid,
        reading: Box<CompletionOutcome>,
    },
}

impl CompletionOutcome {
    /// The status MultiPL-E's evaluator would give this program.
    pub fn multiple_status(&self) -> Status {
        match self {
            CompletionOutcome::CompileError => Status::SyntaxError,
            CompletionOutcome::CompileTimeout => Status::Timeout,
            CompletionOutcome::Ran { whole, .. } => whole.multiple_status(),
            CompletionOutcome::Refused { reading, .. } => reading.multiple_status(),
        }
    }

    /// assay's status: as MultiPL-E's, except that a program passes only
    /// when the whole `main` and every case returned; an early exit or a
    /// case failing alone (a candidate with state across calls) is
    /// `Exception`.
    pub fn status(&self) -> Status {
        match self {
            CompletionOutcome::Ran { whole, cases } => match whole.status() {
                Status::Ok if cases.iter().all(|c| *c == CaseEnd::Passed) => Status::Ok,
                Status::Ok => Status::Exception,
                other => other,
            },
            CompletionOutcome::Refused { .. } => Status::SyntaxError,
            other => other.multiple_status(),
        }
    }

    /// The outcome's kind as stored: `compile_error`, `compile_timeout` or
    /// `ran` (whose runs are stored beside it).
    pub fn kind(&self) -> &'static str {
        match self {
            CompletionOutcome::CompileError => "compile_error",
            CompletionOutcome::CompileTimeout => "compile_timeout",
            CompletionOutcome::Ran { .. } => "ran",
            CompletionOutcome::Refused { reading, .. } => reading.kind(),
        }
    }

    /// Why assay refused the program, as stored beside its reading.
    pub fn refused(&self) -> Option<Unlaid> {
        match self {
            CompletionOutcome::Refused { reason, .. } => Some(*reason),
            _ => None,
        }
    }

    /// The outcome back from its stored kind and, for `ran`, the whole
    /// `main`'s end and the cases' ends (comma-separated), and the reason
    /// assay refused it, if it did.
    pub fn from_stored(
        kind: &str,
        whole: Option<&str>,
        cases: Option<&str>,
        refused: Option<&str>,
    ) -> Result<CompletionOutcome, String> {
        let reading = Self::reading_from_stored(kind, whole, cases)?;
        match refused {
            None => Ok(reading),
            Some(reason) => Ok(CompletionOutcome::Refused {
                reason: reason.parse()?,
                reading: Box::new(reading),
            }),
        }
    }

    fn reading_from_stored(
        kind: &str,
        whole: Option<&str>,
        cases: Option<&str>,
    ) -> Result<CompletionOutcome, String> {
        match kind {
            "compile_error" => Ok(CompletionOutcome::CompileError),
            "compile_timeout" => Ok(CompletionOutcome::CompileTimeout),
            "ran" => {
                let whole = whole.ok_or("a run without its whole `main`")?.parse()?;
                let cases = match cases {
                    Some(list) if !list.is_empty() => list
                        .split(',')
                        .map(str::parse)
                        .collect::<Result<Vec<CaseEnd>, String>>()?,
                    _ => Vec::new(),
                };
                Ok(CompletionOutcome::Ran { whole, cases })
            }
            other => Err(format!("`{other}` is not a completion outcome")),
        }
    }

    /// Cases passed and cases run (0 of 0 when nothing was built).
    pub fn cases_passed(&self) -> (usize, usize) {
        match self {
            CompletionOutcome::Ran { cases, .. } => (
                cases.iter().filter(|c| **c == CaseEnd::Passed).count(),
                cases.len(),
            ),
            _ => (0, 0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_round_trip() {
        for s in Status::ALL {
            assert_eq!(s.to_string().parse::<Status>(), Ok(s));
        }
        assert_eq!(
            ["OK", "SyntaxError", "Exception", "Timeout"].map(|s| s.parse::<Status>().unwrap()),
            Status::ALL
        );
        assert!("ok".parse::<Status>().is_err());
    }

    #[test]
    fn case_ends_and_outcomes_round_trip() {
        use CaseEnd::*;
        let ends = [
            Passed,
            ExitedEarly,
            Failed { code: 101 },
            Failed { code: -1 },
            Signalled { signal: 6 },
            TimedOut,
        ];
        for end in ends {
            assert_eq!(end.to_string().parse::<CaseEnd>(), Ok(end));
        }
        assert!("failed(x)".parse::<CaseEnd>().is_err());
        assert!("ok".parse::<CaseEnd>().is_err());
        let ran = CompletionOutcome::Ran {
            whole: Passed,
            cases: vec![Passed, Failed { code: 101 }],
        };
        assert_eq!(
            CompletionOutcome::from_stored("ran", Some("passed"), Some("passed,failed(101)"), None),
            Ok(ran)
        );
        assert_eq!(
            CompletionOutcome::from_stored("compile_error", None, None, None),
            Ok(CompletionOutcome::CompileError)
        );
        assert!(CompletionOutcome::from_stored("ran", None, None, None).is_err());
        assert!(CompletionOutcome::from_stored("built", None, None, None).is_err());
        let refused = CompletionOutcome::Refused {
            reason: Unlaid::Unparsed,
            reading: Box::new(CompletionOutcome::Ran {
                whole: Passed,
                cases: vec![Passed],
            }),
        };
        assert_eq!(
            CompletionOutcome::from_stored("ran", Some("passed"), Some("passed"), Some("unparsed")),
            Ok(refused.clone())
        );
        // MultiPL-E's reading of an unparsed program that exits 0 is OK;
        // assay never runs it for a verdict.
        assert_eq!(refused.multiple_status(), Status::Ok);
        assert_eq!(refused.status(), Status::SyntaxError);
        assert!(CompletionOutcome::from_stored("ran", Some("passed"), None, Some("odd")).is_err());
    }

    #[test]
    fn statuses_of_each_outcome() {
        use CaseEnd::*;
        let ran = |whole, cases: &[CaseEnd]| CompletionOutcome::Ran {
            whole,
            cases: cases.to_vec(),
        };
        // (outcome, MultiPL-E's status, assay's status)
        let table = [
            (
                CompletionOutcome::CompileError,
                Status::SyntaxError,
                Status::SyntaxError,
            ),
            (
                CompletionOutcome::CompileTimeout,
                Status::Timeout,
                Status::Timeout,
            ),
            (ran(Passed, &[Passed, Passed]), Status::Ok, Status::Ok),
            (
                ran(Failed { code: 101 }, &[Passed, Failed { code: 101 }]),
                Status::Exception,
                Status::Exception,
            ),
            (
                ran(Signalled { signal: 6 }, &[Signalled { signal: 6 }]),
                Status::Exception,
                Status::Exception,
            ),
            (ran(TimedOut, &[TimedOut]), Status::Timeout, Status::Timeout),
            // The early exit: OK for MultiPL-E, not for assay.
            (
                ran(ExitedEarly, &[ExitedEarly, ExitedEarly]),
                Status::Ok,
                Status::Exception,
            ),
            // Whole passes, one case alone does not: state across calls.
            (
                ran(Passed, &[Passed, Failed { code: 101 }]),
                Status::Ok,
                Status::Exception,
            ),
        ];
        for (outcome, multiple, assay) in table {
            assert_eq!(outcome.multiple_status(), multiple, "{outcome:?}");
            assert_eq!(outcome.status(), assay, "{outcome:?}");
        }
        assert_eq!(
            ran(Passed, &[Passed, Failed { code: 1 }, Passed]).cases_passed(),
            (2, 3)
        );
        assert_eq!(CompletionOutcome::CompileError.cases_passed(), (0, 0));
    }
}
