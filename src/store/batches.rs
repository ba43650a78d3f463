//! The `batches` and `resumes` tables: a batch's life, who owns it, and
//! what each `--resume` kept (its phases are in `phases`).

use std::path::Path;

use serde::Serialize;
use strum::{Display, EnumString, IntoStaticStr};

use super::backend::{now_ms_sql, Backend};
use super::scores::ScoreColumns;
use super::{flag, BatchId, Store, StoreError};
use crate::draw::SourceChange;
use crate::score::Scored;
use crate::support::owner::Owner;

/// A batch about to start.
#[derive(Debug, Clone)]
pub struct NewBatch<'a> {
    pub task: &'a str,
    pub spec_path: &'a Path,
    pub pool: &'a str,
    pub n: usize,
    /// Its draw source's JSON (`draw::DrawSource`); `None` for a plan
    /// built by hand.
    pub draw: Option<&'a str>,
}

/// A batch's status, stored and printed as its snake_case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Display, EnumString, IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum BatchStatus {
    Running,
    Finished,
    Interrupted,
    Failed,
}

/// A stored batch.
#[derive(Debug, Clone)]
pub struct BatchRow {
    pub id: BatchId,
    pub task: String,
    pub spec_path: String,
    pub pool: String,
    pub n: usize,
    pub status: BatchStatus,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub errors_dir: Option<String>,
    pub committed: Option<Scored>,
    pub failure: Option<String>,
    /// `exact` or `alpha` (exact for batches stored before it was recorded).
    pub dedup_by: crate::spec::DedupBy,
    /// What the scoring sandbox enforced, and what it warned about.
    pub sandbox: Option<String>,
    pub sandbox_warnings: Option<String>,
    /// blake3 (hex) of the committed file as the batch read it.
    pub committed_hash: Option<String>,
    /// The lane that ran it, when a lane did (`assay lane`).
    pub lane: Option<String>,
    /// Running for a queue item whose lease ran out: its lane stopped
    /// renewing (killed, or cut off from the store), and the next lane to
    /// claim the item resumes the batch. A lane on another machine cannot
    /// be seen dead any other way.
    pub lease_lapsed: bool,
}

/// A batch the database says is running, with its owner where known.
#[derive(Debug, Clone)]
pub struct RunningBatch {
    pub id: BatchId,
    pub owner: Option<Owner>,
}

/// Whether `claim_for_resume` took the batch.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// Now running, owned by the caller; `failure` cleared.
    Claimed,
    Finished,
    /// Another process owns it (or did, and nobody has found it dead yet).
    Running(Option<Owner>),
}

/// One `--resume` of a batch: what was kept from earlier attempts.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ResumeRow {
    pub attempt: u32,
    pub started_at: String,
    /// Index into the batch's phase rows where this attempt's begin.
    pub first_phase: usize,
    pub replies_kept: usize,
    pub extracted_kept: usize,
    pub probed_kept: usize,
    pub scored_kept: usize,
    pub committed_kept: bool,
}

/// Counts for a new `resumes` row.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Kept {
    pub replies: usize,
    pub extracted: usize,
    pub probed: usize,
    pub scored: usize,
    pub committed: bool,
}

record! {
    /// A row of `batches`, as `batch_select` reads it.
    struct BatchRecord {
        id: i64,
        task: String,
        spec_path: String,
        pool: String,
        n: i64,
        status: String,
        started_at: String,
        finished_at: Option<String>,
        errors_dir: Option<String>,
        #[flatten]
        committed: ScoreColumns,
        failure: Option<String>,
        dedup_by: Option<String>,
        sandbox: Option<String>,
        sandbox_warnings: Option<String>,
        committed_hash: Option<String>,
        lane: Option<String>,
        lease_lapsed: Option<i64>,
    }
}

record! {
    /// A running batch's id and owner.
    struct RunningRecord {
        id: i64,
        #[flatten]
        owner: OwnerColumns,
    }
}

