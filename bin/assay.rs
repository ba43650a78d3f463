//! The `assay` command: parses flags, builds a config, calls the library and
//! maps the outcome to an exit code (0 ok, 1 failed, 2 bad input).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};

use assay::draw::DrawOptions;
use assay::interrupt::{Interrupt, Interrupted};
use assay::pipeline::{self, RunConfig};
use assay::progress::Progress;
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
    /// Write an admitted candidate that beat the reference in its batch over
    /// the task's committed file, with a provenance header.
    Promote {
        batch: BatchId,
        candidate: usize,
        #[command(flatten)]
        db: DbArg,
    },
}

#[derive(Args)]
struct DbArg {
    /// The SQLite database.
    #[arg(long, env = "ASSAY_DB", default_value = "assay.db")]
    db: PathBuf,
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
    #[arg(short, env = "NEV_CANDIDATES", conflicts_with = "resume")]
    n: Option<usize>,
    /// Finish an interrupted or failed batch: what it stored is kept, only
    /// the rest is drawn, probed and scored.
    #[arg(long, value_name = "BATCH")]
    resume: Option<BatchId>,
    /// The pools file (default: pools.toml beside the spec, else in the
    /// working directory).
    #[arg(long)]
    pools: Option<PathBuf>,
    /// Draw from this pool (repeatable); NAME=SHARE for a fixed share.
    /// Overrides the spec's `draw.pools`.
    #[arg(long = "pool", value_name = "NAME[=SHARE]")]
    pool: Vec<assay::draw::PoolChoice>,
    /// How the batch is split over its pools: fixed shares, or a race in
    /// which every pool keeps its slots full until N replies are in.
    #[arg(long, value_name = "fixed|race")]
    split: Option<assay::draw::SplitMode>,
    /// Requests in flight per pool (overrides the pools file).
    #[arg(long, env = "NEV_CONCURRENCY")]
    max_in_flight: Option<usize>,
    /// Token cap of every request (overrides the pools file).
    #[arg(long, env = "MAX_COMPLETION_TOKENS")]
    max_completion_tokens: Option<u64>,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
    /// Where batch outputs go (compiler errors, the scorer) [default:
    /// assay-out; with --resume, where the batch's outputs already are].
    #[arg(long, env = "ASSAY_OUT")]
    out: Option<PathBuf>,
    /// Where the generated packages and their cargo target directory live;
    /// kept warm across batches (default: OUT/work).
    #[arg(long, env = "ASSAY_WORK_DIR")]
    work_dir: Option<PathBuf>,
    /// Write the best admitted candidate over the task's committed file when
    /// it beat the committed one in this batch.
    #[arg(long)]
    promote: bool,
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
                        | StoreError::TooNew { .. }
                        | StoreError::ReadOnly { .. }
                        | StoreError::NotResumable { .. }
                )
            )
            || cause.is::<UsageError>()
            || cause.is::<assay::promote::PromoteError>()
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
    let outcome = runtime.block_on(dispatch(cli.command));
    // A blocking task may still wait (for a task package's lock, after
    // Ctrl-C); dropping the runtime would wait for it forever.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match outcome {
        Ok(code) => code,
        Err(e) => {
            if let Some(stopped) = e.downcast_ref::<Interrupted>() {
                // Not an error: the user asked for it, and nothing was lost.
                eprintln!("assay: {stopped}");
                return ExitCode::from(130);
            }
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
        Command::Batches { db, json } => {
            let store = open_store(&db.db).await?;
            let batches = store.batches().await?;
            if json {
                let rows: Vec<_> = batches
                    .iter()
                    .map(|b| {
                        serde_json::json!({
                            "batch_id": b.id, "task": b.task, "pool": b.pool, "n": b.n,
                            "status": b.status.as_str(), "started_at": b.started_at,
                            "finished_at": b.finished_at, "failure": b.failure,
                        })
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                print!("{}", report::batch_table(&batches));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Promote {
            batch,
            candidate,
            db,
        } => {
            let store = open_store(&db.db).await?;
            let p = assay::promote::promote(&store, batch, candidate).await?;
            println!(
                "promoted candidate {} of batch {} over {} ({}/{} against {}/{})",
                p.idx, p.batch_id, p.path, p.passed, p.total, p.reference_passed, p.total
            );
            store.close().await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Show { batch, db, json } => {
            let store = open_store(&db.db).await?;
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

/// Opens the database and marks batches whose process died as interrupted,
/// so every command sees the truth. The marking is best effort: a database
/// that cannot be written is still readable.
async fn open_store(path: &std::path::Path) -> Result<Store> {
    let store = Store::open(path).await?;
    if let Err(e) = assay::resume::interrupt_dead_batches(&store).await {
        tracing::warn!("cannot mark dead batches interrupted: {e}");
    }
    Ok(store)
}

async fn run(args: RunArgs) -> Result<ExitCode> {
    // A resumed batch says which spec, how many and where its outputs are.
    let resumed = match args.resume {
        Some(batch) => {
            if !args.db.db.exists() {
                return Err(StoreError::NoBatch {
                    path: args.db.db.clone(),
                    id: batch,
                }
                .into());
            }
            let store = open_store(&args.db.db).await?;
            let row = store.batch(batch).await?;
            store.close().await;
            Some(row)
        }
        None => None,
    };
    let spec = match (&args.spec, &resumed) {
        (Some(path), _) => Spec::load(path)?,
        (None, Some(row)) => Spec::load(std::path::Path::new(&row.spec_path)).map_err(|e| {
            UsageError(format!(
                "batch {}: {e}; pass the task's spec: assay run SPEC --resume {}",
                row.id, row.id
            ))
        })?,
        (None, None) => unreachable!("clap requires a spec without --resume"),
    };
    let n = match &resumed {
        Some(row) => row.n,
        None => args.n.unwrap_or(spec.draw.n),
    };
    if n == 0 {
        return Err(UsageError("-n: must be at least 1".into()).into());
    }
    let out = match (&args.out, &resumed) {
        (Some(out), _) => out.clone(),
        // errors_dir is OUT/batch-N/errors.
        (None, Some(row)) => row
            .errors_dir
            .as_deref()
            .and_then(|d| std::path::Path::new(d).parent()?.parent())
            .map_or_else(|| PathBuf::from("assay-out"), PathBuf::from),
        (None, None) => PathBuf::from("assay-out"),
    };
    // Absolute, because scoring runs each candidate in its own directory.
    let out = std::path::absolute(&out).with_context(|| format!("{}: bad path", out.display()))?;
    let work_dir = args.work_dir.unwrap_or_else(|| out.join("work"));
    let work_dir = std::path::absolute(&work_dir)
        .with_context(|| format!("{}: bad path", work_dir.display()))?;
    let cfg = RunConfig {
        n,
        target_dir: work_dir.join("target"),
        work_dir,
        out_dir: out,
        spec,
    };
    if args.max_in_flight == Some(0) {
        return Err(
            UsageError("--max-in-flight (NEV_CONCURRENCY): must be at least 1".into()).into(),
        );
    }
    if args.max_completion_tokens == Some(0) {
        return Err(UsageError(
            "--max-completion-tokens (MAX_COMPLETION_TOKENS): must be at least 1".into(),
        )
        .into());
    }
    let draw = DrawOptions {
        pools_file: args.pools,
        pools: args.pool,
        split: args.split,
        max_in_flight: args.max_in_flight,
        max_completion_tokens: args.max_completion_tokens,
        // Read here and held as a secret from now on; never a flag (a flag
        // would show in `ps`).
        default_key: std::env::var("NEV_MODEL_API_KEY")
            .ok()
            .filter(|k| !k.is_empty())
            .map(secrecy::SecretString::from),
    };
    let (plan, warnings) = pipeline::prepare(&cfg, &draw)?;
    for w in warnings {
        eprintln!("warning: {w}");
    }
    plan.check_reachable().await?;
    assay::casecheck::check(&cfg.spec, &cfg.work_dir, &cfg.target_dir).await?;
    let store = open_store(&args.db.db).await?;
    store.check_writable().await?;
    std::fs::create_dir_all(&cfg.out_dir)
        .with_context(|| format!("cannot create {}", cfg.out_dir.display()))?;
    let progress = if args.json {
        Progress::hidden()
    } else {
        Progress::stderr()
    };
    let interrupt = Interrupt::on_signals().context("cannot listen for Ctrl-C")?;
    let batch = match resumed {
        Some(row) => pipeline::resume(&cfg, plan, &store, &progress, &interrupt, row.id).await?,
        None => pipeline::run(&cfg, plan, &store, &progress, &interrupt).await?,
    };
    if args.promote {
        assay::promote::promote_best(&store, batch).await?;
    }
    let summary = summary(&store, batch).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", summary.render());
    }
    store.close().await;
    Ok(ExitCode::SUCCESS)
}

async fn summary(store: &Store, batch: BatchId) -> Result<Summary> {
    let row = store.batch(batch).await?;
    let candidates = store.candidates(batch).await?;
    let phases = store.phases(batch).await?;
    let mut summary = Summary::new(&row, &candidates, phases);
    summary.resumes = store.resumes(batch).await?;
    summary.promotions = store
        .promotions(batch)
        .await?
        .iter()
        .map(report::Promotion::new)
        .collect();
    Ok(summary)
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
        .init();
}
