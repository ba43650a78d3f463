//! The task's check, in the order a mistake would show: the prompt, the
//! replay corpus, the harness builds, the harness fits the contract, the
//! cases load, the committed candidate defines the entry and compiles,
//! `run_input` decodes every case's input without panicking (`inputs`),
//! and the committed candidate runs over the cases with a `judge` that
//! does not panic on its answers. All generated code is built in one cargo build, in a
//! package of the check's own (`WORK/taskcheck/TASK`, with its own lock, so
//! it never waits for a batch holding the task's package) that shares the
//! warm target directory.
//!
//! A check that passed leaves a stamp named after the digest of everything
//! it read (`WORK/taskcheck/TASK/passed/DIGEST`, in the package's slot 0
//! whichever slot the check built in); a batch finds it and does not check
//! again. `assay task check` always checks afresh.

#![expect(
    clippy::result_large_err,
    reason = "a task's mistake is the check's one error, made at most once per batch"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};

use super::committed::{self, CommittedFault};
use super::contract::{self, ContractItem, Fault, Finding};
use super::mistake::{HarnessFailed, Mistake, TaskError};
use crate::build::package::{BuildReport, ModuleKey, Package, Profile};
use crate::draw::ReplayPool;
use crate::sandbox::Sandbox;
use crate::score::{self, CaseOutcome, HarnessFault, RunLimits, ScoreVerdict};
use crate::spec::Spec;

/// Whether a stamp of an earlier check may stand for this one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheUse {
    /// A batch's check: a stamp for the same files is enough.
    Use,
    /// `assay task check`: check afresh, and stamp.
    Refresh,
}

/// How a check that found no mistake went.
#[derive(Debug)]
pub enum Outcome {
    /// Checked now.
    Checked(Report),
    /// Passed before with exactly these files; the stamp that says so.
    Cached { stamp: PathBuf },
}

/// What a check found, mistakes aside.
#[derive(Debug)]
pub struct Report {
    pub cases: usize,
    pub replies: usize,
    /// The committed candidate's run over the cases.
    pub committed: ScoreVerdict,
    pub committed_passed: usize,
    pub warnings: Vec<Warning>,
}

/// Something that does not stop a batch but is likely not what the author
/// meant.
#[derive(Debug)]
pub enum Warning {
    /// The prompt never names the entry function.
    PromptLacksEntry { prompt: PathBuf, entry: String },
    /// The replay pool is the task's pool and cannot serve `draw.n`.
    ShortReplay {
        file: PathBuf,
        available: usize,
        n: usize,
    },
    /// The committed candidate does not pass every case. Not a mistake:
    /// a batch's candidate that passes more replaces it (`--promote`).
    CommittedFails {
        committed: PathBuf,
        passed: usize,
        total: usize,
        verdict: ScoreVerdict,
        first: Option<FirstFailure>,
    },
}

/// The first case the committed candidate does not pass.
#[derive(Debug)]
pub struct FirstFailure {
    pub cases: PathBuf,
    pub line: usize,
    pub name: Option<String>,
    pub outcome: CaseOutcome,
}

/// Writes a stamp whole: into a file of this process's own beside it,
/// then renamed into place, since a batch in another slot may write the
/// same stamp or look for it at the same moment.
fn write_stamp(stamp: &Path, text: &str) -> Result<()> {
    let dir = stamp.parent().expect("the stamp is in a folder");
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut partial = stamp.as_os_str().to_owned();
    partial.push(format!(".{}.partial", std::process::id()));
    std::fs::write(&partial, text)
        .and_then(|()| std::fs::rename(&partial, stamp))
        .with_context(|| format!("cannot write {}", stamp.display()))
}

/// Bumped when the check learns something new, so that stamps of an older
/// check do not stand for it.
const CHECK_VERSION: &str = "assay task check 2";

/// The check's targets; named after the task, because binaries of every
/// package land in the shared target directory under their own names.
struct Targets {
    contract: String,
    cases: String,
    judge: String,
    committed: String,
    inputs: String,
}

