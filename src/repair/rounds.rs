//! A batch's stored rows seen round by round: the [`Attempt`]s the next
//! round's parents are chosen from, and each round's figures for `show`.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde::Serialize;

use super::{Attempt, AttemptState};
use crate::build::probe::ProbeVerdict;
use crate::score::ScoreVerdict;
use crate::store::{CandidateRow, Lineage, RoundRow};
use crate::text::extract::Extraction;

/// The batch's candidates that repair can work from: each group's
/// representative with code, its round, and how far it got.
/// `diagnostics` are the probe's words by candidate; `outputs` the kept
/// outputs of failed visible cases.
pub fn attempts(
    candidates: &[CandidateRow],
    lineage: &[Lineage],
    diagnostics: &HashMap<usize, String>,
    outputs: &BTreeMap<usize, BTreeMap<usize, String>>,
) -> Vec<Attempt> {
    let round_of: HashMap<usize, u32> = lineage.iter().map(|l| (l.idx, l.round)).collect();
    candidates
        .iter()
        .filter(|c| c.dup_of.is_none())
        .filter_map(|c| {
            let Extraction::Source(source) = &c.extraction else {
                return None;
            };
            Some(Attempt {
                idx: c.idx,
                round: round_of.get(&c.idx).copied().unwrap_or(0),
                source: source.clone(),
                state: state_of(c, diagnostics, outputs),
            })
        })
        .collect()
}

fn state_of(
    c: &CandidateRow,
    diagnostics: &HashMap<usize, String>,
    outputs: &BTreeMap<usize, BTreeMap<usize, String>>,
) -> AttemptState {
    let broken = |verdict: String| AttemptState::Broken {
        verdict,
        diagnostics: diagnostics.get(&c.idx).cloned().unwrap_or_default(),
    };
    match (&c.probe, &c.score) {
        (Some(ProbeVerdict::Compiled), Some(s)) if s.verdict == ScoreVerdict::ScoreBuildFailed => {
            broken(s.verdict.to_string())
        }
        (Some(ProbeVerdict::Compiled), Some(s)) => AttemptState::Ran {
            verdict: s.verdict.to_string(),
            cases: s.cases.clone(),
            outputs: outputs.get(&c.idx).cloned().unwrap_or_default(),
        },
        (
            Some(
                v @ (ProbeVerdict::CompileError { .. }
                | ProbeVerdict::Forbidden(_)
                | ProbeVerdict::CompileTimeout
                | ProbeVerdict::CompileOutOfMemory),
            ),
            _,
        ) => broken(v.to_string()),
        // Not probed or scored yet, or the host's failure: nothing of the
        // code to say.
        _ => AttemptState::Other,
    }
}

/// What one round came to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoundFigures {
    pub round: u32,
    /// Parents repaired in this round (0 in round 0).
    pub parents: usize,
    pub replies: usize,
    /// Candidates whose code no earlier reply had (of this round or any
    /// before): dedup runs against every earlier round.
    pub unique: usize,
    /// Of those, how many compiled and how many passed every case.
    pub compiled: usize,
    pub passing: usize,
    /// The round's best candidate: cases passed and total.
    pub best: Option<(usize, usize)>,
    /// Tokens the servers counted; `None` when any reply lacks usage.
    pub prompt_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub wall_s: Option<f64>,
    /// Why no round followed, on the round where they stopped.
    pub stopped: Option<String>,
}

