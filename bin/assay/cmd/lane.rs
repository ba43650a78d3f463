//! `assay lane`: drains the store's queue on this machine.

use std::process::ExitCode;

use anyhow::{Context, Result};

use assay::engine::command_store;
use assay::support::owner::Owner;

use crate::args::LaneArgs;

pub async fn lane(args: LaneArgs) -> Result<ExitCode> {
    let db = args.db.db()?;
    // A lane drains a queue someone filled: a mistyped `--db` must not
    // answer with a new, empty store (and, waiting, wait forever).
    command_store::must_exist(&db)?;
    let outputs = args.output.resolve(&db)?;
    let _work = outputs.prepare()?;
    let cfg = assay::queue::lane::LaneConfig {
        db: db.clone(),
        name: args.lane.unwrap_or_else(|| Owner::current().host),
        jobs: args.jobs,
        lease: args.lease,
        out: outputs.out,
        work_dir: outputs.work.path,
        until_empty: args.until_empty,
        exe: std::env::current_exe().context("cannot find this binary")?,
    };
    let summary = command_store::writing(&db, async |store| {
        assay::queue::lane::run(&cfg, store).await
    })
    .await?;
    eprintln!(
        "lane {}: {} done, {} failed, {} handed on",
        cfg.name, summary.done, summary.failed, summary.lost
    );
    Ok(ExitCode::SUCCESS)
}