impl Targets {
    fn new(task: &str) -> Targets {
        Targets {
            contract: format!("check_{task}_contract"),
            cases: format!("check_{task}_cases"),
            judge: format!("check_{task}_judge"),
            committed: format!("check_{task}_committed"),
            inputs: format!("check_{task}_inputs"),
        }
    }
}

/// Checks `spec`'s task. A mistake is an error that is bad input: a
/// `TaskError`, a `SpecError` (cases the harness rejects), a `DrawError`
/// (a replay corpus line), or `BuildTimedOut`.
pub async fn check(
    spec: &Spec,
    work_dir: &Path,
    target_dir: &Path,
    build_timeout: Duration,
    cache: CacheUse,
) -> Result<Outcome> {
    if spec.prompt.trim().is_empty() {
        return Err(TaskError {
            file: spec.prompt_path.clone(),
            line: None,
            mistake: Mistake::EmptyPrompt,
        }
        .into());
    }
    let replay = ReplayPool::open("replay", &spec.draw.replay)?;
    let mut package = tokio::task::spawn_blocking({
        let (spec, work_dir, target_dir) = (
            spec.clone(),
            work_dir.join("taskcheck"),
            target_dir.to_path_buf(),
        );
        move || Package::open(&spec, &work_dir, &target_dir)
    })
    .await
    .context("opening the task check's package panicked")??;
    package.set_build_timeout(build_timeout);
    let stamp = package
        .home()
        .join("passed")
        .join(digest(spec, package.toolchain())?);
    if cache == CacheUse::Use && stamp.is_file() {
        tracing::info!(stamp = %stamp.display(), "task check: passed before with these files, not built again");
        return Ok(Outcome::Cached { stamp });
    }
    tracing::info!(task = %spec.name, "task check: building the harness contract's probe, the cases' checker, the judge and the committed candidate");

    let h = &spec.harness.crate_name;
    // Named by the package folder too: a same-named task in another build
    // slot (an edited or carried copy) builds into the same target
    // directories.
    let t = Targets::new(&format!("{}_{}", spec.name, package.target_tag()));
    package.write_lib_root(&t.contract, &contract::probe_source(h))?;
    package.write_bin(&t.cases, &super::cases::checker_root(h))?;
    package.write_bin(&t.judge, &score::judge_root(h))?;
    package.write_module(&ModuleKey::Committed, &spec.committed.source)?;
    package.write_bin(&t.committed, &score::image_root(h, &ModuleKey::Committed))?;
    let mut bins = vec![t.cases.clone(), t.judge.clone(), t.committed.clone()];
    let probe_module = super::inputs::module_source(spec);
    if let Some(module) = &probe_module {
        package.write_cands_file(&format!("{}.rs", super::inputs::MODULE), module)?;
        package.write_bin(&t.inputs, &super::inputs::probe_root(h))?;
        bins.push(t.inputs.clone());
    }
    let libs = [t.contract.clone()];
    package.set_targets(
        bins.iter().map(String::as_str),
        libs.iter().map(String::as_str),
    )?;
    let report = package
        .build_targets(Profile::Score, &bins, &libs, |_, _| {})
        .await?;
    if report.timed_out {
        return Err(package.timed_out("the task's check").into());
    }
    harness_builds(spec, &report)?;
    contract_fits(spec, &report, &t.contract)?;
    let sandbox = Arc::new(Sandbox::find(spec.limits.processes));
    super::cases::check(
        built(spec, &report, &t.cases, "the cases' checker")?,
        spec,
        &sandbox,
    )
    .await?;
    committed_builds(spec, &report, &t.committed)?;
    let judge = built(spec, &report, &t.judge, "the judge")?;
    let image = built(
        spec,
        &report,
        &t.committed,
        "the committed candidate's image",
    )?;

    let oracle = score::Oracle::new(
        judge,
        Arc::from(spec.cases.text.as_str()),
        spec.cases.count,
        sandbox.clone(),
        spec.limits.memory_bytes,
    )
    .await?;
    // Built from the committed candidate, which compiled: a probe that did
    // not (a `const fn` entry cannot panic at run time) is skipped.
    match report.built.get(&t.inputs) {
        Some(probe) => super::inputs::check(probe, spec, oracle.inputs(), &sandbox)
            .await
            .map_err(|e| located(spec, e))?,
        None => tracing::info!(
            entry = %spec.entry,
            "task check: no input probe (no top-level `fn` entry in the committed candidate \
             to stand in for): `run_input`'s panics are not told from the entry's"
        ),
    }
    let scored = score::run_one(
        image,
        ModuleKey::Committed,
        &oracle,
        RunLimits::from_spec(&spec.limits),
        &sandbox,
    )
    .await
    .map_err(|e| located(spec, e))?
    .scored;
    drop(package);

    let mut warnings = Vec::new();
    if !spec.prompt.contains(spec.entry.as_str()) {
        warnings.push(Warning::PromptLacksEntry {
            prompt: spec.prompt_path.clone(),
            entry: spec.entry.clone(),
        });
    }
    if spec.draw.pools.is_empty() && replay.len() < spec.draw.n {
        warnings.push(Warning::ShortReplay {
            file: spec.draw.replay.clone(),
            available: replay.len(),
            n: spec.draw.n,
        });
    }
    if scored.passed < scored.total {
        let first = scored
            .cases
            .iter()
            .position(|c| *c != CaseOutcome::Pass)
            .map(|i| FirstFailure {
                cases: spec.cases.path.clone(),
                line: case_line(&spec.cases.text, i),
                name: spec.cases.names.get(i).cloned().flatten(),
                outcome: scored.cases[i],
            });
        warnings.push(Warning::CommittedFails {
            committed: spec.committed.path.clone(),
            passed: scored.passed,
            total: scored.total,
            verdict: scored.verdict,
            first,
        });
    }
    write_stamp(
        &stamp,
        &format!(
            "task `{}` ({}) passed its check; committed candidate {}\n",
            spec.name,
            spec.path.display(),
            scored.verdict
        ),
    )?;
    Ok(Outcome::Checked(Report {
        cases: spec.cases.count,
        replies: replay.len(),
        committed: scored.verdict,
        committed_passed: scored.passed,
        warnings,
    }))
}

