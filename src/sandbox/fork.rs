//! A child forked without exec, for work that must happen in a process of
//! its own: trying a uid switch or a network namespace before any run
//! needs one (`user`, `netns`), writing an executable that no process of
//! assay's holds open (`place`).

use rustix::io::Errno;
use rustix::process::{Pid, WaitOptions, WaitStatus};

/// Forks a child that runs `work` and exits with the code it returns, then
/// waits for the child: how it ended.
///
/// # Safety
///
/// assay has other threads, so the child is the copy of a multi-threaded
/// process: `work` must make only async-signal-safe calls (system calls,
/// no allocation, no lock) on memory prepared before the fork.
pub(super) unsafe fn in_child(work: impl FnOnce() -> i32) -> std::io::Result<WaitStatus> {
    // SAFETY: std and rustix offer no fork. The child runs `work`, which
    // the caller keeps async-signal-safe, then `_exit`.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid == 0 {
        let code = work();
        // SAFETY: ends the child at once, running none of the parent's exit
        // handlers or destructors (std's `exit` would); no safe wrapper
        // exists.
        unsafe { libc::_exit(code) };
    }
    let pid = Pid::from_raw(pid).expect("a parent's fork returns the child's pid");
    loop {
        match rustix::process::waitpid(Some(pid), WaitOptions::empty()) {
            Ok(Some((_, status))) => return Ok(status),
            // No status comes back only under `NOHANG`, not asked for here.
            Ok(None) | Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_childs_exit_code_and_signal_come_back() {
        // SAFETY: the closures return a constant, or signal the child
        // itself with two system calls.
        let exited = unsafe { in_child(|| 7) }.unwrap();
        assert_eq!(exited.exit_status(), Some(7));
        let killed = unsafe {
            in_child(|| {
                let me = rustix::process::getpid();
                let _ = rustix::process::kill_process(me, rustix::process::Signal::KILL);
                0
            })
        }
        .unwrap();
        assert_eq!(killed.exit_status(), None);
        assert_eq!(killed.terminating_signal(), Some(libc::SIGKILL));
    }
}
