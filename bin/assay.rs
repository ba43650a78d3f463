//! The `assay` command: parses flags, builds a config, calls the library and
//! maps the outcome to an exit code (0 ok, 1 failed, 2 bad input).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};

use assay::command_store::{self, reading};
use assay::draw::DrawOptions;
use assay::exit::{ExitClass, UsageError};
use assay::hint::{CommandLine, Reach};
use assay::interrupt::{Interrupt, Interrupted, Stopped};
use assay::outputs::{Outputs, WorkDir};
use assay::owner::Owner;
use assay::pipeline::{self, RunConfig};
use assay::probe::ProbeMode;
use assay::progress::Progress;
use assay::replay::ReplayConfig;
use assay::report::{self, CandidateLine};
use assay::spec::WavePolicy;
use assay::store::{BatchId, Db};
use assay::{sweep, views};

mod suite_cmd;

#[derive(Parser)]
#[command(
    name = "assay",
    version,
    about = "Draw, probe and score LLM-written Rust candidates"
)]
struct Cli {
    /// More log output (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
        /// json (everything, texts included) or csv (figures and verdicts).
        #[arg(long, default_value = "json")]
        format: assay::export::Format,
    },
    /// Probe a stored batch again in one or more modes; exit 1 when any
    /// verdict differs between modes, runs or from the stored one.
    Replay(ReplayArgs),
    /// Problem sets in MultiPL-E's schema: run, show, compare, export.
    Suite {
        #[command(subcommand)]
        command: suite_cmd::SuiteCommand,
    },
    /// Write a new task, or check one (docs/tasks.md).
    #[command(subcommand)]
    Task(TaskCommand),
}

