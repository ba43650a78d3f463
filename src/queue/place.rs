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
//! `assay promote` on a machine that did not run the batch places the
//! task the same way ([`task_to_promote`]), into a folder of its own
//! under `WORK_DIR/promoted/`, never a lane's copy: a promotion writes
//! into the folder, and a lane's copy must keep the bytes its digest
//! names.

use std::path::{Path, PathBuf};

use crate::engine::promote::{PromoteError, TaskAt};
use crate::queue::carry::{holds_task, spec_in, write_task, CarriedPools, CarriedTask, CarryError};
use crate::queue::item::{LiveSuitePart, Placed, QueuedPools, QueuedTask, WorkItem};
use crate::store::{BatchId, Store, StoreError};

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

/// Places what `item` carries under `work_dir`: where its run finds the
/// spec and the pools file.
pub async fn place(store: &Store, item: &WorkItem, work_dir: &Path) -> Result<Placed, PlaceError> {
    let carried = work_dir.join("carried");
    match item {
        WorkItem::Batch(batch) => match &batch.task {
            QueuedTask::Carried { task, pools } => Ok(Placed {
                spec: Some(place_task(store, task, &carried).await?),
                pools_file: pools
                    .as_ref()
                    .map(|p| place_pools(p, &carried))
                    .transpose()?,
            }),
            QueuedTask::Paths { spec, pools_file } => {
                let again = "queue it again with this assay (`assay run TASK --queue`)";
                for path in std::iter::once(spec).chain(pools_file) {
                    seen_here(path, again)?;
                }
                Ok(Placed {
                    spec: Some(spec.clone()),
                    pools_file: pools_file.clone(),
                })
            }
        },
        WorkItem::SuitePart(_) => Ok(Placed::default()),
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
            Ok(Placed {
                spec: None,
                pools_file: Some(pools_file),
            })
        }
    }
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
