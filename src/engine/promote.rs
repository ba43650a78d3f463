//! Promote: write an admitted candidate over its task's committed file.
//!
//! A candidate is promoted only when, in the batch that scored it, it was
//! admitted and passed more cases than the committed candidate scored in that
//! same run, and only while the committed file is still the one that batch
//! read (same blake3): a reference that has changed since proves nothing.
//! The file is replaced atomically (written beside it, then renamed), with a
//! provenance header, and the promotion is recorded in the store.
//!
//! The task is found where [`TaskAt`] says: the spec the batch ran, a
//! folder the user names (which must hold what the batch scored: its spec
//! digest), or, for a batch a lane ran on another machine, the task its
//! queued item carried, placed from the store (`queue::place`, a tier
//! above, chooses). The candidate's source always comes from the store.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::score::ScoreVerdict;
use crate::store::{BatchId, CandidateRow, PromotionRow, Store};

mod diff;

/// Why a promotion was refused. These are the user's input, not failures.
#[derive(Debug, thiserror::Error)]
pub enum PromoteError {
    #[error("batch {batch}: no candidate {idx}")]
    NoCandidate { batch: BatchId, idx: usize },
    #[error("batch {batch}: candidate {idx} was not admitted ({why})")]
    NotAdmitted {
        batch: BatchId,
        idx: usize,
        why: String,
    },
    #[error(
        "batch {batch}: candidate {idx} passed {passed}/{total}, which does not beat the \
         committed candidate's {reference}/{total} in the same run"
    )]
    DidNotBeat {
        batch: BatchId,
        idx: usize,
        passed: usize,
        total: usize,
        reference: usize,
    },
    #[error(
        "{path}: changed since batch {batch} scored it as the reference; run a new batch \
         before promoting"
    )]
    CommittedChanged { batch: BatchId, path: PathBuf },
    #[error("batch {batch}: candidate {idx} line {line}: {why}")]
    Forbidden {
        batch: BatchId,
        idx: usize,
        line: usize,
        why: String,
    },
    #[error("batch {batch}: task `{task}` no longer matches {spec}")]
    TaskMismatch {
        batch: BatchId,
        task: String,
        spec: String,
    },
    #[error(
        "{}: not the task batch {batch} scored (its cases, committed candidate, harness, \
         limits or admission differ); name the folder the batch ran, unchanged",
        dir.display()
    )]
    NotTheTaskScored { batch: BatchId, dir: PathBuf },
    #[error(
        "batch {batch}: its task is not on this machine ({spec}) and the store carries no \
         copy of it; name the task's folder with --task DIR"
    )]
    TaskNotHere { batch: BatchId, spec: String },
}

/// Where a promotion finds the task whose committed file it replaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskAt {
    /// The spec the batch ran, at the path stored with it.
    Ran,
    /// A task folder (or spec file) the user names: promoted only if it
    /// holds what the batch scored (`task::spec_digest`).
    Named(PathBuf),
    /// The spec of the task the batch's queued item carried, written from
    /// the store's blobs (checked against the item's digest) on this
    /// machine.
    Placed(PathBuf),
}