impl RoundFigures {
    /// The figures of every stored round, from the batch's rows.
    /// `prompt_tokens` are the replies' prompt tokens by index.
    pub fn of_batch(
        rounds: &[RoundRow],
        lineage: &[Lineage],
        candidates: &[CandidateRow],
        prompt_tokens: &HashMap<usize, Option<u64>>,
    ) -> Vec<RoundFigures> {
        let by_idx: HashMap<usize, &CandidateRow> = candidates.iter().map(|c| (c.idx, c)).collect();
        rounds
            .iter()
            .map(|row| {
                let replies: Vec<usize> = lineage
                    .iter()
                    .filter(|l| l.round == row.round)
                    .map(|l| l.idx)
                    .collect();
                let rows: Vec<&CandidateRow> = replies
                    .iter()
                    .filter_map(|i| by_idx.get(i).copied())
                    .collect();
                let unique: Vec<&&CandidateRow> = rows
                    .iter()
                    .filter(|c| c.dup_of.is_none() && matches!(c.extraction, Extraction::Source(_)))
                    .collect();
                let passes = |c: &CandidateRow| {
                    c.score
                        .as_ref()
                        .is_some_and(|s| s.verdict.finished() && s.passed == s.total && s.total > 0)
                };
                // A duplicate scores as its representative did.
                let best = rows
                    .iter()
                    .filter_map(|c| {
                        let scored = match c.dup_of {
                            Some(rep) => by_idx.get(&rep)?.score.as_ref(),
                            None => c.score.as_ref(),
                        }?;
                        (scored.verdict != ScoreVerdict::ScoreBuildFailed)
                            .then_some((scored.passed, scored.total))
                    })
                    .max_by_key(|(passed, _)| *passed);
                let sum = |tokens: Vec<Option<u64>>| -> Option<u64> { tokens.into_iter().sum() };
                RoundFigures {
                    round: row.round,
                    parents: row.parents.len(),
                    replies: replies.len(),
                    unique: unique.len(),
                    compiled: unique
                        .iter()
                        .filter(|c| c.probe.as_ref().is_some_and(|p| p.compiled()))
                        .count(),
                    passing: unique.iter().filter(|c| passes(c)).count(),
                    best,
                    prompt_tokens: sum(replies
                        .iter()
                        .map(|i| prompt_tokens.get(i).copied().flatten())
                        .collect()),
                    output_tokens: sum(rows.iter().map(|c| c.completion_tokens).collect()),
                    wall_s: row.wall_s,
                    stopped: row.stopped.clone(),
                }
            })
            .collect()
    }
}

/// The per-round table `show` prints.
pub struct RoundsTable<'a>(pub &'a [RoundFigures]);

