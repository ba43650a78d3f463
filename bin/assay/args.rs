//! The flags of every command, as clap reads them. Declarations only:
//! what a value means and its bounds are the library's (`spec::bounds`,
//! each enum's own strings), what a command does is `cmd`'s. Flags that
//! several commands take are one flattened struct each (`DbArg`,
//! `DrawArgs`, `OutputArgs`, `WorkDirArg`), so they read and say the same
//! everywhere.

use std::path::PathBuf;
use std::time::Duration;

use clap::{value_parser, Args, Parser, Subcommand};

use assay::build::probe::ProbeMode;
use assay::engine::exit::UsageError;
use assay::engine::outputs::{Outputs, WorkDir};
use assay::spec::{bounds, WavePolicy};
use assay::store::{BatchId, Db, SuiteId};
use assay::support::hint::Reach;

use crate::values::{bounded, named, parsed, Refusal};

#[derive(Parser)]
#[command(
    name = "assay",
    version,
    about = "Draw, probe and score LLM-written Rust candidates"
)]
pub struct Cli {
    /// More log output (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run a batch for a task.
    Run(RunArgs),
    /// Drain the store's queue on this machine: run each item as `run`
    /// would, on a renewed lease (docs/scaling.md).
    Lane(LaneArgs),
    /// List the store's queue: every item, its state and lane.
    Queue {
        #[command(flatten)]
        db: DbArg,
        #[arg(long)]
        json: bool,
    },
    /// List stored batches.
    Batches {
        #[command(flatten)]
        db: DbArg,
        /// Print the list as one JSON array (docs/reports.md).
        #[arg(long)]
        json: bool,
    },
    /// Show a stored batch: summary, phases, per-candidate verdicts.
    Show {
        /// The batch (as `assay batches` lists them).
        #[arg(allow_negative_numbers = true)]
        batch: BatchId,
        #[command(flatten)]
        db: DbArg,
        /// Print the batch as one JSON object (docs/reports.md).
        #[arg(long)]
        json: bool,
        /// Print what rustc said of each candidate that did not build (or
        /// of CANDIDATE only), from the store: the text of its error file,
        /// on any machine.
        #[arg(long, value_name = "CANDIDATE", num_args = 0..=1)]
        errors: Option<Option<usize>>,
    },
    /// Write an admitted candidate that beat the reference in its batch over
    /// the task's committed file, with a provenance header. Shows the change
    /// first; writes with --yes, or when confirmed on a terminal.
    Promote {
        /// The batch that scored the candidate.
        #[arg(allow_negative_numbers = true)]
        batch: BatchId,
        /// The candidate's number in that batch (as `show` lists them).
        #[arg(allow_negative_numbers = true)]
        candidate: usize,
        #[command(flatten)]
        db: DbArg,
        /// Write without asking.
        #[arg(long, short)]
        yes: bool,
        /// The task's folder to promote into; it must hold what the batch
        /// scored [default: the folder the batch ran; for a batch a lane
        /// ran, its task placed from the store into WORK_DIR/promoted/]
        #[arg(long, value_name = "DIR")]
        task: Option<PathBuf>,
        #[command(flatten)]
        work: WorkDirArg,
    },
    /// Compare batches side by side: speed, quality, cost. Stored batches,
    /// or one new batch per pool with --spec and --pool.
    Compare(CompareArgs),
    /// Sweep one pool's concurrency: one round of L requests at each level L.
    Ladder(LadderArgs),
    /// Export a stored batch, one row per reply.
    Export {
        /// The batch (as `assay batches` lists them).
        #[arg(allow_negative_numbers = true)]
        batch: BatchId,
        #[command(flatten)]
        db: DbArg,
        /// What to write.
        #[arg(long, default_value = "json", value_parser = named::<assay::report::export::Format>(Refusal::Clap))]
        format: assay::report::export::Format,
    },
    /// Probe a stored batch again in one or more modes; exit 1 when any
    /// verdict differs between modes, runs or from the stored one.
    Replay(ReplayArgs),
    /// Problem sets in MultiPL-E's schema: run, show, compare, export.
    Suite {
        #[command(subcommand)]
        command: SuiteCommand,
    },
    /// Write a new task, or check one (docs/tasks.md).
    #[command(subcommand)]
    Task(TaskCommand),
}

