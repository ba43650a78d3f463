//! The unprivileged user a scoring run becomes when assay is root, and the
//! checks that it can: a trial switch, which paths it can execute, how many
//! tasks it already runs (for `RLIMIT_NPROC`).

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rustix::process::{Gid, Uid};

use super::fork::in_child;

/// The uid and gid scoring runs drop to when assay runs as root, unless
/// `ASSAY_SANDBOX_UID` names others: `nobody` and `nogroup` on Debian and
/// most distributions.
const DEFAULT_RUN_AS: RunAs = RunAs {
    uid: 65534,
    gid: 65534,
};

/// The variable naming the uid (`UID` or `UID:GID`) scoring runs drop to
/// when assay runs as root.
pub const RUN_AS_VARIABLE: &str = "ASSAY_SANDBOX_UID";

/// The unprivileged user a scoring run becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RunAs {
    pub(super) uid: u32,
    pub(super) gid: u32,
}

/// Becomes `who`: no supplementary groups, its gid, then its uid (real,
/// effective and saved, so there is no way back). Async-signal-safe
/// system calls only.
///
/// rustix makes the system calls themselves, which change the calling
/// thread's credentials only (libc's wrappers signal every other thread to
/// do the same). Both callers run this in a child just forked, whose one
/// thread is the whole process.
pub(super) fn drop_privileges(who: RunAs) -> std::io::Result<()> {
    let (uid, gid) = (Uid::from_raw(who.uid), Gid::from_raw(who.gid));
    rustix::thread::set_thread_groups(&[])?;
    rustix::thread::set_thread_res_gid(gid, gid, gid)?;
    rustix::thread::set_thread_res_uid(uid, uid, uid)?;
    Ok(())
}

/// Where the unprivileged user `ASSAY_SANDBOX_UID` names (`UID` or
/// `UID:GID`; the gid defaults to the uid), or 65534.
pub(super) fn run_as_from_env() -> Result<RunAs> {
    match std::env::var_os(RUN_AS_VARIABLE) {
        None => Ok(DEFAULT_RUN_AS),
        Some(value) => parse_run_as(&value.to_string_lossy()),
    }
}

/// `UID` or `UID:GID`, numeric and not 0.
pub(super) fn parse_run_as(value: &str) -> Result<RunAs> {
    let parse = |s: &str| -> Result<u32> {
        s.trim()
            .parse::<u32>()
            .ok()
            .filter(|id| *id != 0)
            .with_context(|| format!("{RUN_AS_VARIABLE}={value}: not a non-zero numeric id"))
    };
    let (uid, gid) = match value.split_once(':') {
        Some((u, g)) => (parse(u)?, parse(g)?),
        None => {
            let uid = parse(value)?;
            (uid, uid)
        }
    };
    Ok(RunAs { uid, gid })
}

/// Forks a child that drops to `who` and reports back, so a uid the kernel
/// refuses (unmapped in a user namespace, say) is found before any run.
pub(super) fn try_drop_to(who: RunAs) -> Result<()> {
    // SAFETY: the child makes rustix's raw system calls only.
    let status = unsafe {
        in_child(|| match drop_privileges(who) {
            Ok(()) => 0,
            Err(e) => e.raw_os_error().unwrap_or(libc::EPERM),
        })
    }
    .context("cannot fork")?;
    let switched = match (status.exit_status(), status.terminating_signal()) {
        (Some(0), _) => return Ok(()),
        (Some(errno), _) => anyhow::Error::from(std::io::Error::from_raw_os_error(errno)),
        (None, signal) => anyhow::anyhow!("the trial died of signal {}", signal.unwrap_or(0)),
    };
    Err(switched).with_context(|| format!("cannot switch to uid {} gid {}", who.uid, who.gid))
}

/// The first part of `path` (a directory above it, or the file itself) that
/// `who`, with no supplementary groups, cannot search or execute; `None`
/// when it can run `path`. Mode bits only (no ACLs: a refusal there shows
/// as the run failing to start).
pub(super) fn unreachable_part(path: &Path, who: RunAs) -> Option<PathBuf> {
    let allowed = |p: &Path| {
        let Ok(meta) = std::fs::metadata(p) else {
            return false;
        };
        let mode = meta.mode();
        let bit = if meta.uid() == who.uid {
            0o100
        } else if meta.gid() == who.gid {
            0o010
        } else {
            0o001
        };
        mode & bit != 0
    };
    let mut parts: Vec<&Path> = path.ancestors().collect();
    parts.reverse();
    parts
        .into_iter()
        .find(|p| !allowed(p))
        .map(Path::to_path_buf)
}

/// Tasks (processes and threads) user `uid` runs now, for `RLIMIT_NPROC`,
/// which counts them all.
pub(super) fn user_tasks(uid: u32) -> Option<u64> {
    let mut n = 0;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let mine = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().next()?.parse::<u32>().ok())
            == Some(uid);
        if mine {
            n += status
                .lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|l| l.trim().parse::<u64>().ok())
                .unwrap_or(1);
        }
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn the_run_user_is_numeric_and_never_root() {
        let who = parse_run_as("1234").unwrap();
        assert_eq!((who.uid, who.gid), (1234, 1234));
        let who = parse_run_as("1234:99").unwrap();
        assert_eq!((who.uid, who.gid), (1234, 99));
        for bad in ["0", "0:5", "5:0", "nobody", "", "1:2:3"] {
            assert!(parse_run_as(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_private_directory_hides_the_scorer_from_the_run_user() {
        let who = RunAs {
            uid: 65534,
            gid: 65534,
        };
        let dir = tempfile::tempdir().unwrap();
        let inner = dir.path().join("batch");
        std::fs::create_dir(&inner).unwrap();
        let exe = inner.join("scorer");
        std::fs::write(&exe, b"").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        // Unless the temporary directory's owner is 65534 itself.
        if std::fs::metadata(dir.path()).unwrap().uid() != who.uid {
            assert_eq!(unreachable_part(&exe, who).as_deref(), Some(dir.path()));
        }
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o644)).unwrap();
        if unreachable_part(dir.path(), who).is_none() {
            // Searchable all the way down, but not executable.
            assert_eq!(unreachable_part(&exe, who).as_deref(), Some(exe.as_path()));
            std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
            assert_eq!(unreachable_part(&exe, who), None);
        }
    }
}