record! {
    /// A batch's status and owner, when a claim did not take it.
    struct ClaimRecord {
        status: String,
        #[flatten]
        owner: OwnerColumns,
    }
}

record! {
    /// A batch's owner columns; `None` unless all four are stored.
    struct OwnerColumns {
        owner_host: Option<String>,
        owner_boot: Option<String>,
        owner_pid: Option<i64>,
        owner_start: Option<i64>,
    }
}

record! {
    /// A row of `resumes`, as stored.
    struct ResumeRecord {
        attempt: i64,
        started_at: String,
        first_phase_seq: i64,
        replies_kept: i64,
        extracted_kept: i64,
        probed_kept: i64,
        scored_kept: i64,
        committed_kept: Option<i64>,
    }
}

impl OwnerColumns {
    fn owner(self) -> Option<Owner> {
        Some(Owner {
            host: self.owner_host?,
            boot: self.owner_boot?,
            pid: self.owner_pid? as u32,
            start: self.owner_start? as u64,
        })
    }
}

/// The columns of a `BatchRecord`; the lease is read on the store's
/// clock, and the committed score under the names of `ScoreColumns`.
fn batch_select(backend: Backend) -> String {
    format!(
        "SELECT id, task, spec_path, pool, n, status, started_at, finished_at, errors_dir,
            committed_verdict AS score, committed_passed AS passed,
            committed_total AS total, failure, dedup_by, sandbox, sandbox_warnings,
            committed_hash, committed_cpu_ms AS cpu_ms, committed_cases AS cases, lane,
            CASE WHEN status = 'running' AND EXISTS (
                SELECT 1 FROM work_items w
                 WHERE w.batch_id = batches.id AND w.state = 'running'
                   AND w.lease_until_ms < {now})
            THEN 1 ELSE 0 END AS lease_lapsed
         FROM batches",
        now = now_ms_sql(backend)
    )
}

impl BatchStatus {
    pub fn as_str(&self) -> &'static str {
        (*self).into()
    }
}

impl Store {
    pub async fn begin_batch(&self, batch: &NewBatch<'_>) -> Result<BatchId, StoreError> {
        sqlx::query_scalar(
            "INSERT INTO batches (task, spec_path, pool, n, status, started_at, draw)
             VALUES ($1, $2, $3, $4, 'running', $5, $6)
             RETURNING id",
        )
        .bind(batch.task)
        .bind(batch.spec_path.display().to_string())
        .bind(batch.pool)
        .bind(batch.n as i64)
        .bind(crate::support::clock::utc_now())
        .bind(batch.draw)
        .fetch_one(&self.pool)
        .await
        .map_err(self.sql())
    }

    pub async fn set_errors_dir(&self, batch: BatchId, dir: &Path) -> Result<(), StoreError> {
        sqlx::query("UPDATE batches SET errors_dir = $1 WHERE id = $2")
            .bind(dir.display().to_string())
            .bind(batch)
            .execute(&self.pool)
            .await
            .map_err(self.sql())?;
        Ok(())
    }

