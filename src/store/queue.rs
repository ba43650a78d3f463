//! The `work_items` table: the queue lanes drain (migration 0009).
//!
//! A claim is one statement: the oldest item that is queued, or running on
//! a lease that ran out, is taken for a new lease. On PostgreSQL the inner
//! select locks the row with `FOR UPDATE SKIP LOCKED`, so lanes claiming at
//! once take different items without waiting on each other; SQLite
//! serialises writers, so there the plain statement is already exclusive.
//! Leases are measured on the store's clock, never a lane's. Every later
//! write names the claim it holds (`claims`), so a lane whose lease another
//! lane took over can neither renew nor finish the item.

use sqlx::Row;

use super::backend::now_ms_sql;
use super::{BatchId, Store, StoreError};
use crate::owner::Owner;

/// What an item is: an `assay run` (a batch) or a part of a suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkKind {
    Batch,
    Suite,
}

impl WorkKind {
    /// The stored form (the `kind` column's `CHECK`).
    pub fn as_str(self) -> &'static str {
        match self {
            WorkKind::Batch => "batch",
            WorkKind::Suite => "suite",
        }
    }

    fn parse(text: &str) -> Option<WorkKind> {
        match text {
            "batch" => Some(WorkKind::Batch),
            "suite" => Some(WorkKind::Suite),
            _ => None,
        }
    }
}

/// What a lane is doing an item for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkState {
    Queued,
    Running,
    Done,
    Failed,
}

/// A claimed item: what to run, and the claim that must be named to renew
/// or finish it.
#[derive(Debug, Clone, PartialEq)]
pub struct Claimed {
    pub id: i64,
    pub kind: WorkKind,
    /// The arguments of `assay run` (a batch) or of `assay suite run` (a
    /// part), as stored by `enqueue`.
    pub args: Vec<String>,
    pub claim: i64,
    /// The batch an earlier claim began (to be resumed, not begun again).
    pub batch: Option<BatchId>,
}

/// One item as `assay queue` lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WorkItemRow {
    pub id: i64,
    pub kind: WorkKind,
    pub state: WorkState,
    pub args: Vec<String>,
    pub lane: Option<String>,
    pub lane_host: Option<String>,
    pub claims: i64,
    pub batch_id: Option<BatchId>,
    pub failure: Option<String>,
    /// Running on a lease that ran out: the lane is gone, and the next
    /// claim takes the item over.
    pub lease_expired: bool,
    pub queued_at: String,
    pub finished_at: Option<String>,
}

impl Store {
    /// Queues work for a lane; returns the item's id. `args` are what a
    /// lane runs: `assay run`'s after `run` (a batch), or the whole command
    /// line after `assay` (a part of a suite).
    pub async fn enqueue(&self, kind: WorkKind, args: &[String]) -> Result<i64, StoreError> {
        let row = sqlx::query(
            "INSERT INTO work_items (kind, args, state, queued_at)
             VALUES ($3, $1, 'queued', $2) RETURNING id",
        )
        .bind(serde_json::to_string(args).expect("strings serialise"))
        .bind(crate::clock::utc_now())
        .bind(kind.as_str())
        .fetch_one(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(row.get(0))
    }

    /// Takes the oldest item that is queued or whose lease ran out, for
    /// `lease_ms` from now; `None` when there is none.
    pub async fn claim_work(
        &self,
        lane: &str,
        owner: &Owner,
        lease_ms: i64,
    ) -> Result<Option<Claimed>, StoreError> {
        let now = now_ms_sql(self.backend());
        let lock = match self.backend() {
            super::Backend::Postgres => "FOR UPDATE SKIP LOCKED",
            super::Backend::Sqlite => "",
        };
        let sql = format!(
            "UPDATE work_items
                SET state = 'running', lane = $1, lane_host = $2, lane_boot = $3, lane_pid = $4,
                    claims = claims + 1, lease_until_ms = {now} + $5
              WHERE id = (SELECT id FROM work_items
                           WHERE state IN ('queued', 'running')
                             AND (state = 'queued' OR lease_until_ms < {now})
                           ORDER BY id LIMIT 1 {lock})
          RETURNING id, kind, args, claims, batch_id"
        );
        let row = sqlx::query(&sql)
            .bind(lane)
            .bind(&owner.host)
            .bind(&owner.boot)
            .bind(i64::from(owner.pid))
            .bind(lease_ms)
            .fetch_optional(&self.pool)
            .await
            .map_err(self.sql())?;
        row.map(|r| {
            let id: i64 = r.get("id");
            let args: String = r.get("args");
            Ok(Claimed {
                id,
                kind: self.kind(&r, id)?,
                args: serde_json::from_str(&args)
                    .map_err(|_| self.bad(-1, id, "work item args", &args))?,
                claim: r.get("claims"),
                batch: r.get("batch_id"),
            })
        })
        .transpose()
    }

    /// Extends the lease of a claim still held; false if it is not (the
    /// lease ran out and another lane took the item, or it is finished).
    pub async fn renew_lease(&self, item: &Claimed, lease_ms: i64) -> Result<bool, StoreError> {
        let sql = format!(
            "UPDATE work_items SET lease_until_ms = {} + $1
              WHERE id = $2 AND claims = $3 AND state = 'running'",
            now_ms_sql(self.backend())
        );
        let done = sqlx::query(&sql)
            .bind(lease_ms)
            .bind(item.id)
            .bind(item.claim)
            .execute(&self.pool)
            .await
            .map_err(self.sql())?;
        Ok(done.rows_affected() == 1)
    }

    /// Records the batch a claimed item began (so a later claim resumes
    /// it), and the lane on the batch.
    pub async fn attach_batch(&self, item: i64, batch: BatchId) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(self.sql())?;
        sqlx::query("UPDATE work_items SET batch_id = $1 WHERE id = $2")
            .bind(batch)
            .bind(item)
            .execute(&mut *tx)
            .await
            .map_err(self.sql())?;
        sqlx::query(
            "UPDATE batches SET lane = (SELECT lane FROM work_items WHERE id = $1) WHERE id = $2",
        )
        .bind(item)
        .bind(batch)
        .execute(&mut *tx)
        .await
        .map_err(self.sql())?;
        tx.commit().await.map_err(self.sql())
    }

