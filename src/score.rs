//! Score: run every compiled candidate over the oracle cases.
//!
//! The compiled candidates and the committed one are linked with the harness
//! into one scoring binary (`build_scorer`). Each candidate then runs in its
//! own child process (`run_one`) with a wall-time limit, resource limits, its
//! own process group (killed whole), an empty environment, a fresh temporary
//! working directory and the confinement of [`crate::sandbox`] (Landlock, a
//! network namespace, pids and memory cgroups, an unprivileged uid when
//! assay is root), so a panic, a loop or an abort costs
//! that candidate its score and nothing else. Results come back over a
//! nonce-framed protocol on stdout (see `score/runner_main.rs`). Each child is
//! reaped with `wait4`, which gives its CPU time for ranking.

use std::collections::BTreeSet;
use std::fmt;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::package::{ModuleKey, Package, Profile, SCORER};
use crate::sandbox::Sandbox;
use crate::spec::{Isolation, Limits};

const RUNNER_MAIN: &str = include_str!("score/runner_main.rs");

/// How often a run's memory cgroup is checked for an OOM kill.
const OOM_WATCH_PERIOD: Duration = Duration::from_millis(50);

/// How one candidate's scoring run ended. The string form is stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScoreVerdict {
    /// Ran every case.
    Scored { passed: usize, total: usize },
    /// Killed at the wall or CPU limit after `completed` cases.
    Timeout { completed: usize, total: usize },
    /// Killed by a signal it raised itself (abort, stack overflow, segfault).
    Crashed { signal: i32 },
    /// An allocation failed under the address-space limit, or the run's
    /// processes together reached its memory cgroup's limit.
    OutOfMemory,
    /// Printed more than the output cap.
    OutputCapExceeded,
    /// Exited before reporting every case.
    ExitedEarly { code: i32, completed: usize },
    /// Results did not follow the protocol (a forged or garbled line).
    ProtocolError,
    /// Compiled alone, but could not be linked into the scoring binary.
    ScoreBuildFailed,
}

/// One candidate's scoring result.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    pub key: ModuleKey,
    pub verdict: ScoreVerdict,
    /// Cases passed before the run ended, whatever the verdict.
    pub passed: usize,
    pub total: usize,
    pub wall: Duration,
    /// CPU time (user + system) of the run's children, from `wait4`.
    pub cpu: Duration,
    /// Each case's outcome in file order (`NotRun` past where a run ended).
    pub cases: Vec<CaseOutcome>,
    /// Fresh children started under per-case isolation after a case failed.
    pub restarts: usize,
    /// The most processes the run held at once, where a cgroup counted them.
    pub peak_processes: Option<u64>,
    /// The tail of the child's stderr, for diagnosis.
    pub stderr: String,
}

/// What became of one case. Stored as one letter per case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaseOutcome {
    Pass,
    Fail,
    /// The case panicked (caught; the run went on).
    Panic,
    /// The case was running when the time ran out.
    Timeout,
    /// The case was running when the child crashed or exited.
    Crash,
    /// Never reached.
    NotRun,
}

/// Limits on one candidate's run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunLimits {
    /// Wall time of the whole run (without isolation).
    pub wall: Duration,
    /// Wall time of one case (with per-case isolation).
    pub case_wall: Duration,
    pub isolation: Isolation,
    pub address_space_bytes: u64,
    pub file_size_bytes: u64,
    pub open_files: u64,
    /// Bytes of stdout that are not results before the run is stopped.
    pub output_cap_bytes: usize,
}

/// The scoring binary and the candidates that could not be linked into it.
#[derive(Debug)]
pub struct ScorerBuild {
    pub exe: PathBuf,
    pub included: Vec<ModuleKey>,
    /// With the rendered errors that blamed them.
    pub excluded: Vec<(ModuleKey, String)>,
}

impl RunLimits {
    pub fn with_wall(wall: Duration) -> RunLimits {
        RunLimits {
            wall,
            case_wall: wall,
            isolation: Isolation::None,
            address_space_bytes: 1 << 30,
            file_size_bytes: 16 << 20,
            open_files: 64,
            output_cap_bytes: 1 << 20,
        }
    }

