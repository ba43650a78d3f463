//! Build slots: a small pool of folders that stand for one, so batches on
//! one work directory build side by side. A task's package folder and a
//! cargo target directory are each such a pool. Slot 0 is the folder as it
//! always was (`WORK/absolute`, `WORK/target`), so warm caches stay warm;
//! slot k is its sibling `NAME.slotK` (`WORK/absolute.slot1`,
//! `WORK/target.slot1`), a name no task can have (a task's name has no
//! `.`), created only when slots 0 to k-1 were busy at once.
//!
//! A slot is ours while we hold the exclusive lock on its `.assay-lock`
//! (`File::try_lock`, a `flock`), which also names our pid for whoever
//! waits. Taking one never waits while a slot is free: the preferred slot
//! first (the last one this package built in, warm for it), then the
//! others in order. When all are busy, the taker says once what it waits
//! for, then polls until the first frees.

use std::fs::{File, OpenOptions};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

/// The variable that sets how many slots each pool of a work directory
/// may grow to (a positive whole number); unset, [`default_pool_size`].
pub const SLOTS_VAR: &str = "ASSAY_BUILD_SLOTS";

/// The file whose lock holds a slot, inside the slot's folder.
const LOCK: &str = ".assay-lock";

/// How often a taker that waits looks again.
const POLL: Duration = Duration::from_millis(200);

/// The pool size unless [`SLOTS_VAR`] says otherwise: one slot per CPU
/// and one more, so two batches on one machine build side by side, and a
/// batch's slow compiles, built beside its main lane
/// ([`super::Package::lane`]), each keep a slot without stopping it.
pub fn default_pool_size() -> usize {
    super::cargo_jobs() + 1
}

/// How many slots a pool may grow to: [`SLOTS_VAR`], else
/// [`default_pool_size`].
pub fn pool_size() -> Result<usize> {
    match std::env::var(SLOTS_VAR) {
        Err(_) => Ok(default_pool_size()),
        Ok(text) => text
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .with_context(|| format!("{SLOTS_VAR} must be a whole number above 0, not `{text}`")),
    }
}

/// A pool of slots standing for the folder `base`.
#[derive(Debug, Clone)]
pub(super) struct Pool {
    base: PathBuf,
    size: usize,
}

/// A slot of a pool, ours until dropped.
#[derive(Debug)]
pub(super) struct Slot {
    pub index: usize,
    pub path: PathBuf,
    _lock: File,
}

/// A busy slot, and the pid its lock file names, if it names one.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Holder {
    path: PathBuf,
    pid: Option<u32>,
}

impl Pool {
    /// A pool of `size` slots (at least one) for `base`.
    pub fn new(base: &Path, size: usize) -> Pool {
        Pool {
            base: base.to_path_buf(),
            size: size.max(1),
        }
    }

    /// Slot `index`'s folder: `base` itself for 0, else `base.slotK`.
    pub fn path(&self, index: usize) -> PathBuf {
        slot_path(&self.base, index)
    }

    /// Takes a free slot (`prefer` first, then the others in order),
    /// blocking the thread while all are busy; `say` is told once what it
    /// waits for.
    pub fn take_blocking(&self, prefer: usize, say: impl FnOnce(String)) -> Result<Slot> {
        let mut say = Some(say);
        loop {
            if let Some(slot) = self.look(prefer, &mut say)? {
                return Ok(slot);
            }
            std::thread::sleep(POLL);
        }
    }

    /// [`Pool::take_blocking`] for async code: waits without holding a
    /// thread, and dropping the future stops the wait.
    pub async fn take(&self, prefer: usize, say: impl FnOnce(String)) -> Result<Slot> {
        let mut say = Some(say);
        loop {
            if let Some(slot) = self.look(prefer, &mut say)? {
                return Ok(slot);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// A free slot, or `None` once `say` (if not told yet) is told who
    /// holds each.
    fn look(&self, prefer: usize, say: &mut Option<impl FnOnce(String)>) -> Result<Option<Slot>> {
        Ok(match self.try_take(prefer)? {
            Ok(slot) => Some(slot),
            Err(busy) => {
                if let Some(say) = say.take() {
                    say(waiting(&busy));
                }
                None
            }
        })
    }

    /// One look at every slot, `prefer` first: the first free one, locked
    /// and marked with our pid, or who holds each.
    fn try_take(&self, prefer: usize) -> Result<Result<Slot, Vec<Holder>>> {
        let prefer = prefer.min(self.size - 1);
        let order = std::iter::once(prefer).chain((0..self.size).filter(|&i| i != prefer));
        let mut busy = Vec::new();
        for index in order {
            let path = self.path(index);
            std::fs::create_dir_all(&path)
                .with_context(|| format!("cannot create {}", path.display()))?;
            let lock_path = path.join(LOCK);
            // Never truncated on open: the holder's pid is in it.
            let mut lock = OpenOptions::new()
                .create(true)
                .truncate(false)
                .read(true)
                .write(true)
                .open(&lock_path)
                .with_context(|| format!("cannot create {}", lock_path.display()))?;
            match lock.try_lock() {
                Ok(()) => {
                    // For whoever waits: who holds it. Best effort.
                    let _ = lock
                        .set_len(0)
                        .and_then(|()| writeln!(lock, "{}", std::process::id()));
                    return Ok(Ok(Slot {
                        index,
                        path,
                        _lock: lock,
                    }));
                }
                Err(std::fs::TryLockError::WouldBlock) => busy.push(Holder {
                    pid: std::fs::read_to_string(&lock_path)
                        .ok()
                        .and_then(|t| t.trim().parse().ok()),
                    path,
                }),
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(e).with_context(|| format!("cannot lock {}", lock_path.display()))
                }
            }
        }
        Ok(Err(busy))
    }
}

/// Slot `index` of the folder `base`: `base` for 0, else its sibling
/// `NAME.slotK`.
pub(super) fn slot_path(base: &Path, index: usize) -> PathBuf {
    if index == 0 {
        return base.to_path_buf();
    }
    let mut name = base.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".slot{index}"));
    base.with_file_name(name)
}

