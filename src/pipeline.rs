//! Pipeline: wires the stages of one batch together.
//!
//! draw -> extract+dedup -> probe -> score build -> score run -> persist.
//! Each phase runs inside an accounting guard, and every result is stored as
//! it arrives. Stages exchange plain data; only this module knows their order.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use tokio::sync::mpsc;

use crate::account::{Phase, PhaseFigures, PhaseGuard};
use crate::dedup;
use crate::draw::{Drawn, ReplayPool};
use crate::extract::{self, Extraction};
use crate::interrupt::{Interrupt, Interrupted};
use crate::owner::Owner;
use crate::package::{ModuleKey, Package};
use crate::probe::{self, Probed};
use crate::progress::Progress;
use crate::resume::{self, Plan};
use crate::score::{self, RunLimits, ScoreVerdict, Scored};
use crate::spec::{AdmitRule, Spec};
use crate::store::{BatchId, BatchStatus, Claim, NewBatch, Store, StoreError};
use crate::testpoint;

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
}

/// Checks what can be checked before anything is written: a batch that
/// cannot start leaves no trace in the store.
pub fn prepare(cfg: &RunConfig) -> Result<ReplayPool> {
    let pool = ReplayPool::open("replay", &cfg.spec.draw.replay)?;
    pool.check_capacity(cfg.n)?;
    Ok(pool)
}

/// Runs one batch to the end and returns its id. On failure after the batch
/// was created, the batch is marked failed with the reason, and everything
/// stored so far stays. When `interrupt` fires, outstanding work is dropped,
/// the batch is marked interrupted and the error is [`Interrupted`].
pub async fn run(
    cfg: &RunConfig,
    pool: ReplayPool,
    store: &Store,
    progress: &Progress,
    interrupt: &Interrupt,
) -> Result<BatchId> {
    let batch = store
        .begin_owned_batch(
            &NewBatch {
                task: &cfg.spec.name,
                spec_path: &cfg.spec.path,
                pool: &pool.name,
                n: cfg.n,
            },
            &Owner::current(),
            &resume::spec_digest(&cfg.spec),
        )
        .await?;
    tracing::info!(batch, task = %cfg.spec.name, n = cfg.n, "batch started");
    drive(cfg, &pool, store, progress, interrupt, batch, Plan::fresh()).await
}