/// Promotes the best admitted candidate of `batch` (rank 1) if it beat the
/// reference; `Ok(None)` when no candidate qualifies.
pub async fn promote_best(store: &Store, batch: BatchId) -> anyhow::Result<Option<PromotionRow>> {
    let candidates = store.candidates(batch).await?;
    let Some(best) = candidates.iter().find(|c| c.rank == Some(1)) else {
        return Ok(None);
    };
    match promote(store, batch, best.idx).await {
        Ok(row) => Ok(Some(row)),
        Err(e) if matches!(e.downcast_ref(), Some(PromoteError::DidNotBeat { .. })) => {
            tracing::info!("no promotion: {e:#}");
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// A promotion checked and ready to write: what the committed file is and
/// what it would become. Nothing is written until [`apply`].
#[derive(Debug, Clone)]
pub struct Plan {
    pub path: PathBuf,
    /// The committed file as it is (the text the batch scored).
    pub current: String,
    /// The provenance header and the candidate's source.
    pub text: String,
    row: PromotionRow,
}

impl Plan {
    /// The change as a unified diff (three lines of context), for the user
    /// to read before the file is written.
    pub fn diff(&self) -> String {
        let name = self.path.display().to_string();
        diff::unified(&self.current, &self.text, &name, 3)
    }
}

/// Promotes candidate `idx` of `batch`, or says why not.
pub async fn promote(store: &Store, batch: BatchId, idx: usize) -> anyhow::Result<PromotionRow> {
    let plan = plan(store, batch, idx).await?;
    apply(store, plan).await
}

/// Writes a planned promotion (atomically) and records it.
pub async fn apply(store: &Store, plan: Plan) -> anyhow::Result<PromotionRow> {
    write_atomically(&plan.path, &plan.text)?;
    store.record_promotion(&plan.row).await?;
    Ok(plan.row)
}

/// Checks that candidate `idx` of `batch` may be promoted over the task
/// the batch ran and what it would write, or says why not.
pub async fn plan(store: &Store, batch: BatchId, idx: usize) -> anyhow::Result<Plan> {
    plan_at(store, batch, idx, &TaskAt::Ran).await
}

/// As [`plan`], over the task `at` says.
pub async fn plan_at(
    store: &Store,
    batch: BatchId,
    idx: usize,
    at: &TaskAt,
) -> anyhow::Result<Plan> {
    let row = store.batch(batch).await?;
    let candidates = store.candidates(batch).await?;
    let candidate = candidates
        .iter()
        .find(|c| c.idx == idx)
        .ok_or(PromoteError::NoCandidate { batch, idx })?;
    let (source, scored) = admitted_source(batch, candidate)?;
    let reference_passed = match &row.committed {
        Some(c) if matches!(c.verdict, ScoreVerdict::Scored { .. }) => c.passed,
        // A reference that did not finish passed what it passed before it
        // stopped; one that was never scored passed nothing.
        Some(c) => c.passed,
        None => 0,
    };
    if !crate::score::admit::beats_reference(scored, row.committed.as_ref()) {
        return Err(PromoteError::DidNotBeat {
            batch,
            idx,
            passed: scored.passed,
            total: scored.total,
            reference: reference_passed,
        }
        .into());
    }
    let spec_path = match at {
        TaskAt::Ran => Path::new(&row.spec_path),
        TaskAt::Named(path) | TaskAt::Placed(path) => path.as_path(),
    };
    let spec = crate::task::load(spec_path)?;
    if spec.name != row.task {
        return Err(PromoteError::TaskMismatch {
            batch,
            task: row.task.clone(),
            spec: spec_path.display().to_string(),
        }
        .into());
    }
    if let TaskAt::Named(dir) = at {
        // A batch begun before schema 5 stored no digest: nothing to
        // check the folder against, so it is refused too.
        let scored = store.spec_digest(batch).await?;
        if scored.as_deref() != Some(crate::task::spec_digest(&spec).as_str()) {
            return Err(PromoteError::NotTheTaskScored {
                batch,
                dir: dir.clone(),
            }
            .into());
        }
    }
    // The policy as it stands now: a candidate scored under a relaxed
    // policy is not written where every later batch links it once the
    // task forbids what it does.
    if let Err(v) = crate::text::policy::check(&spec.policy, source) {
        return Err(PromoteError::Forbidden {
            batch,
            idx,
            line: v.line,
            why: v.summary(),
        }
        .into());
    }
    let current = std::fs::read(&spec.committed.path)
        .with_context(|| format!("cannot read {}", spec.committed.path.display()))?;
    let current_hash = blake3::hash(&current).to_hex().to_string();
    if row.committed_hash.as_deref() != Some(current_hash.as_str()) {
        return Err(PromoteError::CommittedChanged {
            batch,
            path: spec.committed.path.clone(),
        }
        .into());
    }
    let now = crate::support::clock::utc_now_secs();
    let header = provenance_header(
        batch,
        idx,
        &candidate.pool,
        candidate.model.as_deref(),
        scored.passed,
        scored.total,
        reference_passed,
        &now,
    );
    let promotion = PromotionRow {
        batch_id: batch,
        idx,
        path: spec.committed.path.display().to_string(),
        replaced_hash: current_hash,
        passed: scored.passed,
        total: scored.total,
        reference_passed,
        promoted_at: now,
    };
    Ok(Plan {
        path: spec.committed.path.clone(),
        current: String::from_utf8_lossy(&current).into_owned(),
        text: format!("{header}{source}"),
        row: promotion,
    })
}

fn admitted_source(
    batch: BatchId,
    c: &CandidateRow,
) -> Result<(&str, &crate::score::Scored), PromoteError> {
    let refused = |why: &str| PromoteError::NotAdmitted {
        batch,
        idx: c.idx,
        why: why.to_owned(),
    };
    let source = match &c.extraction {
        crate::text::extract::Extraction::Source(s) => s.as_str(),
        crate::text::extract::Extraction::Failed(_) => {
            return Err(refused("nothing was extracted"))
        }
    };
    let Some(scored) = &c.score else {
        return Err(refused(match c.dup_of {
            Some(_) => "a duplicate; promote its group's representative",
            None => "never scored",
        }));
    };
    if !c.admitted {
        return Err(refused(c.admission.as_deref().unwrap_or("not admitted")));
    }
    Ok((source, scored))
}

/// The comment block written above a promoted candidate.
#[allow(clippy::too_many_arguments)]
pub fn provenance_header(
    batch: BatchId,
    idx: usize,
    pool: &str,
    model: Option<&str>,
    passed: usize,
    total: usize,
    reference_passed: usize,
    date: &str,
) -> String {
    format!(
        "// Promoted by assay on {date}: batch {batch}, candidate {idx}, pool {pool}, \
         model {model}.\n// Score {passed}/{total}; the committed candidate it replaced \
         scored {reference_passed}/{total} in the same run.\n\n",
        model = model.unwrap_or("unknown"),
    )
}

fn write_atomically(path: &Path, text: &str) -> anyhow::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    std::io::Write::write_all(&mut tmp, text.as_bytes())
        .with_context(|| format!("cannot write {}", tmp.path().display()))?;
    tmp.as_file()
        .sync_all()
        .with_context(|| format!("cannot sync {}", tmp.path().display()))?;
    tmp.persist(path)
        .with_context(|| format!("cannot replace {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_is_comments_and_names_its_sources() {
        let h = provenance_header(
            3,
            19,
            "replay",
            Some("m1"),
            10,
            10,
            8,
            "2026-12-02T00:00:00Z",
        );
        assert!(
            h.lines().all(|l| l.is_empty() || l.starts_with("// ")),
            "{h}"
        );
        for part in [
            "batch 3",
            "candidate 19",
            "pool replay",
            "model m1",
            "10/10",
            "8/10",
            "2026-12-02",
        ] {
            assert!(h.contains(part), "{h} lacks {part}");
        }
    }
}
