//! Pipeline: wires the stages of one batch together.
//!
//! draw -> extract+dedup -> probe -> score build -> score run -> persist.
//! Each phase runs inside an accounting guard, and every result is stored as
//! it arrives. Stages exchange plain data; only this module knows their order.
//!
//! The probe streams: while the draw runs, each reply is extracted and
//! fingerprinted as it arrives and the first of each fingerprint goes down a
//! channel to the probe, which builds them in waves (`probe::stream`). The
//! `probe` phase is the tail the batch waits for after its last reply; the
//! whole probe's work (every wave) is its probe run's figures.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::sync::mpsc;

use crate::build::exec::Image;
use crate::build::package::{ModuleKey, Package};
use crate::build::probe::stream::{StreamCandidate, Waves};
use crate::build::probe::{self, ProbeMode, ProbeStats, Probed};
use crate::draw::{DrawEvent, DrawOptions, Drawn, Plan, SourceChange};
use crate::engine::drive::drive;
use crate::engine::errors;
use crate::engine::interrupt::{Interrupt, Run};
use crate::engine::resume::ResumePlan;
use crate::engine::rounds::{self, Planned, Resume, Round, RoundKind};
use crate::repair::planner::{self, RoundPlan};
use crate::repair::setup::Repairing;
use crate::repair::{Next, RepairSettings, Stopped};
use crate::sandbox::Sandbox;
use crate::score::admit;
use crate::score::{self, RunLimits, ScoreVerdict, Scored};
use crate::spec::{DedupBy, Spec, WavePolicy};
use crate::store::{BatchId, BatchStatus, Claim, NewBatch, ProbeRunStats, Store, StoreError};
use crate::support::account::{Phase, PhaseFigures, PhaseGuard};
use crate::support::owner::Owner;
use crate::support::progress::Progress;
use crate::support::testpoint;
use crate::task;
use crate::text::dedup;
use crate::text::extract::{self, Extraction};

/// Everything a batch needs besides the store.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub spec: Spec,
    /// Candidates to draw.
    pub n: usize,
    /// Where each batch's outputs go (`batch-N/errors/`, the scorer).
    pub out_dir: PathBuf,
    /// Where the per-task generated packages live (kept warm across batches).
    pub work_dir: PathBuf,
    /// Cargo's target directory for those packages (kept warm too).
    pub target_dir: PathBuf,
    /// How candidates are probed.
    pub probe: ProbeSettings,
    /// The queue item this batch is, when a lane runs it: the batch is
    /// attached to it as soon as it begins, so a lane that takes the item
    /// over resumes it.
    pub work_item: Option<i64>,
    /// Repair rounds after the first draw, or an output-token budget
    /// (issue 28); no settings: one round, as ever.
    pub repair: Repairing,
}

/// The probe's mode, its streaming waves and each build's time limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeSettings {
    pub mode: ProbeMode,
    pub waves: WavePolicy,
    /// How long one nested cargo build (probe or scorer) may run.
    pub build_timeout: Duration,
}

impl Default for ProbeSettings {
    fn default() -> ProbeSettings {
        ProbeSettings {
            mode: ProbeMode::default(),
            waves: WavePolicy::default(),
            build_timeout: crate::build::package::BUILD_TIMEOUT,
        }
    }
}

impl ProbeSettings {
    /// The defaults, with what the spec's `[probe]` table sets.
    pub fn for_spec(spec: &Spec) -> ProbeSettings {
        let default = ProbeSettings::default();
        ProbeSettings {
            mode: default.mode,
            waves: WavePolicy {
                size: spec.probe.wave_size.unwrap_or(default.waves.size),
                wait: spec.probe.wave_wait.unwrap_or(default.waves.wait),
            },
            build_timeout: spec.probe.build_timeout.unwrap_or(default.build_timeout),
        }
    }
}

/// Checks what can be checked before anything is written: a batch that
/// cannot start leaves no trace in the store. Returns the draw plan and
/// warnings to show (a pool without a sampling preset).
pub fn prepare(cfg: &RunConfig, draw: &DrawOptions) -> Result<(Plan, Vec<String>)> {
    let (plan, warnings) = Plan::build(&cfg.spec, draw)?;
    plan.check(cfg.n)?;
    Ok((plan, warnings))
}

/// [`prepare`] for a resume of `batch`, which stored the draw source
/// `stored` (JSON; `None` before sources were stored): the plan draws from
/// that source unless `draw` names another ([`Plan::resume`]).
#[derive(Debug)]
pub struct PreparedResume {
    pub plan: Plan,
    /// Warnings to show (a pool without a sampling preset).
    pub warnings: Vec<String>,
    /// The flags' source, when it is not the batch's: the sentence to
    /// show, and what [`resume`] records.
    pub change: Option<SourceChange>,
    /// `draw` with the stored source's pools file where it names none: a
    /// resume's repair pools are looked up where the batch's were.
    pub draw: DrawOptions,
}

