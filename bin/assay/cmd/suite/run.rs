//! `assay suite run`: a problem set's completions built, run and stored,
//! resumed, or queued for lanes.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};

use assay::command_store;
use assay::exit::UsageError;
use assay::outputs::Outputs;
use assay::progress::Progress;
use assay::store::{Store, SuiteId};
use assay::suite_run::{DrawSettings, ProblemSet, SuiteConfig, SuiteInput, SuiteLimits};
use assay::views;
use assay::work::{DrawChoice, LiveSuitePart, SuitePartRun, WorkItem};

use crate::args::SuiteRunArgs as RunArgs;
use crate::cmd::{checked, draw_options};
use assay::interrupt::Interrupt;

pub async fn run(args: RunArgs) -> Result<ExitCode> {
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
            "suite {suite} queued as {} items of up to {chunk} problems: `assay lane` runs them",
            items.len()
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
    Ok(DrawSettings { plan, n, mode })
}
