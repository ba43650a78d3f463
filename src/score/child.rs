//! Process plumbing of a candidate's run: rlimits, the parent-death signal,
//! process groups that are killed whole, reaping with `wait4`, the nonce, and
//! a stdin that cannot kill assay.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use rustix::io::Errno;
use rustix::net::SendFlags;
use rustix::process::{Pid, Resource, Rlimit, Signal};

use super::RunLimits;

/// Writes `bytes` to a child's stdin on a thread of its own and closes it.
/// The channel is a socket written with `MSG_NOSIGNAL`, so a child that
/// exits without reading (or a forked process that holds stdin and never
/// reads) costs an `EPIPE` at most, never a `SIGPIPE` to assay, whatever
/// the signal's disposition; the writer ends when the child's side closes or
/// the returned [`Feeder`] is finished or dropped.
pub(crate) fn feed_stdin(ours: UnixStream, bytes: Vec<u8>) -> Feeder {
    let stream = Arc::new(ours);
    let writer = stream.clone();
    let spawned = std::thread::Builder::new()
        .name("assay-stdin".into())
        .stack_size(64 << 10)
        .spawn(move || {
            send_all(&writer, &bytes);
            let _ = writer.shutdown(std::net::Shutdown::Write);
        });
    if spawned.is_err() {
        // No thread: the child sees an empty stdin, which is its verdict.
        let _ = stream.shutdown(std::net::Shutdown::Both);
    }
    Feeder(stream)
}

/// The first `cap` bytes of a child's stderr, read to its end (so the
/// child never blocks on a full pipe).
pub(crate) async fn keep_stderr(mut stderr: tokio::process::ChildStderr, cap: usize) -> String {
    use tokio::io::AsyncReadExt as _;
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(n) = stderr.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let room = cap.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
    String::from_utf8_lossy(&kept).into_owned()
}

/// The parent's end of a child's stdin; shut down when finished or dropped,
/// which wakes a writer still blocked on it.
pub(crate) struct Feeder(Arc<UnixStream>);

impl Feeder {
    pub fn finish(self) {}
}

impl Drop for Feeder {
    fn drop(&mut self) {
        let _ = self.0.shutdown(std::net::Shutdown::Both);
    }
}

/// Sends all of `bytes` (`MSG_NOSIGNAL`), until the reader is gone.
pub(crate) fn send_all(stream: &UnixStream, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        match rustix::net::send(stream, bytes, SendFlags::NOSIGNAL) {
            Ok(n) => bytes = &bytes[n..],
            Err(Errno::INTR) => {}
            Err(_) => return,
        }
    }
    let _ = (&*stream).flush();
}

/// Kills a child's process group when dropped, so no path out of
/// `run_child` (an error, a cancelled task) leaves it running.
pub(crate) struct GroupKill(pub i32);

impl Drop for GroupKill {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}

/// Waits for `pid` and returns its wait status and CPU time (user +
/// system, its own and that of the children it waited for).
pub(crate) fn wait4(pid: i32) -> Result<(i32, Duration)> {
    let mut status = 0;
    // SAFETY: rusage is plain data (integers), for which all zeroes is a
    // value; wait4 fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waits for our own child, writing into valid locals.
        // Neither rustix nor std waits with the child's resource usage.
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

/// Sets the run's rlimits, soft and hard alike. Async-signal-safe: for
/// `pre_exec`.
pub(crate) fn apply_rlimits(limits: &RunLimits) -> std::io::Result<()> {
    // Whole seconds; the wall-time limit is the precise one.
    let cpu_secs = limits.wall.max(limits.case_wall).as_secs() + 1;
    set_rlimit(Resource::Cpu, cpu_secs)?;
    set_rlimit(Resource::As, limits.address_space_bytes)?;
    set_rlimit(Resource::Fsize, limits.file_size_bytes)?;
    set_rlimit(Resource::Nofile, limits.open_files)?;
    set_rlimit(Resource::Core, 0)?;
    Ok(())
}

fn set_rlimit(resource: Resource, value: u64) -> std::io::Result<()> {
    let limit = Rlimit {
        current: Some(value),
        maximum: Some(value),
    };
    Ok(rustix::process::setrlimit(resource, limit)?)
}

/// Asks the kernel to SIGKILL the child when assay dies, however it dies (a
/// SIGKILL to assay cannot be caught, and the child's own process group means
/// a terminal's Ctrl-C does not reach it). Fails if the parent is already
/// gone. Async-signal-safe: for `pre_exec`.
pub(crate) fn die_with_parent(parent: libc::pid_t) -> std::io::Result<()> {
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
    if Pid::as_raw(rustix::process::getppid()) != parent {
        // assay exited before the candidate started. An errno, which
        // allocates nothing (a message would, and std hands the parent
        // only an errno anyway: EINVAL for an error without one).
        return Err(Errno::INVAL.into());
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
pub(crate) struct LiveGroup(i32);

impl LiveGroup {
    pub fn register(pgid: i32) -> LiveGroup {
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

pub(crate) fn kill_group(pgid: i32) {
    // Never 0 or below: `kill` would read those as assay's own group, or
    // every process it may signal.
    if let Some(pgid) = (pgid > 0).then(|| Pid::from_raw(pgid)).flatten() {
        // A group already gone is ESRCH: nothing left to kill.
        let _ = rustix::process::kill_process_group(pgid, Signal::KILL);
    }
}

pub(crate) fn nonce() -> Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no randomness for the nonce: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
