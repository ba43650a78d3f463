//! Queueing: a batch with its task packed (`carry`), a suite's parts, and
//! what a queue item carries of a suite run resolved here.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use crate::build::probe::ProbeMode;
use crate::draw::pools::PoolsFile;
use crate::draw::{DrawFlags, DrawOptions};
use crate::engine::suite::setup::pools_file;
use crate::queue::carry::{pack_task, CarriedPools, CarryError};
use crate::queue::item::{BatchRun, DrawChoice, QueuedTask, RepairChoice, SuiteQueue, WorkItem};
use crate::repair::RepairFlags;
use crate::spec::{Spec, WavePolicy};
use crate::store::Store;

/// A batch ready to queue: the item, and the blobs its task's files are
/// in.
#[derive(Debug, Clone)]
pub struct QueuedBatch {
    pub item: BatchRun,
    /// Blob digest to bytes.
    pub blobs: BTreeMap<String, Vec<u8>>,
}

impl QueuedBatch {
    /// A batch as `assay run` resolved it where it is queued: the task
    /// `spec` was loaded from, packed as its files are now, and the pools
    /// file (given, or found beside the spec or in this folder) read;
    /// `n`, the probe's settings and the draw's and repair's options from
    /// the flags, their variables or the spec.
    pub fn pack(
        spec: &Spec,
        n: usize,
        probe: ProbeMode,
        waves: WavePolicy,
        build_timeout: Duration,
        draw: &DrawOptions,
        repair: &RepairFlags,
    ) -> Result<QueuedBatch, CarryError> {
        let packed = pack_task(spec)?;
        let pools = draw
            .pools_file
            .clone()
            .or_else(|| PoolsFile::default_path(&spec.dir))
            .map(|path| CarriedPools::read(&path))
            .transpose()?;
        let task = QueuedTask::Carried {
            task: packed.task,
            pools,
        };
        let repair = RepairChoice::resolved(spec, repair);
        Ok(QueuedBatch {
            item: BatchRun::resolved(task, n, probe, waves, build_timeout, draw, repair),
            blobs: packed.blobs,
        })
    }

    /// Stores the blobs, then the item (so no item names a blob the store
    /// lacks): the item's id.
    pub async fn enqueue(&self, store: &Store) -> Result<i64> {
        let blobs: Vec<(&str, &[u8])> = self
            .blobs
            .iter()
            .map(|(digest, bytes)| (digest.as_str(), bytes.as_slice()))
            .collect();
        store.put_blobs(&blobs).await?;
        let item = WorkItem::Batch(self.item.clone());
        Ok(store.enqueue(item.kind(), &item.to_json()?).await?)
    }
}

/// The draw a lane's part repeats: the pools file's text, the pools and
/// the overrides, as resolved from flags and their variables. The key is
/// never among them: each lane has its own `NEV_MODEL_API_KEY`.
pub fn queued_draw(flags: &DrawFlags, problems: &Path) -> Result<(CarriedPools, DrawChoice)> {
    let pools = pools_file(flags.pools_file.as_deref(), problems, flags)?;
    let pools = CarriedPools::read(&pools)?;
    let choice = DrawChoice {
        pools: flags.pools.clone(),
        split: flags.split,
        max_in_flight: flags.max_in_flight,
        max_completion_tokens: flags.max_completion_tokens,
    };
    Ok((pools, choice))
}

/// Queues a stored suite's parts ([`SuiteQueue::items`]) in `store`, in
/// order: their ids.
pub async fn enqueue(parts: &SuiteQueue, store: &Store) -> Result<Vec<i64>> {
    let mut ids = Vec::new();
    for item in parts.items() {
        ids.push(store.enqueue(item.kind(), &item.to_json()?).await?);
    }
    Ok(ids)
}
