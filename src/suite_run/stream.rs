//! The suite's one wide scheme: programs arrive (all at once from a
//! completions file, or as a live draw goes), go through waves of builds in
//! the suite package, and as each build ends its programs' runs start while
//! the next build goes on. [`Programs`] keeps who shares each program's
//! outcome, so a duplicate that arrives after its program finished still
//! gets its row.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{mpsc, Semaphore};

use super::SuiteConfig;
use crate::account::{Phase, PhaseGuard};
use crate::package::Package;
use crate::probe::programs::build_programs;
use crate::probe::stream::{StreamCandidate, Waves};
use crate::probe::{ProbeFailure, ProbeVerdict, WIDE_TARGETS_PER_BUILD};
use crate::progress::Progress;
use crate::sandbox::Sandbox;
use crate::score::{run_program, RunLimits};
use crate::spec::CompileLimits;
use crate::store::{BatchId, Store, SuiteId, SuiteOutcomeRow, SuitePart};
use crate::suite::cases::{split_cases, Split, SplitProgram};
use crate::suite::{CaseEnd, CompletionOutcome};

/// One program to build and run: a problem's representative completion.
#[derive(Debug)]
pub(super) struct Work {
    pub batch: BatchId,
    /// The problem's place and name, for the error file's name.
    pub pos: usize,
    pub problem: String,
    /// The representative's index in its batch.
    pub idx: usize,
    pub split: SplitProgram,
}

impl Work {
    pub fn new(batch: BatchId, pos: usize, problem: &str, idx: usize, program: &str) -> Work {
        Work {
            batch,
            pos,
            problem: problem.to_owned(),
            idx,
            split: split_cases(program),
        }
    }
}

/// Every program of the suite known so far, who shares its outcome, and
/// its outcome once stored. Work ids are indices here.
pub(super) struct Programs {
    inner: Mutex<Inner>,
}

struct Inner {
    works: Vec<Arc<Work>>,
    /// Per work, the completions that share its outcome (the
    /// representative first).
    sharers: Vec<Vec<usize>>,
    done: Vec<Option<SuiteOutcomeRow>>,
    /// Where new programs go; `None` once no more will come.
    tx: Option<mpsc::UnboundedSender<StreamCandidate>>,
}

impl Programs {
    pub fn new() -> (Programs, mpsc::UnboundedReceiver<StreamCandidate>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Programs {
                inner: Mutex::new(Inner {
                    works: Vec::new(),
                    sharers: Vec::new(),
                    done: Vec::new(),
                    tx: Some(tx),
                }),
            },
            rx,
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a program and sends it on to the builds; returns its id.
    pub fn add(&self, work: Work) -> usize {
        let mut inner = self.lock();
        let id = inner.works.len();
        let source = work.split.dispatch_program();
        inner.sharers.push(vec![work.idx]);
        inner.works.push(Arc::new(work));
        inner.done.push(None);
        if let Some(tx) = &inner.tx {
            let _ = tx.send(StreamCandidate { idx: id, source });
        }
        id
    }

    /// Adds a program whose outcome is already stored (a resume's), so a
    /// duplicate drawn now gets its row; it is never built.
    pub fn add_done(&self, work: Work, row: &SuiteOutcomeRow) -> usize {
        let mut inner = self.lock();
        let id = inner.works.len();
        inner.sharers.push(Vec::new());
        inner.works.push(Arc::new(work));
        inner.done.push(Some(row.clone()));
        id
    }

    /// Completion `idx` shares program `id`'s outcome. When that outcome is
    /// already stored, returns it: the caller stores it for `idx`.
    pub fn share(&self, id: usize, idx: usize) -> Option<SuiteOutcomeRow> {
        let mut inner = self.lock();
        match &inner.done[id] {
            Some(row) => Some(row.clone()),
            None => {
                inner.sharers[id].push(idx);
                None
            }
        }
    }

    /// Program `id` came to `row`: returns its batch and every completion
    /// to store it for.
    fn finish(&self, id: usize, row: &SuiteOutcomeRow) -> (BatchId, Vec<usize>) {
        let mut inner = self.lock();
        inner.done[id] = Some(row.clone());
        (
            inner.works[id].batch,
            std::mem::take(&mut inner.sharers[id]),
        )
    }

    fn work(&self, id: usize) -> Arc<Work> {
        self.lock().works[id].clone()
    }

    /// No more programs will come: the waves end once these are built.
    pub fn close(&self) {
        self.lock().tx = None;
    }

    /// Programs still to build and run.
    pub fn count(&self) -> usize {
        self.lock().done.iter().filter(|d| d.is_none()).count()
    }
}

/// What the suite's stream needs besides its programs.
pub(super) struct Stream<'a> {
    pub cfg: &'a SuiteConfig,
    pub store: &'a Store,
    pub progress: &'a Progress,
    pub suite: SuiteId,
    /// The part this process runs (every problem unless a lane's part):
    /// its phases are recorded as the part's.
    pub part: SuitePart,
}

