//! What a lane runs: a work item with every setting resolved.
//!
//! A command queued for a lane (`run --queue`, `suite run --queue`) is
//! stored as a [`WorkItem`], never as its command line: the queueing
//! command resolves its flags, their environment variables and the spec's
//! defaults, and the item holds the result, so a lane runs it under the
//! settings it was queued with and none of its own environment's
//! ([`FLAG_VARIABLES`]). An item is stored as JSON and becomes the run's
//! arguments in one place, [`WorkItem::args`]; nothing parses a command
//! line back. No key can be in an item (no field has room for one): each
//! lane draws with its own. Nor a path of the queueing machine: a batch
//! carries its task and pools file by content (`carry`), placed by the
//! lane where [`Placed`] says; only an item an older assay queued names
//! paths ([`QueuedTask::Paths`]). Plain data, no IO.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_with::{serde_as, DisplayFromStr};

use crate::build::exec::BuildMode;
use crate::build::probe::ProbeMode;
use crate::draw::DrawOptions;
use crate::queue::carry::{CarriedPools, CarriedTask};
use crate::repair::RepairFlags;
use crate::spec::{PoolChoice, Spec, SplitMode, WavePolicy};
use crate::store::{BatchId, SuiteId, SuitePart, WorkKind};
use crate::suite::CaseRuns;

/// The command that drains the queue of the store `db`: what a queueing
/// command tells the user to start next.
pub fn lane_command(db: &crate::store::Db) -> crate::support::hint::CommandLine {
    crate::support::hint::CommandLine::assay(["lane"]).reaching(&db.reach())
}

/// The environment variables that `assay run` or `assay suite run` read as
/// flags. A lane removes them all from its runs' environment: the item's
/// settings are the whole of what the run is to do (a setting it leaves
/// unset means the spec's or the pools file's, never the lane's variable),
/// and the store and folders are the lane's own flags.
pub const FLAG_VARIABLES: [&str; 7] = [
    "NEV_CANDIDATES",
    "NEV_CONCURRENCY",
    "MAX_COMPLETION_TOKENS",
    "ASSAY_PROBE",
    "ASSAY_DB",
    "ASSAY_OUT",
    "ASSAY_WORK_DIR",
];

/// One item of a store's queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WorkItem {
    /// An `assay run` of a task.
    Batch(BatchRun),
    /// A part of a stored suite whose completions are stored with it.
    SuitePart(SuitePartRun),
    /// A part of a suite drawn live: its lane draws what is missing.
    LiveSuitePart(LiveSuitePart),
}

/// A batch as `assay run` would have run it where it was queued.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawBatchRun", into = "RawBatchRun")]
pub struct BatchRun {
    /// The task and the pools file: by content, or, in an item an older
    /// assay queued, by path.
    pub task: QueuedTask,
    pub n: usize,
    pub probe: ProbeMode,
    pub wave_size: usize,
    pub wave_wait: Duration,
    pub build_timeout: Duration,
    pub draw: DrawChoice,
    /// The repair rounds and budget (issue 28). Left out of the JSON when
    /// empty, as an item queued before they were carried reads: such an
    /// item runs under the spec's `[repair]`, as it always did.
    pub repair: RepairChoice,
}

/// What a batch item says of its task and pools file.
#[derive(Debug, Clone, PartialEq)]
pub enum QueuedTask {
    /// Their content (issue 36): the task's files in the store's blobs,
    /// the pools file's text (`None` when there is none, which only a
    /// replay draw does without).
    Carried {
        task: CarriedTask,
        pools: Option<CarriedPools>,
    },
    /// Paths on the queueing machine, as an assay before migration 0018
    /// queued them: they run only on a lane that sees them there.
    Paths {
        spec: PathBuf,
        pools_file: Option<PathBuf>,
    },
}

/// A batch item as JSON: the task by content (`task`, `pools`) or, as an
/// older assay wrote it, by path (`spec`, `pools_file`), never both.
#[serde_as]
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBatchRun {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    task: Option<CarriedTask>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pools: Option<CarriedPools>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    spec: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pools_file: Option<PathBuf>,
    n: usize,
    #[serde_as(as = "DisplayFromStr")]
    probe: ProbeMode,
    wave_size: usize,
    #[serde(with = "seconds")]
    wave_wait: Duration,
    #[serde(with = "seconds")]
    build_timeout: Duration,
    draw: DrawChoice,
    #[serde(default, skip_serializing_if = "RepairChoice::is_empty")]
    repair: RepairChoice,
}

impl TryFrom<RawBatchRun> for BatchRun {
    type Error = &'static str;

