//! Running candidates: each in its own child process, from the image that
//! holds its module (selected by argument), under limits and the confinement of [`crate::sandbox`]. The child gets
//! the cases' inputs and hands back outputs; the [`Oracle`]'s judge says
//! which are right once the run is over.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::io::AsyncReadExt;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::child::{
    apply_rlimits, die_with_parent, feed_stdin, keep_stderr, kill_group, nonce, wait4, GroupKill,
    LiveGroup,
};
use super::fault::{Given, HarnessFault, HarnessFn};
use super::judge::{Judged, Judgement, Oracle};
use super::protocol::{Protocol, Reported};
use super::{CaseOutcome, RunLimits, ScoreVerdict, Scored};
use crate::build::package::ModuleKey;
use crate::sandbox::scratch::{Kind, ScratchDir};
use crate::sandbox::{RunConfinement, Sandbox};
use crate::spec::Isolation;

/// How often a run's memory cgroup is checked for an OOM kill.
const OOM_WATCH_PERIOD: Duration = Duration::from_millis(50);

/// What a run keeps of its stderr (for the error file).
const RUN_STDERR_CAP: usize = 64 * 1024;

/// Candidates' runs, each from the image that holds it, on `parallel` slots: started
/// as images arrive, collected as they finish.
pub struct Runs {
    set: JoinSet<Result<Ran>>,
    slots: Arc<Semaphore>,
    oracle: Arc<Oracle>,
    limits: RunLimits,
    sandbox: Arc<Sandbox>,
}

impl Runs {
    pub fn new(
        oracle: Arc<Oracle>,
        limits: RunLimits,
        parallel: usize,
        sandbox: Arc<Sandbox>,
    ) -> Runs {
        Runs {
            set: JoinSet::new(),
            slots: Arc::new(Semaphore::new(parallel.max(1))),
            oracle,
            limits,
            sandbox,
        }
    }

    /// Starts `key`'s run from `image` once a slot is free.
    pub fn spawn(&mut self, key: ModuleKey, image: PathBuf) {
        let (slots, oracle, sandbox) = (
            self.slots.clone(),
            self.oracle.clone(),
            self.sandbox.clone(),
        );
        let limits = self.limits;
        self.set.spawn(async move {
            let _slot = slots.acquire().await.expect("semaphore never closed");
            run_one(&image, key, &oracle, limits, &sandbox).await
        });
    }

