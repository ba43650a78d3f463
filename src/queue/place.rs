//! A lane's copy of what an item carries (issue 36): the task's files
//! written from the store's blobs into the lane's work directory, and the
//! pools file's text beside them, so the run reads nothing of the
//! queueing machine.
//!
//! A task's copy is `WORK_DIR/carried/DIGEST/`, named by the task's
//! digest: items of one task share it, and a copy that no longer holds
//! the task's bytes (edited, half removed) is replaced. Copies are
//! written aside and renamed into place, so a run never sees half a task.
//! An item an older assay queued names paths: it runs where they exist,
//! else it fails saying how to queue it again.
//!
//! A lane holds a shared lock on a task's copy from before it places it
//! until the item's run ends ([`CopyHeld`]), and after each run removes
//! the copies that no queued or running item carries and no lane holds
//! ([`prune_carried`]): lanes on one machine share the work directory,
//! and a run reads its copy (the harness crate) for as long as it builds.
//!
//! `assay promote` on a machine that did not run the batch places the
//! task the same way ([`task_to_promote`]), into a folder of its own
//! under `WORK_DIR/promoted/`, never a lane's copy: a promotion writes
//! into the folder, and a lane's copy must keep the bytes its digest
//! names.

use std::path::{Path, PathBuf};

use crate::engine::promote::{PromoteError, TaskAt};
use crate::queue::carry::{holds_task, spec_in, write_task, CarriedPools, CarriedTask, CarryError};
use crate::queue::item::{LiveSuitePart, Placed, QueuedPools, QueuedTask, WorkItem};
use crate::store::{BatchId, Store, StoreError, WorkState};

/// Why a lane cannot place an item's task or pools file.
#[derive(Debug, thiserror::Error)]
pub enum PlaceError {
    #[error(transparent)]
    Carry(#[from] CarryError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{}: queued by an older assay as a path on the queueing machine, which this lane cannot read: {again}", path.display())]
    QueuedByPath { path: PathBuf, again: String },
}

/// A shared `flock` on a task's copy (`carried/DIGEST.lock`), taken
/// before the copy is placed and held until its item's run ends: while
/// any is held, [`prune_carried`] leaves the copy alone.
#[derive(Debug)]
pub struct CopyHeld {
    _file: std::fs::File,
}

/// Places what `item` carries under `work_dir`: where its run finds the
/// spec and the pools file, and the hold on the task's copy, to be kept
/// until the run ends.
pub async fn place(
    store: &Store,
    item: &WorkItem,
    work_dir: &Path,
) -> Result<(Placed, Option<CopyHeld>), PlaceError> {
    let carried = work_dir.join("carried");
    match item {
        WorkItem::Batch(batch) => match &batch.task {
            QueuedTask::Carried { task, pools } => {
                let held = hold_copy(&carried, &task.digest)?;
                let placed = Placed {
                    spec: Some(place_task(store, task, &carried).await?),
                    pools_file: pools
                        .as_ref()
                        .map(|p| place_pools(p, &carried))
                        .transpose()?,
                };
                Ok((placed, Some(held)))
            }
            QueuedTask::Paths { spec, pools_file } => {
                let again = "queue it again with this assay (`assay run TASK --queue`)";
                for path in std::iter::once(spec).chain(pools_file) {
                    seen_here(path, again)?;
                }
                let placed = Placed {
                    spec: Some(spec.clone()),
                    pools_file: pools_file.clone(),
                };
                Ok((placed, None))
            }
        },
        WorkItem::SuitePart(_) => Ok((Placed::default(), None)),
        WorkItem::LiveSuitePart(LiveSuitePart { part, pools, .. }) => {
            let pools_file = match pools {
                QueuedPools::Carried(pools) => place_pools(pools, &carried)?,
                QueuedPools::Path(path) => {
                    let again = format!(
                        "run the part where the file is (`assay suite run --resume {} --part {} --pools FILE`)",
                        part.suite, part.part
                    );
                    seen_here(path, &again)?;
                    path.clone()
                }
            };
            let placed = Placed {
                spec: None,
                pools_file: Some(pools_file),
            };
            Ok((placed, None))
        }
    }
}

/// Removes the task copies under `work_dir/carried/` that no queued or
/// running item of `store` carries and no lane on this machine holds
/// ([`CopyHeld`]); returns the digests removed. A lane that wants a copy
/// back places it again. Lock files stay (a removed one could be locked
/// by one lane and created anew by the next), and so do pools files
/// (a few hundred bytes each).
pub async fn prune_carried(store: &Store, work_dir: &Path) -> Result<Vec<String>, PlaceError> {
    let carried = work_dir.join("carried");
    let Ok(entries) = std::fs::read_dir(&carried) else {
        return Ok(Vec::new());
    };
    let needed: std::collections::HashSet<String> = store
        .work_items()
        .await?
        .into_iter()
        .filter(|row| matches!(row.state, WorkState::Queued | WorkState::Running))
        .filter_map(|row| match WorkItem::from_json(&row.item) {
            Ok(WorkItem::Batch(run)) => match run.task {
                QueuedTask::Carried { task, .. } => Some(task.digest),
                QueuedTask::Paths { .. } => None,
            },
            _ => None,
        })
        .collect();
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if !is_dir || name.starts_with('.') || needed.contains(&name) {
            continue;
        }
        // Held exclusively while it is moved away: a lane that wants it
        // meanwhile waits for its shared hold, then places it again.
        let Ok(lock) = open_lock(&carried, &name) else {
            continue;
        };
        if lock.try_lock().is_err() {
            continue;
        }
        let aside = carried.join(format!(".pruning-{name}"));
        if std::fs::rename(entry.path(), &aside).is_ok() {
            let _ = std::fs::remove_dir_all(&aside);
            removed.push(name);
        }
    }
    Ok(removed)
}