    /// The limits a spec asks for.
    pub fn from_spec(limits: &Limits) -> RunLimits {
        RunLimits {
            case_wall: limits.case_wall,
            isolation: limits.isolation,
            address_space_bytes: limits.memory_bytes,
            ..RunLimits::with_wall(limits.wall)
        }
    }
}

impl CaseOutcome {
    pub fn letter(&self) -> char {
        match self {
            CaseOutcome::Pass => 'p',
            CaseOutcome::Fail => 'f',
            CaseOutcome::Panic => 'x',
            CaseOutcome::Timeout => 't',
            CaseOutcome::Crash => 'c',
            CaseOutcome::NotRun => '-',
        }
    }

    pub fn from_letter(c: char) -> Option<CaseOutcome> {
        Some(match c {
            'p' => CaseOutcome::Pass,
            'f' => CaseOutcome::Fail,
            'x' => CaseOutcome::Panic,
            't' => CaseOutcome::Timeout,
            'c' => CaseOutcome::Crash,
            '-' => CaseOutcome::NotRun,
            _ => return None,
        })
    }
}

/// The stored form of a run's case outcomes: one letter per case.
pub fn case_letters(cases: &[CaseOutcome]) -> String {
    cases.iter().map(CaseOutcome::letter).collect()
}

/// Parses [`case_letters`] back; `None` on a letter it does not know.
pub fn parse_case_letters(text: &str) -> Option<Vec<CaseOutcome>> {
    text.chars().map(CaseOutcome::from_letter).collect()
}

impl ScoreVerdict {
    /// Ran to the end within every limit.
    pub fn finished(&self) -> bool {
        matches!(self, ScoreVerdict::Scored { .. })
    }
}

/// Builds one scoring binary holding `keys`. Candidate modules must already
/// be in the package (the probe wrote them). A candidate that compiled alone
/// but breaks the joint build (a clashing `#[no_mangle]` symbol, say) is
/// blamed by the files its errors point into, dropped, and the build retried.
pub async fn build_scorer(
    package: &Package,
    keys: &[ModuleKey],
    harness_crate: &str,
) -> Result<ScorerBuild> {
    let mut included: BTreeSet<ModuleKey> = keys.iter().cloned().collect();
    let mut excluded = Vec::new();
    package.set_bins([SCORER])?;
    for _round in 0..4 {
        package.write_bin(SCORER, &scorer_root(harness_crate, &included))?;
        let report = package
            .build(Profile::Score, &[SCORER.to_owned()], |_| {})
            .await?;
        if let Some(exe) = report.built.get(SCORER) {
            return Ok(ScorerBuild {
                exe: exe.clone(),
                included: included.into_iter().collect(),
                excluded,
            });
        }
        let diag = report.diagnostics.get(SCORER).cloned().unwrap_or_default();
        let blamed: Vec<ModuleKey> = included
            .iter()
            .filter(|k| diag.error_files.iter().any(|f| f.ends_with(&k.file())))
            .cloned()
            .collect();
        if blamed.is_empty() && report.timed_out {
            return Err(package.timed_out("the scoring binary's build").into());
        }
        if blamed.is_empty() {
            bail!(
                "the scoring binary did not build and no candidate is to blame:\n{}{}",
                report.dependency_errors.concat(),
                if diag.rendered.is_empty() {
                    &report.stderr
                } else {
                    &diag.rendered
                }
            );
        }
        for key in blamed {
            included.remove(&key);
            excluded.push((key, diag.rendered.clone()));
        }
    }
    bail!("the scoring binary did not build after dropping the candidates blamed for it")
}

