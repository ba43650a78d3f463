//! `assay suite ...`: problem sets in MultiPL-E's schema. Flags are checked
//! here, before anything is written; the work is `assay::suite_run`'s and
//! the reports `assay::suite_report`'s.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};

use assay::command_store::{self, reading};
use assay::exit::UsageError;
use assay::hint::Reach;
use assay::interrupt::{Interrupt, Stopped};
use assay::outputs::Outputs;
use assay::progress::Progress;
use assay::store::{Store, SuiteId};
use assay::suite_report::SuiteCompare;
use assay::suite_run::{
    DrawSettings, ProblemSet, RepairFlags, RunShape, SuiteConfig, SuiteInput, SuiteInterrupted,
    SuiteLimits,
};
use assay::views;
use assay::work::{DrawChoice, LiveSuitePart, SuitePartRun, WorkItem};

use super::{checked, draw_options, write_svg, DbArg};

#[derive(Subcommand)]
pub enum SuiteCommand {
    /// Run a problem set's completions: build the programs as modules of
    /// shared images (--build), run each in its own sandboxed process, store
    /// it all and report pass@k.
    Run(RunArgs),
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
        #[arg(short, default_value_t = 1, allow_negative_numbers = true)]
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
        /// json (everything, texts and programs included) or csv (figures
        /// and statuses).
        #[arg(long, default_value = "json")]
        format: assay::export::Format,
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
pub struct RunArgs {
    /// The problem set: MultiPL-E's JSONL (name, language, prompt, tests,
    /// stop_tokens).
    #[arg(required_unless_present = "resume")]
    problems: Option<PathBuf>,
    /// The completions: a JSONL of {"name", "completion"} rows, or
    /// MultiPL-E's output directory of .json / .json.gz files.
    #[arg(long, conflicts_with_all = ["resume", "pool"])]
    completions: Option<PathBuf>,
    /// Draw the completions live from this pool (repeatable; NAME=SHARE
    /// for a fixed share), as `run --pool` does; with --resume, the pools
    /// that draw what a killed draw did not store.
    #[arg(long = "pool", value_name = "NAME[=SHARE]")]
    pool: Vec<assay::spec::PoolChoice>,
    /// Completions to draw per problem (with --pool).
    #[arg(short, allow_negative_numbers = true, conflicts_with = "resume")]
    n: Option<usize>,
    /// chat (the prompt wrapped in a request for the whole function in a
    /// fence, the reply extracted) or completion (`/v1/completions` with the
    /// prompt and its stop tokens, for base models, as MultiPL-E draws).
    #[arg(long, default_value = "chat", conflicts_with = "resume")]
    mode: assay::suite::ProgramMode,
    /// The pools file (default: pools.toml beside the problems, else in the
    /// working directory).
    #[arg(long)]
    pools: Option<PathBuf>,
    /// fixed shares, or a race in which every pool keeps its slots full.
    #[arg(long, value_name = "fixed|race")]
    split: Option<assay::spec::SplitMode>,
    /// Requests in flight per pool (overrides the pools file).
    #[arg(long, env = "NEV_CONCURRENCY", allow_negative_numbers = true)]
    max_in_flight: Option<usize>,
    /// Token cap of every request (overrides the pools file).
    #[arg(long, env = "MAX_COMPLETION_TOKENS", allow_negative_numbers = true)]
    max_completion_tokens: Option<u64>,
    /// Finish an interrupted or failed suite: what it stored is kept, only
    /// the programs without an outcome are built and run.
    #[arg(
        long,
        value_name = "SUITE",
        allow_negative_numbers = true,
        conflicts_with = "problems"
    )]
    resume: Option<SuiteId>,
    #[command(flatten)]
    db: DbArg,
    /// Print the suite as one JSON object.
    #[arg(long)]
    json: bool,
    /// Where the suite's outputs go (compiler errors) [default: the
    /// database's name with -out, beside it].
    #[arg(long, env = "ASSAY_OUT")]
    out: Option<PathBuf>,
    /// Where the suite package and its cargo target directory live; kept
    /// warm across suites and databases [default: the toolchain's folder
    /// in ~/.cache/assay/work].
    #[arg(long, env = "ASSAY_WORK_DIR")]
    work_dir: Option<PathBuf>,
    /// Seconds one run of a program (its whole `main`, or one case) may
    /// take [default: 5, MultiPL-E's].
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    run_timeout: Option<f64>,
    /// Seconds one cargo build (up to 100 programs) may run [default: 600].
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    build_timeout: Option<f64>,
    /// How each wave's programs are built: `shared` (one image per wave,
    /// each program a module run in a process of its own) or `isolated`
    /// (one image per program, the reference the shared build agrees with).
    #[arg(long, value_name = "shared|isolated", default_value = "shared")]
    build: assay::exec::BuildMode,
    /// Which cases of a program run alone after its whole `main`: `failed`
    /// (only when the whole `main` failed, for partial credit) or `all`
    /// (also catches a case that fails alone while the whole passes).
    #[arg(long, value_name = "failed|all", default_value = "failed")]
    cases: assay::suite_run::CaseRuns,
    /// Store the suite and queue it in parts for lanes (`assay lane`) to
    /// run (and, with --pool, to draw), instead of running it here.
    #[arg(long, conflicts_with = "resume")]
    queue: bool,
    /// With --queue: problems per queue item [default: as many as make
    /// about 100 programs, one shared build].
    #[arg(long, value_name = "PROBLEMS", requires = "queue")]
    chunk: Option<usize>,
    /// With --resume: only the problems at these positions (from 0), as
    /// a lane runs its part of a queued suite.
    #[arg(long, value_name = "START..END", requires = "resume")]
    part: Option<assay::store::SuitePart>,
    /// The queue item this run is (set by `assay lane`).
    #[arg(long, hide = true, value_name = "ID", requires = "part")]
    work_item: Option<i64>,
    /// Repair rounds after the first draw: each failing completion's
    /// program goes back with the compiler's errors or its failed asserts
    /// (docs/repair.md, Suites).
    #[arg(long, value_name = "R", allow_negative_numbers = true)]
    rounds: Option<u64>,
    /// What a repair prompt carries: `full` (compiler errors, the failed
    /// asserts and their panics) or `errors-only` (no test text at all).
    #[arg(long, value_name = "full|errors-only")]
    feedback: Option<assay::spec::Feedback>,
    /// Draw the repair rounds from this pool instead of --pool's
    /// (repeatable); NAME=SHARE for a fixed share.
    #[arg(long = "repair-pool", value_name = "NAME[=SHARE]")]
    repair_pool: Vec<assay::spec::PoolChoice>,
    /// Start no draw once the suite's replies have spent this many output
    /// tokens (the servers' counts).
    #[arg(long, value_name = "TOKENS", allow_negative_numbers = true)]
    max_tokens: Option<u64>,
}

