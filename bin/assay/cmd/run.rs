//! `assay run`: a batch for a task, run here, resumed, or queued.

use std::process::ExitCode;

use anyhow::{Context, Result};

use assay::command_store::{self, reading};
use assay::draw::DrawOptions;
use assay::exit::UsageError;
use assay::hint::{CommandLine, Reach};
use assay::interrupt::{Interrupt, Interrupted, Stopped};
use assay::outputs::Outputs;
use assay::pipeline::{self, RunConfig};
use assay::probe::ProbeMode;
use assay::progress::Progress;
use assay::spec::WavePolicy;
use assay::store::Db;
use assay::views;

use super::{checked, draw_options};
use crate::args::RunArgs;

/// A batch stopped by a signal names the command that finishes it, with
/// the flags that reach its store.
fn with_resume_hint(e: anyhow::Error, reach: &Reach) -> anyhow::Error {
    match e.downcast_ref::<Interrupted>() {
        Some(i) => Stopped::batch(i.batch, i.signal, reach).into(),
        None => e,
    }
}

pub async fn run(args: RunArgs) -> Result<ExitCode> {
    let reach = Reach::new(&args.db.raw, args.out.as_deref());
    run_batch(args)
        .await
        .map_err(|e| with_resume_hint(e, &reach))
}

async fn run_batch(args: RunArgs) -> Result<ExitCode> {
    let wave_size = checked("--wave-size", args.wave_size, WavePolicy::check_size)?;
    let wave_wait = checked("--wave-wait", args.wave_wait, WavePolicy::check_wait)?;
    let build_timeout = checked(
        "--build-timeout",
        args.build_timeout,
        assay::spec::check_build_timeout,
    )?;
    let db = args.db.db()?;
    // A resumed batch says which spec, how many and where its outputs are.
    let resumed = match args.resume {
        Some(batch) => Some(assay::exit::opened_for(
            args.work_item,
            reading(&db, async |store| {
                views::refuse_suite_batch(store, batch, &args.db.reach()).await?;
                Ok((
                    store.batch(batch).await?,
                    store.repair_settings(batch).await?,
                ))
            })
            .await,
        )?),
        None => None,
    };
    let (resumed, resumed_repair) = match resumed {
        Some((row, repair)) => (Some(row), repair),
        None => (None, None),
    };
    let spec = match (&args.spec, &resumed) {
        (Some(path), _) => assay::task::load(path)?,
        (None, Some(row)) => {
            assay::task::load(std::path::Path::new(&row.spec_path)).map_err(|e| {
                let with_spec = CommandLine::assay(["run", "SPEC", "--resume"])
                    .arg(row.id.to_string())
                    .reaching(&args.db.reach());
                UsageError(format!(
                    "batch {}: {e}; pass the task's spec: {with_spec}",
                    row.id
                ))
            })?
        }
        (None, None) => unreachable!("clap requires a spec without --resume"),
    };
    let n = match &resumed {
        Some(row) => row.n,
        None => args.n.unwrap_or(spec.draw.n),
    };
    assay::spec::check_candidates(n).map_err(|e| UsageError(format!("-n: {e}")))?;
    let mode: ProbeMode = args
        .probe
        .parse()
        .map_err(|e: String| UsageError(format!("--probe: {e}")))?;
    let mut probe = pipeline::ProbeSettings::for_spec(&spec);
    probe.mode = mode;
    probe.waves.size = wave_size.unwrap_or(probe.waves.size);
    probe.waves.wait = wave_wait.unwrap_or(probe.waves.wait);
    probe.build_timeout = build_timeout.unwrap_or(probe.build_timeout);
    let draw = draw_options(assay::draw::DrawFlags {
        pools_file: args.pools,
        pools: args.pool,
        split: args.split,
        max_in_flight: args.max_in_flight,
        max_completion_tokens: args.max_completion_tokens,
    })?;
    if args.queue {
        return queue_run(&args.db.db()?, args.json, &spec, n, probe, &draw).await;
    }
    // errors_dir is OUT/batch-N/errors: a resumed batch keeps its folder.
    let resumed_out = resumed.as_ref().and_then(|row| {
        let dir = std::path::Path::new(row.errors_dir.as_deref()?);
        Some(dir.parent()?.parent()?.to_path_buf())
    });
    let outputs = Outputs::resolve(
        &db,
        args.out.as_deref().or(resumed_out.as_deref()),
        args.work_dir.as_deref(),
    )?;
    let rounds = checked("--rounds", args.rounds, assay::spec::check_rounds)?;
    let max_tokens = checked(
        "--max-tokens",
        args.max_tokens,
        assay::spec::check_token_budget,
    )?;
    let mut cfg = RunConfig {
        probe,
        n,
        target_dir: outputs.work.target_dir(),
        work_dir: outputs.work.path.clone(),
        out_dir: outputs.out.clone(),
        spec,
        work_item: args.work_item,
        repair: None,
    };
    let (plan, warnings) = pipeline::prepare(&cfg, &draw)?;
    for w in warnings {
        eprintln!("warning: {w}");
    }
    plan.check_reachable().await?;
    cfg.repair = repairing(
        &cfg,
        &plan,
        &draw,
        rounds,
        args.repair_pool,
        max_tokens,
        resumed_repair,
    )
    .await?;
    // Every path is checked, and an existing database opened, before
    // anything is written; the work directory is made before the task's
    // check builds there, the output folder and a new database once the
    // task is known to be good (a refused task leaves neither).
    outputs.check()?;
    let ran = command_store::running(&outputs.db, async |run_store| {
        let _work = outputs.prepare_work_dir()?;
        let checked = pipeline::check_task(&cfg).await?;
        outputs.prepare_out()?;
        let store = run_store.get().await?;
        store.check_writable().await?;
        let progress = if args.json {
            Progress::hidden()
        } else {
            Progress::stderr()
        };
        let interrupt = Interrupt::on_signals().context("cannot listen for Ctrl-C")?;
        let batch = match resumed {
            Some(row) => {
                pipeline::resume(&cfg, plan, checked, store, &progress, &interrupt, row.id).await?
            }
            None => pipeline::run(&cfg, plan, checked, store, &progress, &interrupt).await?,
        };
        if args.promote {
            assay::promote::promote_best(store, batch).await?;
        }
        if args.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&views::batch_json(store, batch).await?)?
            );
        } else {
            print!("{}", views::summary(store, batch).await?.render());
        }
        Ok(ExitCode::SUCCESS)
    })
    .await;
    assay::exit::opened_for(args.work_item, ran)
}

