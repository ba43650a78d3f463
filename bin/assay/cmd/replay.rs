//! `assay replay`: a stored batch probed again in one or more modes.

use std::process::ExitCode;

use anyhow::Result;

use assay::command_store::reading;
use assay::exit::UsageError;
use assay::outputs::WorkDir;
use assay::probe::ProbeMode;
use assay::replay::ReplayConfig;
use assay::views;

use super::checked;
use crate::args::ReplayArgs;

pub async fn replay(args: ReplayArgs) -> Result<ExitCode> {
    let mut modes = Vec::new();
    for mode in &args.modes {
        let mode: ProbeMode = mode
            .trim()
            .parse()
            .map_err(|e: String| UsageError(format!("--modes: {e}")))?;
        if !modes.contains(&mode) {
            modes.push(mode);
        }
    }
    if args.runs == 0 {
        return Err(UsageError("--runs: must be at least 1".into()).into());
    }
    let build_timeout = checked(
        "--build-timeout",
        args.build_timeout,
        assay::spec::check_build_timeout,
    )?;
    let work = WorkDir::resolve(args.work_dir.as_deref())?;
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
        assay::replay::replay(store, &cfg).await
    })
    .await?;
    if args.json {
        let mut value = serde_json::to_value(&report)?;
        value["identical"] = report.identical().into();
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!("{}", report.render());
    }
    Ok(if report.identical() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
