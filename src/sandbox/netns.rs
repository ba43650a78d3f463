//! Network namespaces: whether `unshare(CLONE_NEWNET)` works here.

use rustix::thread::UnshareFlags;

use super::fork::in_child;

/// Forks a child that tries `unshare(CLONE_NEWNET)` and reports back.
pub(super) fn try_unshare_net() -> std::io::Result<()> {
    // SAFETY: the child makes one system call (unshare), async-signal-safe.
    let status = unsafe {
        in_child(|| match new_network_namespace() {
            Ok(()) => 0,
            Err(e) => e.raw_os_error(),
        })
    }?;
    match status.exit_status() {
        Some(0) => Ok(()),
        code => Err(std::io::Error::from_raw_os_error(
            code.unwrap_or(libc::EPERM),
        )),
    }
}

/// Moves the calling thread (in a child between fork and exec, the whole
/// process) into a new network namespace. Async-signal-safe.
pub(super) fn new_network_namespace() -> rustix::io::Result<()> {
    // SAFETY: rustix marks unshare unsafe for `CLONE_FILES`, which leaves
    // other threads' descriptors unusable here; `CLONE_NEWNET` alone
    // shares no descriptor table.
    unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNET) }
}
