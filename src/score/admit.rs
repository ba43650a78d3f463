//! Admit: which scored candidates the spec admits, in what order, and
//! whether one may replace the committed candidate. Pure, no IO.
//!
//! A candidate is admitted when its run finished within every limit
//! (verdict `scored`), its score reaches `min_score`, and it passes every
//! guard case that the committed candidate (the reference, scored in the
//! same run) passes. Admitted candidates are ranked by cases passed; among
//! equals, a cheaper scoring run goes first only when its CPU time is
//! cheaper by more than [`CPU_NOISE`] (what two runs of one candidate
//! differ by), and otherwise the shorter source, then the earlier
//! candidate. So the same batch scored twice ranks the same candidate
//! first, and `--promote` writes the same file.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

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

/// One scored candidate as admission sees it.
#[derive(Debug, Clone, Copy)]
pub struct Contender<'a> {
    /// Its index in the batch: the last tie-break.
    pub idx: usize,
    /// Bytes of its extracted source: the tie-break after CPU time.
    pub source_len: usize,
    pub scored: &'a Scored,
}

/// How much two scoring runs' CPU times may differ and still count as
/// equal: the larger of an absolute and a relative margin. Runs of one
/// candidate on one machine differ by this much (docs/reports.md gives
/// the measurement), so a smaller difference says nothing about the
/// candidates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuNoise {
    pub absolute: Duration,
    /// A fraction of the cheaper run's CPU time.
    pub relative: f64,
}

/// The margin admission ranks with.
pub const CPU_NOISE: CpuNoise = CpuNoise {
    absolute: Duration::from_millis(5),
    relative: 0.5,
};

impl CpuNoise {
    /// Whether `other` (no cheaper than `cheaper`) is within the noise of it.
    pub fn within(&self, cheaper: Duration, other: Duration) -> bool {
        let margin = self.absolute.max(cheaper.mul_f64(self.relative));
        other <= cheaper + margin
    }
}