    /// Records how the batch deduplicates and what its sandbox enforces.
    pub async fn set_batch_setup(
        &self,
        batch: BatchId,
        dedup_by: crate::spec::DedupBy,
        sandbox: &str,
        sandbox_warnings: &[String],
        committed_hash: &str,
    ) -> Result<(), StoreError> {
        let warnings = (!sandbox_warnings.is_empty()).then(|| sandbox_warnings.join("\n"));
        sqlx::query(
            "UPDATE batches SET dedup_by = $1, sandbox = $2, sandbox_warnings = $3, committed_hash = $4
             WHERE id = $5",
        )
        .bind(dedup_by.as_str())
        .bind(sandbox)
        .bind(warnings)
        .bind(committed_hash)
        .bind(batch)
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    pub async fn record_committed(
        &self,
        batch: BatchId,
        scored: &Scored,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE batches SET committed_verdict = $1, committed_passed = $2, committed_total = $3 WHERE id = $4",
        )
        .bind(scored.verdict.to_string())
        .bind(scored.passed as i64)
        .bind(scored.total as i64)
        .bind(batch)
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    pub async fn finish_batch(
        &self,
        batch: BatchId,
        status: BatchStatus,
        failure: Option<&str>,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE batches SET status = $1, failure = $2, finished_at = $4
             WHERE id = $3",
        )
        .bind(status.as_str())
        .bind(failure)
        .bind(batch)
        .bind(crate::support::clock::utc_now())
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    pub async fn batches(&self) -> Result<Vec<BatchRow>, StoreError> {
        // A suite's problems are batches too, listed by `assay suite`.
        let rows: Vec<BatchRecord> = sqlx::query_as(&format!(
            "{} WHERE id NOT IN (SELECT batch_id FROM suite_problems) ORDER BY id",
            batch_select(self.backend())
        ))
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        rows.into_iter().map(|r| r.batch(self)).collect()
    }

    pub async fn batch(&self, id: BatchId) -> Result<BatchRow, StoreError> {
        let row: BatchRecord =
            sqlx::query_as(&format!("{} WHERE id = $1", batch_select(self.backend())))
                .bind(id)
                .fetch_optional(&self.pool)
                .await
                .map_err(self.sql())?
                .ok_or_else(|| self.no_batch(id))?;
        row.batch(self)
    }

    /// Seconds from a batch's start to its end (`None` while it has no end).
    pub async fn batch_wall_s(&self, batch: BatchId) -> Result<Option<f64>, StoreError> {
        let (started, finished): (String, Option<String>) =
            sqlx::query_as("SELECT started_at, finished_at FROM batches WHERE id = $1")
                .bind(batch)
                .fetch_optional(&self.pool)
                .await
                .map_err(self.sql())?
                .ok_or_else(|| self.no_batch(batch))?;
        let started = crate::support::clock::parse_utc(&started);
        let finished = finished
            .as_deref()
            .and_then(crate::support::clock::parse_utc);
        Ok(started.zip(finished).map(|(s, f)| f - s))
    }

    /// Like `begin_batch`, with the owner and the spec digest written in the
    /// same statement, so no other process ever sees this batch running
    /// without an owner (nor a resume finds it without its draw source).
    pub async fn begin_owned_batch(
        &self,
        batch: &NewBatch<'_>,
        owner: &Owner,
        spec_digest: &str,
    ) -> Result<BatchId, StoreError> {
        let spec_path =
            std::path::absolute(batch.spec_path).unwrap_or_else(|_| batch.spec_path.to_path_buf());
        sqlx::query_scalar(
            "INSERT INTO batches (task, spec_path, pool, n, status, started_at,
                                  owner_host, owner_boot, owner_pid, owner_start, spec_digest,
                                  draw)
             VALUES ($1, $2, $3, $4, 'running', $10, $5, $6, $7, $8, $9, $11)
             RETURNING id",
        )
        .bind(batch.task)
        .bind(spec_path.display().to_string())
        .bind(batch.pool)
        .bind(batch.n as i64)
        .bind(&owner.host)
        .bind(&owner.boot)
        .bind(owner.pid as i64)
        .bind(owner.start as i64)
        .bind(spec_digest)
        .bind(crate::support::clock::utc_now())
        .bind(batch.draw)
        .fetch_one(&self.pool)
        .await
        .map_err(self.sql())
    }

    /// Batches whose status is `running`, with their owners.
    pub async fn running_batches(&self) -> Result<Vec<RunningBatch>, StoreError> {
        let rows: Vec<RunningRecord> = sqlx::query_as(
            "SELECT id, owner_host, owner_boot, owner_pid, owner_start FROM batches
             WHERE status = 'running' ORDER BY id",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(rows
            .into_iter()
            .map(|r| RunningBatch {
                id: r.id,
                owner: r.owner.owner(),
            })
            .collect())
    }

