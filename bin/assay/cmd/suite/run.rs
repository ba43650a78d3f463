//! `assay suite run`: a problem set's completions built, run and stored,
//! resumed, or queued for lanes.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};

use assay::build::package::BUILD_TIMEOUT;
use assay::engine::suite::{self as suite_run, setup};
use assay::engine::suite::{DrawSettings, ProblemSet, SuiteConfig, SuiteInput, SuiteLimits};
use assay::engine::{command_store, exit::UsageError, interrupt::Interrupt};
use assay::queue::enqueue;
use assay::queue::item::{self, SuiteQueue};
use assay::report::views;
use assay::store::{Store, SuiteId, SuitePart};
use assay::support::progress::Progress;

use crate::args::SuiteRunArgs as RunArgs;

/// A plan's warnings go to stderr as they come.
fn warn(w: &str) {
    eprintln!("warning: {w}");
}

/// What a run works on, as its flags say: every way in is a variant, so
/// no combination of flags is left to refuse later.
enum Source {
    /// A new suite of recorded completions (`PROBLEMS --completions`).
    Completions(SuiteInput),
    /// A new suite drawn live (`PROBLEMS --pool NAME -n K`).
    Draw(ProblemSet),
    /// A stored suite (`--resume SUITE`), or a part of it; with `--pool`,
    /// the pools that draw what a killed draw did not store.
    Resume { suite: SuiteId, part: SuitePart },
}

impl Source {
    /// Reads and checks the input files whole, before anything is
    /// written.
    fn of(args: &RunArgs) -> Result<Source> {
        if let Some(suite) = args.resume {
            let part = args.part.unwrap_or_else(SuitePart::all);
            return Ok(Source::Resume { suite, part });
        }
        let problems = args.problems.as_deref();
        match (problems, &args.completions) {
            (Some(problems), Some(completions)) => Ok(Source::Completions(
                SuiteInput::from_completions(problems, completions)?,
            )),
            (Some(problems), None) if !args.draw.pool.is_empty() => {
                if args.n.is_none() {
                    return Err(UsageError(
                        "suite run --pool: say how many completions per problem (-n K)".into(),
                    )
                    .into());
                }
                Ok(Source::Draw(ProblemSet::read(problems)?))
            }
            _ => Err(UsageError(
                "suite run: name the completions (--completions PATH) or the pools to draw \
                 them from (--pool NAME -n K)"
                    .into(),
            )
            .into()),
        }
    }
}

/// What a run does once its store is open: a new suite (with its live
/// draw resolved), or a resume of a stored one.
enum Work<'a> {
    Completions(&'a SuiteInput),
    Draw(&'a ProblemSet, DrawSettings),
    Resume {
        suite: SuiteId,
        part: SuitePart,
        draw: Option<DrawSettings>,
    },
}

pub async fn run(args: RunArgs) -> Result<ExitCode> {
    let run_wall = args.run_timeout.unwrap_or(SuiteLimits::default().run_wall);
    let build_timeout = args.build_timeout.unwrap_or(BUILD_TIMEOUT);
    let repair = args.repair_flags();
    repair.check_suite(args.run_shape())?;
    let source = Source::of(&args)?;
    let db = args.db.db()?;
    if let Source::Resume { .. } = source {
        // A resume reads its mode and n from the suite: the store must
        // exist, and is never created.
        command_store::must_exist(&db)?;
    }
    // An existing store is opened first: a file that is not a database is
    // found before anything is written.
    let ran = command_store::running(&db, async |run_store| {
        let work = match &source {
            Source::Completions(input) => Work::Completions(input),
            Source::Draw(set) => {
                let (flags, n) = (args.draw.flags(), args.n.unwrap_or(1));
                let draw = setup::draw_settings(
                    flags, &repair, n, args.mode, &set.path, args.queue, &warn,
                );
                Work::Draw(set, draw.await?)
            }
            Source::Resume { suite, part } => {
                let draw = if args.draw.pool.is_empty() {
                    None
                } else {
                    let (store, flags) = (run_store.get().await?, args.draw.flags());
                    let draw =
                        setup::resumed_draw(store, *suite, flags, &repair, args.queue, &warn);
                    Some(draw.await?)
                };
                Work::Resume {
                    suite: *suite,
                    part: *part,
                    draw,
                }
            }
        };
        if args.queue {
            let store = run_store.get().await?;
            store.check_writable().await?;
            return queue(&args, &work, (run_wall, build_timeout), store).await;
        }
        let outputs = args.output.resolve(&db)?;
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
            edition: args.edition,
            cases: args.cases,
            work_item: args.work_item,
        };
        let progress = Progress::unless_json(args.json);
        let interrupt = Interrupt::on_signals().context("cannot listen for Ctrl-C")?;
        let suite = match &work {
            Work::Completions(input) => {
                suite_run::run(&cfg, input, store, &progress, &interrupt).await?
            }
            Work::Draw(set, draw) => {
                suite_run::run_draw(&cfg, set, draw, store, &progress, &interrupt).await?
            }
            Work::Resume { suite, part, draw } => {
                suite_run::resume(
                    &cfg,
                    store,
                    &progress,
                    &interrupt,
                    *suite,
                    *part,
                    draw.as_ref(),
                )
                .await?
            }
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
    assay::engine::exit::opened_for(args.work_item, ran)
}

/// `suite run --queue`: the new suite is stored, then one queue item per
/// part of it (`queue::item::SuiteQueue`), each with the run's limits as resolved
/// (`limits`: a run's wall time, a build's) and a live draw's choices; the
/// lane picks the store and the folders.
async fn queue(
    args: &RunArgs,
    work: &Work<'_>,
    (run_timeout, build_timeout): (Duration, Duration),
    store: &Store,
) -> Result<ExitCode> {
    let (suite, problems, per_problem, draw) = match work {
        Work::Completions(input) => (
            suite_run::queue(input, args.edition, store).await?,
            input.set.problems.len(),
            input.completions.iter().map(Vec::len).max().unwrap_or(1),
            None,
        ),
        Work::Draw(set, draw) => (
            suite_run::queue_draw(set, draw, args.edition, store).await?,
            set.problems.len(),
            draw.n,
            Some(enqueue::queued_draw(&args.draw.flags(), &set.path)?),
        ),
        Work::Resume { .. } => {
            return Err(UsageError("--queue: a stored suite is resumed, not queued".into()).into())
        }
    };
    let parts = SuiteQueue {
        suite,
        problems,
        per_problem,
        chunk: args.chunk,
        run_timeout,
        build_timeout,
        build: args.build,
        cases: args.cases,
        draw,
    };
    let items = enqueue::enqueue(&parts, store).await?;
    if args.json {
        println!(
            "{}",
            serde_json::json!({ "suite_id": suite, "work_items": items })
        );
    } else {
        println!(
            "suite {suite} queued as {} items of up to {} problems: `{}` runs them",
            items.len(),
            parts.chunk(),
            item::lane_command(store.db())
        );
    }
    Ok(ExitCode::SUCCESS)
}
