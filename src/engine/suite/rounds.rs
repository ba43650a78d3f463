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
//! then (`repair::suite::rounds`). A completion that gave no program (a
//! failed request, a reply without code) ends its chain.
//!
//! A round's plan is stored before any of its requests is sent (the
//! suite's `suite_rounds` row, each problem's `repair_rounds` and
//! `repair_parents`), so a resume goes on in the round it stopped in, asks
//! the same prompts, and draws only the completions the store lacks.

use std::path::Path;

use anyhow::Result;

use super::draw::{ProblemDraw, SuiteDraw};

use crate::draw::{DrawOptions, Plan};
pub(super) use crate::engine::rounds::Resume;
use crate::engine::rounds::{self, Planned, Round, RoundKind};
use crate::repair::planner::{self, SuiteRoundPlan};
use crate::repair::setup::{RepairRefused, Repairing};
use crate::repair::{Next, RepairFlags, RepairSettings, Stopped};
use crate::store::{Store, SuiteId, SuitePart};
use crate::support::progress::Progress;

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

impl Planned for SuiteRoundPlan {
    fn round(&self) -> u32 {
        self.round
    }

    fn note(&self) -> String {
        format!("{} failing completions sent back", self.parents())
    }
}

/// The rounds with the problems they draw for, as the round loop runs them.
struct SuiteRounds<'a, 'b> {
    rounds: &'a Rounds<'a>,
    jobs: &'b mut [ProblemDraw],
}

impl RoundKind for SuiteRounds<'_, '_> {
    type Plan = SuiteRoundPlan;

    async fn stored_plan(&mut self, round: u32) -> Result<SuiteRoundPlan> {
        let Rounds { store, suite, .. } = *self.rounds;
        Ok(SuiteRoundPlan::stored(store, suite, round).await?)
    }

    /// One round: its draw, then every program added so far settled.
    async fn run_round(&mut self, round: &Round<SuiteRoundPlan>) -> Result<()> {
        let Rounds {
            draw, store, suite, ..
        } = *self.rounds;
        let guard = draw.run(self.jobs, round).await?;
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

    async fn plan_next(&mut self, done: u32) -> Result<Next<SuiteRoundPlan>> {
        let Rounds {
            store,
            suite,
            settings,
            ..
        } = *self.rounds;
        Ok(planner::next_suite_round(store, suite, settings, done).await?)
    }

    async fn stop(&mut self, done: u32, why: Stopped) -> Result<()> {
        let Rounds { store, suite, .. } = *self.rounds;
        Ok(store.stop_suite_rounds(suite, done, why.as_str()).await?)
    }
}