    fn try_from(raw: RawBatchRun) -> Result<BatchRun, &'static str> {
        let task = match (raw.task, raw.pools, raw.spec, raw.pools_file) {
            (Some(task), pools, None, None) => QueuedTask::Carried { task, pools },
            (None, None, Some(spec), pools_file) => QueuedTask::Paths { spec, pools_file },
            (None, _, None, _) => return Err("a batch item names no task"),
            _ => return Err("a batch item names its task both by content and by path"),
        };
        Ok(BatchRun {
            task,
            n: raw.n,
            probe: raw.probe,
            wave_size: raw.wave_size,
            wave_wait: raw.wave_wait,
            build_timeout: raw.build_timeout,
            draw: raw.draw,
            repair: raw.repair,
        })
    }
}

impl From<BatchRun> for RawBatchRun {
    fn from(b: BatchRun) -> RawBatchRun {
        let (task, pools, spec, pools_file) = match b.task {
            QueuedTask::Carried { task, pools } => (Some(task), pools, None, None),
            QueuedTask::Paths { spec, pools_file } => (None, None, Some(spec), pools_file),
        };
        RawBatchRun {
            task,
            pools,
            spec,
            pools_file,
            n: b.n,
            probe: b.probe,
            wave_size: b.wave_size,
            wave_wait: b.wave_wait,
            build_timeout: b.build_timeout,
            draw: b.draw,
            repair: b.repair,
        }
    }
}

/// A batch's repair flags as resolved where it is queued: the rounds
/// (`--rounds`, else the spec's `[repair] rounds`), the pools the rounds
/// draw from (`--repair-pool`, names in the item's pools file) and the
/// output-token budget (`--max-tokens`). A lane's run repairs with exactly
/// these, as `run` would have here.
#[serde_as]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepairChoice {
    /// `None`: no rounds asked, and the spec asks none either.
    #[serde(default)]
    pub rounds: Option<u32>,
    #[serde(default)]
    #[serde_as(as = "Vec<DisplayFromStr>")]
    pub pools: Vec<PoolChoice>,
    #[serde(default)]
    pub max_tokens: Option<u64>,
}

/// A part of a stored suite, with the limits of its runs and builds.
#[serde_as]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuitePartRun {
    pub suite: SuiteId,
    #[serde_as(as = "DisplayFromStr")]
    pub part: SuitePart,
    #[serde(with = "seconds")]
    pub run_timeout: Duration,
    #[serde(with = "seconds")]
    pub build_timeout: Duration,
    #[serde_as(as = "DisplayFromStr")]
    pub build: BuildMode,
    #[serde_as(as = "DisplayFromStr")]
    pub cases: CaseRuns,
}

/// A part of a live suite: the part, and the draw its lane does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawLiveSuitePart", into = "RawLiveSuitePart")]
pub struct LiveSuitePart {
    pub part: SuitePartRun,
    pub pools: QueuedPools,
    pub draw: DrawChoice,
}

/// What a live part says of its pools file.
#[derive(Debug, Clone, PartialEq)]
pub enum QueuedPools {
    /// Its text (issue 36).
    Carried(CarriedPools),
    /// A path on the queueing machine, as an assay before migration 0018
    /// queued it.
    Path(PathBuf),
}

/// A live part as JSON: the pools file's text (`pools`) or, as an older
/// assay wrote it, its path (`pools_file`).
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLiveSuitePart {
    part: SuitePartRun,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pools: Option<CarriedPools>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pools_file: Option<PathBuf>,
    draw: DrawChoice,
}

impl TryFrom<RawLiveSuitePart> for LiveSuitePart {
    type Error = &'static str;

    fn try_from(raw: RawLiveSuitePart) -> Result<LiveSuitePart, &'static str> {
        let pools = match (raw.pools, raw.pools_file) {
            (Some(pools), None) => QueuedPools::Carried(pools),
            (None, Some(path)) => QueuedPools::Path(path),
            (None, None) => return Err("a live suite part names no pools file"),
            (Some(_), Some(_)) => {
                return Err("a live suite part names its pools both by content and by path")
            }
        };
        Ok(LiveSuitePart {
            part: raw.part,
            pools,
            draw: raw.draw,
        })
    }
}

impl From<LiveSuitePart> for RawLiveSuitePart {
    fn from(p: LiveSuitePart) -> RawLiveSuitePart {
        let (pools, pools_file) = match p.pools {
            QueuedPools::Carried(pools) => (Some(pools), None),
            QueuedPools::Path(path) => (None, Some(path)),
        };
        RawLiveSuitePart {
            part: p.part,
            pools,
            pools_file,
            draw: p.draw,
        }
    }
}