    /// Ends a claim held: done, or failed with the reason. False if the
    /// claim is no longer held (then nothing changes).
    pub async fn finish_work(
        &self,
        item: &Claimed,
        failure: Option<&str>,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE work_items SET state = $1, failure = $2, finished_at = $3, lease_until_ms = NULL
              WHERE id = $4 AND claims = $5 AND state = 'running'",
        )
        .bind(if failure.is_some() { "failed" } else { "done" })
        .bind(failure)
        .bind(crate::clock::utc_now())
        .bind(item.id)
        .bind(item.claim)
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(done.rows_affected() == 1)
    }

    /// Gives a claim back untouched (a lane stopping): queued again at once.
    pub async fn release_work(&self, item: &Claimed) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE work_items SET state = 'queued', lease_until_ms = NULL
              WHERE id = $1 AND claims = $2 AND state = 'running'",
        )
        .bind(item.id)
        .bind(item.claim)
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    /// Items queued or running, on any lane.
    pub async fn open_work_items(&self) -> Result<i64, StoreError> {
        sqlx::query_scalar("SELECT COUNT(*) FROM work_items WHERE state IN ('queued', 'running')")
            .fetch_one(&self.pool)
            .await
            .map_err(self.sql())
    }

    /// Every item, oldest first.
    pub async fn work_items(&self) -> Result<Vec<WorkItemRow>, StoreError> {
        let sql = format!(
            "SELECT id, kind, state, args, lane, lane_host, claims, batch_id, failure, queued_at,
                    finished_at,
                    CASE WHEN state = 'running' AND lease_until_ms < {} THEN 1 ELSE 0 END AS expired
               FROM work_items ORDER BY id",
            now_ms_sql(self.backend())
        );
        let rows = sqlx::query(&sql)
            .fetch_all(&self.pool)
            .await
            .map_err(self.sql())?;
        rows.iter()
            .map(|r| {
                let id: i64 = r.get("id");
                let state: String = r.get("state");
                let args: String = r.get("args");
                Ok(WorkItemRow {
                    id,
                    kind: self.kind(r, id)?,
                    state: match state.as_str() {
                        "queued" => WorkState::Queued,
                        "running" => WorkState::Running,
                        "done" => WorkState::Done,
                        "failed" => WorkState::Failed,
                        _ => return Err(self.bad(-1, id, "work item state", &state)),
                    },
                    args: serde_json::from_str(&args)
                        .map_err(|_| self.bad(-1, id, "work item args", &args))?,
                    lane: r.get("lane"),
                    lane_host: r.get("lane_host"),
                    claims: r.get("claims"),
                    batch_id: r.get("batch_id"),
                    failure: r.get("failure"),
                    lease_expired: super::flag(r.get("expired")),
                    queued_at: r.get("queued_at"),
                    finished_at: r.get("finished_at"),
                })
            })
            .collect()
    }

    fn kind(&self, row: &sqlx::any::AnyRow, id: i64) -> Result<WorkKind, StoreError> {
        let kind: String = row.get("kind");
        WorkKind::parse(&kind).ok_or_else(|| self.bad(-1, id, "work item kind", &kind))
    }
}