#[derive(Subcommand)]
pub enum TaskCommand {
    /// Check a task as every batch does first: spec, prompt, replay
    /// corpus, the harness against its contract, the cases, and the
    /// committed candidate (defines the entry, compiles, runs the cases).
    /// Exit 2 with one line naming the file and what to fix.
    Check {
        /// The task: a spec.toml or the folder holding one.
        spec: PathBuf,
        #[command(flatten)]
        work: WorkDirArg,
        /// Seconds the check's cargo build may run [default: the spec's
        /// [probe] build_timeout_s, else 600].
        #[arg(long, value_name = "SECS", allow_negative_numbers = true,
              value_parser = bounded(parsed::<f64>(), bounds::check_build_timeout))]
        build_timeout: Option<Duration>,
    },
    /// Write a working task to start from: spec, prompt, harness, cases,
    /// committed candidate and replay corpus, passing `task check` and
    /// `run` as written.
    New {
        /// The task's name; its entry function is named after it.
        name: String,
        /// The folder to create (it must not exist) [default: ./NAME].
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

#[derive(Args)]
pub struct CompareArgs {
    /// Two or more stored batches (or none, with --spec and --pool).
    #[arg(allow_negative_numbers = true)]
    pub batches: Vec<BatchId>,
    /// Run one new batch per --pool of this task, then compare them.
    #[arg(long)]
    pub spec: Option<PathBuf>,
    /// A pool to run (with --spec); give two or more.
    #[arg(long = "pool", value_name = "NAME")]
    pub pool: Vec<assay::spec::PoolChoice>,
    /// Candidates per pool (default: the spec's).
    #[arg(short, allow_negative_numbers = true)]
    pub n: Option<usize>,
    /// Run the pools' batches one after the other (default: at once). Only
    /// then are each batch's CPU-s its own.
    #[arg(long)]
    pub sequential: bool,
    #[command(flatten)]
    pub sweep: SweepArgs,
    #[command(flatten)]
    pub db: DbArg,
    /// Print the comparison as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Also draw latency and score distributions per pool into this SVG file.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Also write the equal-budget chart there: each batch's best score
    /// against the output tokens it had spent (a repair run against a
    /// resampling run; docs/repair.md).
    #[arg(long, value_name = "FILE")]
    pub budget_svg: Option<PathBuf>,
}

#[derive(Args)]
pub struct LadderArgs {
    /// The task whose prompt is sent.
    #[arg(long)]
    pub spec: PathBuf,
    /// The pool to measure.
    #[arg(long = "pool", value_name = "NAME")]
    pub pool: assay::spec::PoolChoice,
    /// Concurrency levels; at each level L, L requests are sent at once.
    #[arg(long, default_value = "1,2,4,8,16,32", value_parser = assay::report::ladder::parse_levels)]
    pub levels: std::vec::Vec<usize>,
    #[command(flatten)]
    pub sweep: SweepArgs,
    #[command(flatten)]
    pub db: DbArg,
    /// Print the ladder as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Also draw throughput and latency against concurrency into this SVG file.
    #[arg(long)]
    pub svg: Option<PathBuf>,
}

/// What a command that runs new batches needs besides the spec: the pools
/// are the sweep's own (one per batch), so neither a split nor an
/// in-flight limit is taken.
#[derive(Args)]
pub struct SweepArgs {
    #[command(flatten)]
    pub pools: PoolsArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// The pools file and the token cap, which every drawing command takes.
#[derive(Args)]
pub struct PoolsArgs {
    /// The pools file [default: pools.toml beside the spec (or the
    /// problems), else in the working directory].
    #[arg(long)]
    pub pools: Option<PathBuf>,
    /// Token cap of every request (overrides the pools file).
    #[arg(long, env = "MAX_COMPLETION_TOKENS", allow_negative_numbers = true)]
    pub max_completion_tokens: Option<u64>,
}

/// The draw flags of `run` and `suite run`: which pools, how the draw is
/// split over them, and the pools file's overrides.
#[derive(Args)]
pub struct DrawArgs {
    #[command(flatten)]
    pub file: PoolsArgs,
    /// Draw from this pool (repeatable); NAME=SHARE for a fixed share.
    /// Overrides the spec's `draw.pools`; with `suite run --resume`, the
    /// pools that draw what a killed draw did not store.
    #[arg(long = "pool", value_name = "NAME[=SHARE]")]
    pub pool: Vec<assay::spec::PoolChoice>,
    /// How the draw is split over its pools.
    #[arg(long, value_name = "fixed|race", value_parser = named::<assay::spec::SplitMode>(Refusal::Clap))]
    pub split: Option<assay::spec::SplitMode>,
    /// Requests in flight per pool (overrides the pools file).
    #[arg(long, env = "NEV_CONCURRENCY", allow_negative_numbers = true)]
    pub max_in_flight: Option<usize>,
}

/// Where a command that builds writes: its outputs and its work directory.
#[derive(Args)]
pub struct OutputArgs {
    /// Where batch and suite outputs go (compiler errors, images) [default:
    /// the database's name with -out, beside it: assay.db -> assay-out;
    /// with `run --resume`, where the batch's outputs already are].
    #[arg(long, env = "ASSAY_OUT")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub work: WorkDirArg,
}

/// The warm work directory every build shares.
#[derive(Args)]
pub struct WorkDirArg {
    /// Where the generated packages and their cargo target directory live,
    /// kept warm across batches, suites and databases [default: the
    /// toolchain's folder in ~/.cache/assay/work].
    #[arg(long, env = "ASSAY_WORK_DIR")]
    pub work_dir: Option<PathBuf>,
}

#[derive(Args)]
pub struct ReplayArgs {
    /// The stored batch whose candidates are probed again.
    #[arg(allow_negative_numbers = true)]
    pub batch: BatchId,
    #[command(flatten)]
    pub db: DbArg,
    /// Probe modes to run, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "shared,serial",
          value_parser = named::<ProbeMode>(Refusal::Line))]
    pub modes: Vec<ProbeMode>,
    /// Times to run each mode.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true,
          value_parser = bounded(parsed::<usize>(), bounds::check_runs))]
    pub runs: usize,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Probe in a new, empty work directory (dependencies built first,
    /// untimed) instead of the warm one.
    #[arg(long)]
    pub fresh: bool,
    #[command(flatten)]
    pub work: WorkDirArg,
    /// Seconds one cargo build may run before it is killed and its
    /// unfinished candidates are probe_failure(timeout) [default: the
    /// spec's [probe] build_timeout_s, else 600].
    #[arg(long, value_name = "SECS", allow_negative_numbers = true,
          value_parser = bounded(parsed::<f64>(), bounds::check_build_timeout))]
    pub build_timeout: Option<Duration>,
}

