//! `assay run`: a batch for a task, run here, resumed, or queued.

use std::process::ExitCode;

use anyhow::{Context, Result};

use assay::engine::batch::{self, RunConfig};
use assay::engine::command_store::{self, reading};
use assay::engine::exit::UsageError;
use assay::engine::interrupt::{Interrupt, Interrupted, Stopped};
use assay::repair::setup;
use assay::repair::RepairFlags;
use assay::report::views;
use assay::store::Db;
use assay::support::hint::{CommandLine, Reach};
use assay::support::progress::Progress;

use super::draw_options;
use crate::args::RunArgs;

/// A batch stopped by a signal names the command that finishes it, with
/// the flags that reach its store.
fn with_resume_hint(e: anyhow::Error, reach: &Reach) -> anyhow::Error {
    match e.downcast_ref::<Interrupted>() {
        Some(i) => Stopped::of(i, reach).into(),
        None => e,
    }
}

pub async fn run(args: RunArgs) -> Result<ExitCode> {
    let reach = Reach::new(&args.db.raw, args.output.out.as_deref());
    run_batch(args)
        .await
        .map_err(|e| with_resume_hint(e, &reach))
}

async fn run_batch(args: RunArgs) -> Result<ExitCode> {
    let db = args.db.db()?;
    // A resumed batch says which spec, how many and where its outputs are.
    let resumed = match args.resume {
        Some(batch) => Some(assay::engine::exit::opened_for(
            args.work_item,
            reading(&db, async |store| {
                views::refuse_suite_batch(store, batch, &args.db.reach()).await?;
                Ok((
                    store.batch(batch).await?,
                    store.repair_settings(batch).await?,
                    store.draw_source(batch).await?,
                ))
            })
            .await,
        )?),
        None => None,
    };
    let (resumed, resumed_repair, resumed_draw) = match resumed {
        Some((row, repair, draw)) => (Some(row), repair, draw),
        None => (None, None, None),
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
        // clap requires one of them; said again rather than assumed.
        (None, None) => {
            return Err(UsageError("run: name the task's spec, or --resume BATCH".into()).into())
        }
    };
    let n = match &resumed {
        Some(row) => row.n,
        None => args.n.unwrap_or(spec.draw.n),
    };
    assay::spec::check_candidates(n).map_err(|e| UsageError(format!("-n: {e}")))?;
    let mut probe = batch::ProbeSettings::for_spec(&spec);
    probe.mode = args.probe;
    probe.waves.size = args.wave_size.unwrap_or(probe.waves.size);
    probe.waves.wait = args.wave_wait.unwrap_or(probe.waves.wait);
    probe.build_timeout = args.build_timeout.unwrap_or(probe.build_timeout);
    let draw = draw_options(args.draw.flags())?;
    let flags = RepairFlags {
        rounds: args.rounds,
        // A task's spec says what its prompts carry (`[repair] feedback`).
        feedback: None,
        pools: args.repair_pool,
        max_tokens: args.max_tokens,
    };
    flags.check_task(&spec)?;
    if args.queue {
        setup::check_queued(&spec, &draw, &flags)?;
        let item = assay::queue::enqueue::QueuedBatch::pack(
            &spec,
            n,
            probe.mode,
            probe.waves,
            probe.build_timeout,
            &draw,
            &flags,
        )?;
        return queue_run(&args.db.db()?, args.json, item).await;
    }
    let resumed_out = resumed
        .as_ref()
        .and_then(|row| assay::engine::outputs::out_of_errors_dir(row.errors_dir.as_deref()?));
    let outputs = args.output.resolve_or(&db, resumed_out.as_deref())?;
    let mut cfg = RunConfig {
        probe,
        n,
        target_dir: outputs.work.target_dir(),
        work_dir: outputs.work.path.clone(),
        out_dir: outputs.out.clone(),
        spec,
        work_item: args.work_item,
        repair: Default::default(),
    };
    // A resume draws from the batch's stored source unless the flags name
    // another, which is said here and recorded with the attempt.
    let (plan, warnings, change, draw) = match &resumed {
        Some(row) => {
            let p = batch::prepare_resume(&cfg, &draw, row.id, resumed_draw.as_deref())?;
            (p.plan, p.warnings, p.change, p.draw)
        }
        None => {
            let (plan, warnings) = batch::prepare(&cfg, &draw)?;
            (plan, warnings, None, draw)
        }
    };
    for w in warnings {
        eprintln!("warning: {w}");
    }
    // Said of a batch the resume can take (a finished one is refused
    // below, and records nothing).
    let resumable = resumed.as_ref().is_some_and(|row| {
        matches!(
            row.status,
            assay::store::BatchStatus::Interrupted | assay::store::BatchStatus::Failed
        )
    });
    if let Some(change) = change.as_ref().filter(|_| resumable) {
        eprintln!("note: {}", change.sentence);
    }
    plan.check_reachable().await?;
    let warn = |w: &str| eprintln!("warning: {w}");
    cfg.repair =
        setup::resolve(&cfg.spec, cfg.n, &plan, &draw, flags, resumed_repair, &warn).await?;
    // Every path is checked, and an existing database opened, before
    // anything is written; the work directory is made before the task's
    // check builds there, the output folder and a new database once the
    // task is known to be good (a refused task leaves neither).
    outputs.check()?;
    let ran = command_store::running(&outputs.db, async |run_store| {
        let _work = outputs.prepare_work_dir()?;
        let checked = batch::check_task(&cfg).await?;
        outputs.prepare_out()?;
        let store = run_store.get().await?;
        store.check_writable().await?;
        let progress = Progress::unless_json(args.json);
        let interrupt = Interrupt::on_signals().context("cannot listen for Ctrl-C")?;
        let batch = match resumed {
            Some(row) => {
                batch::resume(
                    &cfg,
                    plan,
                    change.as_ref(),
                    checked,
                    store,
                    &progress,
                    &interrupt,
                    row.id,
                )
                .await?
            }
            None => batch::run(&cfg, plan, checked, store, &progress, &interrupt).await?,
        };
        if args.promote {
            assay::engine::promote::promote_best(store, batch).await?;
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
    assay::engine::exit::opened_for(args.work_item, ran)
}

/// `run --queue`: the run as resolved here (flags, their variables, the
/// spec's defaults, the pools file found from here, the repair rounds and
/// budget) becomes a queue item; the store, output and work folders are
/// the lane's.
async fn queue_run(
    db: &Db,
    json: bool,
    batch: assay::queue::enqueue::QueuedBatch,
) -> Result<ExitCode> {
    let id = command_store::writing(db, async |store| batch.enqueue(store).await).await?;
    if json {
        println!("{}", serde_json::json!({ "work_item": id }));
    } else {
        println!(
            "queued as item {id}: `{}` runs it",
            assay::queue::item::lane_command(db)
        );
    }
    Ok(ExitCode::SUCCESS)
}
