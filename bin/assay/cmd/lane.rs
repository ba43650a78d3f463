//! `assay lane`: drains the store's queue on this machine.

use std::process::ExitCode;

use anyhow::{Context, Result};

use assay::command_store;
use assay::exit::UsageError;
use assay::outputs::Outputs;
use assay::owner::Owner;

use crate::args::LaneArgs;

pub async fn lane(args: LaneArgs) -> Result<ExitCode> {
    if args.jobs == 0 {
        return Err(UsageError("--jobs: at least 1".into()).into());
    }
    if !(args.lease.is_finite() && (3.0..=86_400.0).contains(&args.lease)) {
        return Err(UsageError("--lease: from 3 to 86400 seconds".into()).into());
    }
    let db = args.db.db()?;
    let outputs = Outputs::resolve(&db, args.out.as_deref(), args.work_dir.as_deref())?;
    let _work = outputs.prepare()?;
    let cfg = assay::lane::LaneConfig {
        db: db.clone(),
        name: args.lane.unwrap_or_else(|| Owner::current().host),
        jobs: args.jobs,
        lease: std::time::Duration::from_secs_f64(args.lease),
        out: outputs.out,
        work_dir: outputs.work.path,
        until_empty: args.until_empty,
        exe: std::env::current_exe().context("cannot find this binary")?,
    };
    let summary =
        command_store::writing(&db, async |store| assay::lane::run(&cfg, store).await).await?;
    eprintln!(
        "lane {}: {} done, {} failed, {} handed on",
        cfg.name, summary.done, summary.failed, summary.lost
    );
    Ok(ExitCode::SUCCESS)
}