impl RunArgs {
    fn repair_flags(&self) -> RepairFlags {
        RepairFlags {
            rounds: self.rounds,
            feedback: self.feedback,
            pools: self.repair_pool.clone(),
            max_tokens: self.max_tokens,
        }
    }
}

pub async fn dispatch(command: SuiteCommand) -> Result<ExitCode> {
    match command {
        SuiteCommand::Run(args) => {
            let reach = Reach::new(&args.db.raw, args.out.as_deref());
            run(args)
                .await
                .map_err(|e| match e.downcast_ref::<SuiteInterrupted>() {
                    Some(i) => Stopped::suite(i.suite, i.signal, &reach).into(),
                    None => e,
                })
        }
        SuiteCommand::Show { suite, db, json } => {
            reading(&db.db()?, async |store| {
                let summary = views::suite_summary(store, suite).await?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&summary)?);
                } else {
                    print!("{}", summary.render());
                }
                Ok(ExitCode::SUCCESS)
            })
            .await
        }
        SuiteCommand::Compare {
            a,
            b,
            db,
            k,
            json,
            svg,
        } => {
            if k == 0 {
                return Err(UsageError("-k: must be at least 1".into()).into());
            }
            // The chart's file is checked before anything is read.
            if let Some(path) = &svg {
                assay::outputs::check_output_file("--svg", path)?;
            }
            reading(&db.db()?, async |store| {
                let (sa, sb) = (
                    views::suite_summary(store, a).await?,
                    views::suite_summary(store, b).await?,
                );
                let compared = SuiteCompare::new(&sa, &sb, k)
                    .map_err(|e| UsageError(format!("suite compare {a} {b} -k {k}: {e}")))?;
                if let Some(path) = &svg {
                    let d = &compared.comparison.difference;
                    write_svg(
                        path,
                        &assay::plot::suite_compare_svg(
                            &format!("suite {a}"),
                            &format!("suite {b}"),
                            k,
                            &compared.comparison.problems,
                            (d.diff, d.low, d.high),
                        )?,
                    )?;
                }
                if json {
                    println!("{}", serde_json::to_string_pretty(&compared)?);
                } else {
                    print!("{}", compared.render());
                }
                Ok(ExitCode::SUCCESS)
            })
            .await
        }
        SuiteCommand::Export { suite, db, format } => {
            reading(&db.db()?, async |store| {
                // Refuses an unknown suite (exit 2) rather than exporting nothing.
                store.suite(suite).await?;
                print!("{}", views::suite_export(store, suite, format).await?);
                Ok(ExitCode::SUCCESS)
            })
            .await
        }
        SuiteCommand::List { db, json } => {
            reading(&db.db()?, async |store| {
                let suites = store.suites().await?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&suites)?);
                } else {
                    print!("{}", assay::suite_report::suite_table(&suites));
                }
                Ok(ExitCode::SUCCESS)
            })
            .await
        }
    }
}

