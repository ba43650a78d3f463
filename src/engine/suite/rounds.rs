//! A suite's repair rounds (issue 28): after round r is built and run,
//! each failing completion's program goes back to the pools (the suite's
//! own, or `--repair-pool`) with what went wrong, and round r + 1's
//! completions go down the same stream as round 0's: the same builds, the
//! same runs, the same store.
//!
//! ```text
//! round 0: draw --> programs --> (waves, builds, runs: `stream`) --> settled
//! round r: plan (parents, prompts; stored) --> draw asking --> programs --> settled
//! ```
//!
//! A problem stops being repaired once one of its completions passes. Each
//! failing completion of the last round that gave a program is a parent
//! and gets one child, so every completion descends from one of round 0's:
//! a chain, and pass@1 after round r is the share of chains that passed by
//! then (`repair::suite_rounds`). A completion that gave no program (a
//! failed request, a reply without code) ends its chain.
//!
//! A round's plan is stored before any of its requests is sent (the
//! suite's `suite_rounds` row, each problem's `repair_rounds` and
//! `repair_parents`), so a resume goes on in the round it stopped in, asks
//! the same prompts, and draws only the completions the store lacks.

use std::collections::HashMap;
use std::path::Path;

use anyhow::Result;

use super::draw::{Ask, SuiteDraw};
use super::ProblemDraw;
use crate::draw::{DrawOptions, Plan};
pub(super) use crate::engine::rounds::Resume;
use crate::engine::rounds::{self, Planned, Round, RoundKind};
use crate::repair::setup::{RepairRefused, Repairing};
use crate::repair::{solution_of, suite_repair_prompt, ProgramState};
use crate::repair::{stop_rule, Next, RepairFlags, RepairSettings, Stopped};
use crate::spec::Feedback;
use crate::store::{
    BatchId, PlannedParent, ProblemRound, Store, SuiteCompletionRow, SuiteId, SuitePart,
    SuiteProblemRow,
};
use crate::suite::Status;
use crate::support::progress::Progress;
use crate::text::extract::Extraction;

/// The settings of `flags`, and the repair pools' plan (from the pools
/// file the draw uses, each server asked for a connection when `reach`).
pub async fn resolve(
    flags: &RepairFlags,
    pools_file: &Path,
    opts: &DrawOptions,
    reach: bool,
) -> Result<Repairing> {
    let usage = |flag: &str, e: String| RepairRefused::Flags(format!("{flag}: {e}"));
    let plan = if flags.pools.is_empty() {
        None
    } else {
        let (plan, warnings) = Plan::for_suite(pools_file, &flags.pools, opts)?;
        for w in warnings {
            tracing::warn!("{w}");
        }
        if !plan.can_repair() {
            return Err(usage(
                "--repair-pool",
                "a replay corpus cannot answer a repair prompt".into(),
            )
            .into());
        }
        if reach {
            plan.check_reachable().await?;
        }
        Some(plan)
    };
    Ok(Repairing {
        settings: RepairSettings::for_suite(flags),
        plan,
    })
}

/// Where a suite that repairs goes on from, by its stored rounds.
pub(super) async fn resume_point(store: &Store, suite: SuiteId) -> Result<Resume> {
    let rounds = store.suite_rounds(suite).await?;
    Ok(Resume::of(rounds.last().map(|r| {
        (r.round, r.wall_s.is_some(), r.stopped.is_some())
    })))
}

/// A suite's rounds: its draw, and what it needs to plan a round.
pub(super) struct Rounds<'a> {
    pub suite: SuiteId,
    pub settings: &'a RepairSettings,
    pub draw: &'a SuiteDraw<'a>,
    pub store: &'a Store,
    pub progress: &'a Progress,
}

impl Rounds<'_> {
    /// Runs the rounds from `at` until they stop: each round drawn, every
    /// program it gave built, run and stored, then the next one planned.
    /// Records each round's draw phase itself.
    pub async fn run(&self, jobs: &mut [ProblemDraw], at: Resume) -> Result<()> {
        rounds::run(&mut SuiteRounds { rounds: self, jobs }, at, self.progress).await
    }
}

/// A repair round of a suite as planned: every problem's parents.
struct SuiteRound {
    round: u32,
    problems: Vec<ProblemRound>,
}

impl Planned for SuiteRound {
    fn round(&self) -> u32 {
        self.round
    }