#[derive(Subcommand)]
enum TaskCommand {
    /// Check a task as every batch does first: spec, prompt, replay
    /// corpus, the harness against its contract, the cases, and the
    /// committed candidate (defines the entry, compiles, runs the cases).
    /// Exit 2 with one line naming the file and what to fix.
    Check {
        /// The task: a spec.toml or the folder holding one.
        spec: PathBuf,
        /// Where the check's package and the cargo target directory live,
        /// shared with `run` (so its passing check is not done again)
        /// [default: the toolchain's folder in ~/.cache/assay/work].
        #[arg(long, env = "ASSAY_WORK_DIR")]
        work_dir: Option<PathBuf>,
        /// Seconds the check's cargo build may run [default: the spec's
        /// [probe] build_timeout_s, else 600].
        #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
        build_timeout: Option<f64>,
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
struct CompareArgs {
    /// Two or more stored batches (or none, with --spec and --pool).
    #[arg(allow_negative_numbers = true)]
    batches: Vec<BatchId>,
    /// Run one new batch per --pool of this task, then compare them.
    #[arg(long)]
    spec: Option<PathBuf>,
    /// A pool to run (with --spec); give two or more.
    #[arg(long = "pool", value_name = "NAME")]
    pool: Vec<assay::spec::PoolChoice>,
    /// Candidates per pool (default: the spec's).
    #[arg(short, allow_negative_numbers = true)]
    n: Option<usize>,
    /// Run the pools' batches one after the other (default: at once). Only
    /// then are each batch's CPU-s its own.
    #[arg(long)]
    sequential: bool,
    #[command(flatten)]
    sweep: SweepArgs,
    #[command(flatten)]
    db: DbArg,
    /// Print the comparison as one JSON object.
    #[arg(long)]
    json: bool,
    /// Also draw latency and score distributions per pool into this SVG file.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Also write the equal-budget chart there: each batch's best score
    /// against the output tokens it had spent (a repair run against a
    /// resampling run; docs/repair.md).
    #[arg(long, value_name = "FILE")]
    budget_svg: Option<PathBuf>,
}

#[derive(Args)]
struct LadderArgs {
    /// The task whose prompt is sent.
    #[arg(long)]
    spec: PathBuf,
    /// The pool to measure.
    #[arg(long = "pool", value_name = "NAME")]
    pool: assay::spec::PoolChoice,
    /// Concurrency levels; at each level L, L requests are sent at once.
    #[arg(long, default_value = "1,2,4,8,16,32", value_parser = assay::ladder::parse_levels)]
    levels: std::vec::Vec<usize>,
    #[command(flatten)]
    sweep: SweepArgs,
    #[command(flatten)]
    db: DbArg,
    /// Print the ladder as one JSON object.
    #[arg(long)]
    json: bool,
    /// Also draw throughput and latency against concurrency into this SVG file.
    #[arg(long)]
    svg: Option<PathBuf>,
}

/// What a command that runs new batches needs besides the spec.
#[derive(Args)]
struct SweepArgs {
    /// The pools file (default: pools.toml beside the spec, else in the
    /// working directory).
    #[arg(long)]
    pools: Option<PathBuf>,
    /// Token cap of every request (overrides the pools file).
    #[arg(long, env = "MAX_COMPLETION_TOKENS", allow_negative_numbers = true)]
    max_completion_tokens: Option<u64>,
    /// Where batch outputs go (compiler errors, the scorer) [default: the
    /// database's name with -out, beside it: assay.db -> assay-out].
    #[arg(long, env = "ASSAY_OUT")]
    out: Option<PathBuf>,
    /// Where the generated packages and their cargo target directory live
    /// [default: the toolchain's folder in ~/.cache/assay/work, shared by
    /// every database].
    #[arg(long, env = "ASSAY_WORK_DIR")]
    work_dir: Option<PathBuf>,
}

#[derive(Args)]
struct ReplayArgs {
    /// The stored batch whose candidates are probed again.
    #[arg(allow_negative_numbers = true)]
    batch: BatchId,
    #[command(flatten)]
    db: DbArg,
    /// Probe modes to run, comma-separated: `shared` (what a batch runs)
    /// and `serial` (one build per candidate, the reference).
    #[arg(long, value_delimiter = ',', default_value = "shared,serial")]
    modes: Vec<String>,
    /// Times to run each mode.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    runs: usize,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
    /// Probe in a new, empty work directory (dependencies built first,
    /// untimed) instead of the warm one.
    #[arg(long)]
    fresh: bool,
    /// The warm work directory [default: the toolchain's folder in
    /// ~/.cache/assay/work, where `run` builds].
    #[arg(long, env = "ASSAY_WORK_DIR")]
    work_dir: Option<PathBuf>,
    /// Seconds one cargo build may run before it is killed and its
    /// unfinished candidates are probe_failure(timeout) [default: the
    /// spec's [probe] build_timeout_s, else 600].
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    build_timeout: Option<f64>,
}

#[derive(Args)]
struct DbArg {
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
    raw: String,
}

impl DbArg {
    fn db(&self) -> Result<Db, UsageError> {
        self.raw
            .parse()
            .map_err(|e| UsageError(format!("--db: {e}")))
    }

    /// The flags a printed command needs to reach this store.
    fn reach(&self) -> Reach {
        Reach::db(&self.raw)
    }
}

#[derive(Args)]
struct RunArgs {
    /// The task: a spec.toml or the folder holding one (with --resume:
    /// default, the spec the batch was started with).
    #[arg(required_unless_present = "resume")]
    spec: Option<PathBuf>,
    #[command(flatten)]
    db: DbArg,
    /// Number of candidates (default: the spec's).
    #[arg(
        short,
        env = "NEV_CANDIDATES",
        conflicts_with = "resume",
        allow_negative_numbers = true
    )]
    n: Option<usize>,
    /// Finish an interrupted or failed batch: what it stored is kept, only
    /// the rest is drawn, probed and scored.
    #[arg(long, value_name = "BATCH", allow_negative_numbers = true)]
    resume: Option<BatchId>,
    /// The pools file (default: pools.toml beside the spec, else in the
    /// working directory).
    #[arg(long)]
    pools: Option<PathBuf>,
    /// Draw from this pool (repeatable); NAME=SHARE for a fixed share.
    /// Overrides the spec's `draw.pools`.
    #[arg(long = "pool", value_name = "NAME[=SHARE]")]
    pool: Vec<assay::spec::PoolChoice>,
    /// How the batch is split over its pools: fixed shares, or a race in
    /// which every pool keeps its slots full until N replies are in.
    #[arg(long, value_name = "fixed|race")]
    split: Option<assay::spec::SplitMode>,
    /// Requests in flight per pool (overrides the pools file).
    #[arg(long, env = "NEV_CONCURRENCY", allow_negative_numbers = true)]
    max_in_flight: Option<usize>,
    /// Token cap of every request (overrides the pools file).
    #[arg(long, env = "MAX_COMPLETION_TOKENS", allow_negative_numbers = true)]
    max_completion_tokens: Option<u64>,
    /// Repair rounds after the first draw: each shows the pools its best
    /// failing candidates with their compiler errors and failed visible
    /// cases, and draws their repairs (docs/repair.md) [default: the
    /// spec's [repair] rounds, else 0].
    #[arg(long, value_name = "K", conflicts_with_all = ["resume", "queue"])]
    rounds: Option<u64>,
    /// Draw the repair rounds from this pool instead of the batch's own
    /// (repeatable); NAME=SHARE for a fixed share.
    #[arg(
        long = "repair-pool",
        value_name = "NAME[=SHARE]",
        conflicts_with_all = ["resume", "queue"]
    )]
    repair_pool: Vec<assay::spec::PoolChoice>,
    /// Stop drawing once the batch's replies have spent this many output
    /// tokens (the servers' counts; a reply without usage counts 0).
    #[arg(long, value_name = "TOKENS", conflicts_with_all = ["resume", "queue"])]
    max_tokens: Option<u64>,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
    /// Where batch outputs go (compiler errors, the scorer) [default: the
    /// database's name with -out, beside it (assay.db -> assay-out); with
    /// --resume, where the batch's outputs already are].
    #[arg(long, env = "ASSAY_OUT")]
    out: Option<PathBuf>,
    /// Where the generated packages and their cargo target directory live;
    /// kept warm across batches and databases [default: the toolchain's
    /// folder in ~/.cache/assay/work].
    #[arg(long, env = "ASSAY_WORK_DIR")]
    work_dir: Option<PathBuf>,
    /// Write the best admitted candidate over the task's committed file when
    /// it beat the committed one in this batch.
    #[arg(long)]
    promote: bool,
    /// Probe mode: `shared` (a wave's candidates built as one image, each
    /// candidate once for the probe and the score) or `serial` (one build
    /// per candidate, the reference the shared build is checked against).
    #[arg(long, env = "ASSAY_PROBE", default_value = "shared")]
    probe: String,
    /// Streaming probe: start a wave once this many candidates wait
    /// [default: the spec's [probe] wave_size, else 32].
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    wave_size: Option<usize>,
    /// Streaming probe: start a wave once the oldest candidate has waited
    /// this many seconds [default: the spec's [probe] wave_wait_ms, else 3].
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    wave_wait: Option<f64>,
    /// Seconds one cargo build (probe or scorer) may run before it is
    /// killed and its unfinished candidates are probe_failure(timeout)
    /// [default: the spec's [probe] build_timeout_s, else 600].
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    build_timeout: Option<f64>,
    /// Store the batch as an item of the store's queue for a lane
    /// (`assay lane`) to run, instead of running it here.
    #[arg(long, conflicts_with_all = ["resume", "promote"])]
    queue: bool,
    /// The queue item this run is (set by `assay lane`).
    #[arg(long, hide = true, value_name = "ID")]
    work_item: Option<i64>,
}

