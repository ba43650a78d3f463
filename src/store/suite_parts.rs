//! A suite's parts: the problems a lane takes of a queued suite, the
//! lane recorded on each part's batches, and a part's claim for resume.

use super::suites::SuiteId;
use super::{Claim, Store, StoreError};
use crate::support::owner::Owner;

/// The batches of a part of a suite, with the suite and the part's start
/// and end bound as `$1`, `$2`, `$3` (every statement on a part starts so).
const PART_BATCHES: &str =
    "SELECT batch_id FROM suite_problems WHERE suite_id = $1 AND pos >= $2 AND pos < $3";

/// A part of a suite: the problems at positions `start..end` (from 0, in
/// the problem set's order), a lane's share of a queued suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SuitePart {
    pub start: usize,
    pub end: usize,
}

impl SuitePart {
    /// Every problem.
    pub fn all() -> SuitePart {
        SuitePart {
            start: 0,
            end: i64::MAX as usize,
        }
    }

    pub fn contains(&self, pos: usize) -> bool {
        (self.start..self.end).contains(&pos)
    }
}

impl std::str::FromStr for SuitePart {
    type Err = String;

    /// `START..END`, as a Rust range.
    fn from_str(s: &str) -> Result<SuitePart, String> {
        let bad = || format!("`{s}` is no part: START..END, positions from 0");
        let (a, b) = s.split_once("..").ok_or_else(bad)?;
        let (start, end) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
        if start >= end {
            return Err(bad());
        }
        Ok(SuitePart { start, end })
    }
}

impl std::fmt::Display for SuitePart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}..{}", self.start, self.end)
    }
}

impl Store {
    /// Records on a part's batches the lane of the queue item running it.
    pub async fn attach_suite_part(
        &self,
        item: i64,
        suite: SuiteId,
        part: &SuitePart,
    ) -> Result<(), StoreError> {
        sqlx::query(&format!(
            "UPDATE batches SET lane = (SELECT lane FROM work_items WHERE id = $4)
             WHERE id IN ({PART_BATCHES})"
        ))
        .bind(suite)
        .bind(part.start as i64)
        .bind(part.end as i64)
        .bind(item)
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    /// The lanes that ran a suite's problems, by name, each once.
    pub async fn suite_lanes(&self, suite: SuiteId) -> Result<Vec<String>, StoreError> {
        sqlx::query_scalar(
            "SELECT DISTINCT b.lane FROM batches b JOIN suite_problems p ON p.batch_id = b.id
              WHERE p.suite_id = $1 AND b.lane IS NOT NULL ORDER BY b.lane",
        )
        .bind(suite)
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())
    }

    /// Marks the running batches of a part of a suite interrupted: their
    /// lane is gone (its lease ran out), so a resume may take them.
    pub async fn interrupt_suite_part(
        &self,
        suite: SuiteId,
        part: &SuitePart,
        reason: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(&format!(
            "UPDATE batches SET status = 'interrupted', failure = $4, finished_at = $5
             WHERE status = 'running' AND id IN ({PART_BATCHES})"
        ))
        .bind(suite)
        .bind(part.start as i64)
        .bind(part.end as i64)
        .bind(reason)
        .bind(crate::support::clock::utc_now())
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    /// Takes the unfinished batches of a part of a suite (every problem
    /// for `SuitePart::all`) over for `owner`, in one transaction: of two
    /// resumes of one part, one wins. `Claimed` when there was something to
    /// take; `Finished` when every batch of the part is finished; `Running`
    /// when one still has a live owner.
    pub async fn claim_suite_for_resume(
        &self,
        suite: SuiteId,
        part: &SuitePart,
        owner: &Owner,
    ) -> Result<Claim, StoreError> {
        self.suite(suite).await?;
        let mut tx = self.pool.begin().await.map_err(self.sql())?;
        let (running, open): (i64, i64) = sqlx::query_as(&format!(
            "SELECT COALESCE(SUM(CASE WHEN status = 'running' THEN 1 ELSE 0 END), 0) AS running,
                    COALESCE(SUM(CASE WHEN status <> 'finished' THEN 1 ELSE 0 END), 0) AS open
               FROM batches WHERE id IN ({PART_BATCHES})"
        ))
        .bind(suite)
        .bind(part.start as i64)
        .bind(part.end as i64)
        .fetch_one(&mut *tx)
        .await
        .map_err(self.sql())?;
        if running > 0 {
            return Ok(Claim::Running(None));
        }
        if open == 0 {
            return Ok(Claim::Finished);
        }
        sqlx::query(&format!(
            "UPDATE batches SET status = 'running', failure = NULL, finished_at = NULL,
                    owner_host = $4, owner_boot = $5, owner_pid = $6, owner_start = $7
             WHERE status IN ('interrupted', 'failed') AND id IN ({PART_BATCHES})"
        ))
        .bind(suite)
        .bind(part.start as i64)
        .bind(part.end as i64)
        .bind(&owner.host)
        .bind(&owner.boot)
        .bind(owner.pid as i64)
        .bind(owner.start as i64)
        .execute(&mut *tx)
        .await
        .map_err(self.sql())?;
        tx.commit().await.map_err(self.sql())?;
        Ok(Claim::Claimed)
    }
}
