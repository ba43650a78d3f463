//! One file per command: each checks what clap could not, calls the
//! library and prints what it returned.

use std::process::ExitCode;

use anyhow::Result;

use assay::draw::DrawOptions;
use assay::engine::exit::UsageError;

use crate::args::Command;

mod batches;
mod compare;
mod export;
mod ladder;
mod lane;
mod promote;
mod queue;
mod replay;
mod run;
mod show;
mod suite;
mod task;

pub async fn dispatch(command: Command) -> Result<ExitCode> {
    match command {
        Command::Run(args) => run::run(args).await,
        Command::Lane(args) => lane::lane(args).await,
        Command::Queue { db, json } => queue::queue(db, json).await,
        Command::Replay(args) => replay::replay(args).await,
        Command::Suite { command } => suite::dispatch(command).await,
        Command::Batches { db, json } => batches::batches(db, json).await,
        Command::Promote {
            batch,
            candidate,
            db,
            yes,
            task,
            work,
        } => promote::promote(batch, candidate, db, yes, task, work).await,
        Command::Show {
            batch,
            db,
            json,
            errors,
        } => show::show(batch, db, json, errors).await,
        Command::Compare(args) => compare::compare(args).await,
        Command::Task(command) => task::task(command).await,
        Command::Ladder(args) => ladder::ladder(args).await,
        Command::Export { batch, db, format } => export::export(batch, db, format).await,
    }
}

/// The draw options from the flags every drawing command shares.
pub fn draw_options(flags: assay::draw::DrawFlags) -> Result<DrawOptions, UsageError> {
    flags.check().map_err(|e| UsageError(e.to_string()))
}

/// The run configuration of a command that runs new batches (as `run`
/// builds it), and its outputs, resolved but not yet made: the sweep's
/// plans are checked first.
pub fn sweep_config(
    spec: &std::path::Path,
    n: Option<usize>,
    args: &crate::args::SweepArgs,
    db: &assay::store::Db,
) -> Result<(
    assay::engine::batch::RunConfig,
    assay::engine::outputs::Outputs,
)> {
    let spec = assay::task::load(spec)?;
    let n = n.unwrap_or(spec.draw.n);
    assay::spec::check_candidates(n).map_err(|e| UsageError(format!("-n: {e}")))?;
    draw_options(args.pools.flags())?;
    let outputs = args.output.resolve(db)?;
    outputs.check()?;
    let cfg = assay::engine::sweep::run_config(spec, n, &outputs);
    Ok((cfg, outputs))
}