pub fn prepare_resume(
    cfg: &RunConfig,
    draw: &DrawOptions,
    batch: BatchId,
    stored: Option<&str>,
) -> Result<PreparedResume> {
    let (plan, warnings, change) = Plan::resume(&cfg.spec, draw, batch, stored)?;
    plan.check(cfg.n)?;
    let mut draw = draw.clone();
    if draw.pools_file.is_none() {
        draw.pools_file = plan
            .source()
            .and_then(|s| s.pools_file())
            .map(Path::to_path_buf);
    }
    Ok(PreparedResume {
        plan,
        warnings,
        change,
        draw,
    })
}

/// Runs one batch to the end and returns its id. On failure after the batch
/// was created, the batch is marked failed with the reason, and everything
/// stored so far stays. When `interrupt` fires, outstanding work is dropped,
/// the batch is marked interrupted and the error is [`crate::engine::interrupt::Interrupted`].
pub async fn run(
    cfg: &RunConfig,
    plan: Plan,
    checked: CheckedTask,
    store: &Store,
    progress: &Progress,
    interrupt: &Interrupt,
) -> Result<BatchId> {
    let draw = plan.source().map(crate::draw::DrawSource::to_json);
    let batch = store
        .begin_owned_batch(
            &NewBatch {
                task: &cfg.spec.name,
                spec_path: &cfg.spec.path,
                pool: &plan.label(),
                n: cfg.n,
                draw: draw.as_deref(),
            },
            &Owner::current(),
            &crate::task::spec_digest(&cfg.spec),
        )
        .await?;
    // The repair settings before the queue item learns of the batch: a
    // lane that takes the item over resumes the batch with the settings it
    // stored, so they are there once the item names it.
    if let Some(settings) = &cfg.repair.settings {
        store
            .set_repair_settings(batch, &settings.to_json())
            .await?;
    }
    if let Some(item) = cfg.work_item {
        store.attach_batch(item, batch).await?;
    }
    tracing::info!(batch, task = %cfg.spec.name, n = cfg.n, "batch started");
    let rounds = run_rounds(
        cfg,
        &plan,
        store,
        progress,
        batch,
        ResumePlan::fresh(),
        checked.0,
    );
    drive(store, interrupt, Run::Batch(batch), rounds).await?;
    Ok(batch)
}

/// Proof that the task was checked ([`check_task`]), with what the check
/// cost: a batch cannot start without one, and records the cost as the
/// start of its `prepare` phase.
#[derive(Debug)]
pub struct CheckedTask(PhaseFigures);

/// Checks the task ([`crate::task::check`]: harness contract, cases,
/// committed candidate), before a batch or even a database exists, so a
/// broken task leaves nothing behind. Skipped when the same files passed
/// before. A task's first check builds the harness's dependencies; that CPU
/// is measured and recorded with the batch, never lost between phases.
pub async fn check_task(cfg: &RunConfig) -> Result<CheckedTask> {
    let guard = PhaseGuard::start(Phase::Prepare);
    let outcome = task::check(
        &cfg.spec,
        &cfg.work_dir,
        &cfg.target_dir,
        cfg.probe.build_timeout,
        task::CacheUse::Use,
    )
    .await?;
    // The batch's report shows the committed candidate's score; the rest
    // is for `assay task check` to say, and for -v.
    if let task::Outcome::Checked(report) = outcome {
        for warning in &report.warnings {
            tracing::info!("task check: {warning}");
        }
    }
    Ok(CheckedTask(guard.finish()))
}

/// Finishes an interrupted or failed batch: takes it over (one process
/// wins), reads what it has stored, records the attempt, and runs every
/// stage on what is missing only. `cfg.n` must be the batch's, and `plan`
/// [`prepare_resume`]'s, whose `change` (another draw source than the
/// batch's) the attempt records.
#[allow(clippy::too_many_arguments)]
pub async fn resume(
    cfg: &RunConfig,
    plan: Plan,
    change: Option<&SourceChange>,
    checked: CheckedTask,
    store: &Store,
    progress: &Progress,
    interrupt: &Interrupt,
    batch: BatchId,
) -> Result<BatchId> {
    let not_resumable = |why: String| StoreError::NotResumable {
        db: store.db().clone(),
        id: batch,
        why,
    };
    let row = store.batch(batch).await?;
    if row.task != cfg.spec.name {
        return Err(not_resumable(format!(
            "is task `{}`, the spec is task `{}`",
            row.task, cfg.spec.name
        ))
        .into());
    }
    if let Some(digest) = store.spec_digest(batch).await? {
        if digest != crate::task::spec_digest(&cfg.spec) {
            return Err(not_resumable(format!(
                "was run with another version of {}: its cases, committed candidate, \
                 harness, limits or admission rule changed since, and a batch scored \
                 against two oracles would mean nothing",
                cfg.spec.path.display()
            ))
            .into());
        }
    }
    match store.claim_for_resume(batch, &Owner::current()).await? {
        Claim::Claimed => {}
        Claim::Finished => {
            return Err(not_resumable("is finished; nothing to resume".into()).into())
        }
        Claim::Running(owner) => {
            let by = owner.map_or_else(
                || "by an older assay".to_owned(),
                |o| format!("in process {} on {}", o.pid, o.host),
            );
            return Err(not_resumable(format!("is running {by}")).into());
        }
    }
    let mut stored = ResumePlan::load(store, batch).await?;
    stored.attempt = store.record_resume(batch, &stored.kept(), change).await?;
    tracing::info!(batch, attempt = stored.attempt, kept = ?stored.kept(), "batch resumed");
    let rounds = run_rounds(cfg, &plan, store, progress, batch, stored, checked.0);
    drive(store, interrupt, Run::Batch(batch), rounds).await?;
    Ok(batch)
}

