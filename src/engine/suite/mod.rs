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
//! without an outcome.
//!
//! A live draw with repair rounds (`--rounds`) has `rounds` as
//! its producer: each round's completions go down the same stream, and the
//! next round is planned from what the last one's programs came to.

mod draw;
mod rounds;
pub mod setup;
mod stream;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;

use crate::draw::{Drawn, Outcome, Reply};
use crate::engine::interrupt::{Interrupt, Run};
use crate::repair::RepairSettings;
use crate::spec::{Edition, WavePolicy};
use crate::store::{
    BatchId, BatchStatus, Claim, NewCompletion, NewProblem, NewSuite, Store, StoreError, SuiteId,
    SuiteOrigin, SuitePart,
};
use crate::suite::SuiteError;
use crate::suite::{Completions, Problem, ProgramMode};
use crate::support::account::{Phase, PhaseGuard};
use crate::support::owner::Owner;
use crate::support::progress::Progress;
use crate::text::dedup;
use crate::text::extract::{Extraction, NoCode};

pub use draw::DrawSettings;
use draw::{Ask, ProblemDraw, SuiteDraw};
pub use rounds::resolve as resolve_repair;
use rounds::{Resume, Rounds};
use stream::{Programs, Stream, Work};

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

/// A problem set, read and checked.
#[derive(Debug, Clone)]
pub struct ProblemSet {
    pub path: PathBuf,
    /// blake3 (hex) of the file.
    pub digest: String,
    pub problems: Vec<Problem>,
    /// The line of each problem.
    lines: Vec<usize>,
}

/// A suite's input, read and checked before anything is written.
#[derive(Debug, Clone)]
pub struct SuiteInput {
    pub set: ProblemSet,
    /// The completions' path.
    pub source: String,
    pub mode: ProgramMode,
    /// Each problem's completions, in input order.
    pub completions: Vec<Vec<String>>,
}

/// The pool name of completions read from a file.
pub const COMPLETIONS_POOL: &str = "completions";

impl ProblemSet {
    /// Reads a problem set (MultiPL-E's JSONL).
    pub fn read(path: &Path) -> Result<ProblemSet, SuiteError> {
        let text =
            crate::support::input::read_to_string(path).map_err(|source| SuiteError::Read {
                file: path.to_path_buf(),
                source,
            })?;
        Ok(ProblemSet {
            path: path.to_path_buf(),
            digest: blake3::hash(text.as_bytes()).to_hex().to_string(),
            problems: crate::suite::problem::parse_problems(path, &text)?,
            lines: problem_lines(&text),
        })
    }
}

impl SuiteInput {
    /// Reads a problem set and its completions (a flat JSONL or MultiPL-E's
    /// output directory). Every problem needs at least one completion: a
    /// problem without one has no pass@k, and the suite's mean would not be
    /// the suite's.
    pub fn from_completions(problems: &Path, completions: &Path) -> Result<SuiteInput, SuiteError> {
        let set = ProblemSet::read(problems)?;
        let read = Completions::load(completions, &set.problems)?;
        let grouped: Vec<Vec<String>> = read
            .per_problem(&set.problems)?
            .into_iter()
            .map(|cs| cs.into_iter().map(str::to_owned).collect())
            .collect();
        for (i, cs) in grouped.iter().enumerate() {
            if cs.is_empty() {
                return Err(SuiteError::Invalid {
                    file: problems.to_path_buf(),
                    line: set.lines.get(i).copied(),
                    field: Some("name"),
                    message: format!(
                        "problem `{}` has no completion in {}",
                        set.problems[i].name,
                        completions.display()
                    ),
                });
            }
        }
        Ok(SuiteInput {
            set,
            source: std::path::absolute(completions)
                .unwrap_or_else(|_| completions.to_path_buf())
                .display()
                .to_string(),
            mode: ProgramMode::Completion,
            completions: grouped,
        })
    }
}

/// The line of each problem (the file's non-blank lines, as
/// `load_problems` reads them).
fn problem_lines(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, _)| i + 1)
        .collect()
}

/// A suite of completions stored, nothing run yet.
struct Staged {
    suite: SuiteId,
    batches: Vec<BatchId>,
    extractions: Vec<Vec<Extraction>>,
    groups: Vec<Vec<Option<usize>>>,
}

