//! A batch's rounds: the round loop's `RoundKind` for a task, and one
//! round's stages in their order.

use std::sync::Arc;

use anyhow::{Context, Result};
use tokio::sync::mpsc;

use crate::build::package::ModuleKey;
use crate::build::probe;
use crate::draw::Plan;
use crate::engine::resume::ResumePlan;
use crate::engine::rounds::{self, Planned, Resume, Round, RoundKind};
use crate::repair::planner::{self, RoundPlan};
use crate::repair::{Next, RepairSettings, Stopped};
use crate::sandbox::Sandbox;
use crate::store::{BatchId, Store};
use crate::support::account::{CutPhases, Phase, PhaseFigures};
use crate::support::progress::Progress;
use crate::support::testpoint;

use super::draw::draw;
use super::extract::{extract_and_dedup, extract_stream, Unique};
use super::probe::{settle_probe, store_probe, stream_probe, ProbeDone};
use super::score::{keep_images, Scoring};
use super::{batch_dir, finish, open_package, record, RunConfig};

impl Planned for RoundPlan {
    fn round(&self) -> u32 {
        self.round
    }

    fn note(&self) -> String {
        format!("{} replies for {} parents", self.n(), self.parents.len())
    }
}

impl Round<RoundPlan> {
    /// One past the round's last reply.
    fn end(&self, n: usize) -> usize {
        match self {
            Round::First => n,
            Round::Repair(p) => p.end(),
        }
    }
}

/// Runs a batch's rounds: its first draw and, while its repair settings
/// ask for more, each repair round on what the rounds before it stored
/// (the round loop around the one-round batch: the same stages on the
/// replies the store lacks). Then the batch is finished.
pub(super) async fn run_rounds(
    mut kind: TaskRounds<'_>,
    stored: ResumePlan,
    prepared: PhaseFigures,
) -> Result<()> {
    let TaskRounds {
        cfg,
        store,
        progress,
        batch,
        ..
    } = kind;
    let settings = store
        .repair_settings(batch)
        .await?
        .and_then(|json| RepairSettings::from_json(&json));
    kind.stored = stored;
    kind.prepared = Some(prepared);
    let Some(settings) = settings else {
        kind.run_round(&Round::First).await?;
        return finish(store, batch).await;
    };
    kind.max_tokens = settings.max_tokens;
    let stored_rounds = store.repair_rounds(batch).await?;
    if stored_rounds.is_empty() {
        store.begin_round(batch, 0, 0, cfg.n, &[]).await?;
    }
    let at = Resume::of(
        stored_rounds
            .last()
            .map(|r| (r.round, r.wall_s.is_some(), r.stopped.is_some())),
    );
    let mut kind = RepairRounds {
        rounds: kind,
        settings,
    };
    rounds::run(&mut kind, at, progress).await?;
    finish(store, batch).await
}

/// A batch's rounds: what one round needs.
pub(super) struct TaskRounds<'a> {
    pub(super) cfg: &'a RunConfig,
    /// The first draw's plan; repair rounds draw from `cfg.repair`'s, if
    /// it names one.
    pub(super) plan: &'a Plan,
    pub(super) store: &'a Store,
    pub(super) progress: &'a Progress,
    pub(super) batch: BatchId,
    /// What the store holds, read again after each round.
    pub(super) stored: ResumePlan,
    /// The check's figures, recorded with the first round's `prepare`.
    pub(super) prepared: Option<PhaseFigures>,
    pub(super) max_tokens: Option<u64>,
    /// Where a phase cut short leaves its figures.
    pub(super) cut: &'a CutPhases,
}

/// A batch that repairs: its rounds, and the settings they were asked with.
pub(super) struct RepairRounds<'a> {
    pub(super) rounds: TaskRounds<'a>,
    pub(super) settings: RepairSettings,
}