/// The digest of everything the check reads: the spec's own (entry, cases,
/// committed candidate, harness files, limits), the spec file (policy and
/// every other key), the prompt, the replay corpus, the toolchain, and the
/// check itself.
fn digest(spec: &Spec, toolchain: Option<&str>) -> Result<String> {
    let spec_text = crate::support::input::read_to_string(&spec.path)
        .with_context(|| format!("cannot read {}", spec.path.display()))?;
    let replay = crate::support::input::read_to_string(&spec.draw.replay)
        .with_context(|| format!("cannot read {}", spec.draw.replay.display()))?;
    let mut h = blake3::Hasher::new();
    for part in [
        CHECK_VERSION,
        env!("CARGO_PKG_VERSION"),
        &crate::task::spec_digest(spec),
        &spec_text,
        &spec.prompt,
        &replay,
        toolchain.unwrap_or(""),
    ] {
        h.update(&(part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    Ok(h.finalize().to_hex()[..32].to_owned())
}

/// A harness that does not compile is reported at its first error in the
/// harness's own files; a dependency's at the harness's manifest.
fn harness_builds(spec: &Spec, report: &BuildReport) -> Result<(), TaskError> {
    let errors = &report.dependency_errors;
    // Cargo hands rustc the harness's path with `..` resolved; the spec's
    // may have them.
    let harness_dir = std::fs::canonicalize(&spec.harness.dir).unwrap_or_default();
    let in_harness = errors.iter().find_map(|d| {
        let (file, line) = d.at.as_ref()?;
        let path = std::fs::canonicalize(spec.harness.dir.join(file)).ok()?;
        path.starts_with(&harness_dir).then_some((d, path, *line))
    });
    match (in_harness, errors.first()) {
        (Some((diag, file, line)), _) => Err(TaskError {
            file,
            line: Some(line),
            mistake: Mistake::HarnessDoesNotBuild {
                compiler: diag.one_line(),
            },
        }),
        (None, Some(diag)) => Err(TaskError {
            file: spec.harness.dir.join("Cargo.toml"),
            line: None,
            mistake: Mistake::DependencyDoesNotBuild {
                compiler: diag.one_line(),
            },
        }),
        (None, None) => Ok(()),
    }
}

/// The first contract item the probe found wrong, at the line of the
/// harness's root where the item is defined (when it is defined there).
fn contract_fits(spec: &Spec, report: &BuildReport, target: &str) -> Result<(), TaskError> {
    let Some(diags) = report.diagnostics.get(target) else {
        return Ok(());
    };
    let root = &spec.harness.root;
    let source = crate::support::input::read_to_string(root).unwrap_or_default();
    let (item, fault, diag) = match contract::finding(&diags.messages, &format!("{target}.lib.rs"))
    {
        None => return Ok(()),
        Some(Finding::Unattributed(diag)) => {
            return Err(TaskError {
                file: root.clone(),
                line: None,
                mistake: Mistake::Unexplained {
                    what: "the contract's probe",
                    compiler: diag.one_line(),
                },
            })
        }
        Some(Finding::Broken { item, fault, diag }) => (item, fault, diag),
    };
    let declaration = match item {
        ContractItem::Entry => committed::fn_pointer_type(&spec.committed.source, &spec.entry)
            .map_or_else(
                || item.declaration().to_owned(),
                |ty| format!("pub type Entry = {ty};"),
            ),
        _ => item.declaration().to_owned(),
    };
    let line = match fault {
        Fault::Missing => None,
        _ => contract::item_line(&source, item.name()),
    };
    Err(TaskError {
        file: root.clone(),
        line,
        mistake: Mistake::Contract {
            item,
            fault,
            declaration,
            compiler: diag.one_line(),
        },
    })
}

/// The committed candidate defines the entry at the harness's `Entry` type
/// and compiles.
fn committed_builds(spec: &Spec, report: &BuildReport, target: &str) -> Result<(), TaskError> {
    let Some(diags) = report.diagnostics.get(target) else {
        return Ok(());
    };
    let module = ModuleKey::Committed.file();
    let lines = spec.committed.source.lines().count();
    let Some((fault, diag)) = committed::fault(&diags.messages, &module, lines) else {
        return Ok(());
    };
    let compiler = diag.one_line();
    let entry = spec.entry.clone();
    let (file, line, mistake) = match fault {
        CommittedFault::NoEntry => (
            spec.committed.path.clone(),
            None,
            Mistake::NoEntry { entry, compiler },
        ),
        CommittedFault::EntryType => (
            spec.committed.path.clone(),
            committed::fn_line(&spec.committed.source, &spec.entry),
            Mistake::EntryType { entry, compiler },
        ),
        CommittedFault::DoesNotCompile { line } => (
            spec.committed.path.clone(),
            Some(line),
            Mistake::CommittedDoesNotBuild { compiler },
        ),
        CommittedFault::Elsewhere => (
            spec.harness.root.clone(),
            None,
            Mistake::Unexplained {
                what: "the committed candidate's scoring image",
                compiler,
            },
        ),
    };
    Err(TaskError {
        file,
        line,
        mistake,
    })
}

/// A target's executable; one that did not build for a reason no earlier
/// step named is reported with its own first error, else with cargo's.
fn built<'a>(
    spec: &Spec,
    report: &'a BuildReport,
    target: &str,
    what: &'static str,
) -> Result<&'a Path> {
    if let Some(exe) = report.built.get(target) {
        return Ok(exe);
    }
    match report
        .diagnostics
        .get(target)
        .and_then(|d| d.messages.iter().find(|m| m.is_error()))
    {
        Some(diag) => Err(TaskError {
            file: spec.harness.root.clone(),
            line: None,
            mistake: Mistake::Unexplained {
                what,
                compiler: diag.one_line(),
            },
        }
        .into()),
        None => Err(anyhow!(
            "{what} of the task's check did not build:\n{}",
            report.stderr
        )),
    }
}

/// A [`HarnessFault`] as bad input: the line of the cases file where the
/// case is; any other error as it was.
fn located(spec: &Spec, e: anyhow::Error) -> anyhow::Error {
    match e.downcast::<HarnessFault>() {
        Ok(fault) => harness_fault(spec, fault).into(),
        Err(e) => e,
    }
}

/// A harness fault, at its case's line of the cases file.
fn harness_fault(spec: &Spec, fault: HarnessFault) -> TaskError {
    TaskError {
        file: spec.cases.path.clone(),
        line: Some(case_line(&spec.cases.text, fault.case)),
        mistake: Mistake::HarnessPanics {
            name: spec.cases.names.get(fault.case).cloned().flatten(),
            fault,
        },
    }
}

/// A batch's run's error: a harness fault becomes [`HarnessFailed`], the
/// line the check gives it; any other error stays as it was.
pub fn harness_fault_in_batch(spec: &Spec, e: anyhow::Error) -> anyhow::Error {
    match e.downcast::<HarnessFault>() {
        Ok(fault) => HarnessFailed(harness_fault(spec, fault)).into(),
        Err(e) => e,
    }
}

/// The 1-based line of the `index`th case (cases are the non-blank lines).
fn case_line(text: &str, index: usize) -> usize {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .nth(index)
        .map_or(0, |(i, _)| i + 1)
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Warning::PromptLacksEntry { prompt, entry } => write!(
                f,
                "{}: the prompt never names `{entry}`, the function every candidate must \
                 define: give its exact name and signature",
                prompt.display()
            ),
            Warning::ShortReplay { file, available, n } => write!(
                f,
                "{}: the replay corpus holds {available} replies and `draw.n` is {n}: a run \
                 from it needs -n {available} or fewer",
                file.display()
            ),
            Warning::CommittedFails {
                committed,
                passed,
                total,
                verdict,
                first,
            } => {
                write!(
                    f,
                    "{}: the committed candidate passes {passed} of {total} cases",
                    committed.display()
                )?;
                if !verdict.finished() {
                    write!(f, " and ends {verdict}")?;
                }
                if let Some(first) = first {
                    let name = first
                        .name
                        .as_ref()
                        .map(|n| format!(" (`{n}`)"))
                        .unwrap_or_default();
                    let how = match first.outcome {
                        CaseOutcome::Pass => "passed",
                        CaseOutcome::Fail => "a wrong answer",
                        CaseOutcome::Panic => "a panic",
                        CaseOutcome::Timeout => "out of time",
                        CaseOutcome::Crash => "a crash",
                        CaseOutcome::NotRun => "not reached",
                    };
                    write!(
                        f,
                        "; the first it fails is {}:{}{name}, {how}",
                        first.cases.display(),
                        first.line
                    )?;
                }
                f.write_str(
                    "; if the candidate is right, fix the case or the harness's `judge`; if \
                     not, a better candidate replaces it (`assay run --promote`)",
                )
            }
        }
    }
}

impl Report {
    /// What `assay task check` prints when the task is ready.
    pub fn render(&self, spec: &Spec) -> String {
        let items: Vec<&str> = ContractItem::ALL.iter().map(|i| i.name()).collect();
        format!(
            "task `{}` is ready ({})\n\
             \x20 harness    `{}` builds and has {}\n\
             \x20 cases      {} loaded by the harness\n\
             \x20 committed  `{}` compiles and passes {} of {} cases\n\
             \x20 replay     {} recorded replies\n",
            spec.name,
            spec.path.display(),
            spec.harness.package,
            items.join(", "),
            self.cases,
            spec.entry,
            self.committed_passed,
            self.cases,
            self.replies,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_line_skips_blank_lines() {
        let text = "{}\n\n{}\n  \n{}\n";
        assert_eq!(case_line(text, 0), 1);
        assert_eq!(case_line(text, 1), 3);
        assert_eq!(case_line(text, 2), 5);
    }
}