/// The shared hold on the copy of the task whose digest is `digest`.
fn hold_copy(carried: &Path, digest: &str) -> Result<CopyHeld, CarryError> {
    create_dir(carried)?;
    let path = carried.join(format!("{digest}.lock"));
    let file = open_lock(carried, digest).map_err(|source| write_error(&path, source))?;
    file.lock_shared()
        .map_err(|source| write_error(&path, source))?;
    Ok(CopyHeld { _file: file })
}

fn open_lock(carried: &Path, digest: &str) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(carried.join(format!("{digest}.lock")))
}

/// Where `assay promote` finds the task of `batch` on this machine: the
/// folder the user names (`named`, checked against what the batch scored
/// by `engine::promote`); else, for a batch whose queued item carried its
/// task, that task written from the store into
/// `work_dir/promoted/batch-N/` (checked against its digest; kept as it
/// is if already there, so a second promotion of the batch is refused as
/// a local one is); else the spec the batch ran, if this machine has it.
/// Neither: a one-line refusal saying to name the folder.
pub async fn task_to_promote(
    store: &Store,
    batch: BatchId,
    named: Option<&Path>,
    work_dir: &Path,
) -> anyhow::Result<TaskAt> {
    if let Some(named) = named {
        return Ok(TaskAt::Named(named.to_path_buf()));
    }
    if let Some(task) = carried_task_of(store, batch).await? {
        let dir = work_dir.join("promoted").join(format!("batch-{batch}"));
        if !dir.exists() {
            write_aside_then_rename(store, &task, &dir).await?;
        }
        return Ok(TaskAt::Placed(spec_in(&task, &dir)?));
    }
    let spec = store.batch(batch).await?.spec_path;
    if Path::new(&spec).is_file() {
        return Ok(TaskAt::Ran);
    }
    Err(PromoteError::TaskNotHere { batch, spec }.into())
}

/// The task the queued item that began `batch` carried, if one did.
async fn carried_task_of(store: &Store, batch: BatchId) -> Result<Option<CarriedTask>, StoreError> {
    let items = store.work_items().await?;
    Ok(items
        .into_iter()
        .filter(|row| row.batch_id == Some(batch))
        .find_map(|row| match WorkItem::from_json(&row.item) {
            Ok(WorkItem::Batch(run)) => match run.task {
                QueuedTask::Carried { task, .. } => Some(task),
                QueuedTask::Paths { .. } => None,
            },
            _ => None,
        }))
}

/// Refuses a path an older item names that this machine does not have.
fn seen_here(path: &Path, again: &str) -> Result<(), PlaceError> {
    if path.is_file() {
        return Ok(());
    }
    Err(PlaceError::QueuedByPath {
        path: path.to_path_buf(),
        again: again.to_owned(),
    })
}

