//! Suite runs: a problem set's completions probed and scored as one wide
//! scheme across every problem (issue 14).
//!
//! ```text
//! problems + completions --> programs, dedup per problem --> store (one transaction)
//!     --> waves --> build (one cargo per 100 programs, whole suite) --> run whole + each case
//!                      |                                                  |
//!                      +------ outcome per program, stored as it lands ---+
//! ```
//!
//! Each problem is a batch (the unit of storage and resume); its
//! completions are the batch's replies and its programs the batch's
//! candidates, deduplicated within the problem by the exact fingerprint.
//! Every representative program goes into one stream: waves of programs are
//! built in the suite's own package (`Package::open_suite`), one binary
//! target per program (`probe::programs`), so a program's image holds its
//! own code and nothing else; as each build ends, its programs' runs start
//! while the next build goes on. Each run (the whole `main`, then each case
//! of the split, `suite::cases`) is a process of its own under the same
//! limits and sandbox as a candidate's scoring run (`score::run_program`).
//! What a program came to is stored for it and its duplicates at once.
//!
//! A killed suite is found by its batches' dead owner (as any batch), and
//! [`resume`] finishes it: it builds and runs only the programs without a
//! stored outcome.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{mpsc, Semaphore};

use crate::account::{Phase, PhaseGuard};
use crate::dedup;
use crate::draw::{Drawn, Outcome, Reply};
use crate::extract::Extraction;
use crate::interrupt::Interrupt;
use crate::owner::Owner;
use crate::package::Package;
use crate::probe::programs::build_programs;
use crate::probe::stream::{StreamCandidate, WavePolicy, Waves};
use crate::probe::{ProbeFailure, ProbeVerdict, WIDE_TARGETS_PER_BUILD};
use crate::progress::Progress;
use crate::sandbox::compile::CompileLimits;
use crate::sandbox::Sandbox;
use crate::score::{run_program, RunLimits};
use crate::store::{
    BatchId, BatchStatus, Claim, NewCompletion, NewProblem, NewSuite, Store, StoreError, SuiteId,
    SuiteOrigin, SuiteOutcomeRow,
};
use crate::suite::cases::{split_cases, Split, SplitProgram};
use crate::suite::SuiteError;
use crate::suite::{CaseEnd, CompletionOutcome, Completions, Problem, ProgramMode};

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

/// A suite's input, read and checked before anything is written.
#[derive(Debug, Clone)]
pub struct SuiteInput {
    pub problems_path: PathBuf,
    /// blake3 (hex) of the problems file.
    pub digest: String,
    pub problems: Vec<Problem>,
    /// The completions' path.
    pub source: String,
    pub mode: ProgramMode,
    /// Each problem's completions, in input order.
    pub completions: Vec<Vec<String>>,
}

/// The suite was stopped by a signal; what it had is stored.
#[derive(Debug, thiserror::Error)]
#[error("suite {suite} interrupted by {signal}; what it had is kept; finish it with `assay suite run --resume {suite}`")]
pub struct SuiteInterrupted {
    pub suite: SuiteId,
    pub signal: &'static str,
}

/// The pool name of completions read from a file.
pub const COMPLETIONS_POOL: &str = "completions";

