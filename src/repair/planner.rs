//! The next repair round of a batch or a suite, read from what the store
//! holds of the rounds before it (issue 28): whether the rounds stop (the
//! one [`stop_rule`], then no parents left), and if not, its parents,
//! their prompts and the replies it asks for. The pure parts
//! (parents, feedback, prompts) are `repair`'s; this module reads the rows
//! and writes the round's plan before any of its requests is sent, so a
//! resume asks the same parents the same prompts.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::suite::rounds::{of_problem, passed};
use crate::repair::settings::{stop_rule, Next, RepairSettings, Stopped};
use crate::repair::{self, Attempt, PromptContext, ShownCase};
use crate::repair::{solution_of, suite_repair_prompt, ProgramState};
use crate::spec::Feedback;
use crate::spec::{Spec, StopWhen};
use crate::store::{
    BatchId, PlannedParent, ProblemRound, Store, StoreError, SuiteCompletionRow, SuiteId,
    SuiteProblemRow,
};
use crate::text::extract::Extraction;

/// A repair round as planned: its replies are `first_idx ..
/// first_idx + n`, each parent's children a run of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundPlan {
    pub round: u32,
    pub first_idx: usize,
    pub parents: Vec<PlannedParent>,
}

impl RoundPlan {
    /// Replies the round asks for.
    pub fn n(&self) -> usize {
        self.parents.iter().map(|p| p.children).sum()
    }

    /// One past the round's last reply.
    pub fn end(&self) -> usize {
        self.first_idx + self.n()
    }

    /// Each reply's prompt, by index.
    pub fn asks(&self) -> BTreeMap<usize, String> {
        self.parents
            .iter()
            .flat_map(|p| (p.first_idx..p.first_idx + p.children).map(|i| (i, p.prompt.clone())))
            .collect()
    }

    /// The candidate reply `idx` repairs.
    pub fn parent_of(&self, idx: usize) -> Option<usize> {
        self.parents
            .iter()
            .find(|p| (p.first_idx..p.first_idx + p.children).contains(&idx))
            .map(|p| p.parent)
    }
}

/// Decides what follows round `done` of `batch` (every one of its replies
/// stored, probed and scored), and when it is a round, stores its plan
/// (the round's row and its parents' prompts) before returning it.
pub async fn next_round(
    store: &Store,
    spec: &Spec,
    batch: BatchId,
    settings: &RepairSettings,
    done: u32,
) -> Result<Next<RoundPlan>, StoreError> {
    let candidates = store.candidates(batch).await?;
    let lineage = store.lineage(batch).await?;
    let diagnostics = diagnostics(store, batch).await?;
    let outputs = store.case_outputs(batch).await?;
    let attempts = repair::attempts(&candidates, &lineage, &diagnostics, &outputs);
    let solved = solved(store, batch, settings.stop_when(), &attempts).await?;
    let spent = match settings.max_tokens {
        Some(_) => store
            .draw_replies(batch)
            .await?
            .iter()
            .filter_map(|d| d.reply.completion_tokens)
            .sum(),
        None => 0,
    };
    if let Some(stopped) = stop_rule(settings, done, solved, spent) {
        return Ok(Next::Stop(stopped));
    }
    let rounds = store.repair_rounds(batch).await?;
    let repaired: BTreeSet<usize> = rounds
        .iter()
        .flat_map(|r| r.parents.iter().map(|p| p.parent))
        .collect();
    let chosen = repair::choose_parents(&attempts, &repaired, spec.repair.parents);
    // Settings a task stored always say how many; one child per parent
    // otherwise, as a suite's round asks.
    let candidates = settings.candidates.unwrap_or(chosen.len());
    let spread = repair::spread(&chosen, candidates);
    if spread.is_empty() {
        return Ok(Next::Stop(Stopped::NoParents));
    }
    let shown = ShownCase::visible(spec);
    let ctx = PromptContext::of_spec(spec, &shown, settings.feedback_mode());
    let by_idx: HashMap<usize, &Attempt> = attempts.iter().map(|a| (a.idx, a)).collect();
    let first_idx = lineage
        .iter()
        .map(|l| l.idx + 1)
        .max()
        .unwrap_or(0)
        .max(rounds.iter().map(|r| r.first_idx + r.n).max().unwrap_or(0));
    let mut next = first_idx;
    let parents: Vec<PlannedParent> = spread
        .iter()
        .map(|p| {
            let planned = PlannedParent {
                parent: p.idx,
                first_idx: next,
                children: p.children,
                prompt: repair::repair_prompt(&ctx, by_idx[&p.idx]),
            };
            next += p.children;
            planned
        })
        .collect();
    let plan = RoundPlan {
        round: done + 1,
        first_idx,
        parents,
    };
    store
        .begin_round(batch, plan.round, plan.first_idx, plan.n(), &plan.parents)
        .await?;
    Ok(Next::Round(plan))
}