    /// The next run to finish; `None` when none is left.
    pub async fn next(&mut self) -> Option<Result<Ran>> {
        let done = self.set.join_next().await?;
        Some(done.context("a scoring task panicked").and_then(|r| r))
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}

/// A run's score, and what it answered on the cases the judge said it got
/// wrong: a repair prompt shows a parent's wrong answers on its failed
/// *visible* cases, so the caller keeps those and drops the rest.
#[derive(Debug, Clone, PartialEq)]
pub struct Ran {
    pub scored: Scored,
    /// (case position, the answer as the harness encoded it), in case
    /// order. Empty when the judge failed: then no answer was judged wrong.
    pub wrong_answers: Vec<(usize, String)>,
}

/// Runs one candidate's image over all cases under `limits`, then has the
/// judge decide its outputs. Whatever the candidate does is a verdict, and
/// so is a judge that fails over its outputs (`judge_failed`); an error
/// means the host could not run it or the judge at all, or the harness's
/// `judge` panicked on one of its answers: a [`HarnessFault`], the task's
/// and never the candidate's, so no verdict is made of the run.
///
/// Without isolation one child runs every case and the first loop, crash
/// or early exit ends the run. With per-case isolation each case has its
/// own wall limit, and a case that times out, crashes or exits is marked
/// (`t` or `c`) and the run goes on in a fresh child from the next case; a
/// run that floods its output or breaks the protocol still ends there, as
/// those attack the result channel rather than fail a case.
pub async fn run_one(
    image: &Path,
    key: ModuleKey,
    oracle: &Oracle,
    limits: RunLimits,
    sandbox: &Sandbox,
) -> Result<Ran> {
    let start = Instant::now();
    let total = oracle.total();
    let mut cases = vec![CaseOutcome::NotRun; total];
    let mut outputs: Vec<(usize, String)> = Vec::new();
    let mut first = 0;
    let mut restarts = 0;
    let mut cpu = Duration::ZERO;
    let mut peak: Option<u64> = None;
    let mut stderr = String::new();
    let (end, completed) = loop {
        let attempt = run_child(image, &key.name(), oracle, first, &limits, sandbox).await?;
        cpu += attempt.cpu;
        peak = peak.max(attempt.peak_processes);
        if !attempt.stderr.is_empty() {
            stderr = attempt.stderr.clone();
        }
        for (i, reported) in attempt.reported.into_iter().enumerate() {
            cases[first + i] = match reported {
                Reported::Output(out) => {
                    outputs.push((first + i, out));
                    // Until the judge says otherwise.
                    CaseOutcome::Fail
                }
                Reported::Panic => CaseOutcome::Panic,
                Reported::Bad => CaseOutcome::Fail,
            };
        }
        let completed = attempt.completed;
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
                    break (End::Finished, total);
                }
                restarts += 1;
            }
            _ => break (attempt.end, completed),
        }
    };
    let answers: Vec<(usize, &str)> = outputs.iter().map(|(i, o)| (*i, o.as_str())).collect();
    let judged = oracle.judge(&answers).await?;
    let mut wrong = Vec::new();
    let verdict = match judged {
        Judged::Verdicts(judgements) => {
            for ((i, answer), judgement) in answers.iter().zip(judgements) {
                match judgement {
                    Judgement::Right => cases[*i] = CaseOutcome::Pass,
                    Judgement::Wrong => wrong.push(*i),
                    Judgement::Panicked(panic) => {
                        let given = Given::Answer {
                            whose: key,
                            answer: (*answer).to_owned(),
                        };
                        return Err(HarnessFault::new(HarnessFn::Judge, *i, &panic, given).into());
                    }
                }
            }
            let passed = cases.iter().filter(|c| **c == CaseOutcome::Pass).count();
            end.verdict(passed, completed, total)
        }
        // Its outputs stay unjudged (`f`); why goes where its stderr goes.
        Judged::Failed(why) => {
            stderr = format!("assay: {why}\n{stderr}");
            ScoreVerdict::JudgeFailed
        }
    };
    let passed = cases.iter().filter(|c| **c == CaseOutcome::Pass).count();
    let scored = Scored {
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
    };
    // `outputs` and `wrong` are both in case order.
    let mut wrong = wrong.into_iter().peekable();
    let wrong_answers = outputs
        .into_iter()
        .filter(|(i, _)| wrong.next_if_eq(i).is_some())
        .collect();
    Ok(Ran {
        scored,
        wrong_answers,
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
    /// An allocation failed (Rust's alloc error handler, then abort), the
    /// kernel OOM-killed a process of the run at its memory cgroup's limit,
    /// or the image could not even be mapped under the address-space limit.
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
    /// What it reported for cases `first..completed`.
    reported: Vec<Reported>,
    completed: usize,
    end: End,
    cpu: Duration,
    peak_processes: Option<u64>,
    stderr: String,
}

/// A started child and what the parent holds of it.
pub(super) struct Started {
    pub pid: i32,
    pub stdout: tokio::process::ChildStdout,
    pub stderr: tokio::process::ChildStderr,
    pub confinement: RunConfinement,
}

async fn run_child(
    image: &Path,
    selector: &str,
    oracle: &Oracle,
    first: usize,
    limits: &RunLimits,
    sandbox: &Sandbox,
) -> Result<Attempt> {
    let workdir =
        ScratchDir::new(Kind::Run).context("cannot create the run's working directory")?;
    let nonce = nonce()?;
    let input = format!("{nonce} {first}\n{}", oracle.inputs()).into_bytes();
    let (ours, theirs) =
        std::os::unix::net::UnixStream::pair().context("cannot make the run's stdin")?;
    let started = match start(image, &[selector], workdir.path(), theirs, limits, sandbox)? {
        Ok(started) => started,
        // The image could not be mapped under the run's limits (a huge
        // static): that candidate's verdict, found before it ran anything.
        Err(_) => return Ok(Attempt::unstarted(first)),
    };
    let pid = started.pid;
    // Listed while it runs, so a second Ctrl-C can kill it (`kill_live_groups`).
    let _group = LiveGroup::register(pid);
    // Kills the group if this future is dropped (Ctrl-C cancels the batch).
    let _kill = GroupKill(pid);
    crate::support::testpoint::reached("score.child").await;
    let feeder = feed_stdin(ours, input);
    let protocol = Protocol::new(nonce, oracle.total(), first, limits.output_cap_bytes);
    let watched = watch(started, protocol, limits).await;
    feeder.finish();
    watched
}

impl Attempt {
    fn unstarted(first: usize) -> Attempt {
        Attempt {
            reported: Vec::new(),
            completed: first,
            end: End::OutOfMemory,
            cpu: Duration::ZERO,
            peak_processes: None,
            stderr: "the image could not be executed under the address-space limit".to_owned(),
        }
    }
}

/// Spawns the child with `args`: its own process group, an empty
/// environment, the rlimits, then the sandbox's steps. `Ok(Err(_))` when
/// exec itself ran out of memory (the image does not fit the address-space
/// limit).
pub(super) fn start(
    image: &Path,
    args: &[&str],
    workdir: &Path,
    stdin: std::os::unix::net::UnixStream,
    limits: &RunLimits,
    sandbox: &Sandbox,
) -> Result<std::result::Result<Started, std::io::Error>> {
    // A path the run's user can execute (a copy when it could not reach
    // the original); made once per image and batch.
    let exe = sandbox.runnable_exe(image)?;
    let mut confinement = sandbox.prepare_run(&exe, workdir, limits.address_space_bytes)?;
    let steps = confinement.child_steps();
    let mut cmd = std::process::Command::new(&exe);
    cmd.args(args)
        .env_clear()
        .current_dir(workdir)
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(stdin)))
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
    let spawned = cmd.spawn();
    // The child's end of stdin must close here, or a child that exits
    // would leave the writer waiting on a reader that is still us.
    drop(cmd);
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) if e.raw_os_error() == Some(libc::ENOMEM) => return Ok(Err(e)),
        Err(e) => return Err(e).with_context(|| format!("cannot start {}", exe.display())),
    };
    confinement.spawned();
    let stdout = tokio::process::ChildStdout::from_std(child.stdout.take().expect("piped"))
        .context("cannot poll the child's stdout")?;
    let stderr = tokio::process::ChildStderr::from_std(child.stderr.take().expect("piped"))
        .context("cannot poll the child's stderr")?;
    Ok(Ok(Started {
        pid: child.id() as i32,
        stdout,
        stderr,
        confinement,
    }))
}