#[derive(Args)]
pub struct DbArg {
    /// The store: a SQLite file (a path or sqlite:PATH), or a shared
    /// PostgreSQL database (postgres://USER@HOST:PORT/DB; the password
    /// comes from PGPASSWORD or ~/.pgpass, never from here).
    // A string, parsed by `db()`: clap would echo a refused value, and a
    // refused URL may hold a password.
    #[arg(
        long = "db",
        env = "ASSAY_DB",
        default_value = "assay.db",
        value_name = "DB"
    )]
    pub raw: String,
}

impl DbArg {
    pub fn db(&self) -> Result<Db, UsageError> {
        self.raw
            .parse()
            .map_err(|e| UsageError(format!("--db: {e}")))
    }

    /// The flags a printed command needs to reach this store.
    pub fn reach(&self) -> Reach {
        Reach::db(&self.raw)
    }
}

#[derive(Args)]
pub struct RunArgs {
    /// The task: a spec.toml or the folder holding one (with --resume:
    /// default, the spec the batch was started with).
    #[arg(required_unless_present = "resume")]
    pub spec: Option<PathBuf>,
    #[command(flatten)]
    pub db: DbArg,
    /// Number of candidates (default: the spec's).
    #[arg(
        short,
        env = "NEV_CANDIDATES",
        conflicts_with = "resume",
        allow_negative_numbers = true
    )]
    pub n: Option<usize>,
    /// Finish an interrupted or failed batch: what it stored is kept, only
    /// the rest is drawn, probed and scored.
    #[arg(long, value_name = "BATCH", allow_negative_numbers = true)]
    pub resume: Option<BatchId>,
    #[command(flatten)]
    pub draw: DrawArgs,
    /// Repair rounds after the first draw: each shows the pools its best
    /// failing candidates with their compiler errors and failed visible
    /// cases, and draws their repairs (docs/repair.md) [default: the
    /// spec's [repair] rounds, else 0].
    #[arg(long, value_name = "K", conflicts_with = "resume",
          value_parser = bounded(value_parser!(u64), bounds::check_rounds))]
    pub rounds: Option<u32>,
    /// Draw the repair rounds from this pool instead of the batch's own
    /// (repeatable); NAME=SHARE for a fixed share.
    #[arg(
        long = "repair-pool",
        value_name = "NAME[=SHARE]",
        conflicts_with = "resume"
    )]
    pub repair_pool: Vec<assay::spec::PoolChoice>,
    /// Stop drawing once the batch's replies have spent this many output
    /// tokens (the servers' counts; a reply without usage counts 0).
    #[arg(long, value_name = "TOKENS", conflicts_with = "resume",
          value_parser = bounded(value_parser!(u64), bounds::check_token_budget))]
    pub max_tokens: Option<u64>,
    /// Print the summary as one JSON object.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub output: OutputArgs,
    /// Write the best admitted candidate over the task's committed file when
    /// it beat the committed one in this batch.
    #[arg(long)]
    pub promote: bool,
    /// How the probe builds the candidates.
    #[arg(long, env = "ASSAY_PROBE", default_value = "shared",
          value_parser = named::<ProbeMode>(Refusal::Line))]
    pub probe: ProbeMode,
    /// Streaming probe: start a wave once this many candidates wait
    /// [default: the spec's [probe] wave_size, else 32].
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = bounded(parsed::<usize>(), WavePolicy::check_size))]
    pub wave_size: Option<usize>,
    /// Streaming probe: start a wave once the oldest candidate has waited
    /// this many seconds [default: the spec's [probe] wave_wait_ms, else 3].
    #[arg(long, value_name = "SECS", allow_negative_numbers = true,
          value_parser = bounded(parsed::<f64>(), WavePolicy::check_wait))]
    pub wave_wait: Option<Duration>,
    /// Seconds one cargo build (probe or scorer) may run before it is
    /// killed and its unfinished candidates are probe_failure(timeout)
    /// [default: the spec's [probe] build_timeout_s, else 600].
    #[arg(long, value_name = "SECS", allow_negative_numbers = true,
          value_parser = bounded(parsed::<f64>(), bounds::check_build_timeout))]
    pub build_timeout: Option<Duration>,
    /// Store the batch as an item of the store's queue for a lane
    /// (`assay lane`) to run, instead of running it here.
    #[arg(long, conflicts_with_all = ["resume", "promote"])]
    pub queue: bool,
    /// The queue item this run is (set by `assay lane`).
    #[arg(long, hide = true, value_name = "ID")]
    pub work_item: Option<i64>,
}