/// The batch's output folder: a resumed batch keeps its own when it writes
/// to the same output folder; otherwise a folder no batch has used, so two
/// databases (or a deleted one) never mix their files.
async fn batch_dir(cfg: &RunConfig, store: &Store, batch: BatchId) -> Result<PathBuf> {
    let stored = store.batch(batch).await?.errors_dir.map(PathBuf::from);
    if let Some(dir) = stored.as_deref().and_then(Path::parent) {
        if dir.parent() == Some(cfg.out_dir.as_path()) && dir.is_dir() {
            return Ok(dir.to_path_buf());
        }
    }
    crate::engine::outputs::new_batch_dir(&cfg.out_dir, batch)
        .with_context(|| format!("cannot create a batch folder in {}", cfg.out_dir.display()))
}

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
async fn run_rounds(
    cfg: &RunConfig,
    plan: &Plan,
    store: &Store,
    progress: &Progress,
    batch: BatchId,
    stored: ResumePlan,
    prepared: PhaseFigures,
) -> Result<()> {
    let settings = store
        .repair_settings(batch)
        .await?
        .and_then(|json| RepairSettings::from_json(&json));
    let mut kind = TaskRounds {
        cfg,
        plan,
        store,
        progress,
        batch,
        stored,
        prepared: Some(prepared),
        max_tokens: None,
    };
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
struct TaskRounds<'a> {
    cfg: &'a RunConfig,
    /// The first draw's plan; repair rounds draw from `cfg.repair`'s, if
    /// it names one.
    plan: &'a Plan,
    store: &'a Store,
    progress: &'a Progress,
    batch: BatchId,
    /// What the store holds, read again after each round.
    stored: ResumePlan,
    /// The check's figures, recorded with the first round's `prepare`.
    prepared: Option<PhaseFigures>,
    max_tokens: Option<u64>,
}

/// A batch that repairs: its rounds, and the settings they were asked with.
struct RepairRounds<'a> {
    rounds: TaskRounds<'a>,
    settings: RepairSettings,
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

/// Marks the batch finished, its last phase.
async fn finish(store: &Store, batch: BatchId) -> Result<()> {
    testpoint::reached("persist").await;
    let guard = PhaseGuard::start(Phase::Persist);
    store
        .finish_batch(batch, BatchStatus::Finished, None)
        .await?;
    record(store, batch, guard.finish()).await?;
    Ok(())
}

impl TaskRounds<'_> {
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
        let guard = PhaseGuard::start(Phase::Prepare);
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
            let guard = PhaseGuard::start(Phase::Draw);
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
            (replies, guard.finish(), PhaseGuard::start(Phase::Probe))
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

        let guard = PhaseGuard::start(Phase::ExtractDedup);
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
        };
        scoring
            .build_and_score(package, keys, ready, sandbox)
            .await?;
        Ok(())
    }
}

async fn record(store: &Store, batch: BatchId, figures: PhaseFigures) -> Result<()> {
    tracing::debug!(?figures, "phase done");
    Ok(store.record_phase(batch, &figures).await?)
}

/// Opens and locks the task's package off the async threads: the lock may
/// be held by another batch for a while, and Ctrl-C must still work.
async fn open_package(cfg: &RunConfig) -> Result<Package> {
    let (spec, work_dir, target_dir) = (
        cfg.spec.clone(),
        cfg.work_dir.clone(),
        cfg.target_dir.clone(),
    );
    let mut package =
        tokio::task::spawn_blocking(move || Package::open(&spec, &work_dir, &target_dir))
            .await
            .context("opening the package panicked")??;
    package.set_build_timeout(cfg.probe.build_timeout);
    Ok(package)
}

