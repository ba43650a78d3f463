//! Scratch directories: the temporary directory a child runs in, and the
//! one the scorer is copied to, made so that what a killed assay leaves
//! behind is removed by the next one.
//!
//! A `TempDir` removes itself when dropped, which a SIGKILL (an operator's
//! `kill -9`, a lane's death taking its runs with it) never lets happen. So
//! each scratch directory is held under an exclusive `flock` on the
//! directory itself for as long as its owner lives; the kernel releases the
//! lock when the owner dies, however it dies. [`sweep`] removes every
//! scratch directory whose lock it can take. A lock, unlike a pid in the
//! name, cannot be fooled by a reused pid or by another pid namespace that
//! shares the temporary directory.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// What scratch directories are for; each kind has its own name prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A child's working directory.
    Run,
    /// Copies of scoring images the run's user can execute.
    Scorer,
    /// The case checker's working directory.
    CaseCheck,
}

const KINDS: [Kind; 3] = [Kind::Run, Kind::Scorer, Kind::CaseCheck];

impl Kind {
    /// The name prefix. The dot tells these apart from the unlocked
    /// `assay-run-XXXXXX` directories of older versions, which may still be
    /// running and must not be swept.
    fn prefix(self) -> &'static str {
        match self {
            Kind::Run => "assay-run.",
            Kind::Scorer => "assay-scorer.",
            Kind::CaseCheck => "assay-casecheck.",
        }
    }
}

/// A directory sweeping leaves alone however unlocked it looks: one this
/// young may be between its `mkdir` and its `flock`.
const YOUNGEST_SWEPT: Duration = Duration::from_secs(60);

/// A temporary directory, locked while it lives and removed when dropped.
#[derive(Debug)]
pub struct ScratchDir {
    // Removed before the lock is released: fields drop in order.
    dir: tempfile::TempDir,
    _lock: File,
}

impl ScratchDir {
    /// Makes a locked directory of `kind` in the temporary directory.
    pub fn new(kind: Kind) -> std::io::Result<ScratchDir> {
        let dir = tempfile::Builder::new()
            .prefix(kind.prefix())
            .tempdir_in(std::env::temp_dir())?;
        let lock = File::open(dir.path())?;
        lock.try_lock().map_err(std::io::Error::from)?;
        Ok(ScratchDir { dir, _lock: lock })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Removes, from the temporary directory, the scratch directories of
/// assays that are gone; returns what it removed. Never fails: what cannot
/// be removed stays for a later sweep.
pub fn sweep() -> Vec<PathBuf> {
    sweep_in(&std::env::temp_dir(), YOUNGEST_SWEPT)
}

fn sweep_in(parent: &Path, youngest: Duration) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    let now = SystemTime::now();
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !KINDS.iter().any(|k| name.starts_with(k.prefix())) {
            continue;
        }
        // Not a symlink: the lock and the removal are of the directory itself.
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        let young = meta
            .modified()
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .is_none_or(|age| age < youngest);
        if !meta.is_dir() || young {
            continue;
        }
        let path = entry.path();
        let Ok(lock) = File::open(&path) else {
            continue;
        };
        if lock.try_lock().is_ok() && std::fs::remove_dir_all(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_owners_directories_are_swept_and_a_live_ones_are_not() {
        let parent = tempfile::tempdir().unwrap();
        let dead = parent.path().join("assay-run.dead01");
        std::fs::create_dir_all(dead.join("sub")).unwrap();
        std::fs::write(dead.join("sub/file"), "x").unwrap();
        let live = parent.path().join("assay-scorer.live01");
        std::fs::create_dir(&live).unwrap();
        let held = File::open(&live).unwrap();
        held.try_lock().unwrap();
        // An older version's unlocked directory, and one not assay's at all.
        let old = parent.path().join("assay-run-old001");
        std::fs::create_dir(&old).unwrap();
        let other = parent.path().join("other.dir");
        std::fs::create_dir(&other).unwrap();

        let removed = sweep_in(parent.path(), Duration::ZERO);

        assert_eq!(removed, vec![dead.clone()]);
        assert!(!dead.exists());
        assert!(live.exists() && old.exists() && other.exists());
        drop(held);
        assert_eq!(sweep_in(parent.path(), Duration::ZERO), vec![live]);
    }

    #[test]
    fn a_young_directory_is_left_alone_even_unlocked() {
        let parent = tempfile::tempdir().unwrap();
        let fresh = parent.path().join("assay-casecheck.fresh1");
        std::fs::create_dir(&fresh).unwrap();
        assert!(sweep_in(parent.path(), Duration::from_secs(3600)).is_empty());
        assert!(fresh.exists());
    }

    #[test]
    fn a_scratch_directory_is_locked_while_it_lives_and_gone_after() {
        let dir = ScratchDir::new(Kind::Run).unwrap();
        let path = dir.path().to_owned();
        assert!(path
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("assay-run."));
        // Another open file description cannot take the lock: a sweep skips it.
        assert!(File::open(&path).unwrap().try_lock().is_err());
        drop(dir);
        assert!(!path.exists());
    }
}