#[derive(Args)]
pub struct LaneArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// The lane's name in the store [default: the host name].
    #[arg(long)]
    pub lane: Option<String>,
    /// Items run at once.
    #[arg(long, default_value_t = 1,
          value_parser = bounded(parsed::<usize>(), bounds::check_jobs))]
    pub jobs: usize,
    /// Seconds a claim holds unrenewed; the lane renews it every third.
    #[arg(long, value_name = "SECS", default_value = "60",
          value_parser = bounded(parsed::<f64>(), bounds::check_lease))]
    pub lease: Duration,
    /// Stop once every item of the queue is done or failed, on this lane or
    /// another (else wait for work).
    #[arg(long)]
    pub until_empty: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Subcommand)]
#[expect(
    clippy::large_enum_variant,
    reason = "parsed once per process; clap builds it by value"
)]
pub enum SuiteCommand {
    /// Run a problem set's completions: build the programs as modules of
    /// shared images (--build), run each in its own sandboxed process, store
    /// it all and report pass@k.
    Run(SuiteRunArgs),
    /// Show a stored suite: pass@k, and per problem n, compiled, passed and
    /// every completion's status.
    Show {
        /// The suite (as `assay suite list` lists them).
        #[arg(allow_negative_numbers = true)]
        suite: SuiteId,
        #[command(flatten)]
        db: DbArg,
        /// Print the suite as one JSON object (docs/suites.md).
        #[arg(long)]
        json: bool,
        /// Print what rustc said of each program that did not build (or
        /// of PROBLEM's only), from the store: the text of its error file,
        /// on any machine.
        #[arg(long, value_name = "PROBLEM", num_args = 0..=1)]
        errors: Option<Option<String>>,
    },
    /// Put two runs over the same problems side by side: per-problem pass
    /// rates, both means, the difference with a paired bootstrap 95%
    /// interval, and each run's draw figures.
    Compare {
        /// The first run (A).
        #[arg(allow_negative_numbers = true)]
        a: SuiteId,
        /// The second run (B); differences are B - A.
        #[arg(allow_negative_numbers = true)]
        b: SuiteId,
        #[command(flatten)]
        db: DbArg,
        /// Compare pass@K (every problem needs K completions in both runs).
        #[arg(short, default_value_t = 1, allow_negative_numbers = true,
              value_parser = bounded(parsed::<usize>(), bounds::check_pass_k))]
        k: usize,
        /// Print the comparison as one JSON object.
        #[arg(long)]
        json: bool,
        /// Also draw the per-problem pass rates and differences into this
        /// SVG file.
        #[arg(long)]
        svg: Option<PathBuf>,
    },
    /// Export a stored suite, one row per completion.
    Export {
        #[arg(allow_negative_numbers = true)]
        suite: SuiteId,
        #[command(flatten)]
        db: DbArg,
        /// What to write (json: texts and programs included; csv: figures
        /// and statuses).
        #[arg(long, default_value = "json", value_parser = named::<assay::report::export::Format>(Refusal::Clap))]
        format: assay::report::export::Format,
    },
    /// List stored suites.
    List {
        #[command(flatten)]
        db: DbArg,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
pub struct SuiteRunArgs {
    /// The problem set: MultiPL-E's JSONL (name, language, prompt, tests,
    /// stop_tokens).
    #[arg(required_unless_present = "resume")]
    pub problems: Option<PathBuf>,
    /// The completions: a JSONL of {"name", "completion"} rows, or
    /// MultiPL-E's output directory of .json / .json.gz files.
    #[arg(long, conflicts_with_all = ["resume", "pool"])]
    pub completions: Option<PathBuf>,
    /// Completions to draw per problem (with --pool).
    #[arg(short, allow_negative_numbers = true, conflicts_with = "resume")]
    pub n: Option<usize>,
    /// How a live draw asks for a completion.
    #[arg(long, default_value = "chat", conflicts_with = "resume",
          value_parser = named::<assay::suite::ProgramMode>(Refusal::Clap))]
    pub mode: assay::suite::ProgramMode,
    #[command(flatten)]
    pub draw: DrawArgs,
    /// Finish an interrupted or failed suite: what it stored is kept, only
    /// the programs without an outcome are built and run.
    #[arg(
        long,
        value_name = "SUITE",
        allow_negative_numbers = true,
        conflicts_with = "problems"
    )]
    pub resume: Option<SuiteId>,
    #[command(flatten)]
    pub db: DbArg,
    /// Print the suite as one JSON object.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub output: OutputArgs,
    /// Seconds one run of a program (its whole `main`, or one case) may
    /// take [default: 5, MultiPL-E's].
    #[arg(long, value_name = "SECS", allow_negative_numbers = true,
          value_parser = bounded(parsed::<f64>(), bounds::check_run_timeout))]
    pub run_timeout: Option<Duration>,
    /// Seconds one cargo build (up to 100 programs) may run [default: 600].
    #[arg(long, value_name = "SECS", allow_negative_numbers = true,
          value_parser = bounded(parsed::<f64>(), bounds::check_build_timeout))]
    pub build_timeout: Option<Duration>,
    /// How each wave's programs are built.
    #[arg(long, value_name = "shared|isolated", default_value = "shared",
          value_parser = named::<assay::build::exec::BuildMode>(Refusal::Clap))]
    pub build: assay::build::exec::BuildMode,
    /// The Rust edition every program is built in (2015 is MultiPL-E's:
    /// its plain `rustc`); a resumed suite keeps its own.
    #[arg(long, value_name = "YEAR", default_value = "2021", conflicts_with = "resume",
          value_parser = named::<assay::spec::Edition>(Refusal::Clap))]
    pub edition: assay::spec::Edition,
    /// Which cases of a program run alone after its whole `main`.
    #[arg(long, value_name = "failed|all", default_value = "failed",
          value_parser = named::<assay::suite::CaseRuns>(Refusal::Clap))]
    pub cases: assay::suite::CaseRuns,
    /// Store the suite and queue it in parts for lanes (`assay lane`) to
    /// run (and, with --pool, to draw), instead of running it here.
    #[arg(long, conflicts_with = "resume")]
    pub queue: bool,
    /// With --queue: problems per queue item [default: as many as make
    /// about 100 programs, one shared build].
    #[arg(long, value_name = "PROBLEMS", requires = "queue",
          value_parser = bounded(parsed::<usize>(), bounds::check_chunk))]
    pub chunk: Option<usize>,
    /// With --resume: only the problems at these positions (from 0), as
    /// a lane runs its part of a queued suite.
    #[arg(long, value_name = "START..END", requires = "resume")]
    pub part: Option<assay::store::SuitePart>,
    /// The queue item this run is (set by `assay lane`).
    #[arg(long, hide = true, value_name = "ID", requires = "part")]
    pub work_item: Option<i64>,
    /// Repair rounds after the first draw: each failing completion's
    /// program goes back with the compiler's errors or its failed asserts
    /// (docs/repair.md, Suites).
    #[arg(long, value_name = "R", allow_negative_numbers = true,
          value_parser = bounded(value_parser!(u64), bounds::check_rounds))]
    pub rounds: Option<u32>,
    /// What a repair prompt carries: `full` (compiler errors, the failed
    /// asserts and their panics) or `errors-only` (no test text at all).
    #[arg(long, value_name = "full|errors-only",
          value_parser = named::<assay::spec::Feedback>(Refusal::Clap))]
    pub feedback: Option<assay::spec::Feedback>,
    /// Draw the repair rounds from this pool instead of --pool's
    /// (repeatable); NAME=SHARE for a fixed share.
    #[arg(long = "repair-pool", value_name = "NAME[=SHARE]")]
    pub repair_pool: Vec<assay::spec::PoolChoice>,
    /// Start no draw once the suite's replies have spent this many output
    /// tokens (the servers' counts).
    #[arg(long, value_name = "TOKENS", allow_negative_numbers = true,
          value_parser = bounded(value_parser!(u64), bounds::check_token_budget))]
    pub max_tokens: Option<u64>,
}

