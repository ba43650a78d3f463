//! The suite's one scheme: programs arrive (all at once from a
//! completions file, or as a live draw goes), go through waves of builds in
//! the suite package, and as each build ends its programs' runs start while
//! the next build goes on. [`Programs`] keeps who shares each program's
//! outcome, so a duplicate that arrives after its program finished still
//! gets its row.
//!
//! A program is laid out as a module (`suite::module`: the solution, and
//! the problem's tests in a scope of their own); a wave's modules share one
//! image (`exec::shared`, `--build shared`, the default) or get one each
//! (`--build isolated`). A program syn cannot read is never run as it
//! stands for a verdict: it is refused (`SyntaxError`), and built and run
//! alone as MultiPL-E would only for MultiPL-E's reading beside it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{mpsc, Semaphore};

use super::SuiteConfig;
use crate::build::exec::isolated::TARGETS_PER_BUILD;
use crate::build::exec::{Layout, Settled, SharedBuild};
use crate::build::package::{ModuleKey, Package, Profile};
use crate::build::probe::stream::{StreamCandidate, Waves};
use crate::build::probe::{ProbeFailure, ProbeStats, ProbeVerdict, Probed};
use crate::engine::errors;
use crate::sandbox::Sandbox;
use crate::score::{run_program, ProgramRun, RunLimits};
use crate::spec::{CompileLimits, Edition};
use crate::store::{BatchId, Store, SuiteId, SuiteOutcomeRow, SuitePart};
use crate::suite::module::{image_root, lay_out, ProgramModule, Unlaid};
use crate::suite::{CaseEnd, CaseRuns, CompletionOutcome, Problem, Split};
use crate::support::account::{Phase, PhaseGuard};
use crate::support::progress::Progress;

/// One program to build and run: a problem's representative completion.
#[derive(Debug)]
pub(super) struct Work {
    pub batch: BatchId,
    /// The problem's place and name, for the error file's name.
    pub pos: usize,
    pub problem: Problem,
    /// The representative's index in its batch.
    pub idx: usize,
    /// The program as MultiPL-E builds it.
    pub program: String,
}

impl Work {
    pub fn new(batch: BatchId, pos: usize, problem: &Problem, idx: usize, program: &str) -> Work {
        Work {
            batch,
            pos,
            problem: problem.clone(),
            idx,
            program: program.to_owned(),
        }
    }