fn scorer_root(harness_crate: &str, keys: &BTreeSet<ModuleKey>) -> String {
    let mut text = format!(
        "// Scoring binary; generated by assay.\n#![allow(warnings)]\n\
         extern crate {harness_crate} as __assay_harness;\n\n"
    );
    for key in keys {
        text.push_str(&format!("#[path = \"{0}.rs\"]\nmod {0};\n", key.name()));
    }
    text.push_str("\nfn entry(key: &str) -> Option<__assay_harness::Entry> {\n    match key {\n");
    for key in keys {
        let name = key.name();
        text.push_str(&format!(
            "        \"{name}\" => Some({name}::__ASSAY_ENTRY),\n"
        ));
    }
    text.push_str("        _ => None,\n    }\n}\n\n");
    text.push_str(RUNNER_MAIN);
    text
}

/// Runs every key on `parallel` slots; drain the set to collect results as
/// they finish.
pub fn spawn_all(
    exe: &Path,
    keys: Vec<ModuleKey>,
    cases_text: Arc<str>,
    total: usize,
    limits: RunLimits,
    parallel: usize,
    sandbox: Arc<Sandbox>,
) -> JoinSet<Result<Scored>> {
    let slots = Arc::new(Semaphore::new(parallel.max(1)));
    let exe: Arc<Path> = exe.into();
    let mut set = JoinSet::new();
    for key in keys {
        let (slots, exe, cases_text, sandbox) = (
            slots.clone(),
            exe.clone(),
            cases_text.clone(),
            sandbox.clone(),
        );
        set.spawn(async move {
            let _slot = slots.acquire().await.expect("semaphore never closed");
            run_one(&exe, key, &cases_text, total, limits, &sandbox).await
        });
    }
    set
}

/// Runs one candidate over all cases under `limits`. Whatever the candidate
/// does is a verdict; an error means the host could not run it at all (no
/// temporary directory, the scorer would not start).
///
/// Without isolation one child runs every case and the first loop, crash
/// or early exit ends the run. With per-case isolation each case has its
/// own wall limit, and a case that times out, crashes or exits is marked
/// (`t` or `c`) and the run goes on in a fresh child from the next case; a
/// run that floods its output or breaks the protocol still ends there, as
/// those attack the result channel rather than fail a case.
pub async fn run_one(
    exe: &Path,
    key: ModuleKey,
    cases_text: &str,
    total: usize,
    limits: RunLimits,
    sandbox: &Sandbox,
) -> Result<Scored> {
    let start = Instant::now();
    let mut cases = vec![CaseOutcome::NotRun; total];
    let mut first = 0;
    let mut restarts = 0;
    let mut cpu = Duration::ZERO;
    let mut peak: Option<u64> = None;
    let mut stderr = String::new();
    let verdict = loop {
        let attempt = run_child(exe, &key, cases_text, first, total, &limits, sandbox).await?;
        cpu += attempt.cpu;
        peak = peak.max(attempt.peak_processes);
        if !attempt.stderr.is_empty() {
            stderr = attempt.stderr.clone();
        }
        for (i, outcome) in attempt.outcomes.iter().enumerate() {
            cases[first + i] = *outcome;
        }
        let completed = first + attempt.outcomes.len();
        let passed = cases.iter().filter(|c| **c == CaseOutcome::Pass).count();
        let case_failure = match attempt.end {
            End::Timeout | End::CpuLimit => Some(CaseOutcome::Timeout),
            End::Signal(_) | End::OutOfMemory | End::Exited(_) => Some(CaseOutcome::Crash),
            _ => None,
        };
        match (limits.isolation, case_failure) {
            (Isolation::PerCase, Some(outcome)) if completed < total => {
                cases[completed] = outcome;
                first = completed + 1;
                if first >= total {
                    let passed = cases.iter().filter(|c| **c == CaseOutcome::Pass).count();
                    break ScoreVerdict::Scored { passed, total };
                }
                restarts += 1;
            }
            _ => break attempt.end.verdict(passed, completed, total),
        }
    };
    let passed = cases.iter().filter(|c| **c == CaseOutcome::Pass).count();
    Ok(Scored {
        key,
        verdict,
        passed,
        total,
        wall: start.elapsed(),
        cpu,
        cases,
        restarts,
        peak_processes: peak,
        stderr,
    })
}

