//! The `scores` and `promotions` tables.

use sqlx::Row;

use super::{millis, BatchId, Store, StoreError};
use crate::build::package::ModuleKey;
use crate::score::Scored;

record! {
    /// A score as stored: a candidate's row of `scores` (its verdict selected
    /// as `score`), or a batch's committed score (its `committed_*` columns
    /// selected under these names). All NULL when there is none; the columns
    /// the committed score lacks (`wall_ms`, `restarts`, `peak_processes`)
    /// read as NULL when not selected.
    pub(super) struct ScoreColumns {
        score: Option<String>,
        passed: Option<i64>,
        total: Option<i64>,
        #[default]
        wall_ms: Option<f64>,
        cpu_ms: Option<f64>,
        cases: Option<String>,
        #[default]
        restarts: Option<i64>,
        #[default]
        peak_processes: Option<i64>,
    }
}

impl ScoreColumns {
    /// The score of `key` in batch `batch`, if it has one; a verdict that
    /// does not parse is an error naming `field`.
    pub(super) fn scored(
        self,
        store: &Store,
        batch: BatchId,
        key: ModuleKey,
        field: &'static str,
    ) -> Result<Option<Scored>, StoreError> {
        let Some(verdict) = self.score else {
            return Ok(None);
        };
        let idx = match key {
            ModuleKey::Committed => -1,
            ModuleKey::Candidate(idx) => idx as i64,
        };
        Ok(Some(Scored {
            key,
            verdict: store.parse(batch, idx, field, &verdict)?,
            passed: self.passed.unwrap_or(0) as usize,
            total: self.total.unwrap_or(0) as usize,
            wall: millis(self.wall_ms),
            cpu: millis(self.cpu_ms),
            cases: store.cases(batch, idx, self.cases)?,
            restarts: self.restarts.unwrap_or(0) as usize,
            peak_processes: self.peak_processes.map(|p| p as u64),
            stderr: String::new(),
        }))
    }
}

/// A recorded promotion.
#[derive(Debug, Clone, PartialEq)]
pub struct PromotionRow {
    pub batch_id: BatchId,
    pub idx: usize,
    pub path: String,
    pub replaced_hash: String,
    pub passed: usize,
    pub total: usize,
    pub reference_passed: usize,
    pub promoted_at: String,
}

impl Store {
    /// Stores a run's CPU time, case outcomes, restarts and peak processes
    /// (after [`Store::record_score`] or [`Store::record_committed`]).
    pub async fn record_run_details(
        &self,
        batch: BatchId,
        scored: &Scored,
    ) -> Result<(), StoreError> {
        let cpu_ms = scored.cpu.as_secs_f64() * 1e3;
        let cases = crate::score::case_letters(&scored.cases);
        let query = match scored.key {
            crate::build::package::ModuleKey::Committed => sqlx::query(
                "UPDATE batches SET committed_cpu_ms = $1, committed_cases = $2 WHERE id = $3",
            )
            .bind(cpu_ms)
            .bind(cases)
            .bind(batch),
            crate::build::package::ModuleKey::Candidate(idx) => sqlx::query(
                "UPDATE scores SET cpu_ms = $1, cases = $2, restarts = $3, peak_processes = $4
                 WHERE batch_id = $5 AND idx = $6",
            )
            .bind(cpu_ms)
            .bind(cases)
            .bind(scored.restarts as i64)
            .bind(scored.peak_processes.map(|p| p as i64))
            .bind(batch)
            .bind(idx as i64),
        };
        query.execute(&self.pool).await.map_err(self.sql())?;
        Ok(())
    }

    /// Stores every candidate's admission in one transaction.
    pub async fn record_admissions(
        &self,
        batch: BatchId,
        decisions: &[(usize, crate::score::admit::Admission)],
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(self.sql())?;
        for (idx, decision) in decisions {
            sqlx::query(
                "UPDATE scores SET admitted = $1, rank = $2, admission = $3 WHERE batch_id = $4 AND idx = $5",
            )
            .bind(i64::from(decision.admitted()))
            .bind(decision.rank().map(|r| r as i64))
            .bind(decision.to_string())
            .bind(batch)
            .bind(*idx as i64)
            .execute(&mut *tx)
            .await
            .map_err(self.sql())?;
        }
        tx.commit().await.map_err(self.sql())
    }

    pub async fn record_promotion(&self, promotion: &PromotionRow) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO promotions (batch_id, idx, path, replaced_hash, passed, total, reference_passed, promoted_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(promotion.batch_id)
        .bind(promotion.idx as i64)
        .bind(&promotion.path)
        .bind(&promotion.replaced_hash)
        .bind(promotion.passed as i64)
        .bind(promotion.total as i64)
        .bind(promotion.reference_passed as i64)
        .bind(&promotion.promoted_at)
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    /// Promotions made from a batch, oldest first.
    pub async fn promotions(&self, batch: BatchId) -> Result<Vec<PromotionRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT batch_id, idx, path, replaced_hash, passed, total, reference_passed, promoted_at
             FROM promotions WHERE batch_id = $1 ORDER BY id",
        )
        .bind(batch)
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(rows
            .iter()
            .map(|r| PromotionRow {
                batch_id: r.get("batch_id"),
                idx: r.get::<i64, _>("idx") as usize,
                path: r.get("path"),
                replaced_hash: r.get("replaced_hash"),
                passed: r.get::<i64, _>("passed") as usize,
                total: r.get::<i64, _>("total") as usize,
                reference_passed: r.get::<i64, _>("reference_passed") as usize,
                promoted_at: r.get("promoted_at"),
            })
            .collect())
    }

    pub async fn record_score(
        &self,
        batch: BatchId,
        idx: usize,
        scored: &Scored,
        admitted: bool,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO scores (batch_id, idx, verdict, passed, total, wall_ms, admitted, stderr)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(batch)
        .bind(idx as i64)
        .bind(scored.verdict.to_string())
        .bind(scored.passed as i64)
        .bind(scored.total as i64)
        .bind(scored.wall.as_secs_f64() * 1e3)
        .bind(i64::from(admitted))
        .bind(Some(scored.stderr.as_str()).filter(|s| !s.is_empty()))
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(())
    }
}