/// Aborts a spawned task when dropped, so cancelling the batch cancels the
/// requests it has outstanding.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Draws `n` replies, storing each (with its attempts, and in a repair
/// round its round and parent) as it arrives. Replies the resume plan has
/// stored are not requested again. Once the replies stored have spent
/// `max_tokens` output tokens, nothing more is asked: the requests still
/// out are cancelled.
#[allow(clippy::too_many_arguments)]
async fn draw(
    plan: &Plan,
    n: usize,
    store: &Store,
    progress: &Progress,
    batch: BatchId,
    stored: &ResumePlan,
    tap: Option<mpsc::UnboundedSender<Drawn>>,
    round: &Round<RoundPlan>,
    max_tokens: Option<u64>,
) -> Result<Vec<Drawn>> {
    let mut replies: Vec<Drawn> = stored.replies().filter(|d| d.idx < n).cloned().collect();
    let mut spent: u64 = stored
        .replies()
        .filter_map(|d| d.reply.completion_tokens)
        .sum();
    let over = |spent: u64| max_tokens.is_some_and(|max| spent >= max);
    if over(spent) {
        replies.sort_by_key(|d| d.idx);
        return Ok(replies);
    }
    // Every pool draws indices in order from `skip`, so skipping the stored
    // prefix asks for nothing twice below it; a reply past a gap that is
    // already stored is passed by (a race may leave such gaps).
    let skip = stored.stored_prefix().min(n);
    let (tx, mut rx) = mpsc::channel(64);
    let mut drawing = {
        let plan = plan.clone();
        let progress = progress.clone();
        let asks = match round {
            Round::First => None,
            Round::Repair(p) => Some((p.asks(), stored.replies().map(|d| d.idx).collect())),
        };
        AbortOnDrop(tokio::spawn(async move {
            match asks {
                None => plan.draw(n, skip, tx, &progress).await,
                Some((asks, done)) => plan.draw_asking(asks, &done, tx, &progress).await,
            }
        }))
    };
    let mut budget_spent = false;
    let mut arrived = Vec::new();
    while let Some(event) = rx.recv().await {
        // Store what has arrived together in one transaction: a reply is
        // still written as soon as the store is free, but a burst of
        // streams ending at once costs one commit, not hundreds.
        let mut events = vec![event];
        while let Ok(more) = rx.try_recv() {
            events.push(more);
        }
        for event in events {
            match event {
                DrawEvent::Reply(drawn) => {
                    if !stored.has_reply(drawn.idx) {
                        arrived.push(drawn);
                    }
                }
                DrawEvent::Cancelled { pool, attempts } => {
                    store.record_cancelled(batch, &pool, &attempts).await?;
                }
                DrawEvent::PoolStopped { pool, reason } => {
                    progress.note(&format!(
                        "warning: pool `{pool}` stopped: {reason}; its remaining requests are not sent"
                    ));
                }
            }
        }
        // One transaction per reply: `draw.reply#K` holds the process with
        // exactly K replies stored, and a kill loses only unstored ones.
        for drawn in arrived.drain(..) {
            match round {
                Round::First => store.record_draw(batch, &drawn).await?,
                Round::Repair(p) => {
                    let parent = p
                        .parent_of(drawn.idx)
                        .context("a repair reply outside its round")?;
                    store
                        .record_repair_draw(batch, &drawn, p.round, parent)
                        .await?
                }
            }
            spent += drawn.reply.completion_tokens.unwrap_or(0);
            if let Some(tap) = &tap {
                // The streaming probe may have stopped on an error of its
                // own, which the batch reports; the draw goes on regardless.
                let _ = tap.send(drawn.clone());
            }
            replies.push(drawn);
            testpoint::reached("draw.reply").await;
        }
        if over(spent) {
            progress.note(&format!(
                "the output-token budget is spent ({spent} of {}): nothing more is drawn",
                max_tokens.unwrap_or_default()
            ));
            budget_spent = true;
            break;
        }
    }
    // Dropping the draw task cancels the requests still out.
    if !budget_spent {
        (&mut drawing.0).await.context("the draw task panicked")??;
    }
    replies.sort_by_key(|d| d.idx);
    Ok(replies)
}

/// A candidate that extraction and dedup kept for probing.
struct Unique {
    idx: usize,
    source: String,
}