/// A program's image, handed from the builds to the runs.
struct Built {
    work: usize,
    image: PathBuf,
}

impl Stream<'_> {
    /// Builds and runs every program `programs` receives until `producer`
    /// (which adds them) is done and every program has its outcome stored.
    /// Records the phases: `prepare` (ended here), `draw` (the producer's,
    /// when it says it drew), `probe` (up to the last build) and `score run`
    /// (the runs' tail).
    pub async fn execute(
        &self,
        programs: &Programs,
        rx: mpsc::UnboundedReceiver<StreamCandidate>,
        producer: impl std::future::Future<Output = Result<Option<PhaseGuard>>>,
        prepare: PhaseGuard,
    ) -> Result<()> {
        let (cfg, store, suite, part) = (self.cfg, self.store, self.suite, self.part);
        let suite_dir = crate::outputs::new_suite_dir(&cfg.out_dir, suite).with_context(|| {
            format!("cannot create a suite folder in {}", cfg.out_dir.display())
        })?;
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
        let mut package = {
            let (work_dir, limits) = (cfg.work_dir.clone(), cfg.limits);
            // Off the async threads: another suite may hold the lock.
            tokio::task::spawn_blocking(move || {
                Package::open_suite(
                    &work_dir,
                    &work_dir.join("suite").join("target"),
                    crate::spec::Policy::default(),
                    CompileLimits {
                        cpu_secs: limits.compile_cpu_secs,
                        ..CompileLimits::default()
                    },
                )
            })
            .await
            .context("the package task panicked")??
        };
        package.set_build_timeout(cfg.build_timeout);
        store
            .record_suite_phase(suite, &part, &prepare.finish())
            .await?;

        let bar = self.progress.bar("programs", 0);
        let (built_tx, mut built_rx) = mpsc::unbounded_channel::<Built>();
        let limits = RunLimits {
            address_space_bytes: cfg.limits.memory_bytes,
            ..RunLimits::with_wall(cfg.limits.run_wall)
        };
        let slots = Semaphore::new(std::thread::available_parallelism().map_or(2, |n| n.get()));

        let producing = async {
            if let Some(draw) = producer.await? {
                store
                    .record_suite_phase(suite, &part, &draw.finish())
                    .await?;
            }
            programs.close();
            anyhow::Ok(())
        };
        let building = async {
            let guard = PhaseGuard::start(Phase::Probe);
            let mut waves = Waves::new(rx, cfg.waves);
            while let Some(wave) = waves.next().await {
                bar.inc_length(wave.len() as u64);
                for chunk in wave.chunks(WIDE_TARGETS_PER_BUILD) {
                    let sources: Vec<(usize, &str)> =
                        chunk.iter().map(|c| (c.idx, c.source.as_str())).collect();
                    let (built, _stats) = build_programs(&package, &sources, |_| {}).await?;
                    for b in built {
                        let id = b.probed.idx;
                        if let Some(image) = b.image {
                            let _ = built_tx.send(Built { work: id, image });
                            continue;
                        }
                        let w = programs.work(id);
                        let outcome = not_built(&b.probed.verdict, &b.probed.diagnostics)?;
                        let file = errors_dir.join(error_file_name(&w));
                        std::fs::write(
                            &file,
                            format!(
                                "{} #{}: {}\n\n{}",
                                w.problem, w.idx, b.probed.verdict, b.probed.diagnostics
                            ),
                        )
                        .with_context(|| format!("cannot write {}", file.display()))?;
                        let row = SuiteOutcomeRow {
                            probe: Some(b.probed.verdict),
                            error_file: Some(file.display().to_string()),
                            outcome,
                            run_wall: Duration::ZERO,
                            run_cpu: Duration::ZERO,
                        };
                        self.store_outcome(programs, id, &row).await?;
                        bar.inc(1);
                    }
                }
            }
            drop(built_tx);
            store
                .record_suite_phase(suite, &part, &guard.finish())
                .await?;
            anyhow::Ok(PhaseGuard::start(Phase::ScoreRun))
        };
        let running = async {
            let mut inflight = FuturesUnordered::new();
            let mut open = true;
            loop {
                tokio::select! {
                    got = built_rx.recv(), if open => match got {
                        Some(b) => {
                            let work = programs.work(b.work);
                            inflight.push(run_cases(b, work, &limits, &sandbox, &slots));
                        }
                        None => open = false,
                    },
                    Some(done) = inflight.next(), if !inflight.is_empty() => {
                        let (id, row) = done?;
                        self.store_outcome(programs, id, &row).await?;
                        bar.inc(1);
                    }
                    else => break,
                }
            }
            anyhow::Ok(())
        };
        let ((), tail, ()) = tokio::try_join!(producing, building, running)?;
        store
            .record_suite_phase(suite, &part, &tail.finish())
            .await?;
        bar.finish();
        Ok(())
    }

    /// Stores program `id`'s outcome for every completion that shares it.
    async fn store_outcome(
        &self,
        programs: &Programs,
        id: usize,
        row: &SuiteOutcomeRow,
    ) -> Result<()> {
        let (batch, idxs) = programs.finish(id, row);
        self.store.record_suite_outcome(batch, &idxs, row).await?;
        crate::testpoint::reached("suite.outcome").await;
        Ok(())
    }
}