    fn note(&self) -> String {
        let parents: usize = self.problems.iter().map(|p| p.parents.len()).sum();
        format!("{parents} failing completions sent back")
    }
}

/// The rounds with the problems they draw for, as the round loop runs them.
struct SuiteRounds<'a, 'b> {
    rounds: &'a Rounds<'a>,
    jobs: &'b mut [ProblemDraw],
}

impl RoundKind for SuiteRounds<'_, '_> {
    type Plan = SuiteRound;

    async fn stored_plan(&mut self, round: u32) -> Result<SuiteRound> {
        let Rounds { store, suite, .. } = *self.rounds;
        Ok(SuiteRound {
            round,
            problems: store.suite_round_plans(suite, round).await?,
        })
    }

    /// One round: its draw, then every program added so far settled.
    async fn run_round(&mut self, round: &Round<SuiteRound>) -> Result<()> {
        let Rounds {
            draw, store, suite, ..
        } = *self.rounds;
        let guard = match round {
            Round::First => draw.run(self.jobs, &Ask::First).await?,
            Round::Repair(plan) => {
                let plans: HashMap<BatchId, Vec<PlannedParent>> = plan
                    .problems
                    .iter()
                    .map(|p| (p.batch, p.parents.clone()))
                    .collect();
                let ask = Ask::Repair {
                    round: plan.round,
                    plans: &plans,
                };
                draw.run(self.jobs, &ask).await?
            }
        };
        store
            .record_suite_phase(suite, &SuitePart::all(), &guard.finish())
            .await?;
        draw.programs.settled().await;
        Ok(())
    }

    async fn end_round(&mut self, round: u32, wall_s: f64) -> Result<()> {
        let Rounds { store, suite, .. } = *self.rounds;
        store.end_suite_round(suite, round, wall_s).await?;
        crate::support::testpoint::reached("suite.round").await;
        Ok(())
    }

    async fn plan_next(&mut self, done: u32) -> Result<Next<SuiteRound>> {
        let Rounds {
            store,
            suite,
            settings,
            ..
        } = *self.rounds;
        next_round(store, suite, settings, done).await
    }

    async fn stop(&mut self, done: u32, why: Stopped) -> Result<()> {
        let Rounds { store, suite, .. } = *self.rounds;
        Ok(store.stop_suite_rounds(suite, done, why.as_str()).await?)
    }
}

/// Decides what follows round `done` (every completion of it has its
/// outcome) and, when it is a round, stores its plan before returning.
async fn next_round(
    store: &Store,
    suite: SuiteId,
    settings: &RepairSettings,
    done: u32,
) -> Result<Next<SuiteRound>> {
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
    let plans = plan_round(&problems, &completions, done, settings.feedback_mode());
    if plans.is_empty() {
        return Ok(Next::Stop(Stopped::NoParents));
    }
    let round = done + 1;
    store.begin_suite_round(suite, round, &plans).await?;
    Ok(Next::Round(SuiteRound {
        round,
        problems: plans,
    }))
}

/// Each unsolved problem's parents (its failing completions of round
/// `done` that gave a program), each with one child numbered on from the
/// problem's last completion, and the prompt it is asked.
fn plan_round(
    problems: &[SuiteProblemRow],
    completions: &[SuiteCompletionRow],
    done: u32,
    mode: Feedback,
) -> Vec<ProblemRound> {
    let mut plans = Vec::new();
    for p in problems {
        let of: Vec<&SuiteCompletionRow> = completions
            .iter()
            .filter(|c| c.batch_id == p.batch_id)
            .collect();
        if of.iter().any(|c| passed(c)) {
            continue;
        }
        let mut next = of.iter().map(|c| c.idx + 1).max().unwrap_or(0);
        let mut parents = Vec::new();
        for c in of.iter().filter(|c| c.round == done) {
            let Some(prompt) = repair_prompt(p, c, mode) else {
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

fn passed(c: &SuiteCompletionRow) -> bool {
    c.outcome
        .as_ref()
        .is_some_and(|o| o.outcome.status() == Status::Ok)
}

/// The prompt that asks for a repair of completion `c`; `None` when it
/// gave no program or has nothing to repair.
fn repair_prompt(p: &SuiteProblemRow, c: &SuiteCompletionRow, mode: Feedback) -> Option<String> {
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