/// Decides admission for every candidate of a batch against the reference.
/// The answer is in the order of `candidates`.
pub fn admit(
    rule: &AdmitRule,
    reference: Option<&Scored>,
    candidates: &[Contender<'_>],
) -> Vec<Admission> {
    let mut decisions: Vec<Admission> = candidates
        .iter()
        .map(|c| refusal(rule, reference, c.scored).unwrap_or(Admission::Admitted { rank: 0 }))
        .collect();
    let admitted: Vec<usize> = (0..candidates.len())
        .filter(|&i| decisions[i].admitted())
        .collect();
    for (rank, i) in ranked(candidates, admitted, CPU_NOISE)
        .into_iter()
        .enumerate()
    {
        decisions[i] = Admission::Admitted { rank: rank + 1 };
    }
    decisions
}

/// `admitted` (positions in `candidates`) best first. Among candidates that
/// passed as many cases, the cheapest run and every run within `noise` of
/// it form a tier, ordered by source length and then index; the next tier
/// starts at the cheapest run left. Tiers are anchored at a run, never
/// chained (a, b and c 4 ms apart each are two tiers, not one), so the
/// order is a total one whatever the figures.
fn ranked(candidates: &[Contender<'_>], mut admitted: Vec<usize>, noise: CpuNoise) -> Vec<usize> {
    let key = |i: usize| {
        let c = &candidates[i];
        (c.source_len, c.idx)
    };
    admitted.sort_by(|&a, &b| {
        let (ca, cb) = (&candidates[a], &candidates[b]);
        cb.scored
            .passed
            .cmp(&ca.scored.passed)
            .then(ca.scored.cpu.cmp(&cb.scored.cpu))
            .then(key(a).cmp(&key(b)))
    });
    let mut order = Vec::with_capacity(admitted.len());
    let mut rest = admitted.as_slice();
    while let Some(&anchor) = rest.first() {
        let anchor = candidates[anchor].scored;
        let tier = rest
            .iter()
            .take_while(|&&i| {
                let s = candidates[i].scored;
                s.passed == anchor.passed && noise.within(anchor.cpu, s.cpu)
            })
            .count();
        let mut members = rest[..tier].to_vec();
        members.sort_by_key(|&i| key(i));
        order.extend(members);
        rest = &rest[tier..];
    }
    order
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
    use crate::build::package::ModuleKey;
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

    /// (verdict, cases, cpu ms) per candidate, and the expected decisions;
    /// every source as long as every other.
    fn check(rule: AdmitRule, reference: &str, runs: &[(&str, &str, u64)], want: &[&str]) {
        let runs: Vec<(&str, &str, u64, usize)> =
            runs.iter().map(|&(v, c, t)| (v, c, t, 100)).collect();
        check_sized(rule, reference, &runs, want);
    }

    /// The same with each candidate's source length.
    fn check_sized(
        rule: AdmitRule,
        reference: &str,
        runs: &[(&str, &str, u64, usize)],
        want: &[&str],
    ) {
        let reference = scored("scored(0/4)", reference, 0);
        let scored_runs: Vec<Scored> = runs.iter().map(|(v, c, t, _)| scored(v, c, *t)).collect();
        let contenders: Vec<Contender<'_>> = scored_runs
            .iter()
            .zip(runs)
            .enumerate()
            .map(|(idx, (scored, run))| Contender {
                idx,
                source_len: run.3,
                scored,
            })
            .collect();
        let got: Vec<String> = admit(&rule, Some(&reference), &contenders)
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

    /// Issue 30: CPU times a few milliseconds apart are one run's noise
    /// and decide nothing; a run cheaper by more than the noise goes first.
    #[test]
    fn ties_on_score_go_to_a_clearly_cheaper_run_then_the_shorter_source_then_the_earlier() {
        check_sized(
            rule(0.0, &[]),
            "ffff",
            &[
                // Within 5 ms of the cheapest 2/4 run: one tier, by length
                // and index.
                ("scored(2/4)", "ppff", 13, 120),
                ("scored(2/4)", "ppff", 10, 120),
                ("scored(4/4)", "pppp", 99, 500),
                ("scored(2/4)", "ppff", 12, 80),
                // 40 ms is no noise: after the tier, whatever its length.
                ("scored(2/4)", "ppff", 50, 10),
            ],
            &[
                "admitted(rank 3)",
                "admitted(rank 4)",
                "admitted(rank 1)",
                "admitted(rank 2)",
                "admitted(rank 5)",
            ],
        );
    }

    /// The order is built from tiers anchored at their cheapest run, so a
    /// chain of small steps never merges runs far apart, and the result is
    /// the same whatever the candidates' order in the input.
    #[test]
    fn tiers_are_anchored_not_chained() {
        let noise = CpuNoise {
            absolute: Duration::from_millis(5),
            relative: 0.0,
        };
        let runs: Vec<Scored> = [10, 14, 18, 22]
            .iter()
            .map(|&ms| scored("scored(1/1)", "p", ms))
            .collect();
        // Longest source first, so length alone would reverse the order.
        let contenders: Vec<Contender<'_>> = runs
            .iter()
            .enumerate()
            .map(|(idx, scored)| Contender {
                idx,
                source_len: 100 - idx,
                scored,
            })
            .collect();
        // {10, 14} and {18, 22}: each tier by length.
        assert_eq!(ranked(&contenders, vec![0, 1, 2, 3], noise), [1, 0, 3, 2]);
        assert_eq!(ranked(&contenders, vec![3, 1, 2, 0], noise), [1, 0, 3, 2]);
    }

    #[test]
    fn the_noise_margin_is_the_larger_of_absolute_and_relative() {
        let ms = Duration::from_millis;
        assert!(CPU_NOISE.within(ms(2), ms(7)));
        assert!(!CPU_NOISE.within(ms(2), ms(8)));
        assert!(CPU_NOISE.within(ms(100), ms(150)));
        assert!(!CPU_NOISE.within(ms(100), ms(151)));
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
