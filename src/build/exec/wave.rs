//! One wave built as the run's setting says: the one place that chooses
//! between a shared image and an image per unit, for a task's probe
//! (`--probe`) and a suite's builds (`--build`) alike.

use anyhow::Result;

use super::isolated::{self, TARGETS_PER_BUILD};
use super::shared::{Layout, Settled, SharedBuild};
use crate::build::package::ModuleKey;
use crate::build::verdict::ProbeStats;

/// How a wave's units are built: the one setting behind a task's probe
/// mode and a suite's build mode, which keep their own flags and strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Units {
    /// One image for the wave where the package's policy lets units share
    /// it (`SharedBuild`); under a relaxed policy, an image per unit,
    /// [`TARGETS_PER_BUILD`] to a cargo build.
    Shared,
    /// An image per unit, `per_build` to a cargo build: the reference the
    /// shared build must agree with.
    Isolated { per_build: usize },
}

impl From<super::BuildMode> for Units {
    fn from(mode: super::BuildMode) -> Units {
        match mode {
            super::BuildMode::Shared => Units::Shared,
            super::BuildMode::Isolated => Units::Isolated {
                per_build: TARGETS_PER_BUILD,
            },
        }
    }
}

/// Builds `keys` (their module files written) as `units` says, through
/// `shared` or beside it with its package and layout, calling `settled`
/// for each unit as it settles.
pub async fn build<L: Layout>(
    shared: &SharedBuild<'_, L>,
    units: Units,
    keys: &[ModuleKey],
    stats: &mut ProbeStats,
    settled: impl FnMut(Settled),
) -> Result<()> {
    let per_build = match units {
        Units::Shared if shared.package().policy().shares_an_image() => {
            return shared.build(keys, stats, settled).await
        }
        Units::Shared => TARGETS_PER_BUILD,
        Units::Isolated { per_build } => per_build,
    };
    isolated::build(
        shared.package(),
        shared.layout(),
        keys,
        per_build,
        stats,
        settled,
    )
    .await
}
