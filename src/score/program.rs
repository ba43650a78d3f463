//! Suites' programs: one run of a program's dispatch binary (its whole
//! `main`, or one case) in a child process of its own, started exactly as a
//! candidate's scoring run is (`run::start`: its own process group, an
//! empty environment, the rlimits, the sandbox's Landlock, network
//! namespace, cgroups and unprivileged user). A suite's oracle is the
//! program's own asserts, so there is no judge: the run's exit status and
//! the dispatch marker (`suite::cases`) are all there is to read.
//!
//! The marker's nonce is fresh per run and reaches the program on stdin
//! only; a run that exits 0 without printing it last left early.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::io::AsyncReadExt;

use super::child::{feed_stdin, kill_group, nonce, wait4, GroupKill, LiveGroup};
use super::run::{start, Started};
use super::RunLimits;
use crate::sandbox::scratch::{Kind, ScratchDir};
use crate::sandbox::Sandbox;
use crate::suite::cases::case_finished;
use crate::suite::CaseEnd;

/// How often a run's memory cgroup is checked for an OOM kill.
const OOM_WATCH_PERIOD: Duration = Duration::from_millis(50);

/// Bytes of a run's stdout kept: the marker line must end it, so only the
/// tail matters; everything before is read and dropped.
const KEPT_TAIL: usize = 512;

/// Bytes of a run's stderr kept: a panic's message is its last words, and
/// a repair prompt shows it beside the failed assert (issue 28).
const KEPT_STDERR: usize = 2048;

/// How long the stderr reader may take to reach the end of the pipe once
/// the run's processes are gone.
const STDERR_GRACE: Duration = Duration::from_millis(200);

/// How one run ended, and what it cost.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgramRun {
    pub end: CaseEnd,
    pub wall: Duration,
    /// CPU time (user + system) of the run's process, from `wait4`.
    pub cpu: Duration,
    /// The last [`KEPT_STDERR`] bytes the run wrote to stderr (lossy
    /// UTF-8): where a failed assert's panic message is.
    pub stderr: String,
}

/// Runs `image` with `args` (the program's module and `whole` or a case's
/// number, in a shared image) under `limits.wall` and the sandbox.
/// `marks`: whether the program prints the
/// dispatch marker (a program syn could not parse is run unchanged and
/// judged by its exit status alone). An error means the host could not run
/// it at all.
pub async fn run_program(
    image: &Path,
    args: &[&str],
    marks: bool,
    limits: &RunLimits,
    sandbox: &Sandbox,
) -> Result<ProgramRun> {
    let started_at = Instant::now();
    let workdir =
        ScratchDir::new(Kind::Run).context("cannot create the run's working directory")?;
    let nonce = nonce()?;
    let (ours, theirs) =
        std::os::unix::net::UnixStream::pair().context("cannot make the run's stdin")?;
    let started = match start(image, args, workdir.path(), theirs, limits, sandbox)? {
        Ok(started) => started,
        // The image does not fit the address-space limit: it never ran,
        // as a program the kernel refused to map would not.
        Err(_) => {
            return Ok(ProgramRun {
                end: CaseEnd::Signalled {
                    signal: libc::SIGKILL,
                },
                wall: started_at.elapsed(),
                cpu: Duration::ZERO,
                stderr: String::new(),
            })
        }
    };
    let pid = started.pid;
    let _group = LiveGroup::register(pid);
    let _kill = GroupKill(pid);
    let feeder = feed_stdin(ours, format!("{nonce}\n").into_bytes());
    let (status, cpu, tail, stderr, stop) = watch(started, limits.wall).await?;
    feeder.finish();
    let end = match stop {
        Stop::OutOfMemory => CaseEnd::Signalled {
            signal: libc::SIGKILL,
        },
        Stop::TimedOut => CaseEnd::TimedOut,
        Stop::Exited if libc::WIFSIGNALED(status) => match libc::WTERMSIG(status) {
            libc::SIGXCPU => CaseEnd::TimedOut,
            signal => CaseEnd::Signalled { signal },
        },
        Stop::Exited => match libc::WEXITSTATUS(status) {
            0 if !marks || case_finished(&tail, &nonce) => CaseEnd::Passed,
            0 => CaseEnd::ExitedEarly,
            code => CaseEnd::Failed { code },
        },
    };
    Ok(ProgramRun {
        end,
        wall: started_at.elapsed(),
        cpu,
        stderr,
    })
}

