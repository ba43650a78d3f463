//! Sweep: several batches of one task, run to be compared. One batch per
//! pool with the same prompt and settings (`assay compare --spec`), or one
//! batch per concurrency level of one pool (`assay ladder`).
//!
//! Every batch is an ordinary batch of [`batch::run`], stored like any
//! other, so `show`, `export` and `compare` read it later. Every plan is
//! built before the first batch starts: a bad pool name or an unset key
//! variable stops the sweep with nothing written.

use anyhow::{anyhow, Context, Result};

use crate::draw::{DrawOptions, Plan};
use crate::engine::batch::{self, RunConfig};
use crate::engine::interrupt::Interrupt;
use crate::spec::PoolChoice;
use crate::store::{BatchId, Db, Store};
use crate::support::progress::Progress;

/// How the batches of `compare --spec` share the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    /// All batches at once, each on its own thread with its own runtime and
    /// store connection: the pools are drawn in the same minutes. The
    /// accounting guards measure the whole process, so the CPU-s of phases
    /// that overlap include the other batches' work.
    Concurrent,
    /// One batch after the other: each batch's CPU-s are its own.
    Sequential,
}

/// Plans built and checked, ready to run.
pub struct Prepared {
    plans: Vec<Plan>,
    /// To show before the sweep starts (a pool without a sampling preset).
    pub warnings: Vec<String>,
}

/// The run configuration of a sweep's batches, as `run` builds one for a
/// new batch: the spec's probe settings, `n` candidates, the folders of
/// `outputs`.
pub fn run_config(
    spec: crate::spec::Spec,
    n: usize,
    outputs: &crate::engine::outputs::Outputs,
) -> RunConfig {
    RunConfig {
        probe: batch::ProbeSettings::for_spec(&spec),
        n,
        target_dir: outputs.work.target_dir(),
        work_dir: outputs.work.path.clone(),
        out_dir: outputs.out.clone(),
        spec,
        work_item: None,
        repair: Default::default(),
    }
}

/// Builds one plan per pool, each drawing `cfg.n` replies from that pool
/// alone. A share given as `NAME=SHARE` is meaningless here and refused.
pub fn prepare_per_pool(
    cfg: &RunConfig,
    draw: &DrawOptions,
    pools: &[PoolChoice],
) -> Result<Prepared> {
    let mut plans = Vec::with_capacity(pools.len());
    let mut warnings = Vec::new();
    for choice in pools {
        if choice.share.is_some() {
            return Err(crate::draw::DrawError::BadChoice {
                what: "--pool".into(),
                message: format!(
                    "`{}`: compare runs one whole batch per pool and takes no shares",
                    choice.name
                ),
            }
            .into());
        }
        let opts = DrawOptions {
            pools: vec![choice.clone()],
            split: None,
            ..draw.clone()
        };
        let (plan, w) = batch::prepare(cfg, &opts)?;
        plans.push(plan);
        warnings.extend(w);
    }
    Ok(Prepared { plans, warnings })
}

/// One level of a ladder, ready to run: the level, its run's settings,
/// its plan and the plan's warnings.
pub type LevelPlan = (usize, RunConfig, Plan, Vec<String>);

/// Builds one plan per level: `level` requests, `level` in flight.
pub fn prepare_ladder(
    cfg: &RunConfig,
    draw: &DrawOptions,
    pool: &PoolChoice,
    levels: &[usize],
) -> Result<Vec<LevelPlan>> {
    levels
        .iter()
        .map(|&level| {
            let cfg = RunConfig {
                n: level,
                ..cfg.clone()
            };
            let opts = DrawOptions {
                pools: vec![PoolChoice {
                    name: pool.name.clone(),
                    share: None,
                }],
                split: None,
                max_in_flight: Some(level),
                ..draw.clone()
            };
            let (plan, warnings) = batch::prepare(&cfg, &opts)?;
            if plan.label() == "replay" {
                return Err(crate::draw::DrawError::BadChoice {
                    what: "--pool".into(),
                    message: "the ladder measures a server: `replay` has no concurrency".into(),
                }
                .into());
            }
            Ok((level, cfg, plan, warnings))
        })
        .collect()
}

