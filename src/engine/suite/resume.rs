//! A suite's resume: its unfinished batches taken over, what is stored
//! read back into the stream, and only what is missing drawn, built and
//! run.

use anyhow::Result;

use crate::engine::draw::TokenBudget;
use crate::engine::interrupt::Interrupt;
use crate::repair::RepairSettings;
use crate::store::{
    BatchStatus, Claim, Store, StoreError, SuiteCompletionRow, SuiteId, SuitePart, SuiteProblemRow,
};
use crate::support::account::{Phase, PhaseGuard};
use crate::support::owner::Owner;
use crate::support::progress::Progress;
use crate::text::extract::{Extraction, NoCode};

use super::draw::{self, Ask, DrawSettings, ProblemDraw, SuiteDraw};
use super::input::Key;
use super::rounds::{self, Resume, Rounds};
use super::stream::{Programs, Stream, Work};
use super::SuiteConfig;

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
    let stored = Stored::read(store, suite, part).await?;
    let missing = stored.missing;
    if missing > 0 && settings.is_none() && row.status != BatchStatus::Finished {
        return Err(not_resumable(format!(
            "lacks {missing} completions of its draw from {}; name the pools again \
             (--pool, --pools) to draw them",
            row.source
        ))
        .into());
    }
    let repair = stored
        .repair
        .clone()
        .map_err(|json| not_resumable(format!("has repair settings assay cannot read: {json}")))?;
    let at = stored.at;
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
    tracing::info!(suite, missing, "suite resumed");
    go_on(
        cfg, store, progress, interrupt, suite, part, settings, stored, guard,
    )
    .await
}

/// What a suite has stored of the part a run goes on with.
pub(super) struct Stored {
    problems: Vec<SuiteProblemRow>,
    completions: Vec<SuiteCompletionRow>,
    /// Completions of the first draw not stored yet (repair rounds' come
    /// on top of `n`).
    missing: usize,
    /// Its repair settings, or the JSON assay cannot read.
    repair: Result<Option<RepairSettings>, String>,
    /// Where its rounds go on from, when it repairs.
    at: Option<Resume>,
}

impl Stored {
    pub(super) async fn read(store: &Store, suite: SuiteId, part: SuitePart) -> Result<Stored> {
        let problems = store.suite_problems(suite).await?;
        let completions = store.suite_completions(suite).await?;
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
        let repair = match store.suite_repair(suite).await? {
            Some(json) => RepairSettings::from_json(&json).map(Some).ok_or(json),
            None => Ok(None),
        };
        let at = match &repair {
            Ok(Some(_)) => Some(rounds::resume_point(store, suite).await?),
            _ => None,
        };
        Ok(Stored {
            problems,
            completions,
            missing,
            repair,
            at,
        })
    }
}

/// Runs `part` of `suite` on from what it has `stored`, a fresh suite's
/// nothing or a resume's rows: every stored program without an outcome is
/// built and run, and what is not drawn is drawn (from `settings`' pools).
#[allow(clippy::too_many_arguments)]
pub(super) async fn go_on(
    cfg: &SuiteConfig,
    store: &Store,
    progress: &Progress,
    interrupt: &Interrupt,
    suite: SuiteId,
    part: SuitePart,
    settings: Option<&DrawSettings>,
    stored: Stored,
    guard: PhaseGuard,
) -> Result<SuiteId> {
    let Stored {
        problems,
        completions,
        missing,
        repair,
        at,
    } = stored;
    let repair = repair.ok().flatten();
    let (programs, rx) = Programs::new();
    let mut jobs = Vec::new();
    for (pos, p) in problems.iter().enumerate() {
        if !part.contains(pos) {
            continue;
        }
        let of_problem = crate::repair::of_problem(&completions, p.batch_id);
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
    tracing::info!(
        suite,
        programs = programs.count(),
        missing,
        "suite programs loaded"
    );
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
    let stream = Stream::new(cfg, store, progress, suite, part);
    stream
        .drive(interrupt, &programs, rx, producer, guard)
        .await
}
