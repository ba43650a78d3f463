//! Suite runs: a problem set's completions probed and scored as one wide
//! scheme across every problem.
//!
//! ```text
//! problems + (completions file | live draw) --> programs, dedup per problem --> store
//!     --> waves --> build (one cargo per 100 programs, whole suite) --> run whole + each case
//!                      |                                                  |
//!                      +------ outcome per program, stored as it lands ---+
//! ```
//!
//! Each problem is a batch (the unit of storage and resume); its
//! completions are the batch's replies and its programs the batch's
//! candidates, deduplicated within the problem by the exact fingerprint.
//! Every representative program goes into one stream (`stream`): waves of
//! programs are built in the suite's own package (`Package::open_suite`)
//! through the one executor (`build::exec`), each program laid out as a
//! module (`suite::module`) of a shared image (`--build shared`, the
//! default) or of an image of its own (`--build isolated`), each run
//! selecting its own program by argument; as each build ends, its programs'
//! runs start while the next build goes on. Each run (the whole `main`,
//! then each case of the split, `suite::cases`) is a process of its own
//! under the same limits and sandbox as a candidate's scoring run
//! (`score::run_program`). What a program came to is stored for it and
//! every completion that shares it.
//!
//! Completions come from a file ([`run`]) or from model pools while the
//! builds go on ([`run_draw`], `draw`). A killed suite is found by its
//! batches' dead owner (as any batch), and [`resume`] finishes it: it draws
//! only the completions not stored, and builds and runs only the programs
//! without an outcome. A fresh suite is a resume of nothing: once stored
//! (`begin`), it runs by the same path (`resume::go_on`).
//!
//! A live draw with repair rounds (`--rounds`) has `rounds` as
//! its producer: each round's completions go down the same stream, and the
//! next round is planned from what the last one's programs came to.

mod begin;
mod draw;
mod input;
mod resume;
mod rounds;
pub mod setup;
mod stream;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;

use crate::engine::interrupt::{Interrupt, Run};
use crate::spec::WavePolicy;
use crate::store::{BatchStatus, Store, SuiteId, SuitePart};
use crate::support::account::{Phase, PhaseGuard};
use crate::support::owner::Owner;
use crate::support::progress::Progress;

use begin::{begin_draw, stage};
pub use begin::{queue, queue_draw};
pub use draw::DrawSettings;
pub use input::{ProblemSet, SuiteInput, COMPLETIONS_POOL};
pub use resume::resume;
use resume::{go_on, Stored};
pub use rounds::resolve as resolve_repair;
use stream::{Programs, Stream};

/// Where a suite run writes and how it builds and runs.
#[derive(Debug, Clone)]
pub struct SuiteConfig {
    /// The output folder; the suite's own is `suite-N` inside it.
    pub out_dir: PathBuf,
    /// Where the suite package lives (`WORK/suite`, its target directory
    /// `WORK/suite/target`), kept warm across suites.
    pub work_dir: PathBuf,
    pub limits: SuiteLimits,
    pub waves: WavePolicy,
    /// How long one cargo build of up to 100 programs may run.
    pub build_timeout: Duration,
    /// Whether a wave's programs share an image (the default) or get one
    /// each: the reference the shared build must agree with.
    pub build: crate::build::exec::BuildMode,
    /// The edition every program is built in: stored with a new suite; a
    /// resume builds in the stored one.
    pub edition: crate::spec::Edition,
    /// Which cases of a built program run alone.
    pub cases: crate::suite::CaseRuns,
    /// The queue item this run is, when a lane runs a part of a suite:
    /// the part's batches record the lane.
    pub work_item: Option<i64>,
}

/// Limits on a suite's programs, MultiPL-E's where it has one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SuiteLimits {
    /// Wall time of one run (the whole `main`, or one case): MultiPL-E's
    /// 5 s per program.
    pub run_wall: Duration,
    /// CPU seconds of one program's rustc: MultiPL-E gives rustc 15 s of
    /// wall; CPU time, so a loaded machine does not fail an honest compile.
    pub compile_cpu_secs: u64,
    /// Address space of one run (MultiPL-E sets none; a test program that
    /// needs a gigabyte is not one).
    pub memory_bytes: u64,
    /// Processes and threads one run may hold.
    pub processes: u64,
}

impl Default for SuiteLimits {
    fn default() -> SuiteLimits {
        SuiteLimits {
            run_wall: Duration::from_secs(5),
            compile_cpu_secs: 15,
            memory_bytes: 1 << 30,
            processes: crate::spec::DEFAULT_PROCESSES,
        }
    }
}

/// Runs a suite of completions read from files to the end; returns its id.
/// A fresh suite is a resume of nothing: stored, then run on from what it
/// stored by the one path a resume takes.
pub async fn run(
    cfg: &SuiteConfig,
    input: &SuiteInput,
    store: &Store,
    progress: &Progress,
    interrupt: &Interrupt,
) -> Result<SuiteId> {
    let guard = PhaseGuard::start(Phase::Prepare);
    let suite = stage(input, cfg.edition, store).await?;
    let stored = Stored::read(store, suite, SuitePart::all()).await?;
    let part = SuitePart::all();
    go_on(
        cfg, store, progress, interrupt, suite, part, None, stored, guard,
    )
    .await
}

/// Draws `settings.n` completions of every problem from model pools and
/// runs them as they arrive; returns the suite's id.
pub async fn run_draw(
    cfg: &SuiteConfig,
    set: &ProblemSet,
    settings: &DrawSettings,
    store: &Store,
    progress: &Progress,
    interrupt: &Interrupt,
) -> Result<SuiteId> {
    let guard = PhaseGuard::start(Phase::Prepare);
    let suite = begin_draw(set, settings, cfg.edition, store).await?;
    if let Some(repair) = &settings.repair.settings {
        store.begin_suite_repair(suite, &repair.to_json()).await?;
    }
    let stored = Stored::read(store, suite, SuitePart::all()).await?;
    let (part, settings) = (SuitePart::all(), Some(settings));
    go_on(
        cfg, store, progress, interrupt, suite, part, settings, stored, guard,
    )
    .await
}

impl<'a> Stream<'a> {
    fn new(
        cfg: &'a SuiteConfig,
        store: &'a Store,
        progress: &'a Progress,
        suite: SuiteId,
        part: SuitePart,
    ) -> Stream<'a> {
        Stream {
            cfg,
            store,
            progress,
            suite,
            part,
        }
    }

    /// Runs the stream until every program has its outcome and marks the
    /// suite finished; a failure or a signal is written by the one drive.
    async fn drive(
        &self,
        interrupt: &Interrupt,
        programs: &Programs,
        rx: tokio::sync::mpsc::UnboundedReceiver<crate::build::probe::stream::StreamCandidate>,
        producer: impl std::future::Future<Output = Result<Option<PhaseGuard>>>,
        prepare: PhaseGuard,
    ) -> Result<SuiteId> {
        let (store, suite) = (self.store, self.suite);
        let work = async {
            self.execute(programs, rx, producer, prepare).await?;
            store
                .finish_suite(suite, &Owner::current(), BatchStatus::Finished, None)
                .await?;
            Ok(suite)
        };
        crate::engine::drive::drive(store, interrupt, Run::Suite(suite), work).await
    }
}