/// Runs a suite of completions read from files to the end; returns its id.
pub async fn run(
    cfg: &SuiteConfig,
    input: &SuiteInput,
    store: &Store,
    progress: &Progress,
    interrupt: &Interrupt,
) -> Result<SuiteId> {
    let guard = PhaseGuard::start(Phase::Prepare);
    let Staged {
        suite,
        batches,
        extractions,
        groups,
    } = stage(input, cfg.edition, store).await?;
    let problems = &input.set.problems;
    let (programs, rx) = Programs::new();
    for (p, problem) in problems.iter().enumerate() {
        let mut ids = vec![None; groups[p].len()];
        for (i, extraction) in extractions[p].iter().enumerate() {
            let Extraction::Source(program) = extraction else {
                continue;
            };
            match groups[p][i] {
                None => ids[i] = Some(programs.add(Work::new(batches[p], p, problem, i, program))),
                Some(rep) => {
                    let id = ids[rep].expect("a representative comes before its duplicates");
                    programs.share(id, i);
                }
            }
        }
    }
    let producer = async { Ok(None) };
    drive(
        cfg,
        store,
        progress,
        interrupt,
        suite,
        SuitePart::all(),
        &programs,
        rx,
        producer,
        guard,
    )
    .await
}

/// Stores a suite of completions (its input, programs and groups, in one
/// transaction), to be built in `edition`, and runs nothing.
async fn stage(input: &SuiteInput, edition: Edition, store: &Store) -> Result<Staged> {
    let problems = &input.set.problems;
    // Everything pure first: the programs, their fingerprints and their
    // groups, so the suite's input is stored in one transaction.
    let mut drawn: Vec<Vec<Drawn>> = Vec::with_capacity(problems.len());
    let mut extractions: Vec<Vec<Extraction>> = Vec::with_capacity(problems.len());
    let mut fingerprints: Vec<Vec<Option<String>>> = Vec::with_capacity(problems.len());
    let mut groups: Vec<Vec<Option<usize>>> = Vec::with_capacity(problems.len());
    for (problem, completions) in problems.iter().zip(&input.completions) {
        let d: Vec<Drawn> = completions
            .iter()
            .enumerate()
            .map(|(idx, c)| Drawn {
                idx,
                pool: COMPLETIONS_POOL.to_owned(),
                reply: Reply {
                    content: Some(c.clone()),
                    outcome: Outcome::Ok,
                    ..Reply::default()
                },
            })
            .collect();
        let programs: Vec<String> = completions
            .iter()
            .map(|c| input.mode.program(problem, c))
            .collect();
        let keys: Vec<Key> = programs.iter().map(|p| Key::of(p)).collect();
        groups.push(duplicates(&keys));
        fingerprints.push(keys.iter().map(Key::fingerprint).collect());
        extractions.push(programs.into_iter().map(Extraction::Source).collect());
        drawn.push(d);
    }
    let new_problems: Vec<NewProblem> = problems
        .iter()
        .enumerate()
        .map(|(p, problem)| NewProblem {
            problem,
            n: drawn[p].len(),
            completions: (0..drawn[p].len())
                .map(|i| NewCompletion {
                    drawn: &drawn[p][i],
                    extraction: &extractions[p][i],
                    fingerprint: fingerprints[p][i].clone(),
                    dup_of: groups[p][i],
                })
                .collect(),
        })
        .collect();
    let (suite, batches) = store
        .begin_suite(
            &NewSuite {
                problems_path: &input.set.path,
                problems_digest: &input.set.digest,
                origin: SuiteOrigin::Completions,
                source: &input.source,
                mode: input.mode,
                edition,
                problems: &new_problems,
            },
            &Owner::current(),
        )
        .await?;
    tracing::info!(suite, problems = batches.len(), "suite started");
    Ok(Staged {
        suite,
        batches,
        extractions,
        groups,
    })
}

/// `suite run --queue`: the suite stored, nothing run, its batches left for
/// lanes to resume part by part (`resume` with a `SuitePart`) in `edition`.
pub async fn queue(input: &SuiteInput, edition: Edition, store: &Store) -> Result<SuiteId> {
    let staged = stage(input, edition, store).await?;
    store
        .finish_suite(
            staged.suite,
            &Owner::current(),
            BatchStatus::Interrupted,
            Some("queued: lanes run it"),
        )
        .await?;
    Ok(staged.suite)
}