/// Repair round `round` of `batch` as it was planned (the same prompts),
/// for a resume that goes on in it.
pub async fn stored_round(
    store: &Store,
    batch: BatchId,
    round: u32,
) -> Result<Option<RoundPlan>, StoreError> {
    let rounds = store.repair_rounds(batch).await?;
    Ok(rounds
        .into_iter()
        .find(|r| r.round == round && round > 0)
        .map(|r| RoundPlan {
            round: r.round,
            first_idx: r.first_idx,
            parents: r.parents,
        }))
}

/// Whether the spec's stop rule holds on what the rounds so far came to.
async fn solved(
    store: &Store,
    batch: BatchId,
    when: StopWhen,
    attempts: &[Attempt],
) -> Result<Option<Stopped>, StoreError> {
    Ok(match when {
        StopWhen::Never => None,
        StopWhen::AllPass => attempts
            .iter()
            .any(Attempt::passes_all)
            .then_some(Stopped::AllPass),
        StopWhen::BeatsCommitted => {
            let committed = store.batch(batch).await?.committed.map(|s| s.passed);
            let best = attempts.iter().filter_map(Attempt::passed).max();
            match (best, committed) {
                (Some(best), Some(committed)) if best > committed => Some(Stopped::BeatsCommitted),
                (Some(_), None) if attempts.iter().any(Attempt::passes_all) => {
                    Some(Stopped::AllPass)
                }
                _ => None,
            }
        }
    })
}

/// What rustc said of each candidate that did not build, from the batch's
/// own probe run.
async fn diagnostics(store: &Store, batch: BatchId) -> Result<HashMap<usize, String>, StoreError> {
    let Some(run) = store.first_probe_run(batch).await? else {
        return Ok(HashMap::new());
    };
    Ok(store
        .probe_verdicts(batch, run)
        .await?
        .into_iter()
        .filter(|v| !v.diagnostics.is_empty())
        .map(|v| (v.idx, v.diagnostics))
        .collect())
}

/// A suite's repair round as planned: each problem's parents, by its
/// batch, each with one child asked its prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuiteRoundPlan {
    pub round: u32,
    pub plans: HashMap<BatchId, Vec<PlannedParent>>,
}

impl SuiteRoundPlan {
    /// Round `round` of `suite` as it was planned (the same prompts), for
    /// a resume that goes on in it.
    pub async fn stored(
        store: &Store,
        suite: SuiteId,
        round: u32,
    ) -> Result<SuiteRoundPlan, StoreError> {
        let plans = store.suite_round_plans(suite, round).await?;
        Ok(SuiteRoundPlan {
            round,
            plans: plans.into_iter().map(|p| (p.batch, p.parents)).collect(),
        })
    }

    /// Parents in all.
    pub fn parents(&self) -> usize {
        self.plans.values().map(Vec::len).sum()
    }
}

