//! Verdicts of a scoring run and of each case, with their stored strings.

use std::fmt;
use std::str::FromStr;

/// How one candidate's scoring run ended. The string form is stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScoreVerdict {
    /// Ran every case.
    Scored { passed: usize, total: usize },
    /// Killed at the wall or CPU limit after `completed` cases.
    Timeout { completed: usize, total: usize },
    /// Killed by a signal it raised itself (abort, stack overflow, segfault).
    Crashed { signal: i32 },
    /// An allocation failed under the address-space limit, or the run's
    /// processes together reached its memory cgroup's limit.
    OutOfMemory,
    /// Printed more than the output cap.
    OutputCapExceeded,
    /// Exited before reporting every case.
    ExitedEarly { code: i32, completed: usize },
    /// Results did not follow the protocol (a forged or garbled line).
    ProtocolError,
    /// Compiled in the probe, but its own scoring image did not build.
    ScoreBuildFailed,
    /// Ran, but the judge failed over its outputs (crashed, ran out of time
    /// or memory, or answered garbage): a harness bug its outputs reached.
    JudgeFailed,
}

/// What became of one case. Stored as one letter per case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaseOutcome {
    Pass,
    Fail,
    /// The case panicked (caught; the run went on).
    Panic,
    /// The case was running when the time ran out.
    Timeout,
    /// The case was running when the child crashed or exited.
    Crash,
    /// Never reached.
    NotRun,
}

impl CaseOutcome {
    pub fn letter(&self) -> char {
        match self {
            CaseOutcome::Pass => 'p',
            CaseOutcome::Fail => 'f',
            CaseOutcome::Panic => 'x',
            CaseOutcome::Timeout => 't',
            CaseOutcome::Crash => 'c',
            CaseOutcome::NotRun => '-',
        }
    }

    pub fn from_letter(c: char) -> Option<CaseOutcome> {
        Some(match c {
            'p' => CaseOutcome::Pass,
            'f' => CaseOutcome::Fail,
            'x' => CaseOutcome::Panic,
            't' => CaseOutcome::Timeout,
            'c' => CaseOutcome::Crash,
            '-' => CaseOutcome::NotRun,
            _ => return None,
        })
    }
}

/// The stored form of a run's case outcomes: one letter per case.
pub fn case_letters(cases: &[CaseOutcome]) -> String {
    cases.iter().map(CaseOutcome::letter).collect()
}

/// Parses [`case_letters`] back; `None` on a letter it does not know.
pub fn parse_case_letters(text: &str) -> Option<Vec<CaseOutcome>> {
    text.chars().map(CaseOutcome::from_letter).collect()
}

impl ScoreVerdict {
    /// Ran to the end within every limit.
    pub fn finished(&self) -> bool {
        matches!(self, ScoreVerdict::Scored { .. })
    }
}

impl fmt::Display for ScoreVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScoreVerdict::Scored { passed, total } => write!(f, "scored({passed}/{total})"),
            ScoreVerdict::Timeout { completed, total } => {
                write!(f, "timeout(after {completed}/{total})")
            }
            ScoreVerdict::Crashed { signal } => write!(f, "crashed(signal {signal})"),
            ScoreVerdict::OutOfMemory => f.write_str("out_of_memory"),
            ScoreVerdict::OutputCapExceeded => f.write_str("output_cap_exceeded"),
            ScoreVerdict::ExitedEarly { code, completed } => {
                write!(f, "exited_early(code {code} after {completed})")
            }
            ScoreVerdict::ProtocolError => f.write_str("protocol_error"),
            ScoreVerdict::ScoreBuildFailed => f.write_str("score_build_failed"),
            ScoreVerdict::JudgeFailed => f.write_str("judge_failed"),
        }
    }
}

impl FromStr for ScoreVerdict {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("unknown score verdict `{s}`");
        let args = |prefix: &str| -> Option<&str> { s.strip_prefix(prefix)?.strip_suffix(')') };
        let fraction = |text: &str| -> Option<(usize, usize)> {
            let (a, b) = text.split_once('/')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        };
        Ok(match s {
            "out_of_memory" => ScoreVerdict::OutOfMemory,
            "output_cap_exceeded" => ScoreVerdict::OutputCapExceeded,
            "protocol_error" => ScoreVerdict::ProtocolError,
            "score_build_failed" => ScoreVerdict::ScoreBuildFailed,
            "judge_failed" => ScoreVerdict::JudgeFailed,
            _ => {
                if let Some(a) = args("scored(") {
                    let (passed, total) = fraction(a).ok_or_else(bad)?;
                    ScoreVerdict::Scored { passed, total }
                } else if let Some(a) = args("timeout(after ") {
                    let (completed, total) = fraction(a).ok_or_else(bad)?;
                    ScoreVerdict::Timeout { completed, total }
                } else if let Some(a) = args("crashed(signal ") {
                    ScoreVerdict::Crashed {
                        signal: a.parse().map_err(|_| bad())?,
                    }
                } else if let Some(a) = args("exited_early(code ") {
                    let (code, completed) = a.split_once(" after ").ok_or_else(bad)?;
                    ScoreVerdict::ExitedEarly {
                        code: code.parse().map_err(|_| bad())?,
                        completed: completed.parse().map_err(|_| bad())?,
                    }
                } else {
                    return Err(bad());
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_round_trip_through_their_strings() {
        let all = [
            ScoreVerdict::Scored {
                passed: 3,
                total: 5,
            },
            ScoreVerdict::Timeout {
                completed: 2,
                total: 5,
            },
            ScoreVerdict::Crashed { signal: 6 },
            ScoreVerdict::OutOfMemory,
            ScoreVerdict::OutputCapExceeded,
            ScoreVerdict::ExitedEarly {
                code: 0,
                completed: 1,
            },
            ScoreVerdict::ProtocolError,
            ScoreVerdict::ScoreBuildFailed,
            ScoreVerdict::JudgeFailed,
        ];
        for v in all {
            assert_eq!(v.to_string().parse::<ScoreVerdict>().unwrap(), v, "{v}");
        }
        assert_eq!(
            ScoreVerdict::Timeout {
                completed: 2,
                total: 5
            }
            .to_string(),
            "timeout(after 2/5)"
        );
    }

    #[test]
    fn case_letters_round_trip() {
        let all = [
            CaseOutcome::Pass,
            CaseOutcome::Fail,
            CaseOutcome::Panic,
            CaseOutcome::Timeout,
            CaseOutcome::Crash,
            CaseOutcome::NotRun,
        ];
        assert_eq!(case_letters(&all), "pfxtc-");
        assert_eq!(parse_case_letters("pfxtc-").unwrap(), all);
        assert!(parse_case_letters("pq").is_none());
    }
}
