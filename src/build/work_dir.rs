//! The work directory: the generated task packages and their cargo target
//! directory, kept warm across batches, tasks and databases.
//!
//! By default there is one per toolchain in the user's cache folder,
//! `$XDG_CACHE_HOME/assay/work/KEY` (else `~/.cache/assay/work/KEY`), where
//! KEY names the toolchain the builds use (`1.95.0-x86_64-unknown-linux-gnu-
//! 59807616e`): an operator keeps one database per experiment, and a new
//! database's first batch then finds every dependency built. A new
//! toolchain starts a directory of its own rather than rebuilding a warm
//! one's units over. `--work-dir` or `ASSAY_WORK_DIR` chooses another.
//!
//! Locking. Two assays using one work directory at once is normal, and
//! what they build there is already guarded: task packages and target
//! directories are pools of build slots (`package::slots`), each slot
//! locked by the batch or build using it, so two batches build side by
//! side in slots of their own. What no build lock covers is
//! the directory itself going away: every assay holds a shared `flock` on
//! `WORK/.assay-lock` while it uses the directory (never an exclusive one,
//! which would serialise whole batches), and the one thing that removes a
//! work directory, [`prune`] of another toolchain's directory unused for
//! [`PRUNE_AFTER`], takes that lock exclusively without waiting, so it
//! never removes one in use. It moves the directory aside before removing
//! it, so an assay that was waiting for the lock finds the path empty and
//! starts a new directory there.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The file each user of a work directory holds a shared lock on.
pub const LOCK_FILE: &str = ".assay-lock";

/// Another toolchain's directory, unused for this long, is removed.
pub const PRUNE_AFTER: Duration = Duration::from_secs(30 * 24 * 3600);

/// Where the default work directories live: `$XDG_CACHE_HOME/assay/work`
/// (an absolute `XDG_CACHE_HOME`, as the XDG spec asks), else
/// `$HOME/.cache/assay/work`. `None` when neither can be found.
pub fn default_root() -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::home_dir().map(|h| h.join(".cache")))?;
    Some(cache.join("assay").join("work"))
}