#[derive(Args)]
struct LaneArgs {
    #[command(flatten)]
    db: DbArg,
    /// The lane's name in the store [default: the host name].
    #[arg(long)]
    lane: Option<String>,
    /// Items run at once.
    #[arg(long, default_value_t = 1)]
    jobs: usize,
    /// Seconds a claim holds unrenewed; the lane renews it every third.
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    lease: f64,
    /// Stop once every item of the queue is done or failed, on this lane or
    /// another (else wait for work).
    #[arg(long)]
    until_empty: bool,
    /// Output folder of the lane's batches [default: ./assay-out].
    #[arg(long, env = "ASSAY_OUT")]
    out: Option<PathBuf>,
    /// The lane's warm work directory [default: the toolchain's folder in
    /// ~/.cache/assay/work].
    #[arg(long, env = "ASSAY_WORK_DIR")]
    work_dir: Option<PathBuf>,
}

fn main() -> ExitCode {
    // Started by a confined cargo as its RUSTC_WORKSPACE_WRAPPER: limit and
    // run one target's rustc, nothing else (`sandbox::compile`).
    if let Some(settings) = std::env::var_os(assay::sandbox::compile::WRAPPER_VAR) {
        let code = assay::sandbox::compile::run_wrapper(&settings.to_string_lossy());
        return ExitCode::from(u8::try_from(code).unwrap_or(101));
    }
    // Every build this process starts wraps its rustc in this binary.
    if let Ok(exe) = std::env::current_exe() {
        assay::sandbox::compile::set_wrapper_exe(exe);
    }
    // `assay show 3 | head` should end quietly, as other Unix tools do, not
    // panic on the closed pipe.
    // SAFETY: restoring the default disposition of a signal at start-up,
    // before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    init_logging(cli.verbose);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(dispatch(cli.command));
    // A blocking task may still wait (for a task package's lock, after
    // Ctrl-C); dropping the runtime would wait for it forever.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match outcome {
        Ok(code) => code,
        Err(e) => {
            let class = ExitClass::of(&e);
            if class == ExitClass::Interrupted {
                // Not an error: the user asked for it, and nothing was lost.
                eprintln!("assay: {e:#}");
            } else {
                eprintln!("error: {e:#}");
            }
            ExitCode::from(class.code())
        }
    }
}