async fn run(args: RunArgs) -> Result<ExitCode> {
    let run_wall = checked("--run-timeout", args.run_timeout, |secs| {
        if (0.1..=3600.0).contains(&secs) {
            Ok(std::time::Duration::from_secs_f64(secs))
        } else {
            Err("must be between 0.1 and 3600 seconds".to_owned())
        }
    })?;
    let build_timeout = checked(
        "--build-timeout",
        args.build_timeout,
        assay::spec::check_build_timeout,
    )?
    .unwrap_or(assay::package::BUILD_TIMEOUT);
    let run_wall = run_wall.unwrap_or(SuiteLimits::default().run_wall);
    if args.chunk == Some(0) {
        return Err(UsageError("--chunk: at least 1 problem".into()).into());
    }
    args.repair_flags().check(RunShape {
        live_draw: !args.pool.is_empty(),
        completions: args.completions.is_some(),
        queue: args.queue,
        resume: args.resume.is_some(),
    })?;
    if args.resume.is_none() && args.completions.is_none() && args.pool.is_empty() {
        return Err(UsageError(
            "suite run: name the completions (--completions PATH) or the pools to draw \
             them from (--pool NAME -n K)"
                .into(),
        )
        .into());
    }
    if !args.pool.is_empty() && args.resume.is_none() && args.n.is_none() {
        return Err(UsageError(
            "suite run --pool: say how many completions per problem (-n K)".into(),
        )
        .into());
    }
    // Read and checked whole before anything is written.
    let input = match (&args.problems, &args.completions) {
        (Some(problems), Some(completions)) => {
            Some(SuiteInput::from_completions(problems, completions)?)
        }
        _ => None,
    };
    let set = match (&args.problems, &input) {
        (Some(problems), None) => Some(ProblemSet::read(problems)?),
        _ => None,
    };
    let db = args.db.db()?;
    if args.resume.is_some() {
        // A resume reads its mode and n from the suite: the store must
        // exist, and is never created.
        command_store::must_exist(&db)?;
    }
    // An existing store is opened first: a file that is not a database is
    // found before anything is written.
    let ran = command_store::running(&db, async |run_store| {
        let draw = if args.pool.is_empty() {
            None
        } else {
            let (n, mode, beside) = match args.resume {
                Some(suite) => {
                    let store = run_store.get().await?;
                    let row = store.suite(suite).await?;
                    let n = store
                        .suite_problems(suite)
                        .await?
                        .iter()
                        .map(|p| p.n)
                        .max()
                        .unwrap_or(1);
                    (n, row.mode, PathBuf::from(&row.problems_path))
                }
                None => (
                    args.n.unwrap_or(1),
                    args.mode,
                    args.problems.clone().unwrap_or_default(),
                ),
            };
            Some(draw_settings(&args, n, mode, &beside).await?)
        };
        if args.queue {
            let store = run_store.get().await?;
            store.check_writable().await?;
            let queued = match (&input, &set, &draw) {
                (Some(input), _, _) => Queued {
                    suite: assay::suite_run::queue(input, store).await?,
                    problems: input.set.problems.len(),
                    per_problem: input.completions.iter().map(Vec::len).max().unwrap_or(1),
                    draw: None,
                },
                (None, Some(set), Some(draw)) => Queued {
                    suite: assay::suite_run::queue_draw(set, draw, store).await?,
                    problems: set.problems.len(),
                    per_problem: draw.n,
                    draw: Some(queued_draw(&args, set)?),
                },
                _ => unreachable!("a suite has completions or pools before this"),
            };
            return queue(&args, queued, (run_wall, build_timeout), store).await;
        };
        let outputs = Outputs::resolve(&db, args.out.as_deref(), args.work_dir.as_deref())?;
        let _work = outputs.prepare()?;
        let store = run_store.get().await?;
        store.check_writable().await?;
        let cfg = SuiteConfig {
            out_dir: outputs.out.clone(),
            work_dir: outputs.work.path.clone(),
            limits: SuiteLimits {
                run_wall,
                ..SuiteLimits::default()
            },
            waves: assay::spec::WavePolicy::default(),
            build_timeout,
            build: args.build,
            cases: args.cases,
            work_item: args.work_item,
        };
        let progress = if args.json {
            Progress::hidden()
        } else {
            Progress::stderr()
        };
        let interrupt = Interrupt::on_signals().context("cannot listen for Ctrl-C")?;
        let suite = match (args.resume, &input, &set, &draw) {
            (Some(suite), _, _, _) => {
                let part = args.part.unwrap_or_else(assay::store::SuitePart::all);
                assay::suite_run::resume(
                    &cfg,
                    store,
                    &progress,
                    &interrupt,
                    suite,
                    part,
                    draw.as_ref(),
                )
                .await?
            }
            (None, Some(input), _, _) => {
                assay::suite_run::run(&cfg, input, store, &progress, &interrupt).await?
            }
            (None, None, Some(set), Some(draw)) => {
                assay::suite_run::run_draw(&cfg, set, draw, store, &progress, &interrupt).await?
            }
            _ => unreachable!("checked above: completions, or pools with a problem set"),
        };
        let summary = views::suite_summary(store, suite).await?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&summary)?);
        } else {
            print!("{}", summary.render());
        }
        Ok(ExitCode::SUCCESS)
    })
    .await;
    assay::exit::opened_for(args.work_item, ran)
}

