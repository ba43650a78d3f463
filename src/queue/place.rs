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

use std::path::{Path, PathBuf};

use crate::queue::carry::{holds_task, spec_in, write_task, CarriedPools, CarriedTask, CarryError};
use crate::queue::item::{LiveSuitePart, Placed, QueuedPools, QueuedTask, WorkItem};
use crate::store::{Store, StoreError};

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
        let blobs = store.blobs(&task.blob_names()).await?;
        create_dir(carried)?;
        let aside = tempfile::Builder::new()
            .prefix(".placing-")
            .tempdir_in(carried)
            .map_err(|source| write_error(carried, source))?;
        write_task(task, &blobs, aside.path())?;
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