/// What a batch's repair rounds need, from the flags (a new batch) or
/// from what the batch stored (a resume): `None` when it asks for neither
/// rounds nor a budget. A replay corpus cannot answer a repair prompt.
async fn repairing(
    cfg: &RunConfig,
    plan: &assay::draw::Plan,
    draw: &DrawOptions,
    rounds: Option<u32>,
    repair_pool: Vec<assay::spec::PoolChoice>,
    max_tokens: Option<u64>,
    stored: Option<String>,
) -> Result<Option<pipeline::Repairing>> {
    let settings = match stored {
        Some(json) => assay::repair_round::RepairSettings::from_json(&json),
        None => {
            let mut s = assay::repair_round::RepairSettings::new(&cfg.spec, rounds, cfg.n);
            s.pools = repair_pool.iter().map(ToString::to_string).collect();
            s.max_tokens = max_tokens;
            (s.rounds > 0 || s.max_tokens.is_some()).then_some(s)
        }
    };
    let Some(settings) = settings else {
        return Ok(None);
    };
    let pools: Vec<assay::spec::PoolChoice> = settings
        .pools
        .iter()
        .map(|p| p.parse())
        .collect::<Result<_, _>>()
        .map_err(|e: String| UsageError(format!("--repair-pool: {e}")))?;
    let repair_plan = if pools.is_empty() {
        None
    } else {
        let opts = DrawOptions {
            pools,
            ..draw.clone()
        };
        let (p, warnings) = assay::draw::Plan::build(&cfg.spec, &opts)?;
        for w in warnings {
            eprintln!("warning: {w}");
        }
        p.check_reachable().await?;
        Some(p)
    };
    if settings.rounds > 0 && !repair_plan.as_ref().unwrap_or(plan).can_repair() {
        return Err(UsageError(
            "--rounds: a replay corpus cannot answer a repair prompt; draw from HTTP pools (--pool or --repair-pool)".into(),
        )
        .into());
    }
    Ok(Some(pipeline::Repairing {
        settings,
        plan: repair_plan,
    }))
}

/// `run --queue`: the run as resolved here (flags, their variables, the
/// spec's defaults, the pools file found from here) becomes a queue item;
/// the store, output and work folders are the lane's.
async fn queue_run(
    db: &Db,
    json: bool,
    spec: &assay::spec::Spec,
    n: usize,
    probe: pipeline::ProbeSettings,
    draw: &DrawOptions,
) -> Result<ExitCode> {
    let item = assay::work::WorkItem::Batch(assay::work::BatchRun::resolved(
        spec,
        n,
        probe.mode,
        probe.waves,
        probe.build_timeout,
        draw,
    ));
    let id = command_store::writing(db, async |store| {
        Ok(store.enqueue(item.kind(), &item.to_json()?).await?)
    })
    .await?;
    if json {
        println!("{}", serde_json::json!({ "work_item": id }));
    } else {
        println!("queued as item {id}: `assay lane` runs it");
    }
    Ok(ExitCode::SUCCESS)
}