/// The toolchain's key from its `rustc -vV`: release, host and the
/// commit's first nine hex digits, in characters safe for a file name.
/// `None` when the text is not `rustc -vV`'s.
pub fn key_of(rustc_vv: &str) -> Option<String> {
    let field = |name: &str| {
        rustc_vv
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(": "))
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    let release = field("release")?;
    let host = field("host")?;
    // A toolchain built from source may say `unknown`; its whole answer
    // then tells it apart.
    let commit = match field("commit-hash") {
        Some(hash) if hash != "unknown" => hash.chars().take(9).collect(),
        _ => blake3::hash(rustc_vv.as_bytes()).to_hex()[..9].to_owned(),
    };
    let key: String = format!("{release}-{host}-{commit}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    Some(key)
}

/// Asks the toolchain the builds would use in `dir` (which need not exist
/// yet) for its key: `rustc -vV` through the same scrubbed environment and
/// `ASSAY_TOOLCHAIN` choice as every nested cargo, run in the nearest
/// existing folder above `dir` (rustup resolves a directory's override
/// from there exactly as from `dir`, whose own folders do not exist).
pub fn toolchain_key(dir: &Path) -> Result<String, String> {
    let near = dir
        .ancestors()
        .find(|d| d.is_dir())
        .unwrap_or(Path::new("/"));
    let toolchain = crate::build::package::default_toolchain();
    let mut cmd = crate::build::package::scrubbed_command("rustc", toolchain.as_deref());
    let out = cmd
        .as_std_mut()
        .arg("-vV")
        .current_dir(near)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot start `rustc -vV`: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`rustc -vV` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    key_of(&text).ok_or_else(|| format!("`rustc -vV` said something else: {}", text.trim()))
}

/// A shared lock on a work directory, held while this process uses it.
/// Dropped, it is given back.
#[must_use = "the work directory is only protected while the lock is held"]
#[derive(Debug)]
pub struct WorkDirLock {
    _file: File,
}

/// Takes a shared lock on `dir` (an existing folder; made again if a
/// prune moved it away meanwhile) and marks it used now. Blocks only while
/// a prune holds it.
pub fn lock(dir: &Path) -> std::io::Result<WorkDirLock> {
    let path = dir.join(LOCK_FILE);
    loop {
        let file = match OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
        {
            Ok(file) => file,
            // Moved aside by a prune: this is a new directory now.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(dir)?;
                continue;
            }
            Err(e) => return Err(e),
        };
        file.lock_shared()?;
        // The file locked must still be the one at the path: a prune that
        // held it before us has moved the whole directory away.
        let ours = file.metadata()?;
        match std::fs::metadata(&path) {
            Ok(now) if now.ino() == ours.ino() && now.dev() == ours.dev() => {
                file.set_modified(SystemTime::now())?;
                return Ok(WorkDirLock { _file: file });
            }
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Removes the work directories under `root` other than `keep` whose lock
/// file was last used more than `unused_for` before `now` and that no
/// assay holds; returns what it removed. Folders without a lock file are
/// not assay's and stay. Also removes what a killed prune left aside.
/// Best effort: what cannot be removed stays for the next prune.
pub fn prune(root: &Path, keep: &Path, unused_for: Duration, now: SystemTime) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let dir = entry.path();
        let name = entry.file_name();
        if dir == keep || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if name.to_string_lossy().starts_with(".removing-") {
            // Left by a prune that was killed mid-way: nobody can reach it.
            if std::fs::remove_dir_all(&dir).is_ok() {
                removed.push(dir);
            }
            continue;
        }
        let Ok(file) = OpenOptions::new().write(true).open(dir.join(LOCK_FILE)) else {
            continue;
        };
        let stale = file
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|used| now.duration_since(used).unwrap_or_default() > unused_for);
        if !stale || file.try_lock().is_err() {
            continue;
        }
        let aside = root.join(format!(
            ".removing-{}-{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        if std::fs::rename(&dir, &aside).is_ok() {
            tracing::info!(
                "removing {}, another toolchain's work directory unused for {} days",
                dir.display(),
                unused_for.as_secs() / 86_400
            );
            let _ = std::fs::remove_dir_all(&aside);
            removed.push(dir);
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    const VV: &str = "rustc 1.95.0 (59807616e 2026-04-14)\nbinary: rustc\n\
        commit-hash: 59807616e1a2b3c4d5e6f708192a3b4c5d6e7f80\ncommit-date: 2026-04-14\n\
        host: x86_64-unknown-linux-gnu\nrelease: 1.95.0\nLLVM version: 20.1.1\n";

    #[test]
    fn the_key_names_release_host_and_commit() {
        assert_eq!(
            key_of(VV).as_deref(),
            Some("1.95.0-x86_64-unknown-linux-gnu-59807616e")
        );
        let nightly = VV
            .replace("release: 1.95.0", "release: 1.96.0-nightly")
            .replace("59807616e1", "0123456789");
        assert_eq!(
            key_of(&nightly).as_deref(),
            Some("1.96.0-nightly-x86_64-unknown-linux-gnu-012345678")
        );
        // Built from source: no commit, so the whole answer decides.
        let local = VV.replace(
            "commit-hash: 59807616e1a2b3c4d5e6f708192a3b4c5d6e7f80",
            "commit-hash: unknown",
        );
        let key = key_of(&local).unwrap();
        assert!(key.starts_with("1.95.0-x86_64-unknown-linux-gnu-"), "{key}");
        assert_ne!(key, key_of(VV).unwrap());
        assert_eq!(key_of("cargo 1.95.0"), None);
        // Nothing in a key leaves its folder.
        let odd = VV.replace("host: x86_64-unknown-linux-gnu", "host: ../../x y");
        assert_eq!(key_of(&odd).as_deref(), Some("1.95.0-.._.._x_y-59807616e"));
    }

    #[test]
    fn the_toolchain_answers_for_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let key = toolchain_key(&dir.path().join("not/yet")).unwrap();
        assert!(key.contains(std::env::consts::ARCH), "{key}");
    }

    fn work_dir(root: &Path, name: &str, used: SystemTime) -> PathBuf {
        let dir = root.join(name);
        std::fs::create_dir_all(dir.join("target")).unwrap();
        std::fs::write(dir.join("target/x"), "x").unwrap();
        drop(lock(&dir).unwrap());
        File::options()
            .write(true)
            .open(dir.join(LOCK_FILE))
            .unwrap()
            .set_modified(used)
            .unwrap();
        dir
    }

    #[test]
    fn prune_removes_only_old_unheld_directories_of_other_toolchains() {
        let root = tempfile::tempdir().unwrap();
        let now = SystemTime::now();
        let long_ago = now - PRUNE_AFTER - Duration::from_secs(60);
        let current = work_dir(root.path(), "current", long_ago);
        let old = work_dir(root.path(), "old", long_ago);
        let recent = work_dir(root.path(), "recent", now - Duration::from_secs(60));
        let held = work_dir(root.path(), "held", long_ago);
        let foreign = root.path().join("not-assay");
        std::fs::create_dir(&foreign).unwrap();
        let left = root.path().join(".removing-x-1");
        std::fs::create_dir(&left).unwrap();

        // Another process's shared lock: a second descriptor's flock is as
        // separate as another process's.
        let holder = lock(&held).unwrap();
        // `lock` marked it used now; make it old again, still held.
        File::options()
            .write(true)
            .open(held.join(LOCK_FILE))
            .unwrap()
            .set_modified(long_ago)
            .unwrap();

        let mut removed = prune(root.path(), &current, PRUNE_AFTER, now);
        removed.sort();
        assert_eq!(removed, vec![left, old.clone()]);
        assert!(!old.exists());
        for stays in [&current, &recent, &held, &foreign] {
            assert!(stays.is_dir(), "{}", stays.display());
        }
        drop(holder);
    }

    /// An assay that waited for the lock while a prune held it (the kernel
    /// says so in /proc/locks) ends up holding a new directory at the same
    /// path, never the one moved aside.
    #[test]
    fn a_lock_waiting_on_a_prune_gets_a_new_directory() {
        let root = tempfile::tempdir().unwrap();
        let dir = work_dir(root.path(), "k", SystemTime::now());
        let pruner = File::options()
            .write(true)
            .open(dir.join(LOCK_FILE))
            .unwrap();
        pruner.lock().unwrap();
        let old_ino = pruner.metadata().unwrap().ino();
        let waiter = {
            let dir = dir.clone();
            std::thread::spawn(move || lock(&dir).map(|l| l._file.metadata().unwrap().ino()))
        };
        // Wait for the kernel to record the waiter blocked on this inode.
        let blocked = format!(":{old_ino} ");
        while !std::fs::read_to_string("/proc/locks")
            .unwrap()
            .lines()
            .any(|l| l.contains("->") && l.contains(&blocked))
        {
            std::thread::yield_now();
        }
        let aside = root.path().join(".removing-k-1");
        std::fs::rename(&dir, &aside).unwrap();
        drop(pruner);
        let new_ino = waiter.join().unwrap().unwrap();
        assert_ne!(new_ino, old_ino);
        assert_eq!(
            std::fs::metadata(dir.join(LOCK_FILE)).unwrap().ino(),
            new_ino
        );
    }

    /// A user that took the lock while a prune held it finds the directory
    /// gone and locks a new one at the same path.
    #[test]
    fn a_lock_taken_after_a_prune_holds_a_new_directory() {
        let root = tempfile::tempdir().unwrap();
        let now = SystemTime::now();
        let dir = work_dir(root.path(), "k", now - PRUNE_AFTER * 2);
        assert_eq!(
            prune(root.path(), Path::new("/none"), PRUNE_AFTER, now),
            std::slice::from_ref(&dir)
        );
        assert!(!dir.exists());
        let held = lock(&dir).unwrap();
        assert!(dir.join(LOCK_FILE).is_file());
        // In use now: the next prune leaves it.
        assert!(prune(root.path(), Path::new("/none"), PRUNE_AFTER, now).is_empty());
        drop(held);
    }
}
