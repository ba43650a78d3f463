//! Score: run every compiled candidate over the oracle cases.
//!
//! Each candidate runs from the image the probe built it into
//! (`build::probe`): under the default policy an image holds many
//! candidates' modules, and a run selects its own by argument; the
//! committed candidate's image and the judge are built here (`build`).
//! The judge, built from the harness alone, holds the expected answers
//! (`judge`). Each candidate then runs in its own child process (`run`) with
//! a wall-time limit, resource limits, its own process group (killed whole),
//! an empty environment, a fresh temporary working directory and the
//! confinement of [`crate::sandbox`] (Landlock, a network namespace, pids and
//! memory cgroups, an unprivileged uid when assay is root), so a panic, a
//! loop, an abort or an early exit costs that candidate its score and nothing
//! else. The child gets the cases' inputs and reports outputs over a
//! nonce-framed protocol on stdout (`protocol`, `build/package/runner_lib.rs`); the judge
//! decides which are right. Each child is reaped with `wait4`, which gives its
//! CPU time for ranking. Verdicts and their stored strings are in `verdict`;
//! a harness that panics on a case is a [`HarnessFault`] (`fault`), an error
//! of the run and never a verdict.

pub mod admit;
mod build;
mod child;
mod fault;
mod fresh;
mod judge;
mod program;
mod protocol;
mod run;
mod verdict;

use std::time::Duration;

use crate::build::package::ModuleKey;
use crate::spec::{Isolation, Limits};

pub use build::{build_images, image_root, judge_name, judge_root, Built, Images};
pub use child::kill_live_groups;
pub use fault::{Given, HarnessFault, HarnessFn};
pub use judge::Oracle;
pub use program::{run_program, ProgramRun};
pub use run::{run_one, Ran, Runs};
pub use verdict::{case_letters, parse_case_letters, CaseOutcome, ScoreVerdict};

/// One candidate's scoring result.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    pub key: ModuleKey,
    pub verdict: ScoreVerdict,
    /// Cases passed before the run ended, whatever the verdict.
    pub passed: usize,
    pub total: usize,
    pub wall: Duration,
    /// CPU time (user + system) of the run's children, from `wait4`.
    pub cpu: Duration,
    /// Each case's outcome in file order (`NotRun` past where a run ended).
    pub cases: Vec<CaseOutcome>,
    /// Fresh children started under per-case isolation after a case failed.
    pub restarts: usize,
    /// The most processes the run held at once, where a cgroup counted them.
    pub peak_processes: Option<u64>,
    /// The tail of the child's stderr, for diagnosis.
    pub stderr: String,
}

/// Limits on one candidate's run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunLimits {
    /// Wall time of the whole run (without isolation).
    pub wall: Duration,
    /// Wall time of one case (with per-case isolation).
    pub case_wall: Duration,
    pub isolation: Isolation,
    pub address_space_bytes: u64,
    pub file_size_bytes: u64,
    pub open_files: u64,
    /// Bytes of stdout that are not results before the run is stopped.
    pub output_cap_bytes: usize,
}

impl RunLimits {
    pub fn with_wall(wall: Duration) -> RunLimits {
        RunLimits {
            wall,
            case_wall: wall,
            isolation: Isolation::None,
            address_space_bytes: 1 << 30,
            file_size_bytes: 16 << 20,
            open_files: 64,
            output_cap_bytes: 1 << 20,
        }
    }

    /// The limits a spec asks for.
    pub fn from_spec(limits: &Limits) -> RunLimits {
        RunLimits {
            case_wall: limits.case_wall,
            isolation: limits.isolation,
            address_space_bytes: limits.memory_bytes,
            ..RunLimits::with_wall(limits.wall)
        }
    }
}