/// The task's copy under `carried`, written if missing or changed: its
/// spec's path.
async fn place_task(
    store: &Store,
    task: &CarriedTask,
    carried: &Path,
) -> Result<PathBuf, PlaceError> {
    let dir = carried.join(&task.digest);
    if !holds_task(task, &dir) {
        let aside = write_aside(store, task, carried).await?;
        if dir.exists() && !holds_task(task, &dir) {
            // A copy changed since it was written: moved aside whole, so
            // no run can see it half removed.
            let stale = tempfile::Builder::new()
                .prefix(".stale-")
                .tempdir_in(carried)
                .map_err(|source| write_error(carried, source))?;
            std::fs::rename(&dir, stale.path().join("task"))
                .map_err(|source| write_error(&dir, source))?;
        }
        match std::fs::rename(aside.path(), &dir) {
            Ok(()) => {}
            // Another run of this lane placed it meanwhile.
            Err(_) if holds_task(task, &dir) => {}
            Err(source) => return Err(write_error(&dir, source).into()),
        }
    }
    Ok(spec_in(task, &dir)?)
}

/// The task written whole into a new folder beside `dir`, checked, for
/// its caller to rename into place.
async fn write_aside(
    store: &Store,
    task: &CarriedTask,
    parent: &Path,
) -> Result<tempfile::TempDir, PlaceError> {
    let blobs = store.blobs(&task.blob_names()).await?;
    create_dir(parent)?;
    let aside = tempfile::Builder::new()
        .prefix(".placing-")
        .tempdir_in(parent)
        .map_err(|source| write_error(parent, source))?;
    write_task(task, &blobs, aside.path())?;
    Ok(aside)
}

/// The task written into `dir`, which does not exist yet, as a whole.
async fn write_aside_then_rename(
    store: &Store,
    task: &CarriedTask,
    dir: &Path,
) -> Result<(), PlaceError> {
    let parent = dir.parent().unwrap_or(Path::new("."));
    let aside = write_aside(store, task, parent).await?;
    match std::fs::rename(aside.path(), dir) {
        Ok(()) => Ok(()),
        // Another promotion placed it meanwhile.
        Err(_) if holds_task(task, dir) => Ok(()),
        Err(source) => Err(write_error(dir, source).into()),
    }
}

/// The pools file's copy under `carried`, named by its text's digest.
fn place_pools(pools: &CarriedPools, carried: &Path) -> Result<PathBuf, CarryError> {
    let path = carried.join(pools.file_name());
    if std::fs::read(&path).is_ok_and(|bytes| bytes == pools.text.as_bytes()) {
        return Ok(path);
    }
    create_dir(carried)?;
    let mut file = tempfile::Builder::new()
        .prefix(".pools-")
        .tempfile_in(carried)
        .map_err(|source| write_error(carried, source))?;
    std::io::Write::write_all(&mut file, pools.text.as_bytes())
        .map_err(|source| write_error(&path, source))?;
    file.persist(&path)
        .map_err(|e| write_error(&path, e.error))?;
    Ok(path)
}

fn create_dir(dir: &Path) -> Result<(), CarryError> {
    std::fs::create_dir_all(dir).map_err(|source| write_error(dir, source))
}