/// Stores every reply's extraction and dedup group, over the whole batch,
/// and returns the unique candidates. A reply the stream already extracted
/// and fingerprinted (`streamed`, by reply index) is taken from there, not
/// extracted again; one stored by an earlier attempt keeps what it has.
async fn extract_and_dedup(
    spec: &Spec,
    replies: &[Drawn],
    streamed: &mut HashMap<usize, Extracted>,
    store: &Store,
    batch: BatchId,
    stored: &ResumePlan,
) -> Result<Vec<Unique>> {
    let (extractions, fingerprints): (Vec<Extraction>, Vec<Option<dedup::Fingerprints>>) = replies
        .iter()
        .map(|d| {
            if let Some((extraction, _)) = stored.extraction(d.idx) {
                return Extracted::of(extraction.clone());
            }
            if let Some(done) = streamed.remove(&d.idx) {
                return done;
            }
            if !d.reply.outcome.is_ok() {
                return Extracted::of(Extraction::Failed(extract::NoCode::DrawFailed));
            }
            Extracted::reply(d, &spec.entry)
        })
        .map(|e| (e.extraction, e.fingerprints))
        .unzip();
    // Groups are formed over batch positions; map them back to reply indices.
    let groups = dedup::group(&fingerprints);
    let mut unique = Vec::new();
    for (pos, (drawn, extraction)) in replies.iter().zip(extractions).enumerate() {
        let to_idx = |rep: Option<usize>| rep.map(|rep| replies[rep].idx);
        let grouping = dedup::Grouping {
            exact_dup_of: to_idx(groups[pos].exact_dup_of),
            alpha_dup_of: to_idx(groups[pos].alpha_dup_of),
        };
        // A candidate stored by an earlier attempt keeps its extraction
        // and groups, and is not written again.
        let dup_of = match stored.extraction(drawn.idx) {
            Some((_, stored_dup_of)) => stored_dup_of,
            None => {
                let dup_of = grouping.dup_of(spec.dedup_by);
                let fp = fingerprints[pos].map(|f| f.exact.to_string());
                store
                    .record_candidate(batch, drawn.idx, &extraction, fp.as_deref(), dup_of)
                    .await?;
                let alpha = fingerprints[pos]
                    .and_then(|f| f.alpha)
                    .map(|f| f.to_string());
                store
                    .record_groups(batch, drawn.idx, alpha.as_deref(), &grouping)
                    .await?;
                testpoint::reached("extract.candidate").await;
                dup_of
            }
        };
        if let (Extraction::Source(source), None) = (extraction, dup_of) {
            unique.push(Unique {
                idx: drawn.idx,
                source,
            });
        }
    }
    Ok(unique)
}

/// One reply's extraction and, for code, its fingerprints.
struct Extracted {
    extraction: Extraction,
    fingerprints: Option<dedup::Fingerprints>,
}

impl Extracted {
    fn of(extraction: Extraction) -> Extracted {
        let fingerprints = match &extraction {
            Extraction::Source(src) => dedup::fingerprints(src),
            Extraction::Failed(_) => None,
        };
        Extracted {
            extraction,
            fingerprints,
        }
    }

    fn reply(d: &Drawn, entry: &str) -> Extracted {
        Extracted::of(extract::extract(
            d.reply.content.as_deref(),
            d.reply.finish_reason.as_deref(),
            entry,
        ))
    }
}

/// Extracts and fingerprints replies as they arrive and sends the first
/// candidate of each fingerprint on to the streaming probe. Returns what
/// it extracted, by reply index, for `extract_and_dedup` to store and
/// group over the whole batch without extracting again; `settle_probe`
/// probes a group's stored representative if the stream probed another
/// member.
async fn extract_stream(
    entry: String,
    dedup_by: DedupBy,
    mut drawn: mpsc::UnboundedReceiver<Drawn>,
    candidates: mpsc::UnboundedSender<StreamCandidate>,
) -> HashMap<usize, Extracted> {
    let mut seen = std::collections::HashSet::new();
    let mut done = HashMap::new();
    while let Some(d) = drawn.recv().await {
        if !d.reply.outcome.is_ok() {
            continue;
        }
        let extracted = Extracted::reply(&d, &entry);
        if let (Extraction::Source(source), Some(f)) =
            (&extracted.extraction, extracted.fingerprints)
        {
            // The same key `extract_and_dedup` groups by; a missing alpha
            // fingerprint falls back to the exact one, kept apart.
            let key = match (dedup_by, f.alpha) {
                (DedupBy::Alpha, Some(alpha)) => (true, alpha),
                _ => (false, f.exact),
            };
            if seen.insert(key) {
                let _ = candidates.send(StreamCandidate {
                    idx: d.idx,
                    source: source.clone(),
                });
            }
        }
        done.insert(d.idx, extracted);
    }
    done
}

/// Probes candidates in waves as they arrive, until the channel closes.
async fn stream_probe(
    package: &Package,
    settings: ProbeSettings,
    candidates: mpsc::UnboundedReceiver<StreamCandidate>,
    progress: &Progress,
) -> Result<(Vec<Probed>, Images, ProbeStats)> {
    let bar = progress.bar("probe", 0);
    let mut waves = Waves::new(candidates, settings.waves);
    let mut probed = Vec::new();
    let mut images = Images::new();
    let mut stats = ProbeStats::default();
    while let Some(wave) = waves.next().await {
        bar.inc_length(wave.len() as u64);
        let sources: Vec<(usize, &str)> = wave.iter().map(|c| (c.idx, c.source.as_str())).collect();
        let done = bar.position();
        let out = probe::probe(package, settings.mode, &sources, |n| {
            bar.set_position(done + n as u64);
            testpoint::reached_blocking("probe.target");
        })
        .await?;
        stats.absorb(&out.stats);
        probed.extend(out.probed);
        images.extend(out.images);
    }
    stats.waves = waves.count;
    bar.finish();
    Ok((probed, images, stats))
}