/// `suite run --pool ... --queue`: the suite stored with its problems and
/// no completions, for lanes to draw and run part by part (`resume` with
/// a `SuitePart` and the pools) in `edition`.
pub async fn queue_draw(
    set: &ProblemSet,
    settings: &DrawSettings,
    edition: Edition,
    store: &Store,
) -> Result<SuiteId> {
    let (suite, _) = begin_draw(set, settings, edition, store).await?;
    store
        .finish_suite(
            suite,
            &Owner::current(),
            BatchStatus::Interrupted,
            Some("queued: lanes draw and run it"),
        )
        .await?;
    Ok(suite)
}

/// A live suite stored with its problems, `settings.n` each, and no
/// completions yet, to be built in `edition`.
async fn begin_draw(
    set: &ProblemSet,
    settings: &DrawSettings,
    edition: Edition,
    store: &Store,
) -> Result<(SuiteId, Vec<BatchId>)> {
    let new_problems: Vec<NewProblem> = set
        .problems
        .iter()
        .map(|problem| NewProblem {
            problem,
            n: settings.n,
            completions: Vec::new(),
        })
        .collect();
    let label = settings.plan.label();
    let begun = store
        .begin_suite(
            &NewSuite {
                problems_path: &set.path,
                problems_digest: &set.digest,
                origin: SuiteOrigin::Pool,
                source: &label,
                mode: settings.mode,
                edition,
                problems: &new_problems,
            },
            &Owner::current(),
        )
        .await?;
    tracing::info!(suite = begun.0, problems = begun.1.len(), pools = %label, "suite draw stored");
    Ok(begun)
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
    let (suite, batches) = begin_draw(set, settings, cfg.edition, store).await?;
    let repair = settings.repair.settings.as_ref();
    if let Some(repair) = repair {
        store.begin_suite_repair(suite, &repair.to_json()).await?;
    }
    let (programs, rx) = Programs::new();
    let mut jobs: Vec<ProblemDraw> = set
        .problems
        .iter()
        .zip(&batches)
        .enumerate()
        .map(|(pos, (problem, batch))| ProblemDraw::fresh(*batch, pos, problem.clone()))
        .collect();
    let draw = SuiteDraw {
        settings,
        store,
        progress,
        programs: &programs,
        spent: 0.into(),
        budget: repair.and_then(|r| r.max_tokens),
    };
    let producer = async {
        match repair {
            None => draw.run(&mut jobs, &Ask::First).await.map(Some),
            Some(repair) => {
                let rounds = Rounds {
                    suite,
                    settings: repair,
                    draw: &draw,
                    store,
                    progress,
                };
                rounds.run(&mut jobs, Resume::First).await.map(|()| None)
            }
        }
    };
    drive(
        cfg,
        store,
        progress,
        interrupt,
        suite,
        SuitePart::all(),
        &programs,
        rx,
        producer,
        guard,
    )
    .await
}