/// How one child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// Reported every case and `done`, and exited 0.
    Finished,
    /// Killed at the wall-time limit.
    Timeout,
    /// Killed by `RLIMIT_CPU` (SIGXCPU).
    CpuLimit,
    OutputCap,
    /// Killed by a signal it raised itself.
    Signal(i32),
    /// An allocation failed (Rust's alloc error handler, then abort), or
    /// the kernel OOM-killed a process of the run at its memory cgroup's
    /// limit.
    OutOfMemory,
    /// Exited before reporting every case.
    Exited(i32),
    /// A malformed or forged result line, or an exit 0 with results missing.
    Protocol,
}

impl End {
    fn verdict(self, passed: usize, completed: usize, total: usize) -> ScoreVerdict {
        match self {
            End::Finished => ScoreVerdict::Scored { passed, total },
            End::Timeout | End::CpuLimit => ScoreVerdict::Timeout { completed, total },
            End::OutputCap => ScoreVerdict::OutputCapExceeded,
            End::Signal(signal) => ScoreVerdict::Crashed { signal },
            End::OutOfMemory => ScoreVerdict::OutOfMemory,
            End::Exited(code) => ScoreVerdict::ExitedEarly { code, completed },
            End::Protocol => ScoreVerdict::ProtocolError,
        }
    }
}

/// One child's run over cases `first..`.
struct Attempt {
    /// Outcomes of cases `first..first + outcomes.len()`.
    outcomes: Vec<CaseOutcome>,
    end: End,
    cpu: Duration,
    peak_processes: Option<u64>,
    stderr: String,
}

/// Kills a child's process group when dropped, so no path out of
/// `run_child` (an error, a cancelled task) leaves it running.
struct GroupKill(i32);

impl Drop for GroupKill {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}

