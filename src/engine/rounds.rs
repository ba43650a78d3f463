//! The round loop, written once for both kinds of problem (issue 35): a
//! task's batch (`batch/rounds.rs`) and a suite (`suite/rounds.rs`) each say how
//! to run, end, plan and stop one of their rounds ([`RoundKind`]); the
//! order is this module's alone.
//!
//! ```text
//! resume point --> round --> its end stored --> next? --plan stored--> round ...
//!                                                   \--stop stored--> done
//! ```
//!
//! A fresh run is a resume of nothing: it starts at [`Resume::First`]. A
//! round's plan is stored before any of its requests is sent, so a resume
//! goes on in the round it stopped in with the same prompts, and draws only
//! what the store lacks.

use std::time::Instant;

use anyhow::Result;

use crate::repair::{Next, Stopped};
use crate::support::progress::Progress;

/// A repair round as its kind planned it.
pub(super) trait Planned {
    /// Its number: 1 for the first repair round.
    fn round(&self) -> u32;
    /// What its note says after "repair round N: ".
    fn note(&self) -> String;
}

/// A round: the first draw, or a repair round as planned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Round<P> {
    First,
    Repair(P),
}

impl<P: Planned> Round<P> {
    pub(super) fn number(&self) -> u32 {
        match self {
            Round::First => 0,
            Round::Repair(p) => p.round(),
        }
    }
}

/// Where a run's rounds go on from, by what it stored of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Resume {
    /// Round 0, the first draw (what of it is stored is not drawn again).
    First,
    /// Repair round r, as its stored plan says.
    Repair(u32),
    /// After round r, which ended: decide what follows.
    After(u32),
    /// The rounds stopped: nothing more is drawn.
    Stopped,
}

impl Resume {
    /// By the last round stored: its number, whether it ended (its wall
    /// time is stored) and whether the rounds stopped after it; `None`
    /// before any.
    pub(super) fn of(last: Option<(u32, bool, bool)>) -> Resume {
        match last {
            None | Some((0, false, _)) => Resume::First,
            Some((round, false, _)) => Resume::Repair(round),
            Some((_, true, true)) => Resume::Stopped,
            Some((round, true, false)) => Resume::After(round),
        }
    }
}

/// What a kind of problem does in each step of the loop.
pub(super) trait RoundKind {
    type Plan: Planned;

    /// Repair round `round`'s plan as stored, for a resume.
    async fn stored_plan(&mut self, round: u32) -> Result<Self::Plan>;

    /// Draws what `round` asks for that the store lacks, and builds, runs
    /// and stores what it gave.
    async fn run_round(&mut self, round: &Round<Self::Plan>) -> Result<()>;

    /// Stores the end of round `round`, which took `wall_s`.
    async fn end_round(&mut self, round: u32, wall_s: f64) -> Result<()>;

    /// Decides what follows round `done` by [`crate::repair::stop_rule`],
    /// then, when no parent is left, [`Stopped::NoParents`]; a round's plan
    /// is stored before it is returned.
    async fn plan_next(&mut self, done: u32) -> Result<Next<Self::Plan>>;

    /// Stores why no round follows round `done`.
    async fn stop(&mut self, done: u32, why: Stopped) -> Result<()>;
}

/// Runs `kind`'s rounds from `at` until they stop, noting each repair
/// round as it is planned.
pub(super) async fn run<K: RoundKind>(kind: &mut K, at: Resume, progress: &Progress) -> Result<()> {
    let (mut round, mut done) = match at {
        Resume::Stopped => return Ok(()),
        Resume::First => (Some(Round::First), 0),
        Resume::Repair(r) => (Some(Round::Repair(kind.stored_plan(r).await?)), r),
        Resume::After(r) => (None, r),
    };
    loop {
        if let Some(round) = round.take() {
            let started = Instant::now();
            kind.run_round(&round).await?;
            done = round.number();
            kind.end_round(done, started.elapsed().as_secs_f64())
                .await?;
        }
        match kind.plan_next(done).await? {
            Next::Round(plan) => {
                progress.note(&format!("repair round {}: {}", plan.round(), plan.note()));
                round = Some(Round::Repair(plan));
            }
            Next::Stop(why) => return kind.stop(done, why).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resume_goes_on_where_the_stored_rounds_say() {
        let cases = [
            (None, Resume::First),
            (Some((0, false, false)), Resume::First),
            (Some((2, false, false)), Resume::Repair(2)),
            (Some((0, true, false)), Resume::After(0)),
            (Some((3, true, false)), Resume::After(3)),
            (Some((3, true, true)), Resume::Stopped),
        ];
        for (last, want) in cases {
            assert_eq!(Resume::of(last), want, "{last:?}");
        }
    }
}