/// Decides what follows round `done` of `suite` (every completion of it
/// has its outcome) and, when it is a round, stores its plan before returning.
pub async fn next_suite_round(
    store: &Store,
    suite: SuiteId,
    settings: &RepairSettings,
    done: u32,
) -> Result<Next<SuiteRoundPlan>, StoreError> {
    let problems = store.suite_problems(suite).await?;
    let completions = store.suite_completions(suite).await?;
    let solved = problems
        .iter()
        .all(|p| {
            completions
                .iter()
                .any(|c| c.batch_id == p.batch_id && passed(c))
        })
        .then_some(Stopped::AllPass);
    let spent = completions
        .iter()
        .filter_map(|c| c.drawn.reply.completion_tokens)
        .sum();
    if let Some(stopped) = stop_rule(settings, done, solved, spent) {
        return Ok(Next::Stop(stopped));
    }
    let plans = plan_suite_round(&problems, &completions, done, settings.feedback_mode());
    if plans.is_empty() {
        return Ok(Next::Stop(Stopped::NoParents));
    }
    let round = done + 1;
    store.begin_suite_round(suite, round, &plans).await?;
    Ok(Next::Round(SuiteRoundPlan {
        round,
        plans: plans.into_iter().map(|p| (p.batch, p.parents)).collect(),
    }))
}

/// Each unsolved problem's parents (its failing completions of round
/// `done` that gave a program), each with one child numbered on from the
/// problem's last completion, and the prompt it is asked.
fn plan_suite_round(
    problems: &[SuiteProblemRow],
    completions: &[SuiteCompletionRow],
    done: u32,
    mode: Feedback,
) -> Vec<ProblemRound> {
    let mut plans = Vec::new();
    for p in problems {
        let of = of_problem(completions, p.batch_id);
        if of.iter().any(|c| passed(c)) {
            continue;
        }
        let mut next = of.iter().map(|c| c.idx + 1).max().unwrap_or(0);
        let mut parents = Vec::new();
        for c in of.iter().filter(|c| c.round == done) {
            let Some(prompt) = suite_prompt(p, c, mode) else {
                continue;
            };
            parents.push(PlannedParent {
                parent: c.idx,
                first_idx: next,
                children: 1,
                prompt,
            });
            next += 1;
        }
        if !parents.is_empty() {
            plans.push(ProblemRound {
                batch: p.batch_id,
                parents,
            });
        }
    }
    plans
}

/// The prompt that asks for a repair of completion `c`; `None` when it
/// gave no program or has nothing to repair.
fn suite_prompt(p: &SuiteProblemRow, c: &SuiteCompletionRow, mode: Feedback) -> Option<String> {
    let Some(Extraction::Source(program)) = &c.extraction else {
        return None;
    };
    let outcome = c.outcome.as_ref()?;
    let diagnostics = outcome.diagnostics.clone().unwrap_or_default();
    let state = ProgramState::of_outcome(
        &p.problem,
        &outcome.outcome,
        &diagnostics,
        &outcome.messages,
    )?;
    let solution = solution_of(&p.problem, program)?;
    Some(suite_repair_prompt(&p.problem, solution, &state, mode))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_gives_each_reply_its_parent_s_prompt() {
        let plan = RoundPlan {
            round: 1,
            first_idx: 4,
            parents: vec![
                PlannedParent {
                    parent: 2,
                    first_idx: 4,
                    children: 2,
                    prompt: "fix 2".into(),
                },
                PlannedParent {
                    parent: 0,
                    first_idx: 6,
                    children: 1,
                    prompt: "fix 0".into(),
                },
            ],
        };
        assert_eq!((plan.n(), plan.end()), (3, 7));
        let asks = plan.asks();
        let asks: Vec<(usize, &str)> = asks.iter().map(|(i, p)| (*i, p.as_str())).collect();
        assert_eq!(asks, [(4, "fix 2"), (5, "fix 2"), (6, "fix 0")]);
        assert_eq!(
            [3, 4, 5, 6, 7].map(|i| plan.parent_of(i)),
            [None, Some(2), Some(2), Some(0), None]
        );
    }

    #[test]
    fn settings_round_trip_through_json() {
        let settings = RepairSettings {
            rounds: 2,
            candidates: Some(8),
            stop: Some("all_pass".into()),
            feedback: "full".into(),
            pools: vec!["fixer".into()],
            max_tokens: Some(4000),
        };
        assert_eq!(
            RepairSettings::from_json(&settings.to_json()),
            Some(settings)
        );
    }
}
