//! The `assay` command: parses flags, builds a config, calls the library and
//! maps the outcome to an exit code (0 ok, 1 failed, 2 bad input).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};

use assay::pipeline::{self, RunConfig};
use assay::probe::ProbeMode;
use assay::progress::Progress;
use assay::replay::ReplayConfig;
use assay::report::{self, CandidateLine, Summary};
use assay::spec::Spec;
use assay::store::{BatchId, Store, StoreError};

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
    /// List stored batches.
    Batches {
        #[command(flatten)]
        db: DbArg,
        #[arg(long)]
        json: bool,
    },
    /// Show a stored batch: summary, phases, per-candidate verdicts.
    Show {
        batch: BatchId,
        #[command(flatten)]
        db: DbArg,
        #[arg(long)]
        json: bool,
    },
    /// Probe a stored batch again in one or more modes; exit 1 when any
    /// verdict differs between modes, runs or from the stored one.
    Replay(ReplayArgs),
}

#[derive(Args)]
struct ReplayArgs {
    batch: BatchId,
    #[command(flatten)]
    db: DbArg,
    /// Probe modes to run, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "wide,serial,fast")]
    modes: Vec<String>,
    /// Times to run each mode.
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
    /// Probe in a new, empty work directory (dependencies built first,
    /// untimed) instead of the warm one.
    #[arg(long)]
    fresh: bool,
    /// Output folder; the warm work directory defaults to OUT/work.
    #[arg(long, env = "ASSAY_OUT", default_value = "assay-out")]
    out: PathBuf,
    /// The warm work directory.
    #[arg(long, env = "ASSAY_WORK_DIR")]
    work_dir: Option<PathBuf>,
}

#[derive(Args)]
struct DbArg {
    /// The SQLite database.
    #[arg(long, env = "ASSAY_DB", default_value = "assay.db")]
    db: PathBuf,
}

#[derive(Args)]
struct RunArgs {
    /// The task: a spec.toml or the folder holding one.
    spec: PathBuf,
    #[command(flatten)]
    db: DbArg,
    /// Number of candidates (default: the spec's).
    #[arg(short)]
    n: Option<usize>,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
    /// Where batch outputs go (compiler errors, the scorer).
    #[arg(long, env = "ASSAY_OUT", default_value = "assay-out")]
    out: PathBuf,
    /// Where the generated packages and their cargo target directory live;
    /// kept warm across batches (default: OUT/work).
    #[arg(long, env = "ASSAY_WORK_DIR")]
    work_dir: Option<PathBuf>,
    /// Probe mode: wide, serial or fast (experimental).
    #[arg(long, env = "ASSAY_PROBE", default_value = "wide")]
    probe: String,
}

/// An error that is the user's input, not a failure of the run.
fn is_bad_input(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause.is::<assay::spec::SpecError>()
            || cause.is::<assay::draw::DrawError>()
            || matches!(
                cause.downcast_ref::<StoreError>(),
                Some(
                    StoreError::Open { .. }
                        | StoreError::Migrate { .. }
                        | StoreError::NoBatch { .. }
                )
            )
            || cause.is::<UsageError>()
    })
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct UsageError(String);

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(dispatch(cli.command)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            if is_bad_input(&e) {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

async fn dispatch(command: Command) -> Result<ExitCode> {
    match command {
        Command::Run(args) => run(args).await,
        Command::Replay(args) => replay(args).await,
        Command::Batches { db, json } => {
            let store = Store::open(&db.db).await?;
            let batches = store.batches().await?;
            if json {
                let rows: Vec<_> = batches
                    .iter()
                    .map(|b| {
                        serde_json::json!({
                            "batch_id": b.id, "task": b.task, "pool": b.pool, "n": b.n,
                            "status": b.status.as_str(), "started_at": b.started_at,
                            "finished_at": b.finished_at,
                        })
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                print!("{}", report::batch_table(&batches));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Show { batch, db, json } => {
            let store = Store::open(&db.db).await?;
            let summary = summary(&store, batch).await?;
            let lines: Vec<CandidateLine> = store
                .candidates(batch)
                .await?
                .iter()
                .map(CandidateLine::new)
                .collect();
            if json {
                let mut value = serde_json::to_value(&summary)?;
                value["candidates"] = serde_json::to_value(&lines)?;
                println!("{}", serde_json::to_string_pretty(&value)?);
            } else {
                print!("{}\n{}", summary.render(), report::candidate_table(&lines));
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn run(args: RunArgs) -> Result<ExitCode> {
    let spec = Spec::load(&args.spec)?;
    let n = args.n.unwrap_or(spec.draw.n);
    if n == 0 {
        return Err(UsageError("-n: must be at least 1".into()).into());
    }
    // Absolute, because scoring runs each candidate in its own directory.
    let out = std::path::absolute(&args.out)
        .with_context(|| format!("{}: bad path", args.out.display()))?;
    let work_dir = args.work_dir.unwrap_or_else(|| out.join("work"));
    let work_dir = std::path::absolute(&work_dir)
        .with_context(|| format!("{}: bad path", work_dir.display()))?;
    let mode: ProbeMode = args
        .probe
        .parse()
        .map_err(|e: String| UsageError(format!("--probe: {e}")))?;
    let cfg = RunConfig {
        probe: pipeline::ProbeSettings {
            mode,
            ..Default::default()
        },
        n,
        target_dir: work_dir.join("target"),
        work_dir,
        out_dir: out,
        spec,
    };
    let pool = pipeline::prepare(&cfg)?;
    std::fs::create_dir_all(&cfg.out_dir)
        .with_context(|| format!("cannot create {}", cfg.out_dir.display()))?;
    let store = Store::open(&args.db.db).await?;
    let progress = if args.json {
        Progress::hidden()
    } else {
        Progress::stderr()
    };
    let batch = pipeline::run(&cfg, pool, &store, &progress).await?;
    let summary = summary(&store, batch).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", summary.render());
    }
    store.close().await;
    Ok(ExitCode::SUCCESS)
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
    let work_dir = args.work_dir.unwrap_or_else(|| args.out.join("work"));
    let work_dir = std::path::absolute(&work_dir)
        .with_context(|| format!("{}: bad path", work_dir.display()))?;
    let store = Store::open(&args.db.db).await?;
    let cfg = ReplayConfig {
        batch: args.batch,
        modes,
        runs: args.runs,
        work_dir,
        fresh: args.fresh,
    };
    let report = assay::replay::replay(&store, &cfg).await?;
    store.close().await;
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

async fn summary(store: &Store, batch: BatchId) -> Result<Summary> {
    let row = store.batch(batch).await?;
    let candidates = store.candidates(batch).await?;
    let phases = store.phases(batch).await?;
    Ok(Summary::new(&row, &candidates, phases))
}

fn init_logging(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let default = match verbose {
        0 => "warn",
        1 => "assay=info",
        _ => "assay=debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
}