/// Why the watch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// The process exited (or was killed by a signal of its own making).
    Exited,
    TimedOut,
    /// The run's memory cgroup killed a process of it.
    OutOfMemory,
}

/// Reads the run's stdout (keeping its tail) until it exits and its output
/// is closed, its time is up or its memory cgroup kills it; then kills what
/// is left of the run and reaps it. Returns the wait status, the CPU time,
/// the tail of stdout, the tail of stderr and why it stopped.
async fn watch(started: Started, wall: Duration) -> Result<(i32, Duration, Vec<u8>, String, Stop)> {
    let Started {
        pid,
        mut stdout,
        mut stderr,
        confinement,
    } = started;
    let mut waiter = tokio::task::spawn_blocking(move || wait4(pid));
    // Drained so a chatty program never blocks on a full pipe; only its
    // tail is kept (a panic's message).
    let kept = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let mut draining = tokio::spawn({
        let kept = kept.clone();
        async move {
            let mut buf = [0u8; 8192];
            while let Ok(n @ 1..) = stderr.read(&mut buf).await {
                let mut kept = kept.lock().unwrap_or_else(|e| e.into_inner());
                kept.extend_from_slice(&buf[..n]);
                if kept.len() > KEPT_STDERR {
                    let cut = kept.len() - KEPT_STDERR;
                    kept.drain(..cut);
                }
            }
        }
    });
    let deadline = tokio::time::Instant::now() + wall;
    let watch_memory = confinement.watches_memory();
    let mut oom_watch = tokio::time::interval(OOM_WATCH_PERIOD);
    oom_watch.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut tail: Vec<u8> = Vec::with_capacity(2 * KEPT_TAIL);
    let mut buf = vec![0u8; 64 * 1024];
    let mut exited: Option<(i32, Duration)> = None;
    let mut open = true;
    let mut stop = Stop::Exited;
    while open || exited.is_none() {
        tokio::select! {
            _ = oom_watch.tick(), if watch_memory => {
                if confinement.oom_killed() {
                    stop = Stop::OutOfMemory;
                    break;
                }
            }
            read = stdout.read(&mut buf), if open => {
                let n = read.unwrap_or(0);
                if n == 0 {
                    open = false;
                } else {
                    tail.extend_from_slice(&buf[..n]);
                    if tail.len() > KEPT_TAIL {
                        tail.drain(..tail.len() - KEPT_TAIL);
                    }
                }
            }
            waited = &mut waiter, if exited.is_none() => {
                exited = Some(waited.context("the wait task panicked")??);
                // What the program left behind (a forked process holding
                // stdout open) must not keep the read going.
                kill_group(pid);
                confinement.kill_all();
            }
            _ = tokio::time::sleep_until(deadline) => {
                stop = Stop::TimedOut;
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
    if stop == Stop::Exited && confinement.oom_killed() {
        stop = Stop::OutOfMemory;
    }
    // Removing the run's cgroup may wait for the kernel; not on the
    // runtime's threads.
    let _ = tokio::task::spawn_blocking(move || drop(confinement)).await;
    // Every process of the run is gone, so the pipe ends soon; a grace
    // period, not a wait, in case something kept it open.
    if tokio::time::timeout(STDERR_GRACE, &mut draining)
        .await
        .is_err()
    {
        draining.abort();
    }
    let stderr =
        String::from_utf8_lossy(&kept.lock().unwrap_or_else(|e| e.into_inner())).into_owned();
    Ok((status, cpu, tail, stderr, stop))
}