    /// Marks a running batch interrupted, but only if `owner` still owns it
    /// (a resume may have taken it over since it was read). True if marked.
    pub async fn interrupt_if_owned(
        &self,
        batch: BatchId,
        owner: Option<&Owner>,
        reason: &str,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE batches SET status = 'interrupted', failure = $1,
                    finished_at = $6
             WHERE id = $2 AND status = 'running' AND owner_pid IS NOT DISTINCT FROM $3 AND owner_start IS NOT DISTINCT FROM $4
                   AND owner_boot IS NOT DISTINCT FROM $5",
        )
        .bind(reason)
        .bind(batch)
        .bind(owner.map(|o| o.pid as i64))
        .bind(owner.map(|o| o.start as i64))
        .bind(owner.map(|o| o.boot.as_str()))
        .bind(crate::support::clock::utc_now())
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(done.rows_affected() == 1)
    }

    /// Takes an interrupted or failed batch over for `owner`, atomically: of
    /// two processes resuming one batch, one wins.
    pub async fn claim_for_resume(
        &self,
        batch: BatchId,
        owner: &Owner,
    ) -> Result<Claim, StoreError> {
        let done = sqlx::query(
            "UPDATE batches SET status = 'running', failure = NULL, finished_at = NULL,
                    owner_host = $1, owner_boot = $2, owner_pid = $3, owner_start = $4
             WHERE id = $5 AND status IN ('interrupted', 'failed')",
        )
        .bind(&owner.host)
        .bind(&owner.boot)
        .bind(owner.pid as i64)
        .bind(owner.start as i64)
        .bind(batch)
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        if done.rows_affected() == 1 {
            return Ok(Claim::Claimed);
        }
        let row: ClaimRecord = sqlx::query_as(
            "SELECT status, owner_host, owner_boot, owner_pid, owner_start FROM batches WHERE id = $1",
        )
        .bind(batch)
        .fetch_optional(&self.pool)
        .await
        .map_err(self.sql())?
        .ok_or_else(|| self.no_batch(batch))?;
        Ok(match row.status.as_str() {
            "finished" => Claim::Finished,
            _ => Claim::Running(row.owner.owner()),
        })
    }

    /// The spec digest recorded when the batch began (None before schema 5).
    pub async fn spec_digest(&self, batch: BatchId) -> Result<Option<String>, StoreError> {
        sqlx::query_scalar("SELECT spec_digest FROM batches WHERE id = $1")
            .bind(batch)
            .fetch_optional(&self.pool)
            .await
            .map_err(self.sql())?
            .ok_or_else(|| self.no_batch(batch))
    }

    /// The draw source's JSON the batch draws from (`None` for a batch
    /// stored before sources were).
    pub async fn draw_source(&self, batch: BatchId) -> Result<Option<String>, StoreError> {
        sqlx::query_scalar("SELECT draw FROM batches WHERE id = $1")
            .bind(batch)
            .fetch_optional(&self.pool)
            .await
            .map_err(self.sql())?
            .ok_or_else(|| self.no_batch(batch))
    }

    /// Records that an attempt resumes the batch now; returns its number.
    /// With a `change`, the attempt draws from another source than the
    /// batch's: the resume records both, and the batch's source becomes
    /// the new one, in the same transaction.
    pub async fn record_resume(
        &self,
        batch: BatchId,
        kept: &Kept,
        change: Option<&SourceChange>,
    ) -> Result<u32, StoreError> {
        let mut tx = self.pool.begin().await.map_err(self.sql())?;
        let attempt: i64 = sqlx::query_scalar(
            "INSERT INTO resumes (batch_id, attempt, started_at, first_phase_seq, replies_kept,
                                  extracted_kept, probed_kept, scored_kept, committed_kept,
                                  draw_was, draw_now)
             VALUES ($1, (SELECT COUNT(*) + 1 FROM resumes WHERE batch_id = $2),
                     $9,
                     (SELECT COUNT(*) FROM phases WHERE batch_id = $3), $4, $5, $6, $7, $8,
                     $10, $11)
             RETURNING attempt",
        )
        .bind(batch)
        .bind(batch)
        .bind(batch)
        .bind(kept.replies as i64)
        .bind(kept.extracted as i64)
        .bind(kept.probed as i64)
        .bind(kept.scored as i64)
        .bind(i64::from(kept.committed))
        .bind(crate::support::clock::utc_now())
        .bind(change.map(|c| c.was.as_str()))
        .bind(change.map(|c| c.now.as_str()))
        .fetch_one(&mut *tx)
        .await
        .map_err(self.sql())?;
        if let Some(change) = change {
            sqlx::query("UPDATE batches SET draw = $1 WHERE id = $2")
                .bind(&change.now)
                .bind(batch)
                .execute(&mut *tx)
                .await
                .map_err(self.sql())?;
        }
        tx.commit().await.map_err(self.sql())?;
        Ok(attempt as u32)
    }

    /// Each resume that changed the batch's draw source: its attempt, and
    /// the source's JSON before and after.
    pub async fn draw_changes(
        &self,
        batch: BatchId,
    ) -> Result<Vec<(u32, String, String)>, StoreError> {
        let rows: Vec<(i64, String, String)> = sqlx::query_as(
            "SELECT attempt, draw_was, draw_now FROM resumes
             WHERE batch_id = $1 AND draw_now IS NOT NULL ORDER BY attempt",
        )
        .bind(batch)
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(rows
            .into_iter()
            .map(|(a, was, now)| (a as u32, was, now))
            .collect())
    }

    /// Every resume of a batch, in order.
    pub async fn resumes(&self, batch: BatchId) -> Result<Vec<ResumeRow>, StoreError> {
        let rows: Vec<ResumeRecord> = sqlx::query_as(
            "SELECT attempt, started_at, first_phase_seq, replies_kept, extracted_kept,
                    probed_kept, scored_kept, committed_kept
             FROM resumes WHERE batch_id = $1 ORDER BY attempt",
        )
        .bind(batch)
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(rows
            .into_iter()
            .map(|r| ResumeRow {
                attempt: r.attempt as u32,
                started_at: r.started_at,
                first_phase: r.first_phase_seq as usize,
                replies_kept: r.replies_kept as usize,
                extracted_kept: r.extracted_kept as usize,
                probed_kept: r.probed_kept as usize,
                scored_kept: r.scored_kept as usize,
                committed_kept: flag(r.committed_kept),
            })
            .collect())
    }
}

impl BatchRecord {
    fn batch(self, store: &Store) -> Result<BatchRow, StoreError> {
        let id = self.id;
        let committed = self.committed.scored(
            store,
            id,
            crate::build::package::ModuleKey::Committed,
            "committed verdict",
        )?;
        // Exact for batches stored before it was recorded.
        let dedup_by = store
            .parse_stored(id, -1, "dedup_by", self.dedup_by)?
            .unwrap_or(crate::spec::DedupBy::Exact);
        Ok(BatchRow {
            id,
            task: self.task,
            spec_path: self.spec_path,
            pool: self.pool,
            n: self.n as usize,
            status: store.parse(id, -1, "status", &self.status)?,
            started_at: self.started_at,
            finished_at: self.finished_at,
            errors_dir: self.errors_dir,
            committed,
            failure: self.failure,
            dedup_by,
            sandbox: self.sandbox,
            sandbox_warnings: self.sandbox_warnings,
            committed_hash: self.committed_hash,
            lane: self.lane,
            lease_lapsed: flag(self.lease_lapsed),
        })
    }
}
