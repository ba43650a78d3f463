//! Resume: what a batch already has, so that each stage does only the rest.
//!
//! A [`ResumePlan`] is read from the store when `assay run --resume` takes a batch
//! up again (and is empty for a new batch, so a fresh run and a resumed one
//! go through the same code). Each stage consults it: draw asks only for the
//! replies not stored, extraction runs only on replies without a candidate
//! row, the probe builds only the unique candidates without a verdict, and
//! scoring runs only the compiled candidates without a score (and the
//! committed candidate if it has none). What was stored is taken as it is,
//! never redone, so a reply is requested and a verdict written once.
//!
//! This module also holds the two checks around a resume: finding batches
//! whose owner died ([`interrupt_dead_batches`]) and the spec digest that
//! stops a batch from being finished against a changed oracle.

use std::collections::BTreeMap;

use anyhow::Result;

use crate::build::probe::ProbeVerdict;
use crate::draw::Drawn;
use crate::store::{BatchId, CandidateRow, Kept, Store, StoreError};
use crate::support::owner::Liveness;
use crate::text::extract::Extraction;

/// What a batch has stored, by candidate index.
#[derive(Debug, Clone, Default)]
pub struct ResumePlan {
    /// 0 for a new batch; the resume's number otherwise.
    pub attempt: u32,
    replies: BTreeMap<usize, Drawn>,
    candidates: BTreeMap<usize, CandidateRow>,
    /// The batch's first probe run, which the report reads; a resume adds
    /// its verdicts there (it may be empty if the process died right after
    /// creating it).
    pub probe_run: Option<i64>,
    committed_scored: bool,
}

impl ResumePlan {
    /// The plan of a new batch: nothing stored.
    pub fn fresh() -> ResumePlan {
        ResumePlan::default()
    }

    /// Reads what `batch` has stored.
    pub async fn load(store: &Store, batch: BatchId) -> Result<ResumePlan, StoreError> {
        let replies = store
            .replies(batch)
            .await?
            .into_iter()
            .map(|d| (d.idx, d))
            .collect();
        let candidates = store
            .candidates(batch)
            .await?
            .into_iter()
            .map(|c| (c.idx, c))
            .collect();
        Ok(ResumePlan {
            attempt: 0,
            replies,
            candidates,
            probe_run: store.first_probe_run(batch).await?,
            committed_scored: store.batch(batch).await?.committed.is_some(),
        })
    }

    pub fn kept(&self) -> Kept {
        let c = self.candidates.values();
        Kept {
            replies: self.replies.len(),
            extracted: self.candidates.len(),
            probed: c.clone().filter(|c| c.probe.is_some()).count(),
            scored: c.filter(|c| c.score.is_some()).count(),
            committed: self.committed_scored,
        }
    }

    /// How many replies from index 0 on are all stored: a pool that serves
    /// in order can skip that many.
    pub fn stored_prefix(&self) -> usize {
        (0..).take_while(|i| self.replies.contains_key(i)).count()
    }

    pub fn has_reply(&self, idx: usize) -> bool {
        self.replies.contains_key(&idx)
    }

    /// The stored replies, in index order.
    pub fn replies(&self) -> impl Iterator<Item = &Drawn> {
        self.replies.values()
    }

    /// The stored extraction of a candidate and the group it was put in.
    pub fn extraction(&self, idx: usize) -> Option<(&Extraction, Option<usize>)> {
        self.candidates.get(&idx).map(|c| (&c.extraction, c.dup_of))
    }

    pub fn probe(&self, idx: usize) -> Option<&ProbeVerdict> {
        self.candidates.get(&idx)?.probe.as_ref()
    }

    pub fn is_scored(&self, idx: usize) -> bool {
        self.candidates.get(&idx).is_some_and(|c| c.score.is_some())
    }

    pub fn committed_scored(&self) -> bool {
        self.committed_scored
    }

    /// Compiled candidates from earlier attempts that still lack a score,
    /// with their sources.
    pub fn compiled_unscored(&self) -> impl Iterator<Item = (usize, &str)> {
        self.candidates
            .values()
            .filter_map(|c| match &c.extraction {
                Extraction::Source(src)
                    if c.probe.as_ref().is_some_and(ProbeVerdict::compiled)
                        && c.score.is_none() =>
                {
                    Some((c.idx, src.as_str()))
                }
                _ => None,
            })
    }
}

/// Marks every `running` batch whose process is gone as interrupted, and
/// returns their ids. A batch whose owner is alive, or on another host, is
/// left alone.
pub async fn interrupt_dead_batches(store: &Store) -> Result<Vec<BatchId>, StoreError> {
    let mut marked = Vec::new();
    for running in store.running_batches().await? {
        // No owner record: begun by an assay older than schema 5 that may
        // still be running (this one's batches always carry their owner).
        let Some(owner) = &running.owner else {
            continue;
        };
        let reason = match owner.liveness() {
            Liveness::Alive | Liveness::Unknown => continue,
            Liveness::Dead => format!(
                "its process (pid {} on {}) stopped without finishing",
                owner.pid, owner.host
            ),
        };
        if store
            .interrupt_if_owned(running.id, running.owner.as_ref(), &reason)
            .await?
        {
            tracing::info!(batch = running.id, %reason, "marked interrupted");
            marked.push(running.id);
        }
    }
    Ok(marked)
}