async fn dispatch(command: Command) -> Result<ExitCode> {
    match command {
        Command::Run(args) => run(args).await,
        Command::Lane(args) => lane(args).await,
        Command::Queue { db, json } => {
            reading(&db.db()?, async |store| {
                let items = store.work_items().await?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&items)?);
                } else {
                    print!("{}", assay::lane::queue_table(&items));
                }
                Ok(ExitCode::SUCCESS)
            })
            .await
        }
        Command::Replay(args) => replay(args).await,
        Command::Suite { command } => suite_cmd::dispatch(command).await,
        Command::Batches { db, json } => {
            reading(&db.db()?, async |store| {
                let batches = store.batches().await?;
                if json {
                    let rows: Vec<_> = batches
                        .iter()
                        .map(|b| {
                            serde_json::json!({
                                "batch_id": b.id, "task": b.task, "pool": b.pool, "n": b.n,
                                "status": b.status.as_str(), "started_at": b.started_at,
                                "finished_at": b.finished_at, "failure": b.failure,
                                "lane": b.lane, "lease_lapsed": b.lease_lapsed,
                            })
                        })
                        .collect();
                    println!("{}", serde_json::to_string_pretty(&rows)?);
                } else {
                    print!("{}", report::batch_table(&batches));
                }
                Ok(ExitCode::SUCCESS)
            })
            .await
        }
        Command::Promote {
            batch,
            candidate,
            db,
            yes,
        } => {
            reading(&db.db()?, async |store| {
                views::refuse_suite_batch(store, batch, &db.reach()).await?;
                let plan = assay::promote::plan(store, batch, candidate).await?;
                print!("{}", plan.diff());
                if !yes && !confirm(&format!("write {}?", plan.path.display()))? {
                    println!("not written");
                    return Ok(ExitCode::SUCCESS);
                }
                let p = assay::promote::apply(store, plan).await?;
                println!(
                    "promoted candidate {} of batch {} over {} ({}/{} against {}/{})",
                    p.idx, p.batch_id, p.path, p.passed, p.total, p.reference_passed, p.total
                );
                Ok(ExitCode::SUCCESS)
            })
            .await
        }
        Command::Show { batch, db, json } => {
            reading(&db.db()?, async |store| {
                views::refuse_suite_batch(store, batch, &db.reach()).await?;
                if json {
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&views::batch_json(store, batch).await?)?
                    );
                    return Ok(ExitCode::SUCCESS);
                }
                let summary = views::summary(store, batch).await?;
                let lines: Vec<CandidateLine> = store
                    .candidates(batch)
                    .await?
                    .iter()
                    .map(CandidateLine::new)
                    .collect();
                let (figures, _) = views::pool_figures(store, batch).await?;
                print!(
                    "{}{}\n{}",
                    summary.render(),
                    figures.draw_line(),
                    report::candidate_table(&lines)
                );
                Ok(ExitCode::SUCCESS)
            })
            .await
        }
        Command::Compare(args) => compare(args).await,
        Command::Task(command) => task(command).await,
        Command::Ladder(args) => ladder(args).await,
        Command::Export { batch, db, format } => {
            reading(&db.db()?, async |store| {
                views::refuse_suite_batch(store, batch, &db.reach()).await?;
                print!("{}", views::export(store, batch, format).await?);
                Ok(ExitCode::SUCCESS)
            })
            .await
        }
    }
}

