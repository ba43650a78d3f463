//! Landlock: the ABI the kernel offers, a scoring run's ruleset, and
//! restricting the calling process (async-signal-safe, for `pre_exec`).

use std::os::fd::{AsRawFd as _, BorrowedFd, OwnedFd};
use std::path::Path;

use anyhow::{Context, Result};
use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, ABI,
};

/// The Landlock ABI whose rules assay asks for. Rules of later ABIs are not
/// used until they are tested here; on older kernels the crate drops what
/// the kernel lacks (best effort) and [`Sandbox::describe`] says what is left.
pub(super) const TARGET_ABI: ABI = ABI::V6;

/// Applies no_new_privs and, given a ruleset, Landlock to the calling
/// process. Async-signal-safe.
pub(super) fn restrict_self(landlock_fd: Option<BorrowedFd<'_>>) -> std::io::Result<()> {
    rustix::thread::set_no_new_privs(true)?;
    if let Some(fd) = landlock_fd {
        // SAFETY: landlock_restrict_self takes a ruleset descriptor, open
        // while it is borrowed, and flags; it writes no memory. Neither
        // rustix nor the landlock crate has an async-signal-safe wrapper
        // (the crate's consumes its ruleset, which a `pre_exec` closure
        // called again could not).
        if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0u32) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The kernel's Landlock ABI version, or 0 when there is none.
pub fn landlock_abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: with the VERSION flag the kernel reads no attribute struct.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v < 0 {
        0
    } else {
        v as i32
    }
}

/// System directories a dynamically linked program loads from.
const LIBRARY_DIRS: &[&str] = &["/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib"];

/// A scoring run's ruleset: read and execute `exe` and the shared
/// libraries, everything in `run_dir`, nothing else; no TCP; scoped
/// signals and abstract sockets.
pub(super) fn run_ruleset(exe: &Path, run_dir: &Path) -> Result<OwnedFd> {
    let abi = TARGET_ABI;
    let created = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))?
        .handle_access(AccessNet::from_all(abi))?
        .scope(Scope::from_all(abi))?
        .create()?
        .add_rules(path_beneath_rules(
            LIBRARY_DIRS
                .iter()
                .map(Path::new)
                .chain([Path::new("/etc/ld.so.cache"), exe]),
            AccessFs::from_read(abi),
        ))?
        .add_rules(path_beneath_rules([run_dir], AccessFs::from_all(abi)))?;
    Option::<OwnedFd>::from(created).context("the kernel gave no Landlock ruleset")
}