/// Runs one built program: the whole `main`, then (when `main` splits)
/// each case alone, every run a process of its own, all of them sharing
/// the machine's slots with the other programs' runs.
async fn run_cases(
    built: Built,
    work: Arc<Work>,
    limits: &RunLimits,
    sandbox: &Sandbox,
    slots: &Semaphore,
) -> Result<(usize, SuiteOutcomeRow)> {
    let marks = work.split.marks_completion();
    let mut which = vec!["whole".to_owned()];
    if let Split::Cases { cases, .. } = &work.split.split {
        which.extend((0..cases.len()).map(|i| i.to_string()));
    }
    let image: &Path = &built.image;
    let runs = futures::future::try_join_all(which.iter().map(|arg| async move {
        let _slot = slots
            .acquire()
            .await
            .expect("the semaphore is never closed");
        run_program(image, arg, marks, limits, sandbox).await
    }))
    .await?;
    let whole = runs[0].end;
    let cases: Vec<CaseEnd> = match work.split.split {
        Split::Cases { .. } => runs[1..].iter().map(|r| r.end).collect(),
        Split::Whole { .. } => vec![whole],
    };
    Ok((
        built.work,
        SuiteOutcomeRow {
            probe: Some(ProbeVerdict::Compiled),
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
pub(super) fn not_built(verdict: &ProbeVerdict, diagnostics: &str) -> Result<CompletionOutcome> {
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
pub(super) fn error_file_name(w: &Work) -> String {
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
    format!("{:04}-{name}-c{}.txt", w.pos, w.idx)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            ok(Forbidden(crate::spec::Rule::UnsafeCode)),
            CompletionOutcome::CompileError
        );
        assert!(not_built(&ProbeFailure(crate::probe::ProbeFailure::DiskFull), "x").is_err());
        assert!(not_built(&Compiled, "").is_err());
    }

    #[test]
    fn error_files_are_named_safely() {
        let w = Work::new(1, 7, "Human/Eval 7", 3, "fn main() {}");
        assert_eq!(error_file_name(&w), "0007-Human_Eval_7-c3.txt");
    }

    #[test]
    fn a_late_duplicate_gets_the_stored_outcome() {
        let (programs, mut rx) = Programs::new();
        let id = programs.add(Work::new(4, 0, "p", 0, "fn main() {}"));
        assert_eq!(rx.try_recv().unwrap().idx, id);
        assert_eq!(programs.share(id, 2), None);
        let row = SuiteOutcomeRow {
            probe: None,
            error_file: None,
            outcome: CompletionOutcome::CompileError,
            run_wall: Duration::ZERO,
            run_cpu: Duration::ZERO,
        };
        assert_eq!(programs.finish(id, &row), (4, vec![0, 2]));
        assert_eq!(programs.share(id, 5), Some(row));
        programs.close();
        assert!(rx.try_recv().is_err());
    }
}