/// A suite stored for lanes, before its items are queued.
struct Queued {
    suite: SuiteId,
    problems: usize,
    /// The most completions of one problem: a part's programs are about
    /// its problems times this.
    per_problem: usize,
    /// A live draw's pools file and choices, for every part.
    draw: Option<(PathBuf, DrawChoice)>,
}

/// The draw a lane's part repeats: the pools file (made absolute, as a
/// lane runs elsewhere), the pools and the overrides, as resolved from
/// flags and their variables. The key is never among them: each lane has
/// its own `NEV_MODEL_API_KEY`.
fn queued_draw(args: &RunArgs, set: &ProblemSet) -> Result<(PathBuf, DrawChoice)> {
    let beside = set.path.parent().unwrap_or(std::path::Path::new("."));
    let pools = pools_file(args, beside)?;
    let pools =
        std::path::absolute(&pools).with_context(|| format!("--pools {}", pools.display()))?;
    let choice = DrawChoice {
        pools: args.pool.clone(),
        split: args.split,
        max_in_flight: args.max_in_flight,
        max_completion_tokens: args.max_completion_tokens,
    };
    Ok((pools, choice))
}

/// `suite run --queue`: one queue item per part of `--chunk` problems of
/// the stored suite, each the part with the run's limits as resolved
/// (`limits`: a run's wall time, a build's), and a live draw's choices;
/// the lane picks the store and the folders.
async fn queue(
    args: &RunArgs,
    queued: Queued,
    (run_timeout, build_timeout): (Duration, Duration),
    store: &Store,
) -> Result<ExitCode> {
    let Queued {
        suite,
        problems,
        per_problem,
        draw,
    } = queued;
    let chunk = args.chunk.unwrap_or((100 / per_problem.max(1)).max(1));
    let mut items = Vec::new();
    for start in (0..problems).step_by(chunk) {
        let part = SuitePartRun {
            suite,
            part: assay::store::SuitePart {
                start,
                end: (start + chunk).min(problems),
            },
            run_timeout,
            build_timeout,
            build: args.build,
            cases: args.cases,
        };
        let item = match &draw {
            None => WorkItem::SuitePart(part),
            Some((pools_file, choice)) => WorkItem::LiveSuitePart(LiveSuitePart {
                part,
                pools_file: pools_file.clone(),
                draw: choice.clone(),
            }),
        };
        items.push(store.enqueue(item.kind(), &item.to_json()?).await?);
    }
    if args.json {
        println!(
            "{}",
            serde_json::json!({ "suite_id": suite, "work_items": items })
        );
    } else {
        println!(
            "suite {suite} queued as {} items of up to {chunk} problems: `{}` runs them",
            items.len(),
            assay::work::lane_command(store.db())
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The pools file: `--pools`, or the default beside the problems.
fn pools_file(args: &RunArgs, beside: &std::path::Path) -> Result<PathBuf> {
    match args
        .pools
        .clone()
        .or_else(|| assay::draw::pools::PoolsFile::default_path(beside))
    {
        Some(path) => Ok(path),
        None => Err(assay::draw::DrawError::NoPoolsFile {
            pool: args.pool[0].name.clone(),
        }
        .into()),
    }
}

/// The live draw's plan from the flags: the pools file (given, or beside
/// the problems, or in the working directory), the pools, the split, the
/// overrides; every pool's server must accept a connection before anything
/// is written (unless the suite is only queued: its lanes draw, and may
/// reach servers this machine cannot).
async fn draw_settings(
    args: &RunArgs,
    n: usize,
    mode: assay::suite::ProgramMode,
    problems: &std::path::Path,
) -> Result<DrawSettings> {
    assay::spec::check_candidates(n).map_err(|e| UsageError(format!("-n: {e}")))?;
    let mut opts = draw_options(assay::draw::DrawFlags {
        pools_file: None,
        pools: args.pool.clone(),
        split: args.split,
        max_in_flight: args.max_in_flight,
        max_completion_tokens: args.max_completion_tokens,
    })?;
    let beside = problems.parent().unwrap_or(std::path::Path::new("."));
    let pools_file = pools_file(args, beside)?;
    opts.pools_file = Some(pools_file.clone());
    let (plan, warnings) = assay::draw::Plan::for_suite(&pools_file, &args.pool, &opts)?;
    for w in warnings {
        eprintln!("warning: {w}");
    }
    if !args.queue {
        plan.check_reachable().await?;
    }
    let repair = args
        .repair_flags()
        .resolve(&pools_file, &opts, !args.queue)
        .await?;
    Ok(DrawSettings {
        plan,
        n,
        mode,
        repair,
    })
}