async fn run_child(
    exe: &Path,
    key: &ModuleKey,
    cases_text: &str,
    first: usize,
    total: usize,
    limits: &RunLimits,
    sandbox: &Sandbox,
) -> Result<Attempt> {
    let workdir = tempfile::Builder::new()
        .prefix("assay-run-")
        .tempdir()
        .context("cannot create the run's working directory")?;
    // A path the run's user can execute (a copy when it could not reach
    // the original); made once per batch.
    let exe = sandbox.runnable_exe(exe)?;
    let exe = exe.as_path();
    let mut confinement = sandbox.prepare_run(exe, workdir.path(), limits.address_space_bytes)?;
    let steps = confinement.child_steps();
    let nonce = nonce()?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg(key.name())
        .env_clear()
        .current_dir(workdir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let rlimits = *limits;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure only makes async-signal-safe system calls
    // (setrlimit, write, unshare, setgroups, setresgid, setresuid, prctl,
    // landlock_restrict_self, getppid).
    //
    // Order: the rlimits (with hard limits, which the unprivileged user
    // cannot raise again), then the sandbox's steps (cgroups, netns, the
    // drop to the unprivileged user, no_new_privs, Landlock; see
    // `ChildSteps::apply`), then the parent-death signal, last because
    // changing credentials clears it.
    unsafe {
        cmd.pre_exec(move || {
            apply_rlimits(&rlimits)?;
            steps.apply()?;
            die_with_parent(parent)
        });
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start {}", exe.display()))?;
    confinement.spawned();
    let pid = child.id() as i32;
    // Listed while it runs, so a second Ctrl-C can kill it (`kill_live_groups`).
    let _group = LiveGroup::register(pid);
    // Kills the group if this future is dropped (Ctrl-C cancels the batch).
    let _kill = GroupKill(pid);
    // Reaped here with wait4, for the child's own CPU time; tokio never
    // sees this child.
    let mut waiter = tokio::task::spawn_blocking(move || wait4(pid));

    let stdin = tokio::process::ChildStdin::from_std(child.stdin.take().expect("piped stdin"))
        .context("cannot poll the child's stdin")?;
    let mut stdout =
        tokio::process::ChildStdout::from_std(child.stdout.take().expect("piped stdout"))
            .context("cannot poll the child's stdout")?;
    let stderr = tokio::process::ChildStderr::from_std(child.stderr.take().expect("piped stderr"))
        .context("cannot poll the child's stderr")?;
    let input = format!("{nonce} {first}\n{cases_text}");
    let writer = tokio::spawn(async move {
        let mut stdin = stdin;
        // A candidate that exits early closes the pipe; that is its verdict,
        // not an error here.
        let _ = stdin.write_all(input.as_bytes()).await;
    });
    let stderr_task = tokio::spawn(async move {
        let mut stderr = stderr;
        let mut kept = Vec::new();
        let mut buf = [0u8; 8192];
        while let Ok(n) = stderr.read(&mut buf).await {
            if n == 0 {
                break;
            }
            if kept.len() < 64 * 1024 {
                kept.extend_from_slice(&buf[..n]);
            }
        }
        String::from_utf8_lossy(&kept).into_owned()
    });

    let mut protocol = Protocol::new(nonce, total, first, limits.output_cap_bytes);
    let per_case = limits.isolation == Isolation::PerCase;
    let budget = if per_case {
        limits.case_wall
    } else {
        limits.wall
    };
    let mut deadline = tokio::time::Instant::now() + budget;
    let mut exited: Option<(i32, Duration)> = None;
    let mut timed_out = false;
    let mut oom_killed = false;
    // A v1 memory cgroup kills only the largest process on OOM; the rest
    // of the run may wait on it forever, so the count is watched.
    let watch_memory = confinement.watches_memory();
    let mut oom_watch = tokio::time::interval(OOM_WATCH_PERIOD);
    oom_watch.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        tokio::select! {
            _ = oom_watch.tick(), if watch_memory => {
                if confinement.oom_killed() {
                    oom_killed = true;
                    break;
                }
            }
            read = stdout.read(&mut buf) => {
                let n = read.unwrap_or(0);
                if n == 0 {
                    break;
                }
                let before = protocol.completed;
                if !protocol.feed(&buf[..n]) {
                    break;
                }
                if per_case && protocol.completed > before {
                    deadline = tokio::time::Instant::now() + budget;
                }
            }
            waited = &mut waiter, if exited.is_none() => {
                exited = Some(waited.context("the wait task panicked")??);
                // What the child left behind (a forked process holding
                // stdout open) must not keep the read going.
                kill_group(pid);
                confinement.kill_all();
            }
            _ = tokio::time::sleep_until(deadline) => {
                timed_out = true;
                break;
            }
        }
    }
    kill_group(pid);
    confinement.kill_all();
    let (status, cpu) = match exited {
        Some(done) => done,
        None => waiter.await.context("the wait task panicked")??,
    };
    writer.abort();
    let peak_processes = confinement.peak_processes();
    oom_killed = oom_killed || confinement.oom_killed();
    // Removing the run's cgroup may wait for the kernel to finish reaping;
    // that wait belongs on a blocking thread, not on the runtime's.
    let _ = tokio::task::spawn_blocking(move || drop(confinement)).await;
    let stderr = stderr_task.await.unwrap_or_default();

    let signal = libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status));
    // An OOM kill in the run's memory cgroup decides the verdict whatever
    // followed it: the SIGKILL it sent, a parent left waiting for the
    // killed child until the wall limit, or the results it still printed.
    let end = if oom_killed {
        End::OutOfMemory
    } else if timed_out {
        End::Timeout
    } else if signal == Some(libc::SIGXCPU) {
        End::CpuLimit
    } else if protocol.over_cap {
        End::OutputCap
    } else if let Some(signal) = signal {
        if stderr.contains("memory allocation of") {
            End::OutOfMemory
        } else {
            End::Signal(signal)
        }
    } else if protocol.broken {
        End::Protocol
    } else if protocol.done && libc::WEXITSTATUS(status) == 0 {
        if protocol.announced == Some(total) && protocol.completed == total {
            End::Finished
        } else {
            End::Protocol
        }
    } else {
        End::Exited(libc::WEXITSTATUS(status))
    };
    Ok(Attempt {
        outcomes: protocol.outcomes,
        end,
        cpu,
        peak_processes,
        stderr,
    })
}