/// Finishes an interrupted or failed batch: takes it over (one process
/// wins), reads what it has stored, records the attempt, and runs every
/// stage on what is missing only. `cfg.n` must be the batch's.
pub async fn resume(
    cfg: &RunConfig,
    pool: ReplayPool,
    store: &Store,
    progress: &Progress,
    interrupt: &Interrupt,
    batch: BatchId,
) -> Result<BatchId> {
    let not_resumable = |why: String| StoreError::NotResumable {
        path: store.path().to_path_buf(),
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
        if digest != resume::spec_digest(&cfg.spec) {
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
    let mut plan = Plan::load(store, batch).await?;
    plan.attempt = store.record_resume(batch, &plan.kept()).await?;
    tracing::info!(batch, attempt = plan.attempt, kept = ?plan.kept(), "batch resumed");
    drive(cfg, &pool, store, progress, interrupt, batch, plan).await
}

/// Runs the stages of an owned batch, and records how it ended.
async fn drive(
    cfg: &RunConfig,
    pool: &ReplayPool,
    store: &Store,
    progress: &Progress,
    interrupt: &Interrupt,
    batch: BatchId,
    plan: Plan,
) -> Result<BatchId> {
    // Dropping the batch's future cancels everything it has outstanding: the
    // draw task is aborted, cargo and scoring children are killed on drop.
    // Every result stored so far is committed; nothing is half-written,
    // because each write is one statement or one transaction.
    let ended = tokio::select! {
        // A batch that has just finished is finished, whatever came in
        // at the same moment.
        biased;
        done = run_batch(cfg, pool, store, progress, batch, &plan) => Ok(done),
        signal = interrupt.fired() => Err(signal),
    };
    match ended {
        Ok(Ok(())) => Ok(batch),
        Ok(Err(e)) => {
            let reason = format!("{e:#}");
            store
                .finish_batch(batch, BatchStatus::Failed, Some(&reason))
                .await?;
            Err(e.context(format!("batch {batch} failed")))
        }
        Err(signal) => {
            store
                .finish_batch(
                    batch,
                    BatchStatus::Interrupted,
                    Some(&format!("interrupted by {signal}")),
                )
                .await?;
            Err(Interrupted { batch, signal }.into())
        }
    }
}

async fn run_batch(
    cfg: &RunConfig,
    pool: &ReplayPool,
    store: &Store,
    progress: &Progress,
    batch: BatchId,
    plan: &Plan,
) -> Result<()> {
    let batch_dir = cfg.out_dir.join(format!("batch-{batch}"));
    let errors_dir = batch_dir.join("errors");
    std::fs::create_dir_all(&errors_dir)
        .with_context(|| format!("cannot create {}", errors_dir.display()))?;
    store.set_errors_dir(batch, &errors_dir).await?;

    let guard = PhaseGuard::start(Phase::Draw);
    let replies = draw(pool, cfg.n, store, progress, batch, plan).await?;
    record(store, batch, guard.finish()).await?;
    testpoint::reached("draw.done").await;

    let guard = PhaseGuard::start(Phase::ExtractDedup);
    let extracted = extract_and_dedup(&cfg.spec, &replies, store, batch, plan).await?;
    record(store, batch, guard.finish()).await?;

    // On a resume, only what lacks a verdict or a score is built and run.
    let to_probe: Vec<Unique> = extracted
        .into_iter()
        .filter(|u| plan.probe(u.idx).is_none())
        .collect();
    let kept_to_score: Vec<(usize, &str)> = plan.compiled_unscored().collect();
    let needs_package =
        !to_probe.is_empty() || !kept_to_score.is_empty() || !plan.committed_scored();
    let package = if needs_package {
        Some(open_package(cfg).await?)
    } else {
        None
    };

    let guard = PhaseGuard::start(Phase::Probe);
    let probed = match &package {
        Some(package) if !to_probe.is_empty() => probe(package, &to_probe, progress).await?,
        _ => Vec::new(),
    };
    let figures = guard.finish();
    if !probed.is_empty() {
        store_probe(
            store,
            batch,
            probed.clone(),
            &errors_dir,
            &figures,
            plan.probe_run,
        )
        .await?;
    }
    record(store, batch, figures).await?;

    let guard = PhaseGuard::start(Phase::ScoreBuild);
    let mut keys: Vec<ModuleKey> = probed
        .iter()
        .filter(|p| p.verdict.compiled())
        .map(|p| ModuleKey::Candidate(p.idx))
        .collect();
    keys.extend(
        kept_to_score
            .iter()
            .map(|(idx, _)| ModuleKey::Candidate(*idx)),
    );
    if !plan.committed_scored() {
        keys.push(ModuleKey::Committed);
    }
    let scorer = match package {
        Some(package) if !keys.is_empty() => {
            // Candidates probed in an earlier attempt are not in the package
            // yet (opening it cleared the last batch's sources).
            for (idx, source) in &kept_to_score {
                package.write_module(&ModuleKey::Candidate(*idx), source)?;
            }
            let spinner = progress.spinner("scorer");
            let scorer = build_scorer(&cfg.spec, &package, keys, &batch_dir, store, batch).await?;
            spinner.finish();
            drop(package);
            Some(scorer)
        }
        _ => None,
    };
    record(store, batch, guard.finish()).await?;
    testpoint::reached("score.built").await;

    let guard = PhaseGuard::start(Phase::ScoreRun);
    if let Some(scorer) = scorer {
        score_all(&cfg.spec, scorer, store, progress, batch).await?;
    }
    record(store, batch, guard.finish()).await?;

    testpoint::reached("persist").await;
    let guard = PhaseGuard::start(Phase::Persist);
    store
        .finish_batch(batch, BatchStatus::Finished, None)
        .await?;
    record(store, batch, guard.finish()).await?;
    Ok(())
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
    tokio::task::spawn_blocking(move || Package::open(&spec, &work_dir, &target_dir))
        .await
        .context("opening the package panicked")?
}

/// Aborts a spawned task when dropped, so cancelling the batch cancels the
/// requests it has outstanding.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Draws `n` replies, storing each as it arrives. Replies the plan has
/// stored are not requested again.
async fn draw(
    pool: &ReplayPool,
    n: usize,
    store: &Store,
    progress: &Progress,
    batch: BatchId,
    plan: &Plan,
) -> Result<Vec<Drawn>> {
    let bar = progress.bar("draw", n);
    let mut replies: Vec<Drawn> = plan.replies().filter(|d| d.idx < n).cloned().collect();
    bar.inc(replies.len() as u64);
    // The replay pool serves in order, so skipping the stored prefix asks
    // for nothing twice; a reply past a gap that is already stored is
    // passed by (a pool drawing out of order may leave such gaps).
    let skip = plan.stored_prefix().min(n);
    let (tx, mut rx) = mpsc::channel(64);
    let pool = pool.clone();
    let mut drawing = AbortOnDrop(tokio::spawn(async move { pool.draw(n, skip, tx).await }));
    while let Some(drawn) = rx.recv().await {
        if plan.has_reply(drawn.idx) {
            continue;
        }
        store.record_reply(batch, &drawn).await?;
        bar.inc(1);
        replies.push(drawn);
        testpoint::reached("draw.reply").await;
    }
    (&mut drawing.0).await.context("the draw task panicked")??;
    bar.finish();
    replies.sort_by_key(|d| d.idx);
    Ok(replies)
}

/// A candidate that extraction and dedup kept for probing.
struct Unique {
    idx: usize,
    source: String,
}

/// Extracts and fingerprints every reply; candidates the plan has stored
/// keep their stored extraction and group, and are not written again.
async fn extract_and_dedup(
    spec: &Spec,
    replies: &[Drawn],
    store: &Store,
    batch: BatchId,
    plan: &Plan,
) -> Result<Vec<Unique>> {
    let extractions: Vec<Extraction> = replies
        .iter()
        .map(|d| match plan.extraction(d.idx) {
            Some((stored, _)) => stored.clone(),
            None => extract::extract(
                d.reply.content.as_deref(),
                d.reply.finish_reason.as_deref(),
                &spec.entry,
            ),
        })
        .collect();
    let fingerprints: Vec<Option<dedup::Fingerprint>> = extractions
        .iter()
        .map(|e| match e {
            Extraction::Source(src) => dedup::fingerprint(src),
            Extraction::Failed(_) => None,
        })
        .collect();
    // Groups are formed over batch positions; map them back to reply indices.
    let dups = dedup::duplicates(&fingerprints);
    let mut unique = Vec::new();
    for (pos, (drawn, extraction)) in replies.iter().zip(extractions).enumerate() {
        let dup_of = match plan.extraction(drawn.idx) {
            Some((_, stored_dup_of)) => stored_dup_of,
            None => {
                let dup_of = dups[pos].map(|rep| replies[rep].idx);
                let fp = fingerprints[pos].map(|f| f.to_string());
                store
                    .record_candidate(batch, drawn.idx, &extraction, fp.as_deref(), dup_of)
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

async fn probe(package: &Package, unique: &[Unique], progress: &Progress) -> Result<Vec<Probed>> {
    let bar = progress.bar("probe", unique.len());
    let sources: Vec<(usize, &str)> = unique.iter().map(|u| (u.idx, u.source.as_str())).collect();
    let probed = probe::probe_wide(package, &sources, |done| {
        bar.set_position(done as u64);
        testpoint::reached_blocking("probe.target");
    })
    .await?;
    bar.finish();
    Ok(probed)
}

/// Writes each failing candidate's diagnostics to its error file and stores
/// the run.
async fn store_probe(
    store: &Store,
    batch: BatchId,
    probed: Vec<Probed>,
    errors_dir: &Path,
    figures: &PhaseFigures,
    resumed_run: Option<i64>,
) -> Result<()> {
    // A resume adds its verdicts to the batch's own run, which is where the
    // report reads them.
    let run = match resumed_run {
        Some(run) => run,
        None => store.begin_probe_run(batch, "wide").await?,
    };
    testpoint::reached("probe.begun").await;
    let mut rows = Vec::with_capacity(probed.len());
    for p in probed {
        let error_file = if p.verdict.compiled() {
            None
        } else {
            let path = errors_dir.join(format!("c{}.txt", p.idx));
            let text = format!("candidate {}: {}\n\n{}", p.idx, p.verdict, p.diagnostics);
            std::fs::write(&path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            Some(path)
        };
        rows.push((p, error_file));
    }
    store
        .record_probe_verdicts(run, batch, &rows, figures)
        .await?;
    testpoint::reached("probe.stored").await;
    Ok(())
}

/// A built scorer, copied into the batch's directory so scoring needs no
/// lock on the task's package.
struct Scorer {
    exe: PathBuf,
    keys: Vec<ModuleKey>,
}

async fn build_scorer(
    spec: &Spec,
    package: &Package,
    keys: Vec<ModuleKey>,
    batch_dir: &Path,
    store: &Store,
    batch: BatchId,
) -> Result<Scorer> {
    package.write_module(&ModuleKey::Committed, &spec.committed.source)?;
    let built = score::build_scorer(package, &keys, &spec.harness.crate_name).await?;
    for (key, errors) in &built.excluded {
        let failed = Scored {
            key: key.clone(),
            verdict: ScoreVerdict::ScoreBuildFailed,
            passed: 0,
            total: spec.cases.count,
            wall: Default::default(),
            stderr: errors.clone(),
        };
        store_score(spec.admit, store, batch, &failed).await?;
    }
    let exe = batch_dir.join("scorer");
    std::fs::copy(&built.exe, &exe)
        .with_context(|| format!("cannot copy the scorer to {}", exe.display()))?;
    Ok(Scorer {
        exe,
        keys: built.included,
    })
}

async fn score_all(
    spec: &Spec,
    scorer: Scorer,
    store: &Store,
    progress: &Progress,
    batch: BatchId,
) -> Result<()> {
    let bar = progress.bar("score", scorer.keys.len());
    let parallel = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut running = score::spawn_all(
        &scorer.exe,
        scorer.keys,
        Arc::from(spec.cases.text.as_str()),
        spec.cases.count,
        RunLimits::with_wall(spec.limits.wall),
        parallel,
    );
    while let Some(done) = running.join_next().await {
        let scored = done.context("a scoring task panicked")??;
        store_score(spec.admit, store, batch, &scored).await?;
        bar.inc(1);
        testpoint::reached("score.run").await;
    }
    bar.finish();
    Ok(())
}

async fn store_score(
    rule: AdmitRule,
    store: &Store,
    batch: BatchId,
    scored: &Scored,
) -> Result<()> {
    match scored.key {
        ModuleKey::Committed => store.record_committed(batch, scored).await?,
        ModuleKey::Candidate(idx) => {
            store
                .record_score(batch, idx, scored, admits(rule, scored))
                .await?
        }
    }
    Ok(())
}

/// The spec's admission rule: finished within the limits with at least the
/// minimum score.
pub fn admits(rule: AdmitRule, scored: &Scored) -> bool {
    match scored.verdict {
        ScoreVerdict::Scored { passed, total } if total > 0 => {
            passed as f64 / total as f64 >= rule.min_score
        }
        _ => false,
    }
}