/// Runs one batch per prepared plan and returns their ids, in the order of
/// the pools.
pub async fn run_per_pool(
    cfg: &RunConfig,
    prepared: Prepared,
    schedule: Schedule,
    db: &Db,
    progress: &Progress,
) -> Result<Vec<BatchId>> {
    match schedule {
        Schedule::Sequential => {
            // Checked before the database is opened, as `assay run` does;
            // later batches check again, which costs nothing once stamped.
            let mut checked = Some(batch::check_task(cfg).await?);
            let store = Store::open(db).await?;
            // Closed on every way out: a pool dropped with its connections
            // open leaves `DB-wal` and `DB-shm` behind (`command_store`).
            crate::engine::command_store::close_after(&store, async {
                let mut ids = Vec::new();
                for plan in prepared.plans {
                    let checked = match checked.take() {
                        Some(c) => c,
                        None => batch::check_task(cfg).await?,
                    };
                    ids.push(
                        batch::run(cfg, plan, checked, &store, progress, &Interrupt::never())
                            .await?,
                    );
                }
                Ok(ids)
            })
            .await
        }
        Schedule::Concurrent => {
            // Checked once before anything is opened, and that check goes
            // with the first batch; the others check again on their threads
            // (free once stamped).
            let mut checked = Some(batch::check_task(cfg).await?);
            // A thread and a runtime per batch: the task package's file lock
            // blocks the thread that waits for it, and must not block a
            // worker another batch needs.
            let handles: Vec<_> = prepared
                .plans
                .into_iter()
                .map(|plan| {
                    let checked = checked.take();
                    let cfg = cfg.clone();
                    let db = db.clone();
                    let progress = progress.clone();
                    std::thread::Builder::new()
                        .name(format!("assay-{}", plan.label()))
                        .spawn(move || -> Result<BatchId> {
                            let rt = tokio::runtime::Builder::new_current_thread()
                                .enable_all()
                                .build()
                                .context("cannot start a runtime for a batch")?;
                            rt.block_on(async {
                                let checked = match checked {
                                    Some(c) => c,
                                    None => batch::check_task(&cfg).await?,
                                };
                                let store = Store::open(&db).await?;
                                let id = batch::run(
                                    &cfg,
                                    plan,
                                    checked,
                                    &store,
                                    &progress,
                                    &Interrupt::never(),
                                )
                                .await;
                                store.close().await;
                                id
                            })
                        })
                        .context("cannot start a thread for a batch")
                })
                .collect::<Result<_>>()?;
            let mut ids = Vec::new();
            let mut first_error = None;
            for handle in handles {
                match handle.join() {
                    Ok(Ok(id)) => ids.push(id),
                    Ok(Err(e)) => {
                        first_error.get_or_insert(e);
                    }
                    Err(_) => {
                        first_error.get_or_insert(anyhow!("a batch thread panicked"));
                    }
                }
            }
            match first_error {
                Some(e) => Err(e),
                None => Ok(ids),
            }
        }
    }
}

/// Runs the ladder's levels one after the other; returns (level, batch).
pub async fn run_ladder(
    prepared: Vec<(usize, RunConfig, Plan, Vec<String>)>,
    store: &Store,
    progress: &Progress,
) -> Result<Vec<(usize, BatchId)>> {
    let mut out = Vec::with_capacity(prepared.len());
    for (level, cfg, plan, _) in prepared {
        let checked = batch::check_task(&cfg).await?;
        let batch = batch::run(&cfg, plan, checked, store, progress, &Interrupt::never()).await?;
        out.push((level, batch));
    }
    Ok(out)
}