/// Waits for `pid` and returns its wait status and CPU time (user +
/// system, its own and that of the children it waited for).
fn wait4(pid: i32) -> Result<(i32, Duration)> {
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waits for our own child, writing into valid locals.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err).context("cannot wait for the candidate");
        }
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    Ok((status, tv(usage.ru_utime) + tv(usage.ru_stime)))
}

/// Parses the scorer's stdout as it streams in.
struct Protocol {
    nonce: String,
    total: usize,
    cap: usize,
    pending: Vec<u8>,
    other_bytes: usize,
    announced: Option<usize>,
    /// The index of the next case expected (starts at the first case asked for).
    completed: usize,
    /// Outcomes of the cases reported, in order.
    outcomes: Vec<CaseOutcome>,
    done: bool,
    broken: bool,
    over_cap: bool,
}

impl Protocol {
    fn new(nonce: String, total: usize, first: usize, cap: usize) -> Protocol {
        Protocol {
            nonce,
            total,
            cap,
            pending: Vec::new(),
            other_bytes: 0,
            announced: None,
            completed: first,
            outcomes: Vec::new(),
            done: false,
            broken: false,
            over_cap: false,
        }
    }

    /// Takes a chunk of stdout; false once reading should stop.
    fn feed(&mut self, chunk: &[u8]) -> bool {
        let mut rest = chunk;
        while let Some(nl) = rest.iter().position(|b| *b == b'\n') {
            self.pending.extend_from_slice(&rest[..nl]);
            let line = std::mem::take(&mut self.pending);
            self.line(&line);
            rest = &rest[nl + 1..];
        }
        self.pending.extend_from_slice(rest);
        if self.pending.len() > self.cap {
            self.other_bytes += self.pending.len();
            self.pending.clear();
        }
        if self.other_bytes > self.cap {
            self.over_cap = true;
        }
        !self.over_cap
    }

    fn line(&mut self, line: &[u8]) {
        let Some(body) = line
            .strip_prefix(self.nonce.as_bytes())
            .and_then(|b| b.strip_prefix(b" "))
        else {
            self.other_bytes += line.len() + 1;
            return;
        };
        let body = String::from_utf8_lossy(body);
        let words: Vec<&str> = body.split(' ').collect();
        match words.as_slice() {
            ["total", n] if self.announced.is_none() => {
                self.announced = n.parse().ok();
                if self.announced != Some(self.total) {
                    self.broken = true;
                }
            }
            ["case", i, outcome]
                if i.parse() == Ok(self.completed) && self.completed < self.total && !self.done =>
            {
                self.completed += 1;
                self.outcomes.push(match *outcome {
                    "pass" => CaseOutcome::Pass,
                    "fail" => CaseOutcome::Fail,
                    "panic" => CaseOutcome::Panic,
                    _ => {
                        self.broken = true;
                        CaseOutcome::Fail
                    }
                });
            }
            ["done"] if !self.done => self.done = true,
            _ => self.broken = true,
        }
    }
}

fn apply_rlimits(limits: &RunLimits) -> std::io::Result<()> {
    // Whole seconds; the wall-time limit is the precise one.
    let cpu_secs = limits.wall.max(limits.case_wall).as_secs() + 1;
    set_rlimit(libc::RLIMIT_CPU, cpu_secs)?;
    set_rlimit(libc::RLIMIT_AS, limits.address_space_bytes)?;
    set_rlimit(libc::RLIMIT_FSIZE, limits.file_size_bytes)?;
    set_rlimit(libc::RLIMIT_NOFILE, limits.open_files)?;
    set_rlimit(libc::RLIMIT_CORE, 0)?;
    Ok(())
}