/// Finishes an interrupted or failed suite: takes its unfinished batches
/// over (one process wins), draws the completions a live draw did not
/// store (from `settings`' pools, which it then needs), and builds and runs
/// only the programs without a stored outcome.
pub async fn resume(
    cfg: &SuiteConfig,
    store: &Store,
    progress: &Progress,
    interrupt: &Interrupt,
    suite: SuiteId,
    part: SuitePart,
    settings: Option<&DrawSettings>,
) -> Result<SuiteId> {
    let guard = PhaseGuard::start(Phase::Prepare);
    let not_resumable = |why: String| StoreError::NotResumable {
        db: store.db().clone(),
        id: suite,
        why,
    };
    let row = store.suite(suite).await?;
    // Its programs are read in the edition it was started in, whatever
    // the flags say.
    let cfg = &SuiteConfig {
        edition: row.edition,
        ..cfg.clone()
    };
    let problems = store.suite_problems(suite).await?;
    let completions = store.suite_completions(suite).await?;
    // The first draw's: repair rounds' completions come on top of `n`.
    let missing: usize = problems
        .iter()
        .enumerate()
        .filter(|(pos, _)| part.contains(*pos))
        .map(|(_, p)| {
            let stored = completions
                .iter()
                .filter(|c| c.batch_id == p.batch_id && c.round == 0)
                .count();
            p.n.saturating_sub(stored)
        })
        .sum();
    if missing > 0 && settings.is_none() && row.status != BatchStatus::Finished {
        return Err(not_resumable(format!(
            "lacks {missing} completions of its draw from {}; name the pools again \
             (--pool, --pools) to draw them",
            row.source
        ))
        .into());
    }
    let repair = match store.suite_repair(suite).await? {
        Some(json) => Some(RepairSettings::from_json(&json).ok_or_else(|| {
            not_resumable(format!("has repair settings assay cannot read: {json}"))
        })?),
        None => None,
    };
    let at = match &repair {
        Some(_) => Some(rounds::resume_point(store, suite).await?),
        None => None,
    };
    if let (Some(repair), Some(at)) = (&repair, at) {
        if part != SuitePart::all() {
            return Err(not_resumable(
                "is a suite with repair rounds, which run over every problem; resume it without --part"
                    .into(),
            )
            .into());
        }
        let to_draw = at != Resume::Stopped && row.status != BatchStatus::Finished;
        match settings {
            None if to_draw => {
                return Err(not_resumable(format!(
                    "has repair rounds to go on with, drawn from {}; name the pools again \
                     (--pool, --pools) to draw them",
                    row.source
                ))
                .into())
            }
            Some(s) if to_draw && !repair.pools.is_empty() && s.repair.plan.is_none() => {
                return Err(not_resumable(format!(
                    "drew its repair rounds from {}; name them again (--repair-pool)",
                    repair.pools.join(", ")
                ))
                .into())
            }
            _ => {}
        }
    }
    match store
        .claim_suite_for_resume(suite, &part, &Owner::current())
        .await?
    {
        Claim::Claimed => {
            if let Some(item) = cfg.work_item {
                store.attach_suite_part(item, suite, &part).await?;
            }
        }
        // A lane's part that an earlier claim finished: nothing is left.
        Claim::Finished if part != SuitePart::all() => return Ok(suite),
        Claim::Finished => {
            return Err(not_resumable("is a finished suite; nothing to resume".into()).into())
        }
        Claim::Running(_) => return Err(not_resumable("is a suite still running".into()).into()),
    }
    let (programs, rx) = Programs::new();
    let mut jobs = Vec::new();
    for (pos, p) in problems.iter().enumerate() {
        if !part.contains(pos) {
            continue;
        }
        let of_problem: Vec<_> = completions
            .iter()
            .filter(|c| c.batch_id == p.batch_id)
            .collect();
        let mut job = ProblemDraw::fresh(p.batch_id, pos, p.problem.clone());
        // Representatives first, so every duplicate finds its program.
        for c in of_problem.iter().filter(|c| c.dup_of.is_none()) {
            job.stored.insert(c.idx);
            let Some(Extraction::Source(program)) = &c.extraction else {
                let server_failed = c.extraction == Some(Extraction::Failed(NoCode::DrawFailed));
                if c.outcome.is_none() && !server_failed {
                    draw::store_no_program(store, p.batch_id, c.idx).await?;
                }
                continue;
            };
            let work = Work::new(p.batch_id, pos, &p.problem, c.idx, program);
            let id = match &c.outcome {
                None => programs.add(work),
                // Done: a duplicate drawn now gets its row.
                Some(row) => programs.add_done(work, row),
            };
            job.keys.insert(Key::of(program), (id, c.idx));
        }
        for c in of_problem.iter().filter(|c| c.dup_of.is_some()) {
            job.stored.insert(c.idx);
            if c.outcome.is_some() {
                continue;
            }
            let rep = c.dup_of.expect("filtered");
            let Some(Extraction::Source(program)) = of_problem
                .iter()
                .find(|r| r.idx == rep)
                .and_then(|r| r.extraction.as_ref())
            else {
                continue;
            };
            let (id, _) = job.keys[&Key::of(program)];
            if let Some(row) = programs.share(id, c.idx) {
                store
                    .record_suite_outcome(p.batch_id, &[c.idx], &row)
                    .await?;
            }
        }
        job.n = p.n;
        jobs.push(job);
    }
    tracing::info!(suite, programs = programs.count(), missing, "suite resumed");
    let spent: u64 = completions
        .iter()
        .filter_map(|c| c.drawn.reply.completion_tokens)
        .sum();
    match (settings, &repair, at) {
        (Some(settings), Some(repair), Some(at)) => {
            let draw = SuiteDraw {
                settings,
                store,
                progress,
                programs: &programs,
                spent: spent.into(),
                budget: repair.max_tokens,
            };
            let rounds = Rounds {
                suite,
                settings: repair,
                draw: &draw,
                store,
                progress,
            };
            let producer = async { rounds.run(&mut jobs, at).await.map(|()| None) };
            drive(
                cfg, store, progress, interrupt, suite, part, &programs, rx, producer, guard,
            )
            .await
        }
        (Some(settings), _, _) if missing > 0 => {
            let draw = SuiteDraw {
                settings,
                store,
                progress,
                programs: &programs,
                spent: spent.into(),
                budget: None,
            };
            let producer = async { draw.run(&mut jobs, &Ask::First).await.map(Some) };
            drive(
                cfg, store, progress, interrupt, suite, part, &programs, rx, producer, guard,
            )
            .await
        }
        _ => {
            let producer = async { Ok(None) };
            drive(
                cfg, store, progress, interrupt, suite, part, &programs, rx, producer, guard,
            )
            .await
        }
    }
}