/// The image each compiled candidate runs from (shared by a wave's
/// candidates), as the probe built it.
type Images = BTreeMap<usize, Arc<Image>>;

/// The batch's probe verdicts: one per unique candidate as `extract_and_dedup`
/// decided them. Streaming probed the first of each fingerprint to arrive;
/// when replies arrived out of order that may be another member of the group
/// than the stored representative, which is then probed here.
async fn settle_probe(
    package: &Package,
    mode: ProbeMode,
    unique: &[Unique],
    streamed: Vec<Probed>,
    images: &mut Images,
    stats: &mut ProbeStats,
) -> Result<Vec<Probed>> {
    let mut by_idx: HashMap<usize, Probed> = streamed.into_iter().map(|p| (p.idx, p)).collect();
    let missing: Vec<(usize, &str)> = unique
        .iter()
        .filter(|u| !by_idx.contains_key(&u.idx))
        .map(|u| (u.idx, u.source.as_str()))
        .collect();
    if !missing.is_empty() {
        tracing::debug!(
            count = missing.len(),
            "probing representatives the stream did not"
        );
        let out = probe::probe(package, mode, &missing, |_| {
            testpoint::reached_blocking("probe.target");
        })
        .await?;
        stats.absorb(&out.stats);
        stats.waves += 1;
        images.extend(out.images);
        by_idx.extend(out.probed.into_iter().map(|p| (p.idx, p)));
    }
    Ok(unique
        .iter()
        .filter_map(|u| by_idx.remove(&u.idx))
        .collect())
}

/// What a batch's probe did, for [`store_probe`].
struct ProbeDone<'a> {
    mode: ProbeMode,
    figures: &'a PhaseFigures,
    stats: &'a ProbeStats,
    toolchain: Option<&'a probe::Toolchain>,
    /// The batch's probe run, when an earlier attempt or round began it.
    run: Option<i64>,
    /// Whether this probe's figures add to that run's (a repair round's)
    /// rather than stand for it (a resume's).
    adds: bool,
}

/// Writes each failing candidate's diagnostics to its error file and stores
/// the run. A repair round (`adds`) adds its figures and stats to the
/// batch's run, which then holds every round's sum (`show` names the
/// rounds); a resume of the first draw replaces them, as it always did.
async fn store_probe(
    store: &Store,
    batch: BatchId,
    probed: Vec<Probed>,
    errors_dir: &Path,
    done: ProbeDone<'_>,
) -> Result<()> {
    let ProbeDone {
        mode,
        figures,
        stats,
        toolchain,
        run: resumed_run,
        adds,
    } = done;
    // A resume adds its verdicts to the batch's own run, which is where the
    // report reads them.
    let run = match resumed_run {
        Some(run) => run,
        None => store.begin_probe_run(batch, mode.as_str()).await?,
    };
    testpoint::reached("probe.begun").await;
    let earlier = match resumed_run.filter(|_| adds) {
        Some(run) => store
            .probe_runs(batch)
            .await?
            .into_iter()
            .find(|r| r.id == run)
            .map(|r| r.so_far()),
        None => None,
    };
    let (figures, stats) = match earlier {
        Some((so_far, mut sum)) => {
            sum.absorb(stats);
            (so_far.then(*figures), sum)
        }
        None => (*figures, stats.clone()),
    };
    let mut rows = Vec::with_capacity(probed.len());
    for p in probed {
        let error_file = if p.verdict.compiled() {
            None
        } else {
            let (file, unit) = (format!("c{}.txt", p.idx), format!("candidate {}", p.idx));
            Some(errors::write(
                errors_dir,
                &file,
                &unit,
                &p.verdict,
                &p.diagnostics,
            )?)
        };
        rows.push((p, error_file));
    }
    store
        .record_probe_verdicts(run, batch, &rows, &figures)
        .await?;
    store
        .record_probe_run_stats(
            run,
            &ProbeRunStats {
                avg_busy: figures.avg_busy,
                peak_busy: figures.peak_busy,
                probe: &stats,
                origin: "batch",
                work_dir: None,
                toolchain,
            },
        )
        .await?;
    testpoint::reached("probe.stored").await;
    Ok(())
}

