//! What a queue item carries of a suite run resolved here: the draw a
//! lane's part repeats, and the parts queued in order.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::draw::DrawFlags;
use crate::engine::suite::setup::pools_file;
use crate::queue::item::{DrawChoice, SuiteQueue};
use crate::store::Store;

/// The draw a lane's part repeats: the pools file (made absolute, as a
/// lane runs elsewhere), the pools and the overrides, as resolved from
/// flags and their variables. The key is never among them: each lane has
/// its own `NEV_MODEL_API_KEY`.
pub fn queued_draw(flags: &DrawFlags, problems: &Path) -> Result<(PathBuf, DrawChoice)> {
    let pools = pools_file(flags.pools_file.as_deref(), problems, flags)?;
    let pools =
        std::path::absolute(&pools).with_context(|| format!("--pools {}", pools.display()))?;
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