impl fmt::Display for RoundsTable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let opt = |v: Option<u64>| v.map_or("-".to_owned(), |v| v.to_string());
        writeln!(
            f,
            "{:>5} {:>7} {:>7} {:>6} {:>8} {:>7} {:>9} {:>9} {:>10} {:>8}",
            "round",
            "parents",
            "replies",
            "unique",
            "compiled",
            "passing",
            "best",
            "tok in",
            "tok out",
            "wall"
        )?;
        for r in self.0 {
            let best = r.best.map_or("-".to_owned(), |(p, t)| format!("{p}/{t}"));
            let wall = r.wall_s.map_or("-".to_owned(), |w| format!("{w:.1} s"));
            writeln!(
                f,
                "{:>5} {:>7} {:>7} {:>6} {:>8} {:>7} {:>9} {:>9} {:>10} {:>8}",
                r.round,
                r.parents,
                r.replies,
                r.unique,
                r.compiled,
                r.passing,
                best,
                opt(r.prompt_tokens),
                opt(r.output_tokens),
                wall
            )?;
        }
        if let Some(why) = self.0.iter().rev().find_map(|r| r.stopped.as_deref()) {
            writeln!(f, "rounds stopped: {why}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::build::package::ModuleKey;
    use crate::score::{CaseOutcome, Scored};

    fn row(
        idx: usize,
        dup_of: Option<usize>,
        probe: Option<ProbeVerdict>,
        letters: Option<&str>,
    ) -> CandidateRow {
        CandidateRow {
            idx,
            pool: "fast".into(),
            model: None,
            completion_tokens: Some(10),
            extraction: Extraction::Source(format!("fn f() {{ {idx} }}")),
            fingerprint: None,
            dup_of,
            probe,
            error_file: None,
            score: letters.map(|l| {
                let cases = crate::score::parse_case_letters(l).unwrap();
                let passed = cases.iter().filter(|c| **c == CaseOutcome::Pass).count();
                Scored {
                    key: ModuleKey::Candidate(idx),
                    verdict: ScoreVerdict::Scored {
                        passed,
                        total: cases.len(),
                    },
                    passed,
                    total: cases.len(),
                    wall: Duration::ZERO,
                    cpu: Duration::ZERO,
                    cases,
                    restarts: 0,
                    peak_processes: None,
                    stderr: String::new(),
                }
            }),
            admitted: false,
            alpha_fingerprint: None,
            exact_dup_of: None,
            alpha_dup_of: None,
            rank: None,
            admission: None,
        }
    }

    fn lineage(rounds: &[(usize, u32, Option<usize>)]) -> Vec<Lineage> {
        rounds
            .iter()
            .map(|(idx, round, parent)| Lineage {
                idx: *idx,
                round: *round,
                parent: *parent,
            })
            .collect()
    }

    fn error() -> Option<ProbeVerdict> {
        Some(ProbeVerdict::CompileError {
            codes: vec!["E0308".into()],
        })
    }

    #[test]
    fn attempts_are_the_representatives_with_their_state() {
        let candidates = [
            row(0, None, Some(ProbeVerdict::Compiled), Some("pf")),
            row(1, None, error(), None),
            row(2, Some(0), Some(ProbeVerdict::Compiled), None),
            row(3, None, None, None),
        ];
        let diagnostics = HashMap::from([(1, "error[E0308]: x\n".to_owned())]);
        let outputs = BTreeMap::from([(0, BTreeMap::from([(1, "7".to_owned())]))]);
        let got = attempts(
            &candidates,
            &lineage(&[(0, 0, None), (1, 0, None), (2, 1, Some(0)), (3, 1, Some(1))]),
            &diagnostics,
            &outputs,
        );
        assert_eq!(got.iter().map(|a| a.idx).collect::<Vec<_>>(), [0, 1, 3]);
        assert!(matches!(&got[0].state, AttemptState::Ran { outputs, .. } if outputs[&1] == "7"));
        assert_eq!(
            got[1].state,
            AttemptState::Broken {
                verdict: "compile_error(E0308)".into(),
                diagnostics: "error[E0308]: x\n".into()
            }
        );
        assert_eq!((got[2].round, &got[2].state), (1, &AttemptState::Other));
    }

    #[test]
    fn figures_are_counted_per_round() {
        let candidates = [
            row(0, None, Some(ProbeVerdict::Compiled), Some("pf")),
            row(1, None, error(), None),
            row(2, Some(0), Some(ProbeVerdict::Compiled), None),
            row(3, None, Some(ProbeVerdict::Compiled), Some("pp")),
        ];
        let lineage = lineage(&[(0, 0, None), (1, 0, None), (2, 1, Some(0)), (3, 1, Some(1))]);
        let rounds = [
            RoundRow {
                round: 0,
                first_idx: 0,
                n: 2,
                started_at: String::new(),
                wall_s: Some(3.0),
                stopped: None,
                parents: vec![],
            },
            RoundRow {
                round: 1,
                first_idx: 2,
                n: 2,
                started_at: String::new(),
                wall_s: Some(1.0),
                stopped: Some("all_pass".into()),
                parents: vec![
                    crate::store::PlannedParent {
                        parent: 0,
                        first_idx: 2,
                        children: 1,
                        prompt: String::new(),
                    },
                    crate::store::PlannedParent {
                        parent: 1,
                        first_idx: 3,
                        children: 1,
                        prompt: String::new(),
                    },
                ],
            },
        ];
        let prompt_tokens = HashMap::from([(0, Some(5)), (1, Some(5)), (2, Some(50)), (3, None)]);
        let figures = RoundFigures::of_batch(&rounds, &lineage, &candidates, &prompt_tokens);
        let r0 = &figures[0];
        assert_eq!(
            (r0.replies, r0.unique, r0.compiled, r0.passing, r0.best),
            (2, 2, 1, 0, Some((1, 2)))
        );
        assert_eq!((r0.prompt_tokens, r0.output_tokens), (Some(10), Some(20)));
        let r1 = &figures[1];
        assert_eq!(
            (
                r1.parents,
                r1.replies,
                r1.unique,
                r1.compiled,
                r1.passing,
                r1.best
            ),
            (2, 2, 1, 1, 1, Some((2, 2)))
        );
        assert_eq!(r1.prompt_tokens, None, "one reply lacks usage");
        let text = RoundsTable(&figures).to_string();
        assert!(text.contains("rounds stopped: all_pass"), "{text}");
        assert_eq!(text.lines().count(), 4, "{text}");
    }
}