/// What building and running the scoring images needs of the batch. The
/// images and the judge are run from copies in the batch's directory, so
/// scoring needs no lock on the task's package.
struct Scoring<'a> {
    spec: &'a Spec,
    batch_dir: &'a Path,
    store: &'a Store,
    progress: &'a Progress,
    batch: BatchId,
    /// Whether a candidate's wrong answers on failed visible cases are
    /// stored, for the next repair round's prompts.
    keep_answers: bool,
    /// The toolchain the probe asked, which lets a score build whose
    /// inputs are unchanged skip cargo (`score::build_images`).
    toolchain: Option<&'a probe::Toolchain>,
}

impl Scoring<'_> {
    /// Builds the scoring images and runs each candidate as soon as its
    /// image is built, so the runs overlap the build. Accounted as the
    /// probe is: the `score build` phase lasts until the last image is
    /// built (the runs meanwhile included), and `score run` is the tail the
    /// batch waits for after it. The package is released once built.
    async fn build_and_score(
        &self,
        package: Package,
        keys: Vec<ModuleKey>,
        ready: Vec<(ModuleKey, PathBuf)>,
        sandbox: Arc<Sandbox>,
    ) -> Result<()> {
        let guard = PhaseGuard::start(Phase::ScoreBuild);
        let (built_tx, built_rx) = mpsc::unbounded_channel();
        // The judge every run needs, and the committed candidate's image
        // (both fresh in a warm target directory: neither changes between
        // batches); the candidates' images are the probe's.
        let wanted = !keys.is_empty() || !ready.is_empty();
        let building = async move {
            if wanted {
                let spinner = self.progress.spinner("scorer");
                let built = self.build(&package, &keys, built_tx).await;
                spinner.finish();
                built?;
            }
            drop(package);
            record(self.store, self.batch, guard.finish()).await?;
            testpoint::reached("score.built").await;
            anyhow::Ok(PhaseGuard::start(Phase::ScoreRun))
        };
        let (tail, scored) = tokio::join!(building, self.run_as_built(built_rx, ready, sandbox));
        let tail = tail?;
        scored?;
        // Decided over every stored run of the batch, so that runs stored by
        // an attempt that was killed count as they would have in one go.
        admit_all(self.spec, self.store, self.batch).await?;
        record(self.store, self.batch, tail.finish()).await
    }

    /// Builds the images, handing each on to `built` as it comes, and
    /// stores the verdict of each candidate whose image did not build.
    async fn build(
        &self,
        package: &Package,
        keys: &[ModuleKey],
        built: mpsc::UnboundedSender<score::Built>,
    ) -> Result<()> {
        package.write_module(&ModuleKey::Committed, &self.spec.committed.source)?;
        let harness = &self.spec.harness.crate_name;
        let images = score::build_images(package, keys, harness, self.toolchain, |b| {
            let _ = built.send(b);
        })
        .await?;
        for (key, errors) in &images.failed {
            let failed = Scored {
                key: key.clone(),
                verdict: ScoreVerdict::ScoreBuildFailed,
                passed: 0,
                total: self.spec.cases.count,
                wall: Default::default(),
                cpu: Default::default(),
                cases: vec![score::CaseOutcome::NotRun; self.spec.cases.count],
                restarts: 0,
                peak_processes: None,
                stderr: errors.clone(),
            };
            store_score(self.store, self.batch, &failed).await?;
        }
        Ok(())
    }

    /// Stores a candidate's wrong answers on the task's visible cases, and
    /// only those: hidden cases' answers are never kept, so no prompt can
    /// carry them.
    async fn keep_wrong_answers(&self, ran: &score::Ran) -> Result<()> {
        let ModuleKey::Candidate(idx) = ran.scored.key else {
            return Ok(());
        };
        if !self.keep_answers {
            return Ok(());
        }
        let visible = &self.spec.repair.visible;
        let kept: Vec<(usize, String)> = ran
            .wrong_answers
            .iter()
            .filter(|(pos, _)| visible.contains(*pos))
            .cloned()
            .collect();
        Ok(self
            .store
            .record_case_outputs(self.batch, idx, &kept)
            .await?)
    }

    /// Runs each image as it is built (from a copy in the batch's folder,
    /// which no later build overwrites) once the judge is built, and stores
    /// each score as its run ends; returns when the build is over and every
    /// run has ended.
    async fn run_as_built(
        &self,
        mut built: mpsc::UnboundedReceiver<score::Built>,
        ready: Vec<(ModuleKey, PathBuf)>,
        sandbox: Arc<Sandbox>,
    ) -> Result<()> {
        let dir = self.batch_dir.join("images");
        let copy = |from: &Path, name: &str| -> Result<PathBuf> {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            let to = dir.join(name);
            // Runs start while later images are copied: placed so that no
            // run's child can hold a copy open for writing when it is exec'd.
            crate::sandbox::place_executable(from, &to)?;
            Ok(to)
        };
        let bar = self.progress.bar("score", 0);
        let parallel = std::thread::available_parallelism().map_or(2, |n| n.get());
        let mut runs: Option<score::Runs> = None;
        // Images built before the judge, which every run needs: the
        // probe's, then any the score build makes.
        bar.inc_length(ready.len() as u64);
        let mut waiting = ready;
        let mut building = true;
        loop {
            tokio::select! {
                next = built.recv(), if building => match next {
                    None => building = false,
                    Some(score::Built::Judge(path)) if runs.is_none() => {
                        let judge = copy(&path, "judge")?;
                        let oracle = score::Oracle::new(
                            &judge,
                            Arc::from(self.spec.cases.text.as_str()),
                            self.spec.cases.count,
                            sandbox.clone(),
                            self.spec.limits.memory_bytes,
                        )
                        .await?;
                        let limits = RunLimits::from_spec(&self.spec.limits);
                        let mut started =
                            score::Runs::new(Arc::new(oracle), limits, parallel, sandbox.clone());
                        for (key, image) in waiting.drain(..) {
                            started.spawn(key, image);
                        }
                        runs = Some(started);
                    }
                    Some(score::Built::Judge(_)) => {}
                    Some(score::Built::Image(key, path)) => {
                        let image = copy(&path, &key.name())?;
                        bar.inc_length(1);
                        match runs.as_mut() {
                            Some(runs) => runs.spawn(key, image),
                            None => waiting.push((key, image)),
                        }
                    }
                },
                Some(ran) = next_run(&mut runs) => {
                    // A harness fault fails the batch; the run is no one's.
                    let ran = ran.map_err(|e| task::harness_fault_in_batch(self.spec, e))?;
                    // Before the score: a run whose score is stored is
                    // never run again, so its answers would never come.
                    self.keep_wrong_answers(&ran).await?;
                    store_score(self.store, self.batch, &ran.scored).await?;
                    testpoint::reached("score.run").await;
                    bar.inc(1);
                }
                else => break,
            }
        }
        bar.finish();
        Ok(())
    }
}