/// Asks on the terminal; without one, refuses (a script must say --yes).
fn confirm(question: &str) -> Result<bool> {
    use std::io::{BufRead, IsTerminal, Write};
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        return Err(UsageError(
            "promote: nothing written; pass --yes to write without a terminal to confirm on".into(),
        )
        .into());
    }
    eprint!("{question} [y/N] ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// A flag's value checked by the library's rule, or a usage error naming
/// the flag.
fn checked<T, U>(
    flag: &str,
    value: Option<T>,
    check: impl FnOnce(T) -> Result<U, String>,
) -> Result<Option<U>> {
    match value {
        Some(v) => Ok(Some(
            check(v).map_err(|e| UsageError(format!("{flag}: {e}")))?,
        )),
        None => Ok(None),
    }
}

/// The draw options from the flags every drawing command shares.
pub(crate) fn draw_options(flags: assay::draw::DrawFlags) -> Result<DrawOptions, UsageError> {
    flags.check().map_err(|e| UsageError(e.to_string()))
}

/// A batch stopped by a signal names the command that finishes it, with
/// the flags that reach its store.
fn with_resume_hint(e: anyhow::Error, reach: &Reach) -> anyhow::Error {
    match e.downcast_ref::<Interrupted>() {
        Some(i) => Stopped::batch(i.batch, i.signal, reach).into(),
        None => e,
    }
}

async fn run(args: RunArgs) -> Result<ExitCode> {
    let reach = Reach::new(&args.db.raw, args.out.as_deref());
    run_batch(args)
        .await
        .map_err(|e| with_resume_hint(e, &reach))
}

async fn run_batch(args: RunArgs) -> Result<ExitCode> {
    let wave_size = checked("--wave-size", args.wave_size, WavePolicy::check_size)?;
    let wave_wait = checked("--wave-wait", args.wave_wait, WavePolicy::check_wait)?;
    let build_timeout = checked(
        "--build-timeout",
        args.build_timeout,
        assay::spec::check_build_timeout,
    )?;
    let db = args.db.db()?;
    // A resumed batch says which spec, how many and where its outputs are.
    let resumed = match args.resume {
        Some(batch) => Some(assay::exit::opened_for(
            args.work_item,
            reading(&db, async |store| {
                views::refuse_suite_batch(store, batch, &args.db.reach()).await?;
                Ok((
                    store.batch(batch).await?,
                    store.repair_settings(batch).await?,
                ))
            })
            .await,
        )?),
        None => None,
    };
    let (resumed, resumed_repair) = match resumed {
        Some((row, repair)) => (Some(row), repair),
        None => (None, None),
    };
    let spec = match (&args.spec, &resumed) {
        (Some(path), _) => assay::task::load(path)?,
        (None, Some(row)) => {
            assay::task::load(std::path::Path::new(&row.spec_path)).map_err(|e| {
                let with_spec = CommandLine::assay(["run", "SPEC", "--resume"])
                    .arg(row.id.to_string())
                    .reaching(&args.db.reach());
                UsageError(format!(
                    "batch {}: {e}; pass the task's spec: {with_spec}",
                    row.id
                ))
            })?
        }
        (None, None) => unreachable!("clap requires a spec without --resume"),
    };
    let n = match &resumed {
        Some(row) => row.n,
        None => args.n.unwrap_or(spec.draw.n),
    };
    assay::spec::check_candidates(n).map_err(|e| UsageError(format!("-n: {e}")))?;
    let mode: ProbeMode = args
        .probe
        .parse()
        .map_err(|e: String| UsageError(format!("--probe: {e}")))?;
    let mut probe = pipeline::ProbeSettings::for_spec(&spec);
    probe.mode = mode;
    probe.waves.size = wave_size.unwrap_or(probe.waves.size);
    probe.waves.wait = wave_wait.unwrap_or(probe.waves.wait);
    probe.build_timeout = build_timeout.unwrap_or(probe.build_timeout);
    let draw = draw_options(assay::draw::DrawFlags {
        pools_file: args.pools,
        pools: args.pool,
        split: args.split,
        max_in_flight: args.max_in_flight,
        max_completion_tokens: args.max_completion_tokens,
    })?;
    if args.queue {
        return queue_run(&args.db.db()?, args.json, &spec, n, probe, &draw).await;
    }
    // errors_dir is OUT/batch-N/errors: a resumed batch keeps its folder.
    let resumed_out = resumed.as_ref().and_then(|row| {
        let dir = std::path::Path::new(row.errors_dir.as_deref()?);
        Some(dir.parent()?.parent()?.to_path_buf())
    });
    let outputs = Outputs::resolve(
        &db,
        args.out.as_deref().or(resumed_out.as_deref()),
        args.work_dir.as_deref(),
    )?;
    let rounds = checked("--rounds", args.rounds, assay::spec::check_rounds)?;
    let max_tokens = checked(
        "--max-tokens",
        args.max_tokens,
        assay::spec::check_token_budget,
    )?;
    let mut cfg = RunConfig {
        probe,
        n,
        target_dir: outputs.work.target_dir(),
        work_dir: outputs.work.path.clone(),
        out_dir: outputs.out.clone(),
        spec,
        work_item: args.work_item,
        repair: None,
    };
    let (plan, warnings) = pipeline::prepare(&cfg, &draw)?;
    for w in warnings {
        eprintln!("warning: {w}");
    }
    plan.check_reachable().await?;
    cfg.repair = repairing(
        &cfg,
        &plan,
        &draw,
        rounds,
        args.repair_pool,
        max_tokens,
        resumed_repair,
    )
    .await?;
    // Every path is checked, and an existing database opened, before
    // anything is written; the work directory is made before the task's
    // check builds there, the output folder and a new database once the
    // task is known to be good (a refused task leaves neither).
    outputs.check()?;
    let ran = command_store::running(&outputs.db, async |run_store| {
        let _work = outputs.prepare_work_dir()?;
        let checked = pipeline::check_task(&cfg).await?;
        outputs.prepare_out()?;
        let store = run_store.get().await?;
        store.check_writable().await?;
        let progress = if args.json {
            Progress::hidden()
        } else {
            Progress::stderr()
        };
        let interrupt = Interrupt::on_signals().context("cannot listen for Ctrl-C")?;
        let batch = match resumed {
            Some(row) => {
                pipeline::resume(&cfg, plan, checked, store, &progress, &interrupt, row.id).await?
            }
            None => pipeline::run(&cfg, plan, checked, store, &progress, &interrupt).await?,
        };
        if args.promote {
            assay::promote::promote_best(store, batch).await?;
        }
        if args.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&views::batch_json(store, batch).await?)?
            );
        } else {
            print!("{}", views::summary(store, batch).await?.render());
        }
        Ok(ExitCode::SUCCESS)
    })
    .await;
    assay::exit::opened_for(args.work_item, ran)
}

