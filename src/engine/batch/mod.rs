//! A task's batch: its stages around the one round loop
//! (`engine::rounds`), each in a file of its own.
//!
//! draw -> extract+dedup -> probe -> score build -> score run -> persist.
//! Each phase runs inside an accounting guard, and every result is stored as
//! it arrives. Stages exchange plain data; only `rounds.rs` knows their order.
//!
//! The probe streams: while the draw runs, each reply is extracted and
//! fingerprinted as it arrives and the first of each fingerprint goes down a
//! channel to the probe, which builds them in waves (`probe::stream`). The
//! `probe` phase is the tail the batch waits for after its last reply; the
//! whole probe's work (every wave) is its probe run's figures.
//!
//! - `rounds.rs`: a batch's rounds as the round loop runs them, and one
//!   round's stages in order.
//! - `draw.rs`: the replies a round asks for, stored as they arrive.
//! - `extract.rs`: extraction and dedup, streaming and over the batch.
//! - `probe.rs`: the streaming probe, settled and stored.
//! - `score.rs`: the scoring images built and run, and admission.

mod draw;
mod extract;
mod probe;
mod rounds;
mod score;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::build::package::Package;
use crate::build::probe::ProbeMode;
use crate::draw::{DrawOptions, Plan, SourceChange};
use crate::engine::drive::drive;
use crate::engine::interrupt::{Interrupt, Run};
use crate::engine::resume::ResumePlan;
use crate::repair::setup::Repairing;
use crate::spec::{Spec, WavePolicy};
use crate::store::{BatchId, BatchStatus, Claim, NewBatch, Store, StoreError};
use crate::support::account::{CutPhases, Phase, PhaseFigures, PhaseGuard};
use crate::support::owner::Owner;
use crate::support::progress::Progress;
use crate::support::testpoint;
use crate::task;
use rounds::{run_rounds, TaskRounds};

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
    let cut = CutPhases::default();
    let rounds = TaskRounds::new(cfg, &plan, store, progress, batch, &cut);
    let rounds = run_rounds(rounds, ResumePlan::fresh(), checked.0);
    let driven = drive(store, interrupt, Run::Batch(batch), rounds).await;
    record_cut(store, batch, &cut, driven).await?;
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
    let cut = CutPhases::default();
    let rounds = TaskRounds::new(cfg, &plan, store, progress, batch, &cut);
    let rounds = run_rounds(rounds, stored, checked.0);
    let driven = drive(store, interrupt, Run::Batch(batch), rounds).await;
    record_cut(store, batch, &cut, driven).await?;
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

/// A batch cut short (interrupted, or failed) still records the phases it
/// was in, each measured up to the cut, so a resumed batch's table shows
/// what its earlier attempt spent. Best effort: the run's own outcome is
/// what is returned.
async fn record_cut<T>(
    store: &Store,
    batch: BatchId,
    cut: &CutPhases,
    driven: Result<T>,
) -> Result<T> {
    if driven.is_err() {
        for figures in cut.take() {
            if let Err(e) = store.record_phase(batch, &figures).await {
                tracing::warn!("cannot record the cut {} phase: {e:#}", figures.phase);
            }
        }
    }
    driven
}

async fn record(store: &Store, batch: BatchId, figures: PhaseFigures) -> Result<()> {
    tracing::debug!(?figures, "phase done");
    Ok(store.record_phase(batch, &figures).await?)
}

/// Opens and locks the task's package (`engine::package::open`).
async fn open_package(cfg: &RunConfig) -> Result<Package> {
    let (spec, work_dir, target_dir) = (
        cfg.spec.clone(),
        cfg.work_dir.clone(),
        cfg.target_dir.clone(),
    );
    let open = move || Package::open(&spec, &work_dir, &target_dir);
    crate::engine::package::open(open, cfg.probe.build_timeout).await
}