/// Copies each distinct image of the `compiled` candidates into the
/// batch's folder (`sandbox::place_executable`), where no later build
/// (another batch of the task, once the package is released) replaces it,
/// and names each candidate's copy: one copy per shared image, not per
/// candidate.
fn keep_images(
    batch_dir: &Path,
    compiled: &[usize],
    images: &Images,
) -> Result<Vec<(ModuleKey, PathBuf)>> {
    let dir = batch_dir.join("images");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut kept: HashMap<PathBuf, PathBuf> = HashMap::new();
    let mut ready = Vec::with_capacity(compiled.len());
    for idx in compiled {
        let image = images
            .get(idx)
            .with_context(|| format!("candidate {idx} compiled but has no image"))?;
        let path = match kept.get(&image.path) {
            Some(path) => path.clone(),
            None => {
                let name = image.path.file_name().context("an image without a name")?;
                let to = dir.join(name);
                crate::sandbox::place_executable(&image.path, &to)?;
                kept.insert(image.path.clone(), to.clone());
                to
            }
        };
        ready.push((ModuleKey::Candidate(*idx), path));
    }
    Ok(ready)
}

/// The next run to end, or `None` when none is running.
async fn next_run(runs: &mut Option<score::Runs>) -> Option<Result<score::Ran>> {
    match runs {
        Some(runs) if !runs.is_empty() => runs.next().await,
        _ => None,
    }
}

/// Decides admission for every scored candidate of the batch, from the
/// store: the reference's run and every candidate's, whichever attempt
/// stored them. Candidates the scorer could not build have no admission.
async fn admit_all(spec: &Spec, store: &Store, batch: BatchId) -> Result<()> {
    let reference = store.batch(batch).await?.committed;
    let rows = store.candidates(batch).await?;
    let candidates: Vec<admit::Contender<'_>> = rows
        .iter()
        .filter_map(|c| {
            let Extraction::Source(source) = &c.extraction else {
                return None;
            };
            Some(admit::Contender {
                idx: c.idx,
                source_len: source.len(),
                scored: c.score.as_ref()?,
            })
        })
        .filter(|c| c.scored.verdict != ScoreVerdict::ScoreBuildFailed)
        .collect();
    let decisions = admit::admit(&spec.admit, reference.as_ref(), &candidates);
    let rows: Vec<(usize, admit::Admission)> =
        candidates.iter().map(|c| c.idx).zip(decisions).collect();
    store.record_admissions(batch, &rows).await?;
    Ok(())
}

/// Stores one run as it finishes; admission comes later, for all at once.
async fn store_score(store: &Store, batch: BatchId, scored: &Scored) -> Result<()> {
    match scored.key {
        ModuleKey::Committed => store.record_committed(batch, scored).await?,
        ModuleKey::Candidate(idx) => store.record_score(batch, idx, scored, false).await?,
    }
    store.record_run_details(batch, scored).await?;
    Ok(())
}