/// What a batch's repair rounds need, from the flags (a new batch) or
/// from what the batch stored (a resume): `None` when it asks for neither
/// rounds nor a budget. A replay corpus cannot answer a repair prompt.
async fn repairing(
    cfg: &RunConfig,
    plan: &assay::draw::Plan,
    draw: &DrawOptions,
    rounds: Option<u32>,
    repair_pool: Vec<assay::spec::PoolChoice>,
    max_tokens: Option<u64>,
    stored: Option<String>,
) -> Result<Option<pipeline::Repairing>> {
    let settings = match stored {
        Some(json) => assay::repair_round::RepairSettings::from_json(&json),
        None => {
            let mut s = assay::repair_round::RepairSettings::new(&cfg.spec, rounds, cfg.n);
            s.pools = repair_pool.iter().map(ToString::to_string).collect();
            s.max_tokens = max_tokens;
            (s.rounds > 0 || s.max_tokens.is_some()).then_some(s)
        }
    };
    let Some(settings) = settings else {
        return Ok(None);
    };
    let pools: Vec<assay::spec::PoolChoice> = settings
        .pools
        .iter()
        .map(|p| p.parse())
        .collect::<Result<_, _>>()
        .map_err(|e: String| UsageError(format!("--repair-pool: {e}")))?;
    let repair_plan = if pools.is_empty() {
        None
    } else {
        let opts = DrawOptions {
            pools,
            ..draw.clone()
        };
        let (p, warnings) = assay::draw::Plan::build(&cfg.spec, &opts)?;
        for w in warnings {
            eprintln!("warning: {w}");
        }
        p.check_reachable().await?;
        Some(p)
    };
    if settings.rounds > 0 && !repair_plan.as_ref().unwrap_or(plan).can_repair() {
        return Err(UsageError(
            "--rounds: a replay corpus cannot answer a repair prompt; draw from HTTP pools (--pool or --repair-pool)".into(),
        )
        .into());
    }
    Ok(Some(pipeline::Repairing {
        settings,
        plan: repair_plan,
    }))
}

