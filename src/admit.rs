//! Admit: which scored candidates the spec admits, in what order, and
//! whether one may replace the committed candidate. Pure, no IO.
//!
//! A candidate is admitted when its run finished within every limit
//! (verdict `scored`), its score reaches `min_score`, and it passes every
//! guard case that the committed candidate (the reference, scored in the
//! same run) passes. Admitted candidates are ranked by cases passed, then by
//! the CPU time of their scoring run, then by position in the batch.

use std::fmt;
use std::str::FromStr;

use crate::score::{CaseOutcome, ScoreVerdict, Scored};
use crate::spec::AdmitRule;

/// What admission made of one candidate. The string form is stable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Admitted; rank 1 is the best of the batch.
    Admitted { rank: usize },
    /// The run did not finish within the limits (any verdict but `scored`).
    NotFinished,
    /// Finished below the minimum score.
    BelowMinScore,
    /// Failed guard cases (0-based positions) that the reference passes.
    Regressed { cases: Vec<usize> },
}

impl Admission {
    pub fn admitted(&self) -> bool {
        matches!(self, Admission::Admitted { .. })
    }

    pub fn rank(&self) -> Option<usize> {
        match self {
            Admission::Admitted { rank } => Some(*rank),
            _ => None,
        }
    }
}

/// Decides admission for every candidate of a batch against the reference.
/// `candidates` pairs each candidate's batch index with its result; the
/// answer is in the same order.
pub fn admit(
    rule: &AdmitRule,
    reference: Option<&Scored>,
    candidates: &[(usize, &Scored)],
) -> Vec<Admission> {
    let mut decisions: Vec<Admission> = candidates
        .iter()
        .map(|(_, scored)| {
            refusal(rule, reference, scored).unwrap_or(Admission::Admitted { rank: 0 })
        })
        .collect();
    let mut admitted: Vec<usize> = (0..candidates.len())
        .filter(|&i| decisions[i].admitted())
        .collect();
    admitted.sort_by(|&a, &b| {
        let (ia, sa) = candidates[a];
        let (ib, sb) = candidates[b];
        sb.passed
            .cmp(&sa.passed)
            .then(sa.cpu.cmp(&sb.cpu))
            .then(ia.cmp(&ib))
    });
    for (rank, i) in admitted.into_iter().enumerate() {
        decisions[i] = Admission::Admitted { rank: rank + 1 };
    }
    decisions
}

/// Why `scored` is refused, or `None` when it is admitted.
fn refusal(rule: &AdmitRule, reference: Option<&Scored>, scored: &Scored) -> Option<Admission> {
    let ScoreVerdict::Scored { passed, total } = scored.verdict else {
        return Some(Admission::NotFinished);
    };
    if total == 0 || (passed as f64 / total as f64) < rule.min_score {
        return Some(Admission::BelowMinScore);
    }
    let regressed: Vec<usize> = rule
        .guard
        .iter()
        .copied()
        .filter(|&case| {
            let reference_passes = reference
                .and_then(|r| r.cases.get(case))
                .is_some_and(|o| *o == CaseOutcome::Pass);
            let candidate_passes = scored.cases.get(case) == Some(&CaseOutcome::Pass);
            reference_passes && !candidate_passes
        })
        .collect();
    if !regressed.is_empty() {
        return Some(Admission::Regressed { cases: regressed });
    }
    None
}

/// Whether `candidate` beat the reference in the same run: it finished, and
/// passed more cases than the reference did (a reference that did not score
/// at all counts as passing none).
pub fn beats_reference(candidate: &Scored, reference: Option<&Scored>) -> bool {
    candidate.verdict.finished() && candidate.passed > reference.map_or(0, |r| r.passed)
}

impl fmt::Display for Admission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Admission::Admitted { rank } => write!(f, "admitted(rank {rank})"),
            Admission::NotFinished => f.write_str("not_finished"),
            Admission::BelowMinScore => f.write_str("below_min_score"),
            Admission::Regressed { cases } => {
                let list: Vec<String> = cases.iter().map(usize::to_string).collect();
                write!(f, "regressed({})", list.join(","))
            }
        }
    }
}

