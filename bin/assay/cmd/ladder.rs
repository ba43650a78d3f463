//! `assay ladder`: one pool's concurrency swept.

use std::process::ExitCode;

use anyhow::Result;

use assay::engine::command_store;
use assay::engine::sweep;
use assay::report::views;
use assay::support::progress::Progress;

use super::{draw_options, sweep_config};
use crate::args::LadderArgs;

pub async fn ladder(args: LadderArgs) -> Result<ExitCode> {
    if let Some(path) = &args.svg {
        assay::engine::outputs::check_output_file("--svg", path)?;
    }
    let db = args.db.db()?;
    let (cfg, outputs) = sweep_config(&args.spec, None, &args.sweep, &db)?;
    let prepared = sweep::prepare_ladder(
        &cfg,
        &draw_options(args.sweep.pools.flags())?,
        &args.pool,
        &args.levels,
    )?;
    if let Some((_, _, _, warnings)) = prepared.first() {
        for w in warnings {
            eprintln!("warning: {w}");
        }
    }
    // Written only once every level's plan is known to be good.
    let _work = outputs.prepare()?;
    command_store::writing(&db, async |store| {
        let progress = Progress::unless_json(args.json);
        let levels = sweep::run_ladder(prepared, store, &progress).await?;
        let ladder = views::ladder(store, &cfg.spec.name, &args.pool.name, &levels).await?;
        if let Some(path) = &args.svg {
            let svg = assay::report::plot::ladder_svg(
                &ladder.pool,
                ladder.ranking.as_str(),
                &ladder.points(),
                ladder.peak_level,
            )?;
            assay::engine::outputs::write_chart(path, &svg)?;
        }
        if args.json {
            println!("{}", serde_json::to_string_pretty(&ladder)?);
        } else {
            print!("{}", ladder.render());
        }
        Ok(ExitCode::SUCCESS)
    })
    .await
}
