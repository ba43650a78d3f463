//! `assay replay`: a stored batch probed again in one or more modes.

use std::process::ExitCode;

use anyhow::Result;

use assay::engine::command_store::reading;
use assay::engine::replay::ReplayConfig;
use assay::report::views;

use crate::args::ReplayArgs;

pub async fn replay(args: ReplayArgs) -> Result<ExitCode> {
    // A mode named twice is run once.
    let mut modes = Vec::new();
    for mode in args.modes {
        if !modes.contains(&mode) {
            modes.push(mode);
        }
    }
    let build_timeout = args.build_timeout;
    let work = args.work.resolve()?;
    work.check()?;
    let report = reading(&args.db.db()?, async |store| {
        views::refuse_suite_batch(store, args.batch, &args.db.reach()).await?;
        store.check_writable().await?;
        let _work = work.prepare()?;
        let cfg = ReplayConfig {
            build_timeout,
            batch: args.batch,
            modes,
            runs: args.runs,
            work_dir: work.path.clone(),
            fresh: args.fresh,
        };
        assay::engine::replay::replay(store, &cfg).await
    })
    .await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report.to_json()?)?);
    } else {
        print!("{}", report.render());
    }
    Ok(if report.identical() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
