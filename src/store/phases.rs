//! The `phases` and `suite_phases` tables: what each phase of a batch or
//! of a suite cost (wall, CPU-s, busy CPUs), in one reader for both.
//!
//! A row's place is its `id`, which the store hands out as the row is
//! inserted (migration 0010), never a number the writer computes from the
//! rows it sees: the parts of one suite end at once on many machines, and
//! two writers counting the same rows would take the same number. So no
//! two writers can collide, and the rows read back in the order they were
//! recorded. A suite's rows also name their part: parts run at once
//! interleave in time, so a suite's phases read part by part (in the
//! order the parts began), each part's in the order it recorded them; a
//! suite run whole is one part, so its phases read as they were recorded.

use super::{BatchId, Store, StoreError, SuiteId, SuitePart};
use crate::support::account::{Phase, PhaseFigures};

record! {
    /// A row of either table, as stored.
    struct PhaseRow {
        phase: String,
        wall_s: f64,
        cpu_s: f64,
        avg_busy: f64,
        peak_busy: f64,
    }
}

impl Store {
    pub async fn record_phase(
        &self,
        batch: BatchId,
        figures: &PhaseFigures,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO phases (batch_id, phase, wall_s, cpu_s, avg_busy, peak_busy)
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(batch)
        .bind(figures.phase.as_str())
        .bind(figures.wall_s)
        .bind(figures.cpu_s)
        .bind(figures.avg_busy)
        .bind(figures.peak_busy)
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    /// A batch's phases in the order they were recorded.
    pub async fn phases(&self, batch: BatchId) -> Result<Vec<PhaseFigures>, StoreError> {
        let rows: Vec<PhaseRow> = sqlx::query_as(
            "SELECT phase, wall_s, cpu_s, avg_busy, peak_busy FROM phases
             WHERE batch_id = $1 ORDER BY id",
        )
        .bind(batch)
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        rows.into_iter()
            .map(|r| r.figures(|name| self.bad(batch, -1, "phase", name)))
            .collect()
    }

    /// Records a phase of `part` of a suite (`SuitePart::all` for a suite
    /// run whole).
    pub async fn record_suite_phase(
        &self,
        suite: SuiteId,
        part: &SuitePart,
        figures: &PhaseFigures,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO suite_phases (suite_id, part_start, part_end, phase, wall_s, cpu_s,
                                       avg_busy, peak_busy)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(suite)
        .bind(part.start as i64)
        .bind(part.end as i64)
        .bind(figures.phase.as_str())
        .bind(figures.wall_s)
        .bind(figures.cpu_s)
        .bind(figures.avg_busy)
        .bind(figures.peak_busy)
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    /// A suite's phases part by part, the parts in the order they began
    /// (rows from before parts were recorded are one part), each part's
    /// rows in the order they were recorded.
    pub async fn suite_phases(&self, suite: SuiteId) -> Result<Vec<PhaseFigures>, StoreError> {
        let rows: Vec<PhaseRow> = sqlx::query_as(
            "SELECT phase, wall_s, cpu_s, avg_busy, peak_busy,
                    MIN(id) OVER (PARTITION BY part_start, part_end) AS part_began
             FROM suite_phases WHERE suite_id = $1
             ORDER BY part_began, id",
        )
        .bind(suite)
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        rows.into_iter()
            .map(|r| r.figures(|name| self.bad(-1, -1, "suite phase", name)))
            .collect()
    }
}

impl PhaseRow {
    fn figures(self, bad: impl Fn(&str) -> StoreError) -> Result<PhaseFigures, StoreError> {
        Ok(PhaseFigures {
            phase: Phase::from_stored(&self.phase).ok_or_else(|| bad(&self.phase))?,
            wall_s: self.wall_s,
            cpu_s: self.cpu_s,
            avg_busy: self.avg_busy,
            peak_busy: self.peak_busy,
        })
    }
}
