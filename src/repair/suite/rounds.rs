//! A suite's rounds as figures (issue 28): per round its completions,
//! how many compiled and passed, the tokens it spent and its wall; and
//! pass@1 after each round, as Reflexion reports it.
//!
//! Every completion of a repair round repairs one of the round before, so
//! each descends from one completion of round 0: a chain. pass@1 after
//! round r is, per problem, the share of its chains that passed by round
//! r, averaged over the problems. A problem is no longer repaired once one
//! of its completions passed, so its figure stays where it was.

use std::collections::HashMap;

use serde::Serialize;

use crate::build::probe::ProbeVerdict;
use crate::store::{BatchId, SuiteCompletionRow, SuiteProblemRow, SuiteRoundRow};
use crate::suite::Status;

/// A suite's repair rounds. The problems' table and pass@k above are the
/// first draw's (round 0): every later completion repairs one of them.
#[derive(Debug, Clone, Serialize)]
pub struct SuiteRounds {
    /// Repair rounds asked for.
    pub asked: u32,
    /// What repair prompts carried: `full` or `errors_only`.
    pub feedback: String,
    pub max_tokens: Option<u64>,
    /// Why no round followed the last one; `None` while they go on.
    pub stopped: Option<String>,
    /// pass@1 after each round, in order: the rounds' own figures.
    pub pass_at_1: Vec<Option<f64>>,
    pub rounds: Vec<SuiteRoundFigures>,
}

impl SuiteRounds {
    /// The rounds of a suite that stored repair settings.
    pub fn new(
        settings: &crate::repair::RepairSettings,
        problems: &[SuiteProblemRow],
        completions: &[SuiteCompletionRow],
        rounds: &[SuiteRoundRow],
    ) -> SuiteRounds {
        let figures = suite_round_figures(problems, completions, rounds);
        SuiteRounds {
            asked: settings.rounds,
            feedback: settings.feedback.clone(),
            max_tokens: settings.max_tokens,
            stopped: rounds.iter().rev().find_map(|r| r.stopped.clone()),
            pass_at_1: figures.iter().map(|f| f.pass_at_1).collect(),
            rounds: figures,
        }
    }
}

/// One round's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SuiteRoundFigures {
    pub round: u32,
    pub completions: usize,
    /// Completions whose program compiled.
    pub compiled: usize,
    /// Completions whose program passed every assert.
    pub passing: usize,
    /// pass@1 after this round (its chains that passed by now).
    pub pass_at_1: Option<f64>,
    /// Prompt and output tokens of the round's replies, from the servers'
    /// usage; `None` when a reply lacks it.
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    /// From the round's start to its last outcome; `None` while it runs.
    pub wall_s: Option<f64>,
}

/// Every stored round's figures, in order.
pub fn suite_round_figures(
    problems: &[SuiteProblemRow],
    completions: &[SuiteCompletionRow],
    rounds: &[SuiteRoundRow],
) -> Vec<SuiteRoundFigures> {
    rounds
        .iter()
        .map(|r| {
            let of: Vec<&SuiteCompletionRow> =
                completions.iter().filter(|c| c.round == r.round).collect();
            let sum = |tokens: fn(&SuiteCompletionRow) -> Option<u64>| -> Option<u64> {
                of.iter().map(|c| tokens(c)).sum()
            };
            SuiteRoundFigures {
                round: r.round,
                completions: of.len(),
                compiled: of
                    .iter()
                    .filter(|c| {
                        c.outcome
                            .as_ref()
                            .is_some_and(|o| o.probe == Some(ProbeVerdict::Compiled))
                    })
                    .count(),
                passing: of.iter().filter(|c| passed(c)).count(),
                pass_at_1: pass_at_1_after(problems, completions, r.round),
                input_tokens: sum(|c| c.drawn.reply.prompt_tokens),
                output_tokens: sum(|c| c.drawn.reply.completion_tokens),
                wall_s: r.wall_s,
            }
        })
        .collect()
}

/// The completions of the problem stored as batch `batch`.
pub fn of_problem(completions: &[SuiteCompletionRow], batch: BatchId) -> Vec<&SuiteCompletionRow> {
    completions.iter().filter(|c| c.batch_id == batch).collect()
}

/// Whether the completion's program passed every assert.
pub(in crate::repair) fn passed(c: &SuiteCompletionRow) -> bool {
    c.outcome
        .as_ref()
        .is_some_and(|o| o.outcome.status() == Status::Ok)
}