fn set_rlimit(resource: libc::__rlimit_resource_t, value: u64) -> std::io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: setrlimit reads a valid rlimit struct and touches nothing else.
    if unsafe { libc::setrlimit(resource, &limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Asks the kernel to SIGKILL the child when assay dies, however it dies (a
/// SIGKILL to assay cannot be caught, and the child's own process group means
/// a terminal's Ctrl-C does not reach it). Fails if the parent is already gone.
fn die_with_parent(parent: libc::pid_t) -> std::io::Result<()> {
    // SAFETY: prctl with PR_SET_PDEATHSIG takes a signal number and nothing else.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: getppid cannot fail.
    if unsafe { libc::getppid() } != parent {
        return Err(std::io::Error::other(
            "assay exited before the candidate started",
        ));
    }
    Ok(())
}

/// The process groups of candidates running now, so that an exit at once
/// (a second Ctrl-C) can kill them first.
fn live_groups() -> &'static std::sync::Mutex<BTreeSet<i32>> {
    static GROUPS: std::sync::OnceLock<std::sync::Mutex<BTreeSet<i32>>> =
        std::sync::OnceLock::new();
    GROUPS.get_or_init(Default::default)
}

/// A running candidate's process group: killed and forgotten on drop.
struct LiveGroup(i32);

impl LiveGroup {
    fn register(pgid: i32) -> LiveGroup {
        live_groups()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(pgid);
        LiveGroup(pgid)
    }
}

impl Drop for LiveGroup {
    fn drop(&mut self) {
        // `GroupKill` kills; this only unlists.
        live_groups()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.0);
    }
}

/// Kills every candidate's process group that is running now.
pub fn kill_live_groups() {
    let groups = live_groups().lock().unwrap_or_else(|e| e.into_inner());
    for pgid in groups.iter() {
        kill_group(*pgid);
    }
}

fn kill_group(pgid: i32) {
    // SAFETY: killpg only sends a signal; a group already gone is ESRCH.
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
    }
}

fn nonce() -> Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no randomness for the nonce: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

impl fmt::Display for ScoreVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScoreVerdict::Scored { passed, total } => write!(f, "scored({passed}/{total})"),
            ScoreVerdict::Timeout { completed, total } => {
                write!(f, "timeout(after {completed}/{total})")
            }
            ScoreVerdict::Crashed { signal } => write!(f, "crashed(signal {signal})"),
            ScoreVerdict::OutOfMemory => f.write_str("out_of_memory"),
            ScoreVerdict::OutputCapExceeded => f.write_str("output_cap_exceeded"),
            ScoreVerdict::ExitedEarly { code, completed } => {
                write!(f, "exited_early(code {code} after {completed})")
            }
            ScoreVerdict::ProtocolError => f.write_str("protocol_error"),
            ScoreVerdict::ScoreBuildFailed => f.write_str("score_build_failed"),
        }
    }
}

