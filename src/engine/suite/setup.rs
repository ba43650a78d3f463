//! A suite's live draw as a run resolves it from its flags, before
//! anything is written: the pools file (given, or beside the problems, or
//! in the working directory), the pools, the split and the overrides, and
//! what a queued part carries of them for a lane.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::draw::pools::PoolsFile;
use crate::draw::{DrawError, DrawFlags, Plan};
use crate::engine::exit::UsageError;
use crate::engine::suite::{resolve_repair, DrawSettings};
use crate::repair::RepairFlags;
use crate::store::{Store, SuiteId};
use crate::suite::ProgramMode;

/// The pools file: `given` (`--pools`), or the default beside the
/// problems; `flags.pools` names the pool an error speaks of.
pub fn pools_file(given: Option<&Path>, problems: &Path, flags: &DrawFlags) -> Result<PathBuf> {
    let beside = problems.parent().unwrap_or(Path::new("."));
    match given
        .map(Path::to_path_buf)
        .or_else(|| PoolsFile::default_path(beside))
    {
        Some(path) => Ok(path),
        None => Err(DrawError::NoPoolsFile {
            pool: flags
                .pools
                .first()
                .map(|p| p.name.clone())
                .unwrap_or_default(),
        }
        .into()),
    }
}

/// The live draw's plan from the flags, for `n` completions per problem
/// in `mode`. Unless `queued` (its lanes draw, and may reach servers this
/// machine cannot), every pool's server must accept a connection. Each
/// warning of the plan is handed to `warn`. `repair` is resolved against
/// the same pools file.
pub async fn draw_settings(
    flags: DrawFlags,
    repair: &RepairFlags,
    n: usize,
    mode: ProgramMode,
    problems: &Path,
    queued: bool,
    warn: &dyn Fn(&str),
) -> Result<DrawSettings> {
    crate::spec::check_candidates(n).map_err(|e| UsageError(format!("-n: {e}")))?;
    let mut opts = DrawFlags {
        pools_file: None,
        ..flags.clone()
    }
    .check()
    .map_err(|e| UsageError(e.to_string()))?;
    let pools_file = pools_file(flags.pools_file.as_deref(), problems, &flags)?;
    opts.pools_file = Some(pools_file.clone());
    let (plan, warnings) = Plan::for_suite(&pools_file, &flags.pools, &opts)?;
    for w in warnings {
        warn(&w);
    }
    if !queued {
        plan.check_reachable().await?;
    }
    let repair = resolve_repair(repair, &pools_file, &opts, !queued).await?;
    Ok(DrawSettings {
        plan,
        n,
        mode,
        repair,
    })
}

/// The live draw that finishes stored suite `suite` (`--resume` with
/// `--pool`): its mode and problems as stored, as many completions per
/// problem as the most any problem asked for.
pub async fn resumed_draw(
    store: &Store,
    suite: SuiteId,
    flags: DrawFlags,
    repair: &RepairFlags,
    queued: bool,
    warn: &dyn Fn(&str),
) -> Result<DrawSettings> {
    let row = store.suite(suite).await?;
    let n = store
        .suite_problems(suite)
        .await?
        .iter()
        .map(|p| p.n)
        .max()
        .unwrap_or(1);
    let problems = PathBuf::from(&row.problems_path);
    draw_settings(flags, repair, n, row.mode, &problems, queued, warn).await
}