/// `run --queue`: the run as resolved here (flags, their variables, the
/// spec's defaults, the pools file found from here) becomes a queue item;
/// the store, output and work folders are the lane's.
async fn queue_run(
    db: &Db,
    json: bool,
    spec: &assay::spec::Spec,
    n: usize,
    probe: pipeline::ProbeSettings,
    draw: &DrawOptions,
) -> Result<ExitCode> {
    let item = assay::work::WorkItem::Batch(assay::work::BatchRun::resolved(
        spec,
        n,
        probe.mode,
        probe.waves,
        probe.build_timeout,
        draw,
    ));
    let id = command_store::writing(db, async |store| {
        Ok(store.enqueue(item.kind(), &item.to_json()?).await?)
    })
    .await?;
    if json {
        println!("{}", serde_json::json!({ "work_item": id }));
    } else {
        println!(
            "queued as item {id}: `{}` runs it",
            assay::work::lane_command(db)
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn lane(args: LaneArgs) -> Result<ExitCode> {
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

async fn compare(args: CompareArgs) -> Result<ExitCode> {
    // The chart's file is checked before any batch runs or is read.
    if let Some(path) = &args.svg {
        assay::outputs::check_output_file("--svg", path)?;
    }
    if let Some(path) = &args.budget_svg {
        assay::outputs::check_output_file("--budget-svg", path)?;
    }
    let db = args.db.db()?;
    let batches = match &args.spec {
        Some(spec) => {
            if !args.batches.is_empty() {
                return Err(UsageError(
                    "compare: name stored batches or --spec with --pool, not both".into(),
                )
                .into());
            }
            if args.pool.len() < 2 {
                return Err(UsageError("compare --spec: name at least two --pool".into()).into());
            }
            let (cfg, outputs) = sweep_config(spec, args.n, &args.sweep, &db)?;
            let prepared =
                sweep::prepare_per_pool(&cfg, &sweep_draw_options(&args.sweep)?, &args.pool)?;
            for w in &prepared.warnings {
                eprintln!("warning: {w}");
            }
            let _work = outputs.prepare()?;
            let schedule = if args.sequential {
                sweep::Schedule::Sequential
            } else {
                sweep::Schedule::Concurrent
            };
            let progress = if args.json {
                Progress::hidden()
            } else {
                Progress::stderr()
            };
            sweep::run_per_pool(&cfg, prepared, schedule, &db, &progress).await?
        }
        None if args.batches.len() < 2 => {
            return Err(UsageError(
                "compare: name at least two batches, or --spec with two --pool".into(),
            )
            .into())
        }
        None => args.batches.clone(),
    };
    reading(&db, async |store| {
        for &batch in &batches {
            views::refuse_suite_batch(store, batch, &args.db.reach()).await?;
        }
        let (comparison, samples) = views::comparison(store, &batches).await?;
        if let Some(path) = &args.svg {
            write_svg(path, &assay::plot::compare_svg(&samples)?)?;
        }
        // The equal-budget table, when a batch repaired or it is asked for.
        let (budget, curves) = views::budget(store, &batches).await?;
        if let Some(path) = &args.budget_svg {
            write_svg(path, &assay::repair::budget_svg(&budget.figure, &curves)?)?;
        }
        let weigh = args.budget_svg.is_some() || budget.runs.iter().any(|r| r.kind != "resample");
        if args.json {
            let mut value = serde_json::to_value(&comparison)?;
            if weigh {
                value["budget"] = serde_json::to_value(&budget)?;
            }
            println!("{}", serde_json::to_string_pretty(&value)?);
        } else {
            print!("{}", comparison.render());
            if weigh {
                print!("\nat equal output tokens:\n{budget}");
            }
            if args.spec.is_some() && !args.sequential {
                println!("(the batches ran at once: CPU-s of overlapping phases include each other's work; --sequential for separate figures)");
            }
        }
        Ok(ExitCode::SUCCESS)
    })
    .await
}

async fn ladder(args: LadderArgs) -> Result<ExitCode> {
    if let Some(path) = &args.svg {
        assay::outputs::check_output_file("--svg", path)?;
    }
    let db = args.db.db()?;
    let (cfg, outputs) = sweep_config(&args.spec, None, &args.sweep, &db)?;
    let prepared = sweep::prepare_ladder(
        &cfg,
        &sweep_draw_options(&args.sweep)?,
        &args.pool,
        &args.levels,
    )?;
    if let Some((_, _, _, warnings)) = prepared.first() {
        for w in warnings {
            eprintln!("warning: {w}");
        }
    }
    // Written only once every level's plan is known to be good.
    let _work = outputs.prepare()?;
    command_store::writing(&db, async |store| {
        let progress = if args.json {
            Progress::hidden()
        } else {
            Progress::stderr()
        };
        let levels = sweep::run_ladder(prepared, store, &progress).await?;
        let ladder = views::ladder(store, &cfg.spec.name, &args.pool.name, &levels).await?;
        if let Some(path) = &args.svg {
            let svg = assay::plot::ladder_svg(
                &ladder.pool,
                ladder.ranking.as_str(),
                &ladder.points(),
                ladder.peak_level,
            )?;
            write_svg(path, &svg)?;
        }
        if args.json {
            println!("{}", serde_json::to_string_pretty(&ladder)?);
        } else {
            print!("{}", ladder.render());
        }
        Ok(ExitCode::SUCCESS)
    })
    .await
}

/// The run configuration of a command that runs new batches (as `run`
/// builds it), and its outputs, resolved but not yet made: the sweep's
/// plans are checked first.
fn sweep_config(
    spec: &std::path::Path,
    n: Option<usize>,
    args: &SweepArgs,
    db: &Db,
) -> Result<(RunConfig, Outputs)> {
    let spec = assay::task::load(spec)?;
    let n = n.unwrap_or(spec.draw.n);
    assay::spec::check_candidates(n).map_err(|e| UsageError(format!("-n: {e}")))?;
    sweep_draw_options(args)?;
    let outputs = Outputs::resolve(db, args.out.as_deref(), args.work_dir.as_deref())?;
    outputs.check()?;
    let cfg = RunConfig {
        probe: pipeline::ProbeSettings::for_spec(&spec),
        n,
        target_dir: outputs.work.target_dir(),
        work_dir: outputs.work.path.clone(),
        out_dir: outputs.out.clone(),
        spec,
        work_item: None,
        repair: None,
    };
    Ok((cfg, outputs))
}

/// The draw options of a sweep; pools, split and in-flight are the sweep's.
fn sweep_draw_options(args: &SweepArgs) -> Result<DrawOptions, UsageError> {
    draw_options(assay::draw::DrawFlags {
        pools_file: args.pools.clone(),
        max_completion_tokens: args.max_completion_tokens,
        ..Default::default()
    })
}

fn write_svg(path: &std::path::Path, svg: &str) -> Result<()> {
    std::fs::write(path, svg).with_context(|| format!("{}: cannot write the chart", path.display()))
}

async fn task(command: TaskCommand) -> Result<ExitCode> {
    match command {
        TaskCommand::Check {
            spec,
            work_dir,
            build_timeout,
        } => {
            let build_timeout = checked(
                "--build-timeout",
                build_timeout,
                assay::spec::check_build_timeout,
            )?;
            let spec = assay::task::load(&spec)?;
            let work = WorkDir::resolve(work_dir.as_deref())?;
            work.check()?;
            let _work = work.prepare()?;
            let settings = pipeline::ProbeSettings::for_spec(&spec);
            let outcome = assay::task::check(
                &spec,
                &work.path,
                &work.target_dir(),
                build_timeout.unwrap_or(settings.build_timeout),
                assay::task::CacheUse::Refresh,
            )
            .await?;
            let assay::task::Outcome::Checked(report) = outcome else {
                unreachable!("a refreshed check is never a stamp")
            };
            for warning in &report.warnings {
                eprintln!("warning: {warning}");
            }
            print!("{}", report.render(&spec));
            Ok(ExitCode::SUCCESS)
        }
        TaskCommand::New { name, dir } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            assay::task::write_skeleton(&name, &dir)?;
            println!(
                "wrote task `{name}` in {}: spec.toml, prompt.md, harness/, cases.jsonl, \
                 committed.rs, replies.jsonl, ORACLE.md\n\
                 next: make the example yours (docs/tasks.md), then `{}` and `{}`",
                dir.display(),
                CommandLine::assay(["task", "check"]).arg(&dir),
                CommandLine::assay(["run"]).arg(&dir),
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn replay(args: ReplayArgs) -> Result<ExitCode> {
    let mut modes = Vec::new();
    for mode in &args.modes {
        let mode: ProbeMode = mode
            .trim()
            .parse()
            .map_err(|e: String| UsageError(format!("--modes: {e}")))?;
        if !modes.contains(&mode) {
            modes.push(mode);
        }
    }
    if args.runs == 0 {
        return Err(UsageError("--runs: must be at least 1".into()).into());
    }
    let build_timeout = checked(
        "--build-timeout",
        args.build_timeout,
        assay::spec::check_build_timeout,
    )?;
    let work = WorkDir::resolve(args.work_dir.as_deref())?;
    work.check()?;
    let report = reading(&args.db.db()?, async |store| {
        views::refuse_suite_batch(store, args.batch, &args.db.reach()).await?;
        store.check_writable().await?;
        let _work = work.prepare()?;
        let cfg = ReplayConfig {
            build_timeout,
            batch: args.batch,
            modes,
            runs: args.runs,
            work_dir: work.path.clone(),
            fresh: args.fresh,
        };
        assay::replay::replay(store, &cfg).await
    })
    .await?;
    if args.json {
        let mut value = serde_json::to_value(&report)?;
        value["identical"] = report.identical().into();
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!("{}", report.render());
    }
    Ok(if report.identical() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn init_logging(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let default = match verbose {
        // async-openai logs a malformed chunk at error level; assay records it.
        0 => "warn,async_openai=off",
        1 => "assay=info",
        _ => "assay=debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        // Colour only for a person at a terminal, never in a log file.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}