impl RoundKind for RepairRounds<'_> {
    type Plan = RoundPlan;

    async fn stored_plan(&mut self, round: u32) -> Result<RoundPlan> {
        planner::stored_round(self.rounds.store, self.rounds.batch, round)
            .await?
            .with_context(|| format!("repair round {round} has no stored plan"))
    }

    async fn run_round(&mut self, round: &Round<RoundPlan>) -> Result<()> {
        self.rounds.run_round(round).await
    }

    async fn end_round(&mut self, round: u32, wall_s: f64) -> Result<()> {
        let TaskRounds { store, batch, .. } = self.rounds;
        store.end_round(batch, round, wall_s, None).await?;
        testpoint::reached("repair.round").await;
        self.rounds.stored = ResumePlan::load(store, batch).await?;
        Ok(())
    }

    async fn plan_next(&mut self, done: u32) -> Result<Next<RoundPlan>> {
        let TaskRounds {
            cfg,
            store,
            batch,
            progress,
            ..
        } = self.rounds;
        let next = planner::next_round(store, &cfg.spec, batch, &self.settings, done).await?;
        if let Next::Round(p) = &next {
            if p.round == 1 && crate::repair::ShownCase::visible(&cfg.spec).is_empty() {
                progress.note(&format!(
                    "note: task `{}` has no visible cases: repair rounds show the model compiler errors and crashes only",
                    cfg.spec.name
                ));
            }
        }
        Ok(next)
    }

    async fn stop(&mut self, done: u32, why: Stopped) -> Result<()> {
        let TaskRounds { store, batch, .. } = self.rounds;
        Ok(store.stop_rounds(batch, done, why.as_str()).await?)
    }
}