/// Where a lane put what an item carries, on its own disk: the task's
/// spec (a batch's) and the pools file (when the item has one).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Placed {
    pub spec: Option<PathBuf>,
    pub pools_file: Option<PathBuf>,
}

/// The draw flags as resolved: the pools chosen (empty: the spec's), the
/// split (`None`: the spec's, else fixed) and the overrides of the pools
/// file (`None`: the file's own). Never a key.
#[serde_as]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DrawChoice {
    #[serde_as(as = "Vec<DisplayFromStr>")]
    pub pools: Vec<PoolChoice>,
    /// Always written, `null` for none; an item without it is refused
    /// (`no_default`: `serde_as` would read a missing one as `None`).
    #[serde_as(as = "Option<DisplayFromStr>", no_default)]
    pub split: Option<SplitMode>,
    pub max_in_flight: Option<usize>,
    pub max_completion_tokens: Option<u64>,
}

/// An item's JSON that could not be read as a [`WorkItem`].
#[derive(Debug, thiserror::Error)]
#[error("a work item that cannot be read: {0}")]
pub struct BadItem(#[from] serde_json::Error);

/// A path that JSON cannot hold: a lane could not be given it.
#[derive(Debug, thiserror::Error)]
#[error("{}: a path that is not UTF-8 cannot be queued", .0.display())]
pub struct NotUtf8(pub PathBuf);

impl WorkItem {
    /// The kind the store files it under.
    pub fn kind(&self) -> WorkKind {
        match self {
            WorkItem::Batch(_) => WorkKind::Batch,
            WorkItem::SuitePart(_) | WorkItem::LiveSuitePart(_) => WorkKind::Suite,
        }
    }

    /// The JSON the store keeps. Refuses a path that is not UTF-8, which
    /// JSON cannot hold.
    pub fn to_json(&self) -> Result<serde_json::Value, NotUtf8> {
        // Only an item an older assay queued holds paths.
        let paths: Vec<&Path> = match self {
            WorkItem::Batch(BatchRun {
                task: QueuedTask::Paths { spec, pools_file },
                ..
            }) => std::iter::once(spec.as_path())
                .chain(pools_file.as_deref())
                .collect(),
            WorkItem::LiveSuitePart(LiveSuitePart {
                pools: QueuedPools::Path(path),
                ..
            }) => vec![path.as_path()],
            WorkItem::Batch(_) | WorkItem::SuitePart(_) | WorkItem::LiveSuitePart(_) => Vec::new(),
        };
        if let Some(bad) = paths.into_iter().find(|p| p.to_str().is_none()) {
            return Err(NotUtf8(bad.to_path_buf()));
        }
        Ok(serde_json::to_value(self).expect("an item of UTF-8 paths serialises"))
    }

    /// Reads an item the store kept.
    pub fn from_json(value: &serde_json::Value) -> Result<WorkItem, BadItem> {
        Ok(WorkItem::deserialize(value)?)
    }

    /// The arguments of the `assay` run that does the item, after the
    /// program's name: every setting as its flag, and the spec and pools
    /// file where the lane `placed` them. `begun` is the batch an earlier
    /// claim of a batch item began: the run resumes it (its `-n` is the
    /// batch's own). The lane adds its store, folders and `--json`.
    pub fn args(&self, begun: Option<BatchId>, placed: &Placed) -> Vec<OsString> {
        let mut args = Args::default();
        match self {
            WorkItem::Batch(b) => b.args(begun, placed, &mut args),
            WorkItem::SuitePart(p) => p.args(&mut args),
            WorkItem::LiveSuitePart(LiveSuitePart {
                part,
                pools: _,
                draw,
            }) => {
                part.args(&mut args);
                if let Some(file) = &placed.pools_file {
                    args.flag("--pools", file);
                }
                draw.args(&mut args);
            }
        }
        args.0
    }

    /// What the item is, in a few words, for `assay queue`.
    pub fn describe(&self) -> String {
        match self {
            WorkItem::Batch(b) => format!(
                "batch {} -n {}{}",
                match &b.task {
                    QueuedTask::Carried { task, .. } => task.describe(),
                    QueuedTask::Paths { spec, .. } => format!("{} (by path)", spec.display()),
                },
                b.n,
                b.repair.describe()
            ),
            WorkItem::SuitePart(p) => format!("suite {} part {}", p.suite, p.part),
            WorkItem::LiveSuitePart(p) => {
                format!("suite {} part {} (drawn)", p.part.suite, p.part.part)
            }
        }
    }
}

impl BatchRun {
    /// A batch as `assay run` resolved it where it is queued: `task` as
    /// packed (`queue::enqueue::QueuedBatch::pack`), `n` and the probe's
    /// settings from the flags, their variables or the spec, and the
    /// draw's and repair's options.
    pub fn resolved(
        task: QueuedTask,
        n: usize,
        probe: ProbeMode,
        waves: WavePolicy,
        build_timeout: Duration,
        draw: &DrawOptions,
        repair: RepairChoice,
    ) -> BatchRun {
        BatchRun {
            task,
            n,
            probe,
            wave_size: waves.size,
            wave_wait: waves.wait,
            build_timeout,
            draw: DrawChoice::of(draw),
            repair,
        }
    }

    fn args(&self, begun: Option<BatchId>, placed: &Placed, args: &mut Args) {
        // Every field named, so a new setting cannot be left out here.
        let BatchRun {
            task: _,
            n,
            probe,
            wave_size,
            wave_wait,
            build_timeout,
            draw,
            repair,
        } = self;
        args.word("run");
        if let Some(spec) = &placed.spec {
            args.word(spec);
        }
        match begun {
            Some(batch) => args.flag("--resume", batch),
            None => args.flag("-n", n),
        }
        args.flag("--probe", probe);
        args.flag("--wave-size", wave_size);
        args.flag("--wave-wait", wave_wait.as_secs_f64());
        args.flag("--build-timeout", build_timeout.as_secs_f64());
        if let Some(file) = &placed.pools_file {
            args.flag("--pools", file);
        }
        draw.args(args);
        // A batch an earlier claim began stored its repair settings before
        // its lane attached it to the item, and a resume goes on with
        // those (`run --resume` takes no repair flag).
        if begun.is_none() {
            repair.args(args);
        }
    }
}

impl RepairChoice {
    /// The flags as `run` resolves them against `spec`: the rounds are
    /// fixed now (`--rounds 0` stays, to override a spec that asks for
    /// rounds), the pools and budget as given.
    pub fn resolved(spec: &Spec, flags: &RepairFlags) -> RepairChoice {
        let own = spec.repair.rounds;
        let rounds = flags.rounds.unwrap_or(own);
        RepairChoice {
            rounds: (rounds > 0 || own > 0).then_some(rounds),
            pools: flags.pools.clone(),
            max_tokens: flags.max_tokens,
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == RepairChoice::default()
    }

    fn args(&self, args: &mut Args) {
        let RepairChoice {
            rounds,
            pools,
            max_tokens,
        } = self;
        if let Some(rounds) = rounds {
            args.flag("--rounds", rounds);
        }
        for pool in pools {
            args.flag("--repair-pool", pool);
        }
        if let Some(t) = max_tokens {
            args.flag("--max-tokens", t);
        }
    }

    /// ` --rounds 2 --max-tokens 9000`: the repair an item asks, for
    /// `assay queue`; nothing when it asks none.
    fn describe(&self) -> String {
        let mut args = Args::default();
        self.args(&mut args);
        args.0
            .iter()
            .map(|a| format!(" {}", a.to_string_lossy()))
            .collect()
    }
}

impl SuitePartRun {
    fn args(&self, args: &mut Args) {
        let SuitePartRun {
            suite,
            part,
            run_timeout,
            build_timeout,
            build,
            cases,
        } = self;
        args.word("suite");
        args.word("run");
        args.flag("--resume", suite);
        args.flag("--part", part);
        args.flag("--run-timeout", run_timeout.as_secs_f64());
        args.flag("--build-timeout", build_timeout.as_secs_f64());
        args.flag("--build", build);
        args.flag("--cases", cases);
    }
}

/// A stored suite to be queued in parts: its size and the settings every
/// part runs under, as the queueing command resolved them.
#[derive(Debug, Clone, PartialEq)]
pub struct SuiteQueue {
    pub suite: SuiteId,
    pub problems: usize,
    /// The most completions of one problem: a part's programs are about
    /// its problems times this.
    pub per_problem: usize,
    /// Problems per part (`--chunk`); `None`: [`SuiteQueue::chunk`]'s
    /// default.
    pub chunk: Option<usize>,
    pub run_timeout: Duration,
    pub build_timeout: Duration,
    pub build: BuildMode,
    pub cases: CaseRuns,
    /// A live draw's pools file and choices, for every part.
    pub draw: Option<(CarriedPools, DrawChoice)>,
}

impl SuiteQueue {
    /// Problems per part: as given, else as many as make about
    /// [`PROGRAMS_PER_PART`] programs, one shared build.
    pub fn chunk(&self) -> usize {
        self.chunk
            .unwrap_or((PROGRAMS_PER_PART / self.per_problem.max(1)).max(1))
            .max(1)
    }

    /// One item per part, in order of the problems.
    pub fn items(&self) -> Vec<WorkItem> {
        let chunk = self.chunk();
        (0..self.problems)
            .step_by(chunk)
            .map(|start| {
                let part = SuitePartRun {
                    suite: self.suite,
                    part: SuitePart {
                        start,
                        end: (start + chunk).min(self.problems),
                    },
                    run_timeout: self.run_timeout,
                    build_timeout: self.build_timeout,
                    build: self.build,
                    cases: self.cases,
                };
                match &self.draw {
                    None => WorkItem::SuitePart(part),
                    Some((pools, choice)) => WorkItem::LiveSuitePart(LiveSuitePart {
                        part,
                        pools: QueuedPools::Carried(pools.clone()),
                        draw: choice.clone(),
                    }),
                }
            })
            .collect()
    }
}

/// About how many programs one queued part of a suite holds by default:
/// one shared build's worth.
pub const PROGRAMS_PER_PART: usize = 100;

impl DrawChoice {
    /// The choices of `opts`; its key stays behind.
    pub fn of(opts: &DrawOptions) -> DrawChoice {
        DrawChoice {
            pools: opts.pools.clone(),
            split: opts.split,
            max_in_flight: opts.max_in_flight,
            max_completion_tokens: opts.max_completion_tokens,
        }
    }

    fn args(&self, args: &mut Args) {
        let DrawChoice {
            pools,
            split,
            max_in_flight,
            max_completion_tokens,
        } = self;
        for pool in pools {
            args.flag("--pool", pool);
        }
        if let Some(split) = split {
            args.flag("--split", split);
        }
        if let Some(k) = max_in_flight {
            args.flag("--max-in-flight", k);
        }
        if let Some(t) = max_completion_tokens {
            args.flag("--max-completion-tokens", t);
        }
    }
}

/// A command line being built.
#[derive(Default)]
struct Args(Vec<OsString>);

impl Args {
    fn word(&mut self, word: impl AsArg) {
        self.0.push(word.as_arg());
    }

    fn flag(&mut self, flag: &str, value: impl AsArg) {
        self.0.push(flag.into());
        self.0.push(value.as_arg());
    }
}

/// A value as one argument: paths as they are, the rest as they print
/// (an `f64` prints the shortest text that parses back to it).
trait AsArg {
    fn as_arg(&self) -> OsString;
}

impl AsArg for &Path {
    fn as_arg(&self) -> OsString {
        self.as_os_str().to_owned()
    }
}

impl AsArg for &PathBuf {
    fn as_arg(&self) -> OsString {
        self.as_os_str().to_owned()
    }
}

macro_rules! displayed_arg {
    ($($t:ty),*) => {$(
        impl AsArg for $t {
            fn as_arg(&self) -> OsString {
                self.to_string().into()
            }
        }
    )*};
}

displayed_arg!(
    &str,
    f64,
    &i64,
    i64,
    &usize,
    &u32,
    &u64,
    &ProbeMode,
    &PoolChoice,
    &SplitMode,
    &SuitePart,
    &BuildMode,
    &CaseRuns
);

/// A duration as seconds, as the flags take it. Not `serde_with`'s
/// `DurationSecondsWithFrac<f64>`: it reads seconds back by truncating
/// `secs * 1e9`, so 1.001 s (stored as 1.001) would come back as
/// 1.000999999 s and a lane would run `--wave-wait 1.000999999`;
/// `Duration::try_from_secs_f64` gives back the duration that was stored.
mod seconds {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(value.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let secs = f64::deserialize(d)?;
        Duration::try_from_secs_f64(secs).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_suite_is_queued_in_parts_of_about_a_hundred_programs() {
        let queue = SuiteQueue {
            suite: 7,
            problems: 45,
            per_problem: 10,
            chunk: None,
            run_timeout: Duration::from_secs(5),
            build_timeout: Duration::from_secs(600),
            build: BuildMode::Shared,
            cases: CaseRuns::Failed,
            draw: None,
        };
        assert_eq!(queue.chunk(), 10);
        let parts: Vec<(usize, usize)> = queue
            .items()
            .iter()
            .map(|item| match item {
                WorkItem::SuitePart(p) => (p.part.start, p.part.end),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(parts, [(0, 10), (10, 20), (20, 30), (30, 40), (40, 45)]);
        // More completions per problem than a part holds: one problem each.
        let wide = SuiteQueue {
            per_problem: 500,
            ..queue.clone()
        };
        assert_eq!(wide.chunk(), 1);
        let given = SuiteQueue {
            chunk: Some(50),
            ..queue
        };
        assert_eq!(given.items().len(), 1);
    }

    /// A carried task of two files, its digest made to match.
    fn carried() -> CarriedTask {
        let files = vec![
            crate::queue::carry::CarriedFile {
                path: "cases.jsonl".into(),
                blob: "c".repeat(64),
                size: 10,
                executable: false,
            },
            crate::queue::carry::CarriedFile {
                path: "spec.toml".into(),
                blob: "5".repeat(64),
                size: 20,
                executable: false,
            },
        ];
        CarriedTask {
            digest: CarriedTask::digest_of("tiny", "spec.toml", &files),
            name: "tiny".into(),
            spec: "spec.toml".into(),
            files,
        }
    }

    fn pools() -> CarriedPools {
        CarriedPools {
            text: "[pools.fast]\nbase_url = \"http://gw:8000/v1\"\nmodel = \"m\"\n".into(),
        }
    }

    fn batch() -> BatchRun {
        BatchRun {
            task: QueuedTask::Carried {
                task: carried(),
                pools: Some(pools()),
            },
            n: 5,
            probe: ProbeMode::Serial,
            wave_size: 8,
            wave_wait: Duration::from_millis(1500),
            build_timeout: Duration::from_secs(90),
            draw: DrawChoice {
                pools: vec!["fast=3".parse().unwrap(), "slow=1".parse().unwrap()],
                split: Some(SplitMode::Fixed),
                max_in_flight: Some(2),
                max_completion_tokens: Some(4000),
            },
            repair: RepairChoice::default(),
        }
    }

    fn repairing() -> BatchRun {
        BatchRun {
            repair: RepairChoice {
                rounds: Some(2),
                pools: vec!["big=1".parse().unwrap()],
                max_tokens: Some(9000),
            },
            ..batch()
        }
    }

    fn part() -> SuitePartRun {
        SuitePartRun {
            suite: 7,
            part: "4..8".parse().unwrap(),
            run_timeout: Duration::from_millis(2500),
            build_timeout: Duration::from_secs(600),
            build: BuildMode::Isolated,
            cases: CaseRuns::All,
        }
    }

    fn live() -> LiveSuitePart {
        LiveSuitePart {
            part: part(),
            pools: QueuedPools::Carried(pools()),
            draw: DrawChoice {
                pools: vec!["tiny".parse().unwrap()],
                split: Some(SplitMode::Race),
                max_in_flight: None,
                max_completion_tokens: Some(64),
            },
        }
    }

    /// Where a lane put the task and the pools file.
    fn placed() -> Placed {
        Placed {
            spec: Some("/lane/carried/d1/spec.toml".into()),
            pools_file: Some("/lane/carried/pools-p1.toml".into()),
        }
    }

    fn line(item: &WorkItem, begun: Option<BatchId>) -> String {
        let placed = match item {
            WorkItem::Batch(BatchRun {
                task: QueuedTask::Carried { pools: None, .. },
                ..
            }) => Placed {
                pools_file: None,
                ..placed()
            },
            WorkItem::Batch(_) => placed(),
            WorkItem::SuitePart(_) => Placed::default(),
            WorkItem::LiveSuitePart(_) => Placed {
                spec: None,
                ..placed()
            },
        };
        let args: Vec<String> = item
            .args(begun, &placed)
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        args.join(" ")
    }

    #[test]
    fn every_setting_becomes_its_flag() {
        let cases = [
            (
                WorkItem::Batch(batch()),
                None,
                "run /lane/carried/d1/spec.toml -n 5 --probe serial --wave-size 8 --wave-wait 1.5 \
                 --build-timeout 90 --pools /lane/carried/pools-p1.toml --pool fast=3 --pool slow=1 \
                 --split fixed --max-in-flight 2 --max-completion-tokens 4000",
            ),
            // A resume: the batch has its spec and n; the rest is the item's.
            (
                WorkItem::Batch(batch()),
                Some(12),
                "run /lane/carried/d1/spec.toml --resume 12 --probe serial --wave-size 8 --wave-wait 1.5 \
                 --build-timeout 90 --pools /lane/carried/pools-p1.toml --pool fast=3 --pool slow=1 \
                 --split fixed --max-in-flight 2 --max-completion-tokens 4000",
            ),
            // Unset overrides stay unset: the spec's and pools file's own.
            (
                WorkItem::Batch(BatchRun {
                    task: QueuedTask::Carried {
                        task: carried(),
                        pools: None,
                    },
                    draw: DrawChoice::default(),
                    ..batch()
                }),
                None,
                "run /lane/carried/d1/spec.toml -n 5 --probe serial --wave-size 8 --wave-wait 1.5 \
                 --build-timeout 90",
            ),
            // Repair: its flags after the draw's.
            (
                WorkItem::Batch(repairing()),
                None,
                "run /lane/carried/d1/spec.toml -n 5 --probe serial --wave-size 8 --wave-wait 1.5 \
                 --build-timeout 90 --pools /lane/carried/pools-p1.toml --pool fast=3 --pool slow=1 \
                 --split fixed --max-in-flight 2 --max-completion-tokens 4000 --rounds 2 \
                 --repair-pool big=1 --max-tokens 9000",
            ),
            // A resume goes on with the repair the batch stored.
            (
                WorkItem::Batch(repairing()),
                Some(12),
                "run /lane/carried/d1/spec.toml --resume 12 --probe serial --wave-size 8 --wave-wait 1.5 \
                 --build-timeout 90 --pools /lane/carried/pools-p1.toml --pool fast=3 --pool slow=1 \
                 --split fixed --max-in-flight 2 --max-completion-tokens 4000",
            ),
            (
                WorkItem::SuitePart(part()),
                None,
                "suite run --resume 7 --part 4..8 --run-timeout 2.5 --build-timeout 600 \
                 --build isolated --cases all",
            ),
            (
                WorkItem::LiveSuitePart(live()),
                None,
                "suite run --resume 7 --part 4..8 --run-timeout 2.5 --build-timeout 600 \
                 --build isolated --cases all --pools /lane/carried/pools-p1.toml --pool tiny --split race \
                 --max-completion-tokens 64",
            ),
        ];
        for (item, begun, want) in cases {
            assert_eq!(line(&item, begun), want, "{item:?}");
        }
    }

    #[test]
    fn an_item_reads_back_as_stored() {
        for item in [
            WorkItem::Batch(batch()),
            WorkItem::Batch(repairing()),
            WorkItem::SuitePart(part()),
            WorkItem::LiveSuitePart(live()),
        ] {
            let json = item.to_json().unwrap();
            assert_eq!(WorkItem::from_json(&json).unwrap(), item, "{json}");
        }
        let json = WorkItem::Batch(batch()).to_json().unwrap();
        assert_eq!(json["kind"], "batch");
        assert_eq!(json["probe"], "serial");
        assert_eq!(json["wave_wait"], 1.5);
        assert_eq!(json["draw"]["pools"][0], "fast=3");
        // The task by content, the pools by text: no path.
        assert_eq!(json["task"]["digest"], carried().digest.as_str());
        assert_eq!(json["task"]["files"][1]["path"], "spec.toml");
        assert_eq!(json["pools"]["text"], pools().text.as_str());
        assert!(json.get("spec").is_none() && json.get("pools_file").is_none());
        // No repair: no key, so a lane of an older assay still runs it.
        assert!(json.get("repair").is_none(), "{json}");
        let json = WorkItem::Batch(repairing()).to_json().unwrap();
        assert_eq!(
            json["repair"],
            serde_json::json!({"rounds": 2, "pools": ["big=1"], "max_tokens": 9000})
        );
        assert_eq!(
            WorkItem::Batch(repairing()).describe(),
            format!(
                "batch tiny@{} -n 5 --rounds 2 --repair-pool big=1 --max-tokens 9000",
                &carried().digest[..12]
            )
        );
    }

    /// An item queued before tasks were carried, or before repair settings
    /// were (its JSON as that assay wrote it), reads: its task by path, no
    /// repair of its own.
    #[test]
    fn an_item_queued_without_repair_settings_still_reads() {
        let old = serde_json::json!({
            "kind": "batch",
            "spec": "/tasks/tiny/spec.toml",
            "n": 5,
            "probe": "serial",
            "wave_size": 8,
            "wave_wait": 1.5,
            "build_timeout": 90.0,
            "pools_file": "/tasks/pools.toml",
            "draw": {
                "pools": ["fast=3", "slow=1"],
                "split": "fixed",
                "max_in_flight": 2,
                "max_completion_tokens": 4000
            }
        });
        let by_path = BatchRun {
            task: QueuedTask::Paths {
                spec: "/tasks/tiny/spec.toml".into(),
                pools_file: Some("/tasks/pools.toml".into()),
            },
            ..batch()
        };
        assert_eq!(
            WorkItem::from_json(&old).unwrap(),
            WorkItem::Batch(by_path.clone())
        );
        assert_eq!(
            WorkItem::Batch(by_path).to_json().unwrap(),
            old,
            "written back as read"
        );
        assert_eq!(
            WorkItem::from_json(&old).unwrap().describe(),
            "batch /tasks/tiny/spec.toml (by path) -n 5"
        );
        // Both ways at once, or neither, is no item.
        let mut both = old.clone();
        both["task"] = serde_json::to_value(carried()).unwrap();
        let e = WorkItem::from_json(&both).unwrap_err().to_string();
        assert!(e.contains("both by content and by path"), "{e}");
        let mut neither = old.clone();
        neither.as_object_mut().unwrap().remove("spec");
        let e = WorkItem::from_json(&neither).unwrap_err().to_string();
        assert!(e.contains("names no task"), "{e}");
        let live_by_path = serde_json::json!({
            "kind": "live_suite_part",
            "part": serde_json::to_value(part()).unwrap(),
            "pools_file": "/rig/pools.toml",
            "draw": {"pools": ["tiny"], "split": "race", "max_in_flight": null, "max_completion_tokens": 64}
        });
        let read = WorkItem::from_json(&live_by_path).unwrap();
        assert_eq!(
            read,
            WorkItem::LiveSuitePart(LiveSuitePart {
                pools: QueuedPools::Path("/rig/pools.toml".into()),
                ..live()
            })
        );
        // A repair key this assay does not know is refused, not dropped.
        let mut json = WorkItem::Batch(repairing()).to_json().unwrap();
        json["repair"]["feedback"] = "full".into();
        assert!(WorkItem::from_json(&json).is_err(), "{json}");
    }

    /// The rounds are fixed when queued: the spec's own when no flag says,
    /// and `--rounds 0` kept against a spec that asks for rounds.
    #[test]
    fn the_rounds_are_resolved_against_the_spec_when_queued() {
        let tiny = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny");
        let mut spec = Spec::load(&tiny).unwrap();
        let flags = |rounds| RepairFlags {
            rounds,
            ..RepairFlags::default()
        };
        assert!(RepairChoice::resolved(&spec, &flags(None)).is_empty());
        assert!(RepairChoice::resolved(&spec, &flags(Some(0))).is_empty());
        assert_eq!(
            RepairChoice::resolved(&spec, &flags(Some(3))).rounds,
            Some(3)
        );
        spec.repair.rounds = 2;
        assert_eq!(RepairChoice::resolved(&spec, &flags(None)).rounds, Some(2));
        assert_eq!(
            RepairChoice::resolved(&spec, &flags(Some(0))).rounds,
            Some(0)
        );
        let budget = RepairFlags {
            pools: vec!["big".parse().unwrap()],
            max_tokens: Some(100),
            ..flags(Some(1))
        };
        assert_eq!(
            RepairChoice::resolved(&spec, &budget),
            RepairChoice {
                rounds: Some(1),
                pools: vec!["big".parse().unwrap()],
                max_tokens: Some(100),
            }
        );
    }

    /// A duration reads back as the one stored, to the nanosecond: a lane
    /// runs the flags it was queued with, not one a rounding step away.
    #[test]
    fn durations_read_back_exactly() {
        for ms in [1, 300, 1001, 1500, 2001, 999_999] {
            let wait = Duration::from_millis(ms);
            let item = WorkItem::Batch(BatchRun {
                wave_wait: wait,
                ..batch()
            });
            let back = WorkItem::from_json(&item.to_json().unwrap()).unwrap();
            assert_eq!(back, item, "{wait:?}");
        }
    }

    /// A setting this assay does not know is refused, not dropped: an item
    /// run without one of its settings is what this module exists to stop.
    #[test]
    fn an_unknown_or_bad_setting_is_refused_not_dropped() {
        let mut json = WorkItem::Batch(batch()).to_json().unwrap();
        json["temperature"] = 0.5.into();
        assert!(WorkItem::from_json(&json).is_err(), "{json}");
        let mut json = WorkItem::Batch(batch()).to_json().unwrap();
        json["probe"] = "sideways".into();
        let e = WorkItem::from_json(&json).unwrap_err().to_string();
        assert!(e.contains("sideways"), "{e}");
        // An item queued as a command line by an older assay.
        let legacy = serde_json::json!(["/tasks/tiny", "-n", "3"]);
        assert!(WorkItem::from_json(&legacy).is_err());
    }

    #[test]
    fn a_path_json_cannot_hold_is_refused_when_queued() {
        use std::os::unix::ffi::OsStrExt;
        let bad = PathBuf::from(std::ffi::OsStr::from_bytes(b"/tasks/\xff/spec.toml"));
        let item = WorkItem::Batch(BatchRun {
            task: QueuedTask::Paths {
                spec: bad.clone(),
                pools_file: None,
            },
            ..batch()
        });
        assert_eq!(item.to_json().unwrap_err().0, bad);
    }
}
