//! Extraction and dedup: streaming, to feed the probe while the draw
//! goes on, then over the whole batch, stored.

use std::collections::HashMap;

use anyhow::Result;
use tokio::sync::mpsc;

use crate::build::probe::stream::StreamCandidate;
use crate::draw::Drawn;
use crate::engine::resume::ResumePlan;
use crate::spec::{DedupBy, Spec};
use crate::store::{BatchId, Store};
use crate::support::testpoint;
use crate::text::dedup;
use crate::text::extract::{self, Extraction};

/// A candidate that extraction and dedup kept for probing.
pub(super) struct Unique {
    pub(super) idx: usize,
    pub(super) source: String,
}

/// Stores every reply's extraction and dedup group, over the whole batch,
/// and returns the unique candidates. A reply the stream already extracted
/// and fingerprinted (`streamed`, by reply index) is taken from there, not
/// extracted again; one stored by an earlier attempt keeps what it has.
pub(super) async fn extract_and_dedup(
    spec: &Spec,
    replies: &[Drawn],
    streamed: &mut HashMap<usize, Extracted>,
    store: &Store,
    batch: BatchId,
    stored: &ResumePlan,
) -> Result<Vec<Unique>> {
    let (extractions, fingerprints): (Vec<Extraction>, Vec<Option<dedup::Fingerprints>>) = replies
        .iter()
        .map(|d| {
            if let Some((extraction, _)) = stored.extraction(d.idx) {
                return Extracted::of(extraction.clone());
            }
            if let Some(done) = streamed.remove(&d.idx) {
                return done;
            }
            if !d.reply.outcome.is_ok() {
                return Extracted::of(Extraction::Failed(extract::NoCode::DrawFailed));
            }
            Extracted::reply(d, &spec.entry)
        })
        .map(|e| (e.extraction, e.fingerprints))
        .unzip();
    // Groups are formed over batch positions; map them back to reply indices.
    let groups = dedup::group(&fingerprints);
    let mut unique = Vec::new();
    for (pos, (drawn, extraction)) in replies.iter().zip(extractions).enumerate() {
        let to_idx = |rep: Option<usize>| rep.map(|rep| replies[rep].idx);
        let grouping = dedup::Grouping {
            exact_dup_of: to_idx(groups[pos].exact_dup_of),
            alpha_dup_of: to_idx(groups[pos].alpha_dup_of),
        };
        // A candidate stored by an earlier attempt keeps its extraction
        // and groups, and is not written again.
        let dup_of = match stored.extraction(drawn.idx) {
            Some((_, stored_dup_of)) => stored_dup_of,
            None => {
                let dup_of = grouping.dup_of(spec.dedup_by);
                let fp = fingerprints[pos].map(|f| f.exact.to_string());
                store
                    .record_candidate(batch, drawn.idx, &extraction, fp.as_deref(), dup_of)
                    .await?;
                let alpha = fingerprints[pos]
                    .and_then(|f| f.alpha)
                    .map(|f| f.to_string());
                store
                    .record_groups(batch, drawn.idx, alpha.as_deref(), &grouping)
                    .await?;
                testpoint::reached("extract.candidate").await;
                dup_of
            }
        };
        if let (Extraction::Source(source), None) = (extraction, dup_of) {
            unique.push(Unique {
                idx: drawn.idx,
                source,
            });
        }
    }
    Ok(unique)
}

/// One reply's extraction and, for code, its fingerprints.
pub(super) struct Extracted {
    pub(super) extraction: Extraction,
    pub(super) fingerprints: Option<dedup::Fingerprints>,
}

impl Extracted {
    pub(super) fn of(extraction: Extraction) -> Extracted {
        let fingerprints = match &extraction {
            Extraction::Source(src) => dedup::fingerprints(src),
            Extraction::Failed(_) => None,
        };
        Extracted {
            extraction,
            fingerprints,
        }
    }

    pub(super) fn reply(d: &Drawn, entry: &str) -> Extracted {
        Extracted::of(extract::extract(
            d.reply.content.as_deref(),
            d.reply.finish_reason.as_deref(),
            entry,
        ))
    }
}

/// Extracts and fingerprints replies as they arrive and sends the first
/// candidate of each fingerprint on to the streaming probe. Returns what
/// it extracted, by reply index, for `extract_and_dedup` to store and
/// group over the whole batch without extracting again; `settle_probe`
/// probes a group's stored representative if the stream probed another
/// member.
pub(super) async fn extract_stream(
    entry: String,
    dedup_by: DedupBy,
    mut drawn: mpsc::UnboundedReceiver<Drawn>,
    candidates: mpsc::UnboundedSender<StreamCandidate>,
) -> HashMap<usize, Extracted> {
    let mut seen = std::collections::HashSet::new();
    let mut done = HashMap::new();
    while let Some(d) = drawn.recv().await {
        if !d.reply.outcome.is_ok() {
            continue;
        }
        let extracted = Extracted::reply(&d, &entry);
        if let (Extraction::Source(source), Some(f)) =
            (&extracted.extraction, extracted.fingerprints)
        {
            // The same key `extract_and_dedup` groups by; a missing alpha
            // fingerprint falls back to the exact one, kept apart.
            let key = match (dedup_by, f.alpha) {
                (DedupBy::Alpha, Some(alpha)) => (true, alpha),
                _ => (false, f.exact),
            };
            if seen.insert(key) {
                let _ = candidates.send(StreamCandidate {
                    idx: d.idx,
                    source: source.clone(),
                });
            }
        }
        done.insert(d.idx, extracted);
    }
    done
}