impl SuiteRunArgs {
    /// What the run's flags ask for, as the repair flags are checked
    /// against it.
    pub fn run_shape(&self) -> assay::repair::setup::RunShape {
        assay::repair::setup::RunShape {
            live_draw: !self.draw.pool.is_empty(),
            completions: self.completions.is_some(),
            queue: self.queue,
            resume: self.resume.is_some(),
        }
    }

    /// The repair flags, checked and resolved by the library.
    pub fn repair_flags(&self) -> assay::repair::RepairFlags {
        assay::repair::RepairFlags {
            rounds: self.rounds,
            feedback: self.feedback,
            pools: self.repair_pool.clone(),
            max_tokens: self.max_tokens,
        }
    }
}

impl PoolsArgs {
    /// The draw flags of a sweep: its pools, split and in-flight limit
    /// are the sweep's own.
    pub fn flags(&self) -> assay::draw::DrawFlags {
        assay::draw::DrawFlags {
            pools_file: self.pools.clone(),
            max_completion_tokens: self.max_completion_tokens,
            ..Default::default()
        }
    }
}

impl DrawArgs {
    pub fn flags(&self) -> assay::draw::DrawFlags {
        assay::draw::DrawFlags {
            pools_file: self.file.pools.clone(),
            pools: self.pool.clone(),
            split: self.split,
            max_in_flight: self.max_in_flight,
            max_completion_tokens: self.file.max_completion_tokens,
        }
    }
}

impl OutputArgs {
    /// The outputs and work directory these flags name for `db`, made
    /// absolute but not yet created.
    pub fn resolve(&self, db: &Db) -> anyhow::Result<Outputs> {
        self.resolve_or(db, None)
    }

    /// As [`OutputArgs::resolve`], with `out` standing in for a missing
    /// `--out` (a resumed batch's own folder).
    pub fn resolve_or(&self, db: &Db, out: Option<&std::path::Path>) -> anyhow::Result<Outputs> {
        Ok(Outputs::resolve(
            db,
            self.out.as_deref().or(out),
            self.work.work_dir.as_deref(),
        )?)
    }
}

impl WorkDirArg {
    pub fn resolve(&self) -> anyhow::Result<WorkDir> {
        Ok(WorkDir::resolve(self.work_dir.as_deref())?)
    }
}