/// pass@1 after `round`: per problem, the share of its round-0 chains
/// with a passing completion of round `round` or before; the mean over
/// the problems that have any. `None` when none has.
pub fn pass_at_1_after(
    problems: &[SuiteProblemRow],
    completions: &[SuiteCompletionRow],
    round: u32,
) -> Option<f64> {
    let mut rates = Vec::new();
    for p in problems {
        let of = of_problem(completions, p.batch_id);
        let parent: HashMap<usize, Option<usize>> = of.iter().map(|c| (c.idx, c.parent)).collect();
        let root = |mut idx: usize| {
            // Parents come before their children; the bound guards a
            // damaged store's cycle.
            for _ in 0..=of.len() {
                match parent.get(&idx).copied().flatten() {
                    Some(up) => idx = up,
                    None => break,
                }
            }
            idx
        };
        let chains = of.iter().filter(|c| c.round == 0).count();
        if chains == 0 {
            continue;
        }
        let mut solved: Vec<usize> = of
            .iter()
            .filter(|c| c.round <= round && passed(c))
            .map(|c| root(c.idx))
            .collect();
        solved.sort_unstable();
        solved.dedup();
        rates.push(solved.len() as f64 / chains as f64);
    }
    (!rates.is_empty()).then(|| rates.iter().sum::<f64>() / rates.len() as f64)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::draw::{Drawn, Reply};
    use crate::store::{BatchStatus, SuiteOutcomeRow};
    use crate::suite::{CaseEnd, CompletionOutcome, Problem};

    fn problem(batch: i64) -> SuiteProblemRow {
        SuiteProblemRow {
            batch_id: batch,
            pos: batch as usize,
            problem: Problem {
                name: format!("p{batch}"),
                prompt: String::new(),
                tests: String::new(),
                stop_tokens: Vec::new(),
            },
            n: 2,
            status: BatchStatus::Finished,
        }
    }

    /// A completion: `ok` passed, else failed to compile.
    fn completion(
        batch: i64,
        idx: usize,
        round: u32,
        parent: Option<usize>,
        ok: bool,
    ) -> SuiteCompletionRow {
        let outcome = if ok {
            CompletionOutcome::Ran {
                whole: CaseEnd::Passed,
                cases: vec![CaseEnd::Passed],
            }
        } else {
            CompletionOutcome::CompileError
        };
        SuiteCompletionRow {
            batch_id: batch,
            idx,
            drawn: Drawn {
                idx,
                pool: "p".into(),
                reply: Reply {
                    prompt_tokens: Some(10),
                    completion_tokens: Some(idx as u64 + 1),
                    ..Reply::default()
                },
            },
            extraction: None,
            dup_of: None,
            outcome: Some(SuiteOutcomeRow {
                probe: Some(if ok {
                    ProbeVerdict::Compiled
                } else {
                    ProbeVerdict::CompileError { codes: vec![] }
                }),
                error_file: None,
                diagnostics: None,
                outcome,
                run_wall: Duration::ZERO,
                run_cpu: Duration::ZERO,
                messages: Vec::new(),
            }),
            round,
            parent,
        }
    }

    fn round(round: u32) -> SuiteRoundRow {
        SuiteRoundRow {
            round,
            started_at: String::new(),
            wall_s: Some(1.0),
            stopped: None,
        }
    }

    #[test]
    fn pass_at_1_counts_the_chains_that_passed_by_each_round() {
        let problems = [problem(1), problem(2)];
        let completions = [
            // Problem 1: both chains fail in round 0; chain 0's repair
            // fails, chain 1's passes; round 2 repairs nothing (solved).
            completion(1, 0, 0, None, false),
            completion(1, 1, 0, None, false),
            completion(1, 2, 1, Some(0), false),
            completion(1, 3, 1, Some(1), true),
            // Problem 2: one chain passes at once.
            completion(2, 0, 0, None, true),
            completion(2, 1, 0, None, false),
        ];
        let figures = suite_round_figures(&problems, &completions, &[round(0), round(1)]);
        let rates: Vec<Option<f64>> = figures.iter().map(|f| f.pass_at_1).collect();
        assert_eq!(rates, [Some(0.25), Some(0.5)]);
        assert_eq!(
            (
                figures[1].completions,
                figures[1].compiled,
                figures[1].passing
            ),
            (2, 1, 1)
        );
        assert_eq!(figures[1].input_tokens, Some(20));
        assert_eq!(figures[1].output_tokens, Some(3 + 4));
        // A grandchild counts for its round-0 ancestor's chain.
        let deeper = [
            completion(1, 0, 0, None, false),
            completion(1, 1, 1, Some(0), false),
            completion(1, 2, 2, Some(1), true),
        ];
        let one = [problem(1)];
        assert_eq!(pass_at_1_after(&one, &deeper, 1), Some(0.0));
        assert_eq!(pass_at_1_after(&one, &deeper, 2), Some(1.0));
    }

    #[test]
    fn tokens_are_unknown_when_a_reply_lacks_usage() {
        let mut c = completion(1, 0, 0, None, true);
        c.drawn.reply.completion_tokens = None;
        let figures = suite_round_figures(&[problem(1)], &[c], &[round(0)]);
        assert_eq!(figures[0].output_tokens, None);
        assert_eq!(figures[0].input_tokens, Some(10));
    }
}