/// What makes two programs of a problem one: the exact fingerprint, or,
/// for a program that does not lex (and has none), its text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Fingerprint(String),
    Text(String),
}

impl Key {
    fn of(program: &str) -> Key {
        match dedup::fingerprint(program) {
            Some(fp) => Key::Fingerprint(fp.to_string()),
            None => Key::Text(program.to_owned()),
        }
    }

    fn fingerprint(&self) -> Option<String> {
        match self {
            Key::Fingerprint(f) => Some(f.clone()),
            Key::Text(_) => None,
        }
    }
}

/// For each program, the first earlier one of its problem with the same
/// key.
fn duplicates(keys: &[Key]) -> Vec<Option<usize>> {
    let mut first: std::collections::HashMap<&Key, usize> = std::collections::HashMap::new();
    keys.iter()
        .enumerate()
        .map(|(i, key)| match first.get(key) {
            Some(&rep) => Some(rep),
            None => {
                first.insert(key, i);
                None
            }
        })
        .collect()
}

/// Runs the suite's stream until every program has its outcome and marks
/// the suite finished; a failure or a signal is written by the one drive.
#[allow(clippy::too_many_arguments)]
async fn drive(
    cfg: &SuiteConfig,
    store: &Store,
    progress: &Progress,
    interrupt: &Interrupt,
    suite: SuiteId,
    part: SuitePart,
    programs: &Programs,
    rx: tokio::sync::mpsc::UnboundedReceiver<crate::build::probe::stream::StreamCandidate>,
    producer: impl std::future::Future<Output = Result<Option<PhaseGuard>>>,
    prepare: PhaseGuard,
) -> Result<SuiteId> {
    let stream = Stream {
        cfg,
        store,
        progress,
        suite,
        part,
    };
    let work = async {
        stream.execute(programs, rx, producer, prepare).await?;
        store
            .finish_suite(suite, &Owner::current(), BatchStatus::Finished, None)
            .await?;
        Ok(suite)
    };
    crate::engine::drive::drive(store, interrupt, Run::Suite(suite), work).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problem_lines_skip_blank_lines() {
        assert_eq!(problem_lines("a\n\n  \nb\nc\n"), [1, 4, 5]);
    }

    #[test]
    fn equal_programs_are_grouped_by_fingerprint_or_text() {
        let keys: Vec<Key> = [
            "fn main() { 1; }",
            "fn main() {  1 ; } // the same",
            "fn main() { \"open",
            "fn main() { \"open",
            "fn main() { 2; }",
        ]
        .iter()
        .map(|p| Key::of(p))
        .collect();
        assert!(
            matches!(keys[2], Key::Text(_)),
            "an unterminated string does not lex"
        );
        assert_eq!(duplicates(&keys), [None, Some(0), None, Some(2), None]);
    }
}