/// Tells the person waiting (on a terminal; a script's stderr keeps its
/// one-line errors) and the log (`-v`) what a wait is for.
pub(super) fn say_waiting(why: String) {
    if std::io::stderr().is_terminal() {
        eprintln!("assay: {why}");
    }
    tracing::info!("{why}");
}

/// The one line a taker says when every slot is busy.
fn waiting(busy: &[Holder]) -> String {
    let held: Vec<String> = busy
        .iter()
        .map(|h| match h.pid {
            Some(pid) => format!("{} (pid {pid})", h.path.display()),
            None => h.path.display().to_string(),
        })
        .collect();
    format!(
        "waiting for a build slot: all {} are busy ({}); give this run its own `--work-dir` \
         to build side by side, or allow more slots with {SLOTS_VAR}",
        busy.len(),
        held.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Another process's lock on slot `index`: a second descriptor's flock
    /// is as separate as another process's.
    fn hold(pool: &Pool, index: usize) -> File {
        let path = pool.path(index);
        std::fs::create_dir_all(&path).unwrap();
        let file = File::create(path.join(LOCK)).unwrap();
        file.lock().unwrap();
        std::fs::write(path.join(LOCK), "4242\n").unwrap();
        file
    }

    #[test]
    fn slot_zero_is_the_folder_itself_and_the_others_its_siblings() {
        let base = Path::new("/w/absolute");
        assert_eq!(slot_path(base, 0), base);
        assert_eq!(slot_path(base, 1), Path::new("/w/absolute.slot1"));
        assert_eq!(
            slot_path(Path::new("/w/suite/target"), 2),
            Path::new("/w/suite/target.slot2")
        );
    }

    #[test]
    fn a_free_slot_is_taken_without_waiting_and_busy_ones_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let pool = Pool::new(&dir.path().join("target"), 3);
        let no_wait = |why: String| panic!("no wait, yet: {why}");

        let first = pool.take_blocking(0, no_wait).unwrap();
        assert_eq!(first.index, 0);
        assert_eq!(first.path, dir.path().join("target"));
        // Only a busy slot makes the next one exist.
        assert!(!pool.path(1).exists());
        let second = pool.take_blocking(0, no_wait).unwrap();
        assert_eq!((second.index, second.path.clone()), (1, pool.path(1)));
        drop((first, second));
        // The preferred slot first, when free.
        let third = pool.take_blocking(2, no_wait).unwrap();
        assert_eq!(third.index, 2);
        // A busy preferred slot is skipped for the first free one.
        let fourth = pool.take_blocking(2, no_wait).unwrap();
        assert_eq!(fourth.index, 0);
        // Ours names our pid, for whoever waits.
        assert_eq!(
            std::fs::read_to_string(pool.path(0).join(LOCK)).unwrap(),
            format!("{}\n", std::process::id())
        );
    }

    #[test]
    fn when_every_slot_is_busy_the_wait_is_said_once_then_the_first_freed_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        let pool = Pool::new(&dir.path().join("absolute"), 2);
        let zero = hold(&pool, 0);
        let one = hold(&pool, 1);
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = {
            let pool = pool.clone();
            std::thread::spawn(move || pool.take_blocking(0, |why| tx.send(why).unwrap()))
        };
        let said = rx.recv().unwrap();
        for path in [pool.path(0), pool.path(1)] {
            assert!(
                said.contains(&format!("{} (pid 4242)", path.display())),
                "{said}"
            );
        }
        assert!(
            said.contains("--work-dir") && said.contains(SLOTS_VAR),
            "{said}"
        );
        drop(one);
        let taken = waiter.join().unwrap().unwrap();
        assert_eq!(taken.index, 1);
        // Said once: the sender is gone with the waiter, nothing more came.
        assert!(rx.try_recv().is_err());
        drop(zero);
    }

    #[tokio::test]
    async fn the_async_wait_ends_when_a_slot_frees_and_says_once() {
        let dir = tempfile::tempdir().unwrap();
        let pool = Pool::new(&dir.path().join("target"), 1);
        let held = hold(&pool, 0);
        let said = std::sync::Mutex::new(Vec::new());
        let taking = pool.take(0, |why| said.lock().unwrap().push(why));
        tokio::pin!(taking);
        // Polled past its first look, then the slot frees.
        assert!(
            tokio::time::timeout(POLL * 3, &mut taking).await.is_err(),
            "taken while held"
        );
        drop(held);
        assert_eq!(taking.await.unwrap().index, 0);
        assert_eq!(said.lock().unwrap().len(), 1);
    }
}