/// Reads the child's results until it ends, floods, or runs out of time;
/// then kills what is left of the run, reaps it and says how it ended.
async fn watch(started: Started, mut protocol: Protocol, limits: &RunLimits) -> Result<Attempt> {
    let Started {
        pid,
        mut stdout,
        stderr,
        confinement,
    } = started;
    // Reaped here with wait4, for the child's own CPU time; tokio never
    // sees this child.
    let mut waiter = tokio::task::spawn_blocking(move || wait4(pid));
    let stderr_task = tokio::spawn(keep_stderr(stderr, RUN_STDERR_CAP));
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
    let peak_processes = confinement.peak_processes();
    oom_killed = oom_killed || confinement.oom_killed();
    // Removing the run's cgroup may wait for the kernel to finish reaping;
    // that wait belongs on a blocking thread, not on the runtime's.
    let _ = tokio::task::spawn_blocking(move || drop(confinement)).await;
    let stderr = stderr_task.await.unwrap_or_default();
    let end = end_of(status, &stderr, &protocol, oom_killed, timed_out);
    Ok(Attempt {
        reported: protocol.reported,
        completed: protocol.completed,
        end,
        cpu,
        peak_processes,
        stderr,
    })
}

/// How a child ended, from its wait status and what it reported. An OOM
/// kill in the run's memory cgroup decides the verdict whatever followed it:
/// the SIGKILL it sent, a parent left waiting for the killed child until the
/// wall limit, or the results it still printed.
fn end_of(status: i32, stderr: &str, p: &Protocol, oom_killed: bool, timed_out: bool) -> End {
    let signal = libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status));
    if oom_killed {
        End::OutOfMemory
    } else if timed_out {
        End::Timeout
    } else if signal == Some(libc::SIGXCPU) {
        End::CpuLimit
    } else if p.over_cap {
        End::OutputCap
    } else if let Some(signal) = signal {
        if stderr.contains("memory allocation of") {
            End::OutOfMemory
        } else {
            End::Signal(signal)
        }
    } else if p.broken {
        End::Protocol
    } else if p.done && libc::WEXITSTATUS(status) == 0 {
        if p.announced == Some(p.total) && p.completed == p.total {
            End::Finished
        } else {
            End::Protocol
        }
    } else {
        End::Exited(libc::WEXITSTATUS(status))
    }
}