impl FromStr for Admission {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("unknown admission `{s}`");
        Ok(match s {
            "not_finished" => Admission::NotFinished,
            "below_min_score" => Admission::BelowMinScore,
            _ => {
                if let Some(rank) = s
                    .strip_prefix("admitted(rank ")
                    .and_then(|r| r.strip_suffix(')'))
                {
                    Admission::Admitted {
                        rank: rank.parse().map_err(|_| bad())?,
                    }
                } else if let Some(list) = s
                    .strip_prefix("regressed(")
                    .and_then(|r| r.strip_suffix(')'))
                {
                    Admission::Regressed {
                        cases: list
                            .split(',')
                            .map(|c| c.parse().map_err(|_| bad()))
                            .collect::<Result<_, _>>()?,
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
    use crate::package::ModuleKey;
    use crate::score::parse_case_letters;
    use std::time::Duration;

    fn scored(verdict: &str, cases: &str, cpu_ms: u64) -> Scored {
        let cases = parse_case_letters(cases).unwrap();
        Scored {
            key: ModuleKey::Candidate(0),
            verdict: verdict.parse().unwrap(),
            passed: cases.iter().filter(|c| **c == CaseOutcome::Pass).count(),
            total: cases.len(),
            wall: Duration::ZERO,
            cpu: Duration::from_millis(cpu_ms),
            cases,
            restarts: 0,
            peak_processes: None,
            stderr: String::new(),
        }
    }

    fn rule(min_score: f64, guard: &[usize]) -> AdmitRule {
        AdmitRule {
            min_score,
            guard: guard.to_vec(),
        }
    }

    /// (verdict, cases, cpu ms) per candidate, and the expected decisions.
    fn check(rule: AdmitRule, reference: &str, runs: &[(&str, &str, u64)], want: &[&str]) {
        let reference = scored("scored(0/4)", reference, 0);
        let runs: Vec<Scored> = runs.iter().map(|(v, c, t)| scored(v, c, *t)).collect();
        let pairs: Vec<(usize, &Scored)> = runs.iter().enumerate().collect();
        let got: Vec<String> = admit(&rule, Some(&reference), &pairs)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn min_score_and_finishing_admit() {
        check(
            rule(0.5, &[]),
            "pppp",
            &[
                ("scored(3/4)", "pppf", 10),
                ("scored(1/4)", "pfff", 10),
                ("timeout(after 3/4)", "ppp-", 10),
                ("scored(2/4)", "ppff", 10),
            ],
            &[
                "admitted(rank 1)",
                "below_min_score",
                "not_finished",
                "admitted(rank 2)",
            ],
        );
    }

    #[test]
    fn guard_cases_the_reference_passes_must_pass() {
        check(
            rule(0.0, &[1, 2]),
            "pfpp",
            &[
                ("scored(3/4)", "pppf", 10),
                ("scored(3/4)", "ppfp", 10),
                ("scored(2/4)", "ffpp", 10),
            ],
            // Case 1 fails in the reference, so only case 2 guards: the
            // second run fails it, the first and third pass it.
            &["admitted(rank 1)", "regressed(2)", "admitted(rank 2)"],
        );
    }

    #[test]
    fn ties_on_score_go_to_the_cheaper_run_then_the_earlier() {
        check(
            rule(0.0, &[]),
            "ffff",
            &[
                ("scored(2/4)", "ppff", 30),
                ("scored(2/4)", "ppff", 10),
                ("scored(4/4)", "pppp", 99),
                ("scored(2/4)", "ppff", 10),
            ],
            &[
                "admitted(rank 4)",
                "admitted(rank 2)",
                "admitted(rank 1)",
                "admitted(rank 3)",
            ],
        );
    }

    #[test]
    fn beating_the_reference_means_more_cases_passed() {
        let reference = scored("scored(3/4)", "pppf", 0);
        assert!(beats_reference(
            &scored("scored(4/4)", "pppp", 0),
            Some(&reference)
        ));
        assert!(!beats_reference(
            &scored("scored(3/4)", "ppfp", 0),
            Some(&reference)
        ));
        assert!(!beats_reference(
            &scored("timeout(after 3/4)", "ppp-", 0),
            None
        ));
        assert!(beats_reference(&scored("scored(1/4)", "pfff", 0), None));
    }

    #[test]
    fn admissions_round_trip() {
        for a in [
            Admission::Admitted { rank: 3 },
            Admission::NotFinished,
            Admission::BelowMinScore,
            Admission::Regressed { cases: vec![0, 7] },
        ] {
            assert_eq!(a.to_string().parse::<Admission>().unwrap(), a);
        }
    }
}
