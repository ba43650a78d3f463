//! The `work_items` table: the queue lanes drain (migrations 0009, 0011).
//!
//! An item is kept as the JSON its queueing command made of it
//! (`queue::item::WorkItem`); the store files it under its kind and hands it back
//! as it was, reading nothing else in it.
//!
//! A claim is one statement: the oldest item that is queued, or running on
//! a lease that ran out, is taken for a new lease. On PostgreSQL the inner
//! select locks the row with `FOR UPDATE SKIP LOCKED`, so lanes claiming at
//! once take different items without waiting on each other; SQLite
//! serialises writers, so there the plain statement is already exclusive.
//! Leases are measured on the store's clock, never a lane's. Every later
//! write names the claim it holds (`claims`), so a lane whose lease another
//! lane took over can neither renew nor finish the item.

use serde::Serialize;
use sqlx::Row;
use strum::{Display, EnumString, IntoStaticStr};

use super::backend::now_ms_sql;
use super::{BatchId, Store, StoreError};
use crate::support::owner::Owner;

/// What an item is: an `assay run` (a batch) or a part of a suite. Stored
/// as its snake_case name (the `kind` column's `CHECK`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Display, EnumString, IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum WorkKind {
    Batch,
    Suite,
}

impl WorkKind {
    /// The stored form.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What a lane is doing an item for (the `state` column, its snake_case
/// name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Display, EnumString, IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
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
    /// The item, as `enqueue` stored it (`queue::item::WorkItem::from_json`
    /// reads it).
    pub item: serde_json::Value,
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
    /// The item as stored: a `queue::item::WorkItem`, or, for an item queued
    /// before migration 0011, the command line it was queued as.
    pub item: serde_json::Value,
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
    /// Queues work for a lane; returns the item's id. `item` is what a
    /// lane runs (`queue::item::WorkItem::to_json`).
    pub async fn enqueue(
        &self,
        kind: WorkKind,
        item: &serde_json::Value,
    ) -> Result<i64, StoreError> {
        let row = sqlx::query(
            "INSERT INTO work_items (kind, item, state, queued_at)
             VALUES ($3, $1, 'queued', $2) RETURNING id",
        )
        .bind(item.to_string())
        .bind(crate::support::clock::utc_now())
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
          RETURNING id, kind, item, claims, batch_id"
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
            Ok(Claimed {
                id,
                kind: self.kind(&r, id)?,
                item: self.item(&r, id)?,
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
        .bind(crate::support::clock::utc_now())
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
            "SELECT id, kind, state, item, lane, lane_host, claims, batch_id, failure, queued_at,
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
                Ok(WorkItemRow {
                    id,
                    kind: self.kind(r, id)?,
                    state: state
                        .parse()
                        .map_err(|_| self.bad(-1, id, "work item state", &state))?,
                    item: self.item(r, id)?,
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

    fn item(&self, row: &sqlx::any::AnyRow, id: i64) -> Result<serde_json::Value, StoreError> {
        let item: String = row.get("item");
        serde_json::from_str(&item).map_err(|_| self.bad(-1, id, "work item", &item))
    }

    fn kind(&self, row: &sqlx::any::AnyRow, id: i64) -> Result<WorkKind, StoreError> {
        let kind: String = row.get("kind");
        kind.parse::<WorkKind>()
            .map_err(|_| self.bad(-1, id, "work item kind", &kind))
    }
}

impl StoreError {
    /// Whether the store was away: not reached, or its connection lost or
    /// refused in the middle of the work (the server shutting down or
    /// restarting, too many connections). Such a failure is the store's,
    /// not the work's: a lane gives the item back, for a resume once the
    /// store is back, where any other failure fails the item.
    pub fn is_away(&self) -> bool {
        match self {
            StoreError::Sql { source, .. } => connection_lost(source),
            _ => false,
        }
    }
}

fn connection_lost(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        // PostgreSQL's classes: 08 connection exception; 57P01-57P03 the
        // server shutting down or starting; 53300 too many connections.
        sqlx::Error::Database(d) => d.code().is_some_and(|code| {
            code.starts_with("08") || matches!(&*code, "57P01" | "57P02" | "57P03" | "53300")
        }),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::super::migrations;
    use super::*;

    /// Items an older assay queued as command lines: one queued, one
    /// running on a lease, one done.
    const LEGACY: &str = "INSERT INTO work_items (kind, args, state, queued_at, lease_until_ms)
        VALUES ('batch', '[\"/t/spec.toml\",\"-n\",\"3\"]', 'queued', '2026-01-01T00:00:00.000Z', NULL),
               ('suite', '[\"suite\",\"run\",\"--resume\",\"1\"]', 'running', '2026-01-01T00:00:00.000Z', 99),
               ('batch', '[\"/t/spec.toml\"]', 'done', '2026-01-01T00:00:00.000Z', NULL)";

    /// 0011 fails the open items an older assay queued (their settings
    /// given by environment were never stored: no faithful item can be
    /// made of them), saying so, and keeps every row's command line.
    async fn legacy_items_are_failed_and_kept(store: Store) {
        let items = store.work_items().await.unwrap();
        let states: Vec<WorkState> = items.iter().map(|w| w.state).collect();
        assert_eq!(
            states,
            [WorkState::Failed, WorkState::Failed, WorkState::Done]
        );
        for w in &items[..2] {
            let why = w.failure.as_deref().unwrap();
            assert!(why.contains("queue it again"), "{why}");
            let at = w.finished_at.as_deref().unwrap();
            assert!(crate::support::clock::parse_utc(at).is_some(), "{at}");
            assert_eq!(at.len(), "2026-01-01T00:00:00.000Z".len(), "{at}");
            assert!(!w.lease_expired);
        }
        assert_eq!(items[2].failure, None);
        assert_eq!(
            items[0].item,
            serde_json::json!(["/t/spec.toml", "-n", "3"])
        );
        assert_eq!(store.open_work_items().await.unwrap(), 0);
        assert!(store
            .claim_work("a", &Owner::current(), 60_000)
            .await
            .unwrap()
            .is_none());
    }

    #[tokio::test]
    async fn legacy_items_are_failed_by_0011_on_sqlite() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        let url = format!("sqlite:{}?mode=rwc", path.display());
        let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
        migrations::before(migrations::sqlite(), 11)
            .run(&pool)
            .await
            .unwrap();
        sqlx::query(LEGACY).execute(&pool).await.unwrap();
        pool.close().await;
        let store = Store::open(path.as_path()).await.unwrap();
        legacy_items_are_failed_and_kept(store.clone()).await;
        store.close().await;
    }

    #[tokio::test]
    async fn legacy_items_are_failed_by_0011_on_postgres() {
        let schema = super::super::pg_test::PgSchema::new();
        sqlx::any::install_default_drivers();
        let pool = sqlx::any::AnyPoolOptions::new()
            .max_connections(1)
            .connect(&schema.url)
            .await
            .unwrap();
        migrations::before(migrations::postgres(), 11)
            .run(&pool)
            .await
            .unwrap();
        sqlx::query(LEGACY).execute(&pool).await.unwrap();
        pool.close().await;
        let store = Store::open(schema.url.parse::<super::super::Db>().unwrap())
            .await
            .unwrap();
        legacy_items_are_failed_and_kept(store.clone()).await;
        store.close().await;
    }

    #[test]
    fn a_lost_connection_is_the_store_away_and_a_refused_statement_is_not() {
        let db: super::super::Db = "postgres://lane@localhost/rig".parse().unwrap();
        let sql = |source| StoreError::Sql {
            db: db.clone(),
            source,
        };
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert!(sql(sqlx::Error::Io(reset)).is_away());
        assert!(sql(sqlx::Error::PoolTimedOut).is_away());
        assert!(sql(sqlx::Error::PoolClosed).is_away());
        assert!(!sql(sqlx::Error::RowNotFound).is_away());
        assert!(!sql(sqlx::Error::Protocol("bad".into())).is_away());
        let no_batch = StoreError::NoBatch { db, id: 3 };
        assert!(!no_batch.is_away(), "a missing batch is the item's fault");
    }
}
