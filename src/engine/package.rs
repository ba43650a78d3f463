//! The package a run builds in, a task's or a suite's, opened the one way:
//! off the async threads, since when other runs hold every build slot of
//! its folder the open waits for one (`build::package`, saying so once)
//! and Ctrl-C must still work, with the run's limit on each build.

use std::time::Duration;

use anyhow::{Context, Result};

use crate::build::package::Package;

/// Opens (and locks) a package by `open`, on a blocking thread, each of
/// its nested cargo builds limited to `build_timeout`.
pub(crate) async fn open(
    open: impl FnOnce() -> Result<Package> + Send + 'static,
    build_timeout: Duration,
) -> Result<Package> {
    let mut package = tokio::task::spawn_blocking(open)
        .await
        .context("opening the package panicked")??;
    package.set_build_timeout(build_timeout);
    Ok(package)
}