    /// The program laid out as module `c{id}` of a crate of `edition`, or
    /// why it cannot be.
    fn lay_out(&self, id: usize, edition: Edition) -> Result<ProgramModule, Unlaid> {
        lay_out(
            &self.problem,
            &self.program,
            &program_target(id),
            true,
            edition,
        )
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
    /// How each laid-out program's tests split.
    splits: Vec<Option<Split>>,
    /// Where new programs go; `None` once no more will come.
    tx: Option<mpsc::UnboundedSender<StreamCandidate>>,
    /// Programs added whose outcome is not stored yet: a repair round
    /// waits for 0 before it reads what its parents came to.
    pending: tokio::sync::watch::Sender<usize>,
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
                    splits: Vec::new(),
                    tx: Some(tx),
                    pending: tokio::sync::watch::Sender::new(0),
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
        let source = work.program.clone();
        inner.sharers.push(vec![work.idx]);
        inner.works.push(Arc::new(work));
        inner.done.push(None);
        inner.splits.push(None);
        inner.pending.send_modify(|n| *n += 1);
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
        inner.splits.push(None);
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

    fn set_split(&self, id: usize, split: Split) {
        self.lock().splits[id] = Some(split);
    }

    fn split(&self, id: usize) -> Option<Split> {
        self.lock().splits[id].clone()
    }

    /// No more programs will come: the waves end once these are built.
    pub fn close(&self) {
        self.lock().tx = None;
    }

    /// Programs still to build and run.
    pub fn count(&self) -> usize {
        self.lock().done.iter().filter(|d| d.is_none()).count()
    }

    /// A program's outcome is stored (for it and every completion sharing
    /// it so far).
    fn stored(&self) {
        self.lock()
            .pending
            .send_modify(|n| *n = n.saturating_sub(1));
    }

    /// Waits until every program added so far has its outcome stored.
    pub async fn settled(&self) {
        let mut rx = self.lock().pending.subscribe();
        // The sender lives as long as `self`: the wait ends at 0.
        let _ = rx.wait_for(|n| *n == 0).await;
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

/// A built program, handed from the builds to the runs.
struct Built {
    work: usize,
    image: Arc<PathBuf>,
    how: Runs,
}

/// How a built program is run.
#[derive(Debug, Clone, Copy)]
enum Runs {
    /// A module of an image: its module's name is the first argument, and
    /// the marker says a run returned.
    Module,
    /// A program syn could not read, built as it stands: run once, whole,
    /// read by its exit status alone, for MultiPL-E's reading only.
    Unchanged(Unlaid),
}

/// The suite's images are laid out by `suite::module`.
struct SuiteLayout;

impl Layout for SuiteLayout {
    fn root(&self, members: &[ModuleKey]) -> String {
        image_root(&members.iter().map(ModuleKey::name).collect::<Vec<_>>())
    }

    fn profile(&self) -> Profile {
        Profile::Probe
    }

    fn isolated_target(&self, key: &ModuleKey) -> String {
        key.name()
    }
}

/// Programs syn cannot read, each built as it stands for MultiPL-E's
/// reading: the program is its image's root, `#![forbid(unsafe_code)]`
/// first.
struct Unchanged(std::collections::HashMap<usize, String>);

impl Layout for Unchanged {
    fn root(&self, members: &[ModuleKey]) -> String {
        match members {
            [ModuleKey::Candidate(id)] => format!("#![forbid(unsafe_code)] {}", self.0[id]),
            _ => unreachable!("a program as it stands is built alone"),
        }
    }

    fn profile(&self) -> Profile {
        Profile::Probe
    }

    fn isolated_target(&self, key: &ModuleKey) -> String {
        key.name()
    }
}

/// The module and target name of program `id` (unique within a suite):
/// `cN`, the candidates' pattern, so the compile wrapper confines an image
/// of its own to the program's files.
fn program_target(id: usize) -> String {
    ModuleKey::Candidate(id).name()
}

/// What one wave's builds settled, for the caller to store.
struct WaveEnd {
    /// Programs that did not build, with their verdicts, and why assay
    /// refused to lay out those it built as they stand.
    failed: Vec<(usize, Probed, Option<Unlaid>)>,
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
        let suite_dir =
            crate::engine::outputs::new_suite_dir(&cfg.out_dir, suite).with_context(|| {
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
        let package = {
            let (work_dir, limits, edition) = (cfg.work_dir.clone(), cfg.limits, cfg.edition);
            let open = move || {
                Package::open_suite(
                    &work_dir,
                    &work_dir.join("suite").join("target"),
                    crate::spec::Policy::default(),
                    CompileLimits {
                        cpu_secs: limits.compile_cpu_secs,
                        ..CompileLimits::default()
                    },
                    limits.memory_bytes,
                    edition,
                )
            };
            crate::engine::package::open(open, cfg.build_timeout).await?
        };
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
            let shared = SharedBuild::new(&package, &SuiteLayout, cfg.limits.memory_bytes);
            let mut waves = Waves::new(rx, cfg.waves);
            let (package, shared, built) = (&package, &shared, &built_tx);
            let build = |wave: Vec<StreamCandidate>| {
                bar.inc_length(wave.len() as u64);
                let chunks = wave.chunks(TARGETS_PER_BUILD).map(|chunk| {
                    let ids: Vec<usize> = chunk.iter().map(|c| c.idx).collect();
                    build_wave(package, shared, cfg, programs, ids, built)
                });
                futures::future::try_join_all(chunks.collect::<Vec<_>>())
            };
            waves
                .build_side_by_side(build, async |ends: Vec<WaveEnd>| {
                    for (id, probed, unlaid) in ends.into_iter().flat_map(|e| e.failed) {
                        self.store_failed(programs, &errors_dir, id, probed, unlaid)
                            .await?;
                        bar.inc(1);
                    }
                    Ok(())
                })
                .await?;
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
                            let split = programs.split(b.work);
                            inflight.push(run_cases(b, split, cfg.cases, &limits, &sandbox, &slots));
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

    /// Stores the outcome of program `id`, which did not build: its error
    /// file, and `unlaid` when assay refused to lay it out.
    async fn store_failed(
        &self,
        programs: &Programs,
        errors_dir: &std::path::Path,
        id: usize,
        probed: Probed,
        unlaid: Option<Unlaid>,
    ) -> Result<()> {
        let w = programs.work(id);
        let mut outcome = not_built(&probed.verdict, &probed.diagnostics)?;
        if let Some(reason) = unlaid {
            outcome = CompletionOutcome::Refused {
                reason,
                reading: Box::new(outcome),
            };
        }
        let unit = format!("{} #{}", w.problem.name, w.idx);
        let file = errors::write(
            errors_dir,
            &error_file_name(&w),
            &unit,
            &probed.verdict,
            &probed.diagnostics,
        )?;
        let row = SuiteOutcomeRow {
            probe: Some(probed.verdict),
            error_file: Some(file.display().to_string()),
            diagnostics: Some(probed.diagnostics),
            outcome,
            run_wall: Duration::ZERO,
            run_cpu: Duration::ZERO,
            messages: Vec::new(),
        };
        self.store_outcome(programs, id, &row).await
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
        programs.stored();
        crate::support::testpoint::reached("suite.outcome").await;
        Ok(())
    }
}

/// Builds one wave's programs: the policy first (a refused program is
/// never built), then the laid-out modules in shared images or one image
/// each, and the programs syn cannot read alone, as they stand. Each built
/// program goes to `built` as soon as its image is there.
async fn build_wave(
    package: &Package,
    shared: &SharedBuild<'_, SuiteLayout>,
    cfg: &SuiteConfig,
    programs: &Programs,
    ids: Vec<usize>,
    built: &mpsc::UnboundedSender<Built>,
) -> Result<WaveEnd> {
    let mut failed = Vec::new();
    let sources: Vec<(usize, String)> = ids
        .iter()
        .map(|&id| (id, programs.work(id).program.clone()))
        .collect();
    let checked: Vec<(usize, &str)> = sources.iter().map(|(id, s)| (*id, s.as_str())).collect();
    let (refused, allowed) = crate::build::probe::check_policy(package, &checked);
    failed.extend(refused.into_iter().map(|p| (p.idx, p, None)));
    let mut modules = Vec::new();
    let mut unchanged = Vec::new();
    for (id, program) in allowed {
        match programs.work(id).lay_out(id, cfg.edition) {
            Ok(module) => {
                package
                    .write_cands_file(&format!("{}.rs", program_target(id)), &module.solution)?;
                package
                    .write_cands_file(&format!("{}.tests.rs", program_target(id)), &module.tests)?;
                programs.set_split(id, module.split);
                modules.push(id);
            }
            Err(why) => unchanged.push((id, why, program.to_owned())),
        }
    }
    let mut stats = ProbeStats::default();
    let keys: Vec<ModuleKey> = modules.iter().map(|&id| ModuleKey::Candidate(id)).collect();
    let mut hand_on = |s: Settled| settle(s, None, built, &mut failed);
    // A relaxed policy lets a program reach its image-mates: one image each
    // then, as a task's probe does.
    crate::build::exec::wave::build(shared, cfg.build.into(), &keys, &mut stats, &mut hand_on)
        .await?;
    let why: std::collections::HashMap<usize, Unlaid> =
        unchanged.iter().map(|(id, why, _)| (*id, *why)).collect();
    let layout = Unchanged(
        unchanged
            .into_iter()
            .map(|(id, _, program)| (id, program))
            .collect(),
    );
    let keys: Vec<ModuleKey> = why.keys().map(|&id| ModuleKey::Candidate(id)).collect();
    crate::build::exec::isolated::build(
        package,
        &layout,
        &keys,
        TARGETS_PER_BUILD,
        &mut stats,
        |s: Settled| {
            let why = match s.key {
                ModuleKey::Candidate(id) => why.get(&id).copied(),
                ModuleKey::Committed => None,
            };
            settle(s, why, built, &mut failed)
        },
    )
    .await?;
    Ok(WaveEnd { failed })
}

/// Hands a settled program on: to the runs when its image is there (as a
/// module, or as it stands when assay refused to lay it out, `unlaid`), or
/// to `failed` with its verdict.
fn settle(
    s: Settled,
    unlaid: Option<Unlaid>,
    built: &mpsc::UnboundedSender<Built>,
    failed: &mut Vec<(usize, Probed, Option<Unlaid>)>,
) {
    let ModuleKey::Candidate(id) = s.key else {
        return;
    };
    match s.image {
        Some(image) => {
            let _ = built.send(Built {
                work: id,
                image: Arc::new(image.path.clone()),
                how: unlaid.map_or(Runs::Module, Runs::Unchanged),
            });
        }
        None => failed.push((
            id,
            Probed {
                idx: id,
                verdict: s.verdict,
                diagnostics: s.diagnostics,
                warnings: s.warnings,
            },
            unlaid,
        )),
    }
}

/// Runs one built program: the whole `main` first, then (when it splits)
/// each case alone if the whole `main` failed, or always with
/// [`CaseRuns::All`]; every run a process of its own, all of them sharing
/// the machine's slots with the other programs' runs.
async fn run_cases(
    built: Built,
    split: Option<Split>,
    case_runs: CaseRuns,
    limits: &RunLimits,
    sandbox: &Sandbox,
    slots: &Semaphore,
) -> Result<(usize, SuiteOutcomeRow)> {
    let image: &Path = &built.image;
    let module = program_target(built.work);
    let run = |which: String| {
        let module = &module;
        async move {
            let _slot = slots
                .acquire()
                .await
                .expect("the semaphore is never closed");
            match built.how {
                Runs::Module => {
                    run_program(
                        image,
                        &[module.as_str(), which.as_str()],
                        true,
                        limits,
                        sandbox,
                    )
                    .await
                }
                Runs::Unchanged(_) => run_program(image, &[], false, limits, sandbox).await,
            }
        }
    };
    let whole = run("whole".to_owned()).await?;
    let mut runs: Vec<ProgramRun> = vec![whole.clone()];
    let mut messages = vec![said(&whole)];
    let outcome = match (built.how, split) {
        (Runs::Unchanged(reason), _) => CompletionOutcome::Refused {
            reason,
            reading: Box::new(CompletionOutcome::Ran {
                whole: whole.end,
                cases: vec![whole.end],
            }),
        },
        (Runs::Module, Some(Split::Cases { cases, .. })) => {
            let alone = case_runs == CaseRuns::All || whole.end != CaseEnd::Passed;
            let ends = if alone {
                let each =
                    futures::future::try_join_all((0..cases.len()).map(|i| run(i.to_string())))
                        .await?;
                messages = each.iter().map(said).collect();
                runs.extend(each.iter().cloned());
                each.iter().map(|r| r.end).collect()
            } else {
                // Every assert returned within the whole `main`.
                messages = Vec::new();
                vec![CaseEnd::Passed; cases.len()]
            };
            CompletionOutcome::Ran {
                whole: whole.end,
                cases: ends,
            }
        }
        (Runs::Module, _) => CompletionOutcome::Ran {
            whole: whole.end,
            cases: vec![whole.end],
        },
    };
    if messages.iter().all(Option::is_none) {
        messages = Vec::new();
    }
    Ok((
        built.work,
        SuiteOutcomeRow {
            probe: Some(ProbeVerdict::Compiled),
            error_file: None,
            diagnostics: None,
            outcome,
            run_wall: runs.iter().map(|r| r.wall).sum(),
            run_cpu: runs.iter().map(|r| r.cpu).sum(),
            messages,
        },
    ))
}

/// What a run that did not pass said as it ended (its panic's message).
fn said(run: &ProgramRun) -> Option<String> {
    if run.end == CaseEnd::Passed {
        return None;
    }
    crate::repair::panic_message(&run.stderr)
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
        .name
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
        assert!(not_built(
            &ProbeFailure(crate::build::probe::ProbeFailure::DiskFull),
            "x"
        )
        .is_err());
        assert!(not_built(&Compiled, "").is_err());
    }

    fn problem(name: &str) -> Problem {
        Problem {
            name: name.to_owned(),
            prompt: String::new(),
            tests: "fn main() {}".to_owned(),
            stop_tokens: Vec::new(),
        }
    }

    #[test]
    fn error_files_are_named_safely() {
        let w = Work::new(1, 7, &problem("Human/Eval 7"), 3, "fn main() {}");
        assert_eq!(error_file_name(&w), "0007-Human_Eval_7-c3.txt");
    }

    #[test]
    fn a_late_duplicate_gets_the_stored_outcome() {
        let (programs, mut rx) = Programs::new();
        let id = programs.add(Work::new(4, 0, &problem("p"), 0, "fn main() {}"));
        assert_eq!(rx.try_recv().unwrap().idx, id);
        assert_eq!(programs.share(id, 2), None);
        let row = SuiteOutcomeRow {
            probe: None,
            error_file: None,
            diagnostics: None,
            outcome: CompletionOutcome::CompileError,
            run_wall: Duration::ZERO,
            run_cpu: Duration::ZERO,
            messages: Vec::new(),
        };
        assert_eq!(programs.finish(id, &row), (4, vec![0, 2]));
        assert_eq!(programs.share(id, 5), Some(row));
        programs.close();
        assert!(rx.try_recv().is_err());
    }
}
