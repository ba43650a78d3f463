//! `assay compare`: batches side by side, stored or run per pool.

use std::process::ExitCode;

use anyhow::Result;

use assay::engine::command_store::reading;
use assay::engine::exit::UsageError;
use assay::engine::sweep;
use assay::report::views;
use assay::support::progress::Progress;

use super::{draw_options, sweep_config};
use crate::args::CompareArgs;

pub async fn compare(args: CompareArgs) -> Result<ExitCode> {
    // The chart's file is checked before any batch runs or is read.
    if let Some(path) = &args.svg {
        assay::engine::outputs::check_output_file("--svg", path)?;
    }
    if let Some(path) = &args.budget_svg {
        assay::engine::outputs::check_output_file("--budget-svg", path)?;
    }
    let db = args.db.db()?;
    let batches = match &args.spec {
        Some(spec) => {
            if !args.batches.is_empty() {
                return Err(UsageError(
                    "compare: name stored batches or --spec with --pool, not both".into(),
                )
                .into());
            }
            if args.pool.len() < 2 {
                return Err(UsageError("compare --spec: name at least two --pool".into()).into());
            }
            let (cfg, outputs) = sweep_config(spec, args.n, &args.sweep, &db)?;
            let prepared = sweep::prepare_per_pool(
                &cfg,
                &draw_options(args.sweep.pools.flags())?,
                &args.pool,
            )?;
            for w in &prepared.warnings {
                eprintln!("warning: {w}");
            }
            let _work = outputs.prepare()?;
            let schedule = if args.sequential {
                sweep::Schedule::Sequential
            } else {
                sweep::Schedule::Concurrent
            };
            let progress = Progress::unless_json(args.json);
            sweep::run_per_pool(&cfg, prepared, schedule, &db, &progress).await?
        }
        None if args.batches.len() < 2 => {
            return Err(UsageError(
                "compare: name at least two batches, or --spec with two --pool".into(),
            )
            .into())
        }
        None => args.batches.clone(),
    };
    reading(&db, async |store| {
        for &batch in &batches {
            views::refuse_suite_batch(store, batch, &args.db.reach()).await?;
        }
        let (comparison, samples) = views::comparison(store, &batches).await?;
        if let Some(w) = comparison.mixed_tasks() {
            eprintln!("warning: {w}");
        }
        if let Some(path) = &args.svg {
            assay::engine::outputs::write_chart(path, &assay::report::plot::compare_svg(&samples)?)?;
        }
        // The equal-budget table, when a batch repaired or it is asked for.
        let (budget, curves) = views::budget(store, &batches).await?;
        if let Some(path) = &args.budget_svg {
            assay::engine::outputs::write_chart(path, &assay::repair::budget_svg(&budget.figure, &curves)?)?;
        }
        let weigh = args.budget_svg.is_some() || budget.any_repaired();
        if args.json {
            let mut value = serde_json::to_value(&comparison)?;
            if weigh {
                value["budget"] = serde_json::to_value(&budget)?;
            }
            println!("{}", serde_json::to_string_pretty(&value)?);
        } else {
            print!("{}", comparison.render());
            if weigh {
                print!("\nat equal output tokens:\n{budget}");
            }
            if args.spec.is_some() && !args.sequential {
                println!("(the batches ran at once: CPU-s of overlapping phases include each other's work; --sequential for separate figures)");
            }
        }
        Ok(ExitCode::SUCCESS)
    })
    .await
}