impl<'a> TaskRounds<'a> {
    /// A batch's rounds, with nothing stored yet.
    pub(super) fn new(
        cfg: &'a RunConfig,
        plan: &'a Plan,
        store: &'a Store,
        progress: &'a Progress,
        batch: BatchId,
        cut: &'a CutPhases,
    ) -> TaskRounds<'a> {
        TaskRounds {
            cfg,
            plan,
            store,
            progress,
            batch,
            stored: ResumePlan::fresh(),
            prepared: None,
            max_tokens: None,
            cut,
        }
    }

    /// One round of a batch: draws the replies `round` asks for that the
    /// store lacks, and extracts, dedups (against every earlier round),
    /// probes and scores what is new.
    async fn run_round(&mut self, round: &Round<RoundPlan>) -> Result<()> {
        let prepared = self.prepared.take();
        let TaskRounds {
            cfg,
            store,
            progress,
            batch,
            max_tokens,
            cut,
            ref stored,
            ..
        } = *self;
        let plan = match round {
            Round::First => self.plan,
            Round::Repair(_) => cfg.repair.plan.as_ref().unwrap_or(self.plan),
        };
        let batch_dir = batch_dir(cfg, store, batch).await?;
        let errors_dir = batch_dir.join("errors");
        std::fs::create_dir_all(&errors_dir)
            .with_context(|| format!("cannot create {}", errors_dir.display()))?;
        store.set_errors_dir(batch, &errors_dir).await?;
        // What confines the scoring runs is found once and stored with the
        // batch, with every warning, so a weaker sandbox is never silent.
        let sandbox = Arc::new(Sandbox::probe(cfg.spec.limits.processes));
        store
            .set_batch_setup(
                batch,
                cfg.spec.dedup_by,
                &sandbox.describe(cfg.spec.limits.memory_bytes),
                sandbox.warnings(),
                &blake3::hash(cfg.spec.committed.source.as_bytes()).to_hex(),
            )
            .await?;

        // Opened before the draw, so waves can build while replies arrive; off
        // the async threads, since another batch may hold its lock for a while
        // and Ctrl-C must still work.
        let guard = cut.start(Phase::Prepare);
        let package = open_package(cfg).await?;
        let figures = guard.finish();
        record(store, batch, prepared.map_or(figures, |p| p.then(figures))).await?;
        // Asked while the draw runs; a toolchain that cannot say what it is
        // leaves the run's record empty, not the batch failed.
        let asking_toolchain = async {
            probe::toolchain(&package)
                .await
                .inspect_err(|e| {
                    tracing::warn!("cannot ask the probe's toolchain its version: {e:#}")
                })
                .ok()
        };
        let (tap, drawn_rx) = mpsc::unbounded_channel();
        let (candidates_tx, candidates_rx) = mpsc::unbounded_channel();
        let extracting = tokio::spawn(extract_stream(
            cfg.spec.entry.clone(),
            cfg.spec.dedup_by,
            drawn_rx,
            candidates_tx,
        ));
        let drawing = async {
            let guard = cut.start(Phase::Draw);
            let replies = draw(
                plan,
                round.end(cfg.n),
                store,
                progress,
                batch,
                stored,
                Some(tap),
                round,
                max_tokens,
            )
            .await;
            (replies, guard.finish(), cut.start(Phase::Probe))
        };
        let streaming = stream_probe(&package, cfg.probe, candidates_rx, progress);
        let ((replies, draw_figures, tail), streamed, toolchain) =
            tokio::join!(drawing, streaming, asking_toolchain);
        let replies = replies?;
        let mut streamed_extractions = extracting.await.context("the extraction task panicked")?;
        let (streamed, mut images, mut stats) = streamed?;
        record(store, batch, draw_figures).await?;
        testpoint::reached("draw.done").await;
        // Nothing to extract: the batch fails with the engine's sentence, and
        // every reply stays stored.
        if let Some(why) = crate::draw::all_failed(&replies) {
            anyhow::bail!(why);
        }

        let guard = cut.start(Phase::ExtractDedup);
        let extracted = extract_and_dedup(
            &cfg.spec,
            &replies,
            &mut streamed_extractions,
            store,
            batch,
            stored,
        )
        .await?;
        let extract_figures = guard.finish();

        // On a resume, only what lacks a verdict or a score is built and run
        // (stored replies are not tapped, so the stream probed none of them).
        let to_probe: Vec<Unique> = extracted
            .into_iter()
            .filter(|u| stored.probe(u.idx).is_none())
            .collect();
        let kept_to_score: Vec<(usize, &str)> = stored.compiled_unscored().collect();
        let probed = settle_probe(
            &package,
            cfg.probe.mode,
            &to_probe,
            streamed,
            &mut images,
            &mut stats,
        )
        .await?;
        let figures = tail.finish();
        record(store, batch, extract_figures).await?;
        // A batch always has its own probe run (with its waves' figures); a
        // resume that probed nothing new leaves the stored one as it is.
        if !probed.is_empty() || stored.probe_run.is_none() {
            let done = ProbeDone {
                mode: cfg.probe.mode,
                figures: &figures,
                stats: &stats,
                toolchain: toolchain.as_ref(),
                run: stored.probe_run,
                adds: round.number() > 0,
            };
            store_probe(store, batch, probed.clone(), &errors_dir, done).await?;
        }
        record(store, batch, figures).await?;

        // Candidates compiled in an earlier attempt (a resume) have no image in
        // this process: built again, their verdicts already stored.
        if !kept_to_score.is_empty() {
            let out = probe::probe(&package, cfg.probe.mode, &kept_to_score, |_| {}).await?;
            images.extend(out.images);
        }
        let compiled: Vec<usize> = probed
            .iter()
            .filter(|p| p.verdict.compiled())
            .map(|p| p.idx)
            .chain(kept_to_score.iter().map(|(idx, _)| *idx))
            .collect();
        let ready = keep_images(&batch_dir, &compiled, &images)?;
        let keys = if stored.committed_scored() {
            Vec::new()
        } else {
            vec![ModuleKey::Committed]
        };
        let scoring = Scoring {
            spec: &cfg.spec,
            batch_dir: &batch_dir,
            store,
            progress,
            batch,
            // Only a batch with repair rounds shows a model its wrong answers.
            keep_answers: cfg.repair.settings.as_ref().is_some_and(|s| s.rounds > 0),
            toolchain: toolchain.as_ref(),
            cut,
        };
        scoring
            .build_and_score(package, keys, ready, sandbox)
            .await?;
        Ok(())
    }
}
