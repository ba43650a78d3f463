//! Network namespaces: whether `unshare(CLONE_NEWNET)` works here.

/// Forks a child that tries `unshare(CLONE_NEWNET)` and reports back.
pub(super) fn try_unshare_net() -> std::io::Result<()> {
    // SAFETY: the child only calls unshare and _exit, both async-signal-safe.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            let code = if libc::unshare(libc::CLONE_NEWNET) == 0 {
                0
            } else {
                *libc::__errno_location()
            };
            libc::_exit(code);
        }
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    match libc::WEXITSTATUS(status) {
        0 if libc::WIFEXITED(status) => Ok(()),
        errno => Err(std::io::Error::from_raw_os_error(errno)),
    }
}
