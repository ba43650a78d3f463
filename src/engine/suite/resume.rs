//! A suite's resume: its unfinished batches taken over, what is stored
//! read back into the stream, and only what is missing drawn, built and
//! run.

use anyhow::Result;

use crate::engine::draw::TokenBudget;
use crate::engine::interrupt::Interrupt;
use crate::repair::RepairSettings;
use crate::store::{BatchStatus, Claim, Store, StoreError, SuiteId, SuitePart};
use crate::support::account::{Phase, PhaseGuard};
use crate::support::owner::Owner;
use crate::support::progress::Progress;
use crate::text::extract::{Extraction, NoCode};

use super::draw::{self, Ask, DrawSettings, ProblemDraw, SuiteDraw};
use super::input::Key;
use super::rounds::{self, Resume, Rounds};
use super::stream::{Programs, Work};
use super::{drive, SuiteConfig};

/// Finishes an interrupted or failed suite: takes its unfinished batches
/// over (one process wins), draws the completions a live draw did not
/// store (from `settings`' pools, which it then needs), and builds and runs
/// only the programs without a stored outcome.
pub async fn resume(
    cfg: &SuiteConfig,
    store: &Store,
    progress: &Progress,
    interrupt: &Interrupt,
    suite: SuiteId,
    part: SuitePart,
    settings: Option<&DrawSettings>,
) -> Result<SuiteId> {
    let guard = PhaseGuard::start(Phase::Prepare);
    let not_resumable = |why: String| StoreError::NotResumable {
        db: store.db().clone(),
        id: suite,
        why,
    };
    let row = store.suite(suite).await?;
    // Its programs are read in the edition it was started in, whatever
    // the flags say.
    let cfg = &SuiteConfig {
        edition: row.edition,
        ..cfg.clone()
    };
    let problems = store.suite_problems(suite).await?;
    let completions = store.suite_completions(suite).await?;
    // The first draw's: repair rounds' completions come on top of `n`.
    let missing: usize = problems
        .iter()
        .enumerate()
        .filter(|(pos, _)| part.contains(*pos))
        .map(|(_, p)| {
            let stored = completions
                .iter()
                .filter(|c| c.batch_id == p.batch_id && c.round == 0)
                .count();
            p.n.saturating_sub(stored)
        })
        .sum();
    if missing > 0 && settings.is_none() && row.status != BatchStatus::Finished {
        return Err(not_resumable(format!(
            "lacks {missing} completions of its draw from {}; name the pools again \
             (--pool, --pools) to draw them",
            row.source
        ))
        .into());
    }
    let repair = match store.suite_repair(suite).await? {
        Some(json) => Some(RepairSettings::from_json(&json).ok_or_else(|| {
            not_resumable(format!("has repair settings assay cannot read: {json}"))
        })?),
        None => None,
    };
    let at = match &repair {
        Some(_) => Some(rounds::resume_point(store, suite).await?),
        None => None,
    };
    if let (Some(repair), Some(at)) = (&repair, at) {
        if part != SuitePart::all() {
            return Err(not_resumable(
                "is a suite with repair rounds, which run over every problem; resume it without --part"
                    .into(),
            )
            .into());
        }
        let to_draw = at != Resume::Stopped && row.status != BatchStatus::Finished;
        match settings {
            None if to_draw => {
                return Err(not_resumable(format!(
                    "has repair rounds to go on with, drawn from {}; name the pools again \
                     (--pool, --pools) to draw them",
                    row.source
                ))
                .into())
            }
            Some(s) if to_draw && !repair.pools.is_empty() && s.repair.plan.is_none() => {
                return Err(not_resumable(format!(
                    "drew its repair rounds from {}; name them again (--repair-pool)",
                    repair.pools.join(", ")
                ))
                .into())
            }
            _ => {}
        }
    }
    match store
        .claim_suite_for_resume(suite, &part, &Owner::current())
        .await?
    {
        Claim::Claimed => {
            if let Some(item) = cfg.work_item {
                store.attach_suite_part(item, suite, &part).await?;
            }
        }
        // A lane's part that an earlier claim finished: nothing is left.
        Claim::Finished if part != SuitePart::all() => return Ok(suite),
        Claim::Finished => {
            return Err(not_resumable("is a finished suite; nothing to resume".into()).into())
        }
        Claim::Running(_) => return Err(not_resumable("is a suite still running".into()).into()),
    }
    let (programs, rx) = Programs::new();
    let mut jobs = Vec::new();
    for (pos, p) in problems.iter().enumerate() {
        if !part.contains(pos) {
            continue;
        }
        let of_problem: Vec<_> = completions
            .iter()
            .filter(|c| c.batch_id == p.batch_id)
            .collect();
        let mut job = ProblemDraw::fresh(p.batch_id, pos, p.problem.clone());
        // Representatives first, so every duplicate finds its program.
        for c in of_problem.iter().filter(|c| c.dup_of.is_none()) {
            job.stored.insert(c.idx);
            let Some(Extraction::Source(program)) = &c.extraction else {
                let server_failed = c.extraction == Some(Extraction::Failed(NoCode::DrawFailed));
                if c.outcome.is_none() && !server_failed {
                    draw::store_no_program(store, p.batch_id, c.idx).await?;
                }
                continue;
            };
            let work = Work::new(p.batch_id, pos, &p.problem, c.idx, program);
            let id = match &c.outcome {
                None => programs.add(work),
                // Done: a duplicate drawn now gets its row.
                Some(row) => programs.add_done(work, row),
            };
            job.keys.insert(Key::of(program), (id, c.idx));
        }
        for c in of_problem.iter().filter(|c| c.dup_of.is_some()) {
            job.stored.insert(c.idx);
            if c.outcome.is_some() {
                continue;
            }
            let rep = c.dup_of.expect("filtered");
            let Some(Extraction::Source(program)) = of_problem
                .iter()
                .find(|r| r.idx == rep)
                .and_then(|r| r.extraction.as_ref())
            else {
                continue;
            };
            let (id, _) = job.keys[&Key::of(program)];
            if let Some(row) = programs.share(id, c.idx) {
                store
                    .record_suite_outcome(p.batch_id, &[c.idx], &row)
                    .await?;
            }
        }
        job.n = p.n;
        jobs.push(job);
    }
    tracing::info!(suite, programs = programs.count(), missing, "suite resumed");
    let spent: u64 = completions
        .iter()
        .filter_map(|c| c.drawn.reply.completion_tokens)
        .sum();
    let draw = settings.map(|settings| SuiteDraw {
        settings,
        store,
        progress,
        programs: &programs,
        budget: TokenBudget::new(repair.as_ref().and_then(|r| r.max_tokens), spent),
    });
    let rounds = match (&draw, &repair, at) {
        (Some(draw), Some(repair), Some(at)) => Some((
            Rounds {
                suite,
                settings: repair,
                draw,
                store,
                progress,
            },
            at,
        )),
        _ => None,
    };
    let producer = async {
        match (&rounds, &draw) {
            (Some((rounds, at)), _) => rounds.run(&mut jobs, *at).await.map(|()| None),
            (None, Some(draw)) if missing > 0 => draw.run(&mut jobs, &Ask::First).await.map(Some),
            _ => Ok(None),
        }
    };
    drive(
        cfg, store, progress, interrupt, suite, part, &programs, rx, producer, guard,
    )
    .await
}