impl SuiteInput {
    /// Reads a problem set and its completions (a flat JSONL or MultiPL-E's
    /// output directory). Every problem needs at least one completion: a
    /// problem without one has no pass@k, and the suite's mean would not be
    /// the suite's.
    pub fn from_completions(problems: &Path, completions: &Path) -> Result<SuiteInput, SuiteError> {
        let text = crate::input::read_to_string(problems).map_err(|source| SuiteError::Read {
            file: problems.to_path_buf(),
            source,
        })?;
        let parsed = crate::suite::problem::parse_problems(problems, &text)?;
        let read = Completions::load(completions, &parsed)?;
        let grouped: Vec<Vec<String>> = read
            .per_problem(&parsed)?
            .into_iter()
            .map(|cs| cs.into_iter().map(str::to_owned).collect())
            .collect();
        let lines = problem_lines(&text);
        for (i, cs) in grouped.iter().enumerate() {
            if cs.is_empty() {
                return Err(SuiteError::Invalid {
                    file: problems.to_path_buf(),
                    line: lines.get(i).copied(),
                    field: Some("name"),
                    message: format!(
                        "problem `{}` has no completion in {}",
                        parsed[i].name,
                        completions.display()
                    ),
                });
            }
        }
        Ok(SuiteInput {
            problems_path: problems.to_path_buf(),
            digest: blake3::hash(text.as_bytes()).to_hex().to_string(),
            problems: parsed,
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

/// Runs a suite of completions read from files to the end; returns its id.
pub async fn run(
    cfg: &SuiteConfig,
    input: &SuiteInput,
    store: &Store,
    progress: &Progress,
    interrupt: &Interrupt,
) -> Result<SuiteId> {
    let guard = PhaseGuard::start(Phase::Prepare);
    // Everything pure first: the programs, their fingerprints and their
    // groups, so the suite's input is stored in one transaction.
    let mut drawn: Vec<Vec<Drawn>> = Vec::with_capacity(input.problems.len());
    let mut extractions: Vec<Vec<Extraction>> = Vec::with_capacity(input.problems.len());
    let mut fingerprints: Vec<Vec<Option<String>>> = Vec::with_capacity(input.problems.len());
    let mut groups: Vec<Vec<Option<usize>>> = Vec::with_capacity(input.problems.len());
    for (problem, completions) in input.problems.iter().zip(&input.completions) {
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
        let fps: Vec<Option<dedup::Fingerprint>> =
            programs.iter().map(|p| dedup::fingerprint(p)).collect();
        groups.push(duplicates(&programs, &fps));
        fingerprints.push(fps.iter().map(|f| f.map(|f| f.to_string())).collect());
        extractions.push(programs.into_iter().map(Extraction::Source).collect());
        drawn.push(d);
    }
    let new_problems: Vec<NewProblem> = input
        .problems
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
                problems_path: &input.problems_path,
                problems_digest: &input.digest,
                origin: SuiteOrigin::Completions,
                source: &input.source,
                mode: input.mode,
                problems: &new_problems,
            },
            &Owner::current(),
        )
        .await?;
    tracing::info!(suite, problems = batches.len(), "suite started");
    let mut work = Vec::new();
    for (p, problem) in input.problems.iter().enumerate() {
        for (i, extraction) in extractions[p].iter().enumerate() {
            if groups[p][i].is_some() {
                continue;
            }
            let Extraction::Source(program) = extraction else {
                continue;
            };
            let dups = (0..groups[p].len())
                .filter(|&j| groups[p][j] == Some(i))
                .collect();
            work.push(Work::new(batches[p], p, &problem.name, i, dups, program));
        }
    }
    drive(cfg, store, progress, interrupt, suite, work, guard).await
}

/// Finishes an interrupted or failed suite: takes its unfinished batches
/// over (one process wins) and builds and runs only the programs without a
/// stored outcome.
pub async fn resume(
    cfg: &SuiteConfig,
    store: &Store,
    progress: &Progress,
    interrupt: &Interrupt,
    suite: SuiteId,
) -> Result<SuiteId> {
    let guard = PhaseGuard::start(Phase::Prepare);
    let not_resumable = |why: &str| StoreError::NotResumable {
        path: store.path().to_path_buf(),
        id: suite,
        why: why.to_owned(),
    };
    match store
        .claim_suite_for_resume(suite, &Owner::current())
        .await?
    {
        Claim::Claimed => {}
        Claim::Finished => {
            return Err(not_resumable("is a finished suite; nothing to resume").into())
        }
        Claim::Running(_) => return Err(not_resumable("is a suite still running").into()),
    }
    let problems = store.suite_problems(suite).await?;
    let completions = store.suite_completions(suite).await?;
    let mut work = Vec::new();
    for (p, row) in problems.iter().enumerate() {
        let of_problem: Vec<_> = completions
            .iter()
            .filter(|c| c.batch_id == row.batch_id)
            .collect();
        for c in &of_problem {
            let (None, None, Some(Extraction::Source(program))) =
                (c.dup_of, &c.outcome, &c.extraction)
            else {
                continue;
            };
            let dups = of_problem
                .iter()
                .filter(|d| d.dup_of == Some(c.idx))
                .map(|d| d.idx)
                .collect();
            work.push(Work::new(
                row.batch_id,
                p,
                &row.problem.name,
                c.idx,
                dups,
                program,
            ));
        }
    }
    tracing::info!(suite, programs = work.len(), "suite resumed");
    drive(cfg, store, progress, interrupt, suite, work, guard).await
}

/// For each program, the first earlier one of its problem that is the same
/// program: the same exact fingerprint, or, for a program that does not
/// lex (and has none), the same text.
fn duplicates(
    programs: &[String],
    fingerprints: &[Option<dedup::Fingerprint>],
) -> Vec<Option<usize>> {
    let mut first: std::collections::HashMap<(bool, String), usize> =
        std::collections::HashMap::new();
    programs
        .iter()
        .zip(fingerprints)
        .enumerate()
        .map(|(i, (program, fp))| {
            let key = match fp {
                Some(fp) => (true, fp.to_string()),
                None => (false, program.clone()),
            };
            match first.get(&key) {
                Some(&rep) => Some(rep),
                None => {
                    first.insert(key, i);
                    None
                }
            }
        })
        .collect()
}

/// One program to build and run: a problem's representative completion,
/// and the duplicates that share its outcome.
struct Work {
    batch: BatchId,
    /// The problem's place and name, for the error file's name.
    pos: usize,
    problem: String,
    /// The representative first, then its duplicates.
    idxs: Vec<usize>,
    split: SplitProgram,
}

impl Work {
    fn new(
        batch: BatchId,
        pos: usize,
        problem: &str,
        idx: usize,
        dups: Vec<usize>,
        program: &str,
    ) -> Work {
        let mut idxs = vec![idx];
        idxs.extend(dups);
        Work {
            batch,
            pos,
            problem: problem.to_owned(),
            idxs,
            split: split_cases(program),
        }
    }
}

/// Runs the suite's work and records how it ended.
async fn drive(
    cfg: &SuiteConfig,
    store: &Store,
    progress: &Progress,
    interrupt: &Interrupt,
    suite: SuiteId,
    work: Vec<Work>,
    prepare: PhaseGuard,
) -> Result<SuiteId> {
    // Dropping the run's future kills cargo and every program's process
    // group; each outcome stored so far is whole (one transaction each).
    let ended = tokio::select! {
        biased;
        done = execute(cfg, store, progress, suite, work, prepare) => Ok(done),
        signal = interrupt.fired() => Err(signal),
    };
    match ended {
        Ok(Ok(())) => {
            store
                .finish_suite(suite, BatchStatus::Finished, None)
                .await?;
            Ok(suite)
        }
        Ok(Err(e)) => {
            let reason = format!("{e:#}");
            store
                .finish_suite(suite, BatchStatus::Failed, Some(&reason))
                .await?;
            Err(e.context(format!("suite {suite} failed")))
        }
        Err(signal) => {
            store
                .finish_suite(
                    suite,
                    BatchStatus::Interrupted,
                    Some(&format!("interrupted by {signal}")),
                )
                .await?;
            Err(SuiteInterrupted { suite, signal }.into())
        }
    }
}

/// A program's image, handed from the builds to the runs.
struct Built {
    work: usize,
    image: PathBuf,
}

async fn execute(
    cfg: &SuiteConfig,
    store: &Store,
    progress: &Progress,
    suite: SuiteId,
    work: Vec<Work>,
    prepare: PhaseGuard,
) -> Result<()> {
    let suite_dir = crate::outputs::new_suite_dir(&cfg.out_dir, suite)
        .with_context(|| format!("cannot create a suite folder in {}", cfg.out_dir.display()))?;
    let errors_dir = suite_dir.join("errors");
    std::fs::create_dir_all(&errors_dir)
        .with_context(|| format!("cannot create {}", errors_dir.display()))?;
    let sandbox = Arc::new(Sandbox::probe(cfg.limits.processes));
    store
        .set_suite_sandbox(
            suite,
            &sandbox.describe(cfg.limits.memory_bytes),
            sandbox.warnings(),
        )
        .await?;
    let package = {
        let (work_dir, limits) = (cfg.work_dir.clone(), cfg.limits);
        // Off the async threads: another suite may hold the package's lock.
        tokio::task::spawn_blocking(move || {
            Package::open_suite(
                &work_dir,
                &work_dir.join("suite").join("target"),
                crate::policy::Policy::default(),
                CompileLimits {
                    cpu_secs: limits.compile_cpu_secs,
                    ..CompileLimits::default()
                },
            )
        })
        .await
        .context("the package task panicked")??
    };
    let mut package = package;
    package.set_build_timeout(cfg.build_timeout);
    store.record_suite_phase(suite, &prepare.finish()).await?;

    let bar = progress.bar("programs", work.len());
    let (programs_tx, programs_rx) = mpsc::unbounded_channel();
    for (id, w) in work.iter().enumerate() {
        let _ = programs_tx.send(StreamCandidate {
            idx: id,
            source: w.split.dispatch_program(),
        });
    }
    drop(programs_tx);
    let (built_tx, mut built_rx) = mpsc::unbounded_channel::<Built>();
    let limits = RunLimits {
        address_space_bytes: cfg.limits.memory_bytes,
        ..RunLimits::with_wall(cfg.limits.run_wall)
    };
    let slots = Arc::new(Semaphore::new(
        std::thread::available_parallelism().map_or(2, |n| n.get()),
    ));

    let work = &work;
    let building = async {
        let guard = PhaseGuard::start(Phase::Probe);
        let mut waves = Waves::new(programs_rx, cfg.waves);
        while let Some(wave) = waves.next().await {
            for chunk in wave.chunks(WIDE_TARGETS_PER_BUILD) {
                let programs: Vec<(usize, &str)> =
                    chunk.iter().map(|c| (c.idx, c.source.as_str())).collect();
                let (built, _stats) = build_programs(&package, &programs, |_| {}).await?;
                for b in built {
                    let id = b.probed.idx;
                    match b.image {
                        Some(image) => {
                            let _ = built_tx.send(Built { work: id, image });
                        }
                        None => {
                            let w = &work[id];
                            let outcome = not_built(&b.probed.verdict, &b.probed.diagnostics)?;
                            let file = errors_dir.join(error_file_name(w));
                            std::fs::write(
                                &file,
                                format!(
                                    "{} #{}: {}\n\n{}",
                                    w.problem, w.idxs[0], b.probed.verdict, b.probed.diagnostics
                                ),
                            )
                            .with_context(|| format!("cannot write {}", file.display()))?;
                            let row = SuiteOutcomeRow {
                                probe: b.probed.verdict,
                                error_file: Some(file.display().to_string()),
                                outcome,
                                run_wall: Duration::ZERO,
                                run_cpu: Duration::ZERO,
                            };
                            store.record_suite_outcome(w.batch, &w.idxs, &row).await?;
                            bar.inc(1);
                            crate::testpoint::reached("suite.outcome").await;
                        }
                    }
                }
            }
        }
        drop(built_tx);
        let figures = guard.finish();
        store.record_suite_phase(suite, &figures).await?;
        anyhow::Ok(PhaseGuard::start(Phase::ScoreRun))
    };
    let running = async {
        let mut inflight = FuturesUnordered::new();
        let mut open = true;
        loop {
            tokio::select! {
                got = built_rx.recv(), if open => match got {
                    Some(b) => inflight.push(run_cases(b, work, &limits, &sandbox, &slots)),
                    None => open = false,
                },
                Some(done) = inflight.next(), if !inflight.is_empty() => {
                    let (id, row) = done?;
                    let w = &work[id];
                    store.record_suite_outcome(w.batch, &w.idxs, &row).await?;
                    bar.inc(1);
                    crate::testpoint::reached("suite.outcome").await;
                }
                else => break,
            }
        }
        anyhow::Ok(())
    };
    let (tail, ()) = tokio::try_join!(building, running)?;
    store.record_suite_phase(suite, &tail.finish()).await?;
    bar.finish();
    Ok(())
}

/// Runs one built program: the whole `main`, then (when `main` splits)
/// each case alone, every run a process of its own, all of them sharing
/// the machine's slots with the other programs' runs.
async fn run_cases(
    built: Built,
    work: &[Work],
    limits: &RunLimits,
    sandbox: &Sandbox,
    slots: &Semaphore,
) -> Result<(usize, SuiteOutcomeRow)> {
    let w = &work[built.work];
    let marks = w.split.marks_completion();
    let mut which = vec!["whole".to_owned()];
    if let Split::Cases { cases, .. } = &w.split.split {
        which.extend((0..cases.len()).map(|i| i.to_string()));
    }
    let image = built.image.as_path();
    let runs = futures::future::try_join_all(which.iter().map(|arg| async move {
        let _slot = slots
            .acquire()
            .await
            .expect("the semaphore is never closed");
        run_program(image, arg, marks, limits, sandbox).await
    }))
    .await?;
    let whole = runs[0].end;
    let cases: Vec<CaseEnd> = match w.split.split {
        Split::Cases { .. } => runs[1..].iter().map(|r| r.end).collect(),
        Split::Whole { .. } => vec![whole],
    };
    Ok((
        built.work,
        SuiteOutcomeRow {
            probe: ProbeVerdict::Compiled,
            error_file: None,
            outcome: CompletionOutcome::Ran { whole, cases },
            run_wall: runs.iter().map(|r| r.wall).sum(),
            run_cpu: runs.iter().map(|r| r.cpu).sum(),
        },
    ))
}

/// What a program that did not build came to. A failure of the host (a
/// full disk, a build killed again and again) is an error, not a status:
/// the suite fails and can be resumed.
fn not_built(verdict: &ProbeVerdict, diagnostics: &str) -> Result<CompletionOutcome> {
    Ok(match verdict {
        ProbeVerdict::CompileTimeout | ProbeVerdict::ProbeFailure(ProbeFailure::Timeout) => {
            CompletionOutcome::CompileTimeout
        }
        ProbeVerdict::CompileError { .. }
        | ProbeVerdict::Forbidden(_)
        | ProbeVerdict::CompileOutOfMemory
        | ProbeVerdict::DependencyFailure
        | ProbeVerdict::ProbeFailure(ProbeFailure::CompilerCrashed) => {
            CompletionOutcome::CompileError
        }
        ProbeVerdict::ProbeFailure(why) => bail!(
            "a program could not be built ({}): {}",
            why.as_str(),
            diagnostics
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
        ),
        ProbeVerdict::Compiled => bail!("a program compiled but left no binary"),
    })
}

/// `0007-HumanEval_7_filter-c3.txt`: the problem's place and name (only
/// characters safe in a file name) and the completion.
fn error_file_name(w: &Work) -> String {
    let name: String = w
        .problem
        .chars()
        .take(80)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{:04}-{name}-c{}.txt", w.pos, w.idxs[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problem_lines_skip_blank_lines() {
        assert_eq!(problem_lines("a\n\n  \nb\nc\n"), [1, 4, 5]);
    }

    #[test]
    fn only_host_failures_stop_the_suite() {
        use ProbeVerdict::*;
        let ok = |v: ProbeVerdict| not_built(&v, "").unwrap();
        assert_eq!(
            ok(CompileError { codes: vec![] }),
            CompletionOutcome::CompileError
        );
        assert_eq!(ok(CompileTimeout), CompletionOutcome::CompileTimeout);
        assert_eq!(
            ok(Forbidden(crate::policy::Rule::UnsafeCode)),
            CompletionOutcome::CompileError
        );
        assert!(not_built(&ProbeFailure(crate::probe::ProbeFailure::DiskFull), "x").is_err());
        assert!(not_built(&Compiled, "").is_err());
    }

    #[test]
    fn equal_programs_are_grouped_by_fingerprint_or_text() {
        let programs: Vec<String> = [
            "fn main() { 1; }",
            "fn main() {  1 ; } // the same",
            "fn main() { \"open",
            "fn main() { \"open",
            "fn main() { 2; }",
        ]
        .map(str::to_owned)
        .to_vec();
        let fps: Vec<_> = programs.iter().map(|p| dedup::fingerprint(p)).collect();
        assert!(fps[2].is_none(), "an unterminated string does not lex");
        assert_eq!(
            duplicates(&programs, &fps),
            [None, Some(0), None, Some(2), None]
        );
    }

    #[test]
    fn error_files_are_named_safely() {
        let w = Work::new(1, 7, "Human/Eval 7", 3, vec![], "fn main() {}");
        assert_eq!(error_file_name(&w), "0007-Human_Eval_7-c3.txt");
    }
}