fn write_error(path: &Path, source: std::io::Error) -> CarryError {
    CarryError::Write {
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{NewBatch, WorkKind};

    /// The tiny fixture's task packed, its blobs stored, queued as a batch
    /// item that began a batch a lane ran from its own copy: the store,
    /// the batch and the packed task.
    async fn a_lane_ran_batch(dir: &Path) -> (Store, BatchId, CarriedTask) {
        let store = Store::open(&dir.join("t.db")).await.unwrap();
        let tiny = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny");
        let packed =
            crate::queue::carry::pack_task(&crate::spec::Spec::load(&tiny).unwrap()).unwrap();
        let blobs: Vec<(&str, &[u8])> = packed
            .blobs
            .iter()
            .map(|(d, b)| (d.as_str(), b.as_slice()))
            .collect();
        store.put_blobs(&blobs).await.unwrap();
        let item = serde_json::json!({
            "kind": "batch",
            "task": packed.task,
            "n": 6,
            "probe": "shared",
            "wave_size": 16,
            "wave_wait": 1.5,
            "build_timeout": 600.0,
            "draw": {"pools": [], "split": null, "max_in_flight": null, "max_completion_tokens": null}
        });
        assert!(WorkItem::from_json(&item).is_ok(), "{item:#}");
        let id = store.enqueue(WorkKind::Batch, &item).await.unwrap();
        let lane_copy = format!("/lane/work/carried/{}/spec.toml", packed.task.digest);
        let batch = store
            .begin_batch(&NewBatch {
                task: "tiny",
                spec_path: Path::new(&lane_copy),
                pool: "replay",
                n: 6,
                draw: None,
            })
            .await
            .unwrap();
        store.attach_batch(id, batch).await.unwrap();
        (store, batch, packed.task)
    }

    #[tokio::test]
    async fn a_promotion_places_the_carried_task_once_and_else_names_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        let (store, batch, task) = a_lane_ran_batch(dir.path()).await;

        // Placed from the store into a folder of its own, not a lane's copy.
        let at = task_to_promote(&store, batch, None, &work).await.unwrap();
        let placed = work.join("promoted").join(format!("batch-{batch}"));
        assert_eq!(at, TaskAt::Placed(placed.join("spec.toml")));
        assert!(holds_task(&task, &placed));
        assert!(!work.join("carried").exists());
        // A promotion's write is kept: the folder is not placed again.
        std::fs::write(placed.join("committed.rs"), "// promoted\n").unwrap();
        task_to_promote(&store, batch, None, &work).await.unwrap();
        assert_eq!(
            std::fs::read_to_string(placed.join("committed.rs")).unwrap(),
            "// promoted\n"
        );

        // A folder the user names comes first, whatever the store holds.
        let named = dir.path().join("mine");
        assert_eq!(
            task_to_promote(&store, batch, Some(&named), &work)
                .await
                .unwrap(),
            TaskAt::Named(named)
        );

        // A batch run here, from a folder since removed, with no item.
        let gone = dir.path().join("gone/spec.toml");
        let local = store
            .begin_batch(&NewBatch {
                task: "tiny",
                spec_path: &gone,
                pool: "replay",
                n: 6,
                draw: None,
            })
            .await
            .unwrap();
        let err = task_to_promote(&store, local, None, &work)
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!(
                "batch {local}: its task is not on this machine ({}) and the store carries no \
                 copy of it; name the task's folder with --task DIR",
                gone.display()
            )
        );
    }

    #[tokio::test]
    async fn copies_no_item_needs_and_no_lane_holds_are_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        // Its item is queued: its copy is needed.
        let (store, _, task) = a_lane_ran_batch(dir.path()).await;
        let carried = work.join("carried");
        for name in [task.digest.as_str(), "done", "held", ".placing-x"] {
            std::fs::create_dir_all(carried.join(name).join("harness")).unwrap();
            std::fs::write(carried.join(name).join("spec.toml"), "").unwrap();
        }
        std::fs::write(carried.join("pools-x.toml"), "").unwrap();
        // A lane on this machine runs from `held`.
        let held = hold_copy(&carried, "held").unwrap();

        assert_eq!(prune_carried(&store, &work).await.unwrap(), ["done"]);
        assert!(!carried.join("done").exists());
        for stays in [task.digest.as_str(), "held", ".placing-x", "pools-x.toml"] {
            assert!(carried.join(stays).exists(), "{stays}");
        }
        // Its run ended: removed by a next prune. Not always the very next
        // one: a child that another test of this process forks meanwhile
        // holds the hold's descriptor until it execs (its confinement runs
        // first), and a prune leaves a held copy alone; a lane's next prune
        // takes it then, as this loop does.
        drop(held);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let mut removed = prune_carried(&store, &work).await.unwrap();
        while removed.is_empty() && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            removed = prune_carried(&store, &work).await.unwrap();
        }
        assert_eq!(removed, ["held"]);
        assert!(carried.join(&task.digest).is_dir());
        // A lane that wants a copy back places it again.
        let (placed, hold) = place(&store, &queued_item(&store).await, &work)
            .await
            .unwrap();
        assert!(hold.is_some());
        assert!(placed.spec.unwrap().is_file());
    }

    async fn queued_item(store: &Store) -> WorkItem {
        let rows = store.work_items().await.unwrap();
        WorkItem::from_json(&rows[0].item).unwrap()
    }
}