impl FromStr for ScoreVerdict {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("unknown score verdict `{s}`");
        let args = |prefix: &str| -> Option<&str> { s.strip_prefix(prefix)?.strip_suffix(')') };
        let fraction = |text: &str| -> Option<(usize, usize)> {
            let (a, b) = text.split_once('/')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        };
        Ok(match s {
            "out_of_memory" => ScoreVerdict::OutOfMemory,
            "output_cap_exceeded" => ScoreVerdict::OutputCapExceeded,
            "protocol_error" => ScoreVerdict::ProtocolError,
            "score_build_failed" => ScoreVerdict::ScoreBuildFailed,
            _ => {
                if let Some(a) = args("scored(") {
                    let (passed, total) = fraction(a).ok_or_else(bad)?;
                    ScoreVerdict::Scored { passed, total }
                } else if let Some(a) = args("timeout(after ") {
                    let (completed, total) = fraction(a).ok_or_else(bad)?;
                    ScoreVerdict::Timeout { completed, total }
                } else if let Some(a) = args("crashed(signal ") {
                    ScoreVerdict::Crashed {
                        signal: a.parse().map_err(|_| bad())?,
                    }
                } else if let Some(a) = args("exited_early(code ") {
                    let (code, completed) = a.split_once(" after ").ok_or_else(bad)?;
                    ScoreVerdict::ExitedEarly {
                        code: code.parse().map_err(|_| bad())?,
                        completed: completed.parse().map_err(|_| bad())?,
                    }
                } else {
                    return Err(bad());
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_round_trip_through_their_strings() {
        let all = [
            ScoreVerdict::Scored {
                passed: 3,
                total: 5,
            },
            ScoreVerdict::Timeout {
                completed: 2,
                total: 5,
            },
            ScoreVerdict::Crashed { signal: 6 },
            ScoreVerdict::OutOfMemory,
            ScoreVerdict::OutputCapExceeded,
            ScoreVerdict::ExitedEarly {
                code: 0,
                completed: 1,
            },
            ScoreVerdict::ProtocolError,
            ScoreVerdict::ScoreBuildFailed,
        ];
        for v in all {
            assert_eq!(v.to_string().parse::<ScoreVerdict>().unwrap(), v, "{v}");
        }
        assert_eq!(
            ScoreVerdict::Timeout {
                completed: 2,
                total: 5
            }
            .to_string(),
            "timeout(after 2/5)"
        );
    }

    fn feed(p: &mut Protocol, text: &str) -> bool {
        p.feed(text.as_bytes())
    }

    #[test]
    fn protocol_counts_framed_lines_only() {
        let mut p = Protocol::new("n0nce".into(), 3, 0, 1000);
        feed(
            &mut p,
            "\nn0nce total 3\nhello from the candidate\nn0nce case 0 pass\n",
        );
        feed(&mut p, "case 1 pass\n\nn0nce case 1 fa");
        feed(&mut p, "il\nn0nce case 2 panic\nn0nce done\n");
        assert_eq!((p.completed, p.done, p.broken), (3, true, false));
        assert_eq!(
            p.outcomes,
            [CaseOutcome::Pass, CaseOutcome::Fail, CaseOutcome::Panic]
        );
    }

    #[test]
    fn a_restarted_run_reports_from_its_first_case() {
        let mut p = Protocol::new("n".into(), 4, 2, 1000);
        feed(&mut p, "n total 4\nn case 2 pass\nn case 3 fail\nn done\n");
        assert_eq!((p.completed, p.done, p.broken), (4, true, false));
        let mut p = Protocol::new("n".into(), 4, 2, 1000);
        feed(&mut p, "n total 4\nn case 0 pass\n");
        assert!(p.broken, "a case before the first asked for is forged");
    }

    #[test]
    fn case_letters_round_trip() {
        let all = [
            CaseOutcome::Pass,
            CaseOutcome::Fail,
            CaseOutcome::Panic,
            CaseOutcome::Timeout,
            CaseOutcome::Crash,
            CaseOutcome::NotRun,
        ];
        assert_eq!(case_letters(&all), "pfxtc-");
        assert_eq!(parse_case_letters("pfxtc-").unwrap(), all);
        assert!(parse_case_letters("pq").is_none());
    }

    #[test]
    fn forged_or_out_of_order_lines_break_the_protocol() {
        let mut p = Protocol::new("n".into(), 2, 0, 1000);
        feed(&mut p, "n total 2\nn case 1 pass\n");
        assert!(p.broken);
        let mut p = Protocol::new("n".into(), 2, 0, 1000);
        feed(&mut p, "n total 2\nn case 0 pass\nn case 0 pass\n");
        assert!(p.broken);
        let mut p = Protocol::new("n".into(), 2, 0, 1000);
        feed(&mut p, "n total 5\n");
        assert!(p.broken);
    }

    #[test]
    fn output_past_the_cap_stops_reading() {
        let mut p = Protocol::new("n".into(), 1, 0, 100);
        assert!(feed(&mut p, &"x".repeat(50)));
        assert!(!feed(&mut p, &"y".repeat(100)));
        assert!(p.over_cap);
        let mut p = Protocol::new("n".into(), 1, 0, 100);
        for _ in 0..10 {
            feed(&mut p, "0123456789abcdef\n");
        }
        assert!(p.over_cap);
    }
}
