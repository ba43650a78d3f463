//! The `candidates` table, and the read that joins every stage's verdict
//! onto each candidate.

use std::time::Duration;

use sqlx::Row;

use super::{flag, BatchId, Store, StoreError};
use crate::extract::Extraction;
use crate::score::Scored;

/// A stored candidate with what every stage made of it.
#[derive(Debug, Clone)]
pub struct CandidateRow {
    pub idx: usize,
    pub pool: String,
    pub model: Option<String>,
    pub completion_tokens: Option<u64>,
    pub extraction: Extraction,
    pub fingerprint: Option<String>,
    pub dup_of: Option<usize>,
    pub probe: Option<crate::probe::ProbeVerdict>,
    pub error_file: Option<String>,
    pub score: Option<Scored>,
    pub admitted: bool,
    pub alpha_fingerprint: Option<String>,
    /// First earlier candidate with the same exact / alpha fingerprint.
    pub exact_dup_of: Option<usize>,
    pub alpha_dup_of: Option<usize>,
    /// Rank among the admitted (1 = best).
    pub rank: Option<usize>,
    /// Admission's decision (`admitted(rank 1)`, `below_min_score`, ...).
    pub admission: Option<String>,
}

impl Store {
    pub async fn record_candidate(
        &self,
        batch: BatchId,
        idx: usize,
        extraction: &Extraction,
        fingerprint: Option<&str>,
        dup_of: Option<usize>,
    ) -> Result<(), StoreError> {
        let (source, detail) = match extraction {
            Extraction::Source(src) => (Some(src.as_str()), None),
            Extraction::Failed(why) => (None, why.detail()),
        };
        sqlx::query(
            "INSERT INTO candidates (batch_id, idx, extract, extract_detail, source, fingerprint, dup_of)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(batch)
        .bind(idx as i64)
        .bind(extraction.kind())
        .bind(detail)
        .bind(source)
        .bind(fingerprint)
        .bind(dup_of.map(|d| d as i64))
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    /// Stores both fingerprints' view of a candidate (after
    /// [`Store::record_candidate`], which stores the exact fingerprint and the
    /// grouping the batch used).
    pub async fn record_groups(
        &self,
        batch: BatchId,
        idx: usize,
        alpha_fingerprint: Option<&str>,
        grouping: &crate::dedup::Grouping,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE candidates SET alpha_fingerprint = $1, exact_dup_of = $2, alpha_dup_of = $3
             WHERE batch_id = $4 AND idx = $5",
        )
        .bind(alpha_fingerprint)
        .bind(grouping.exact_dup_of.map(|d| d as i64))
        .bind(grouping.alpha_dup_of.map(|d| d as i64))
        .bind(batch)
        .bind(idx as i64)
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    /// Every candidate of a batch with its verdicts, from the batch's own
    /// (first) probe run.
    pub async fn candidates(&self, batch: BatchId) -> Result<Vec<CandidateRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT c.idx, r.pool, r.model, r.completion_tokens, c.extract, c.extract_detail, c.source,
                    c.fingerprint, c.dup_of, pv.verdict AS probe, pv.error_file,
                    s.verdict AS score, s.passed, s.total, s.wall_ms, s.admitted,
                    c.alpha_fingerprint, c.exact_dup_of, c.alpha_dup_of,
                    s.cpu_ms, s.cases, s.restarts, s.peak_processes, s.rank, s.admission
             FROM candidates c
             JOIN replies r ON r.batch_id = c.batch_id AND r.idx = c.idx
             LEFT JOIN probe_verdicts pv ON pv.batch_id = c.batch_id AND pv.idx = c.idx
                  AND pv.probe_run_id = (SELECT MIN(id) FROM probe_runs WHERE batch_id = c.batch_id)
             LEFT JOIN scores s ON s.batch_id = c.batch_id AND s.idx = c.idx
             WHERE c.batch_id = $1
             ORDER BY c.idx",
        )
        .bind(batch)
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        rows.iter().map(|r| self.candidate_row(batch, r)).collect()
    }

    fn candidate_row(
        &self,
        batch: BatchId,
        r: &sqlx::any::AnyRow,
    ) -> Result<CandidateRow, StoreError> {
        let idx: i64 = r.get("idx");
        let kind: String = r.get("extract");
        let extraction = match r.get::<Option<String>, _>("source") {
            Some(source) if kind == "extracted" => Extraction::Source(source),
            _ => Extraction::Failed(
                crate::extract::NoCode::from_stored(
                    &kind,
                    r.get::<Option<&str>, _>("extract_detail"),
                )
                .ok_or_else(|| self.bad(batch, idx, "extraction", &kind))?,
            ),
        };
        let probe = match r.get::<Option<String>, _>("probe") {
            Some(v) => Some(self.parse(batch, idx, "probe verdict", &v)?),
            None => None,
        };
        let score = match r.get::<Option<String>, _>("score") {
            Some(v) => Some(Scored {
                key: crate::package::ModuleKey::Candidate(idx as usize),
                verdict: self.parse(batch, idx, "score verdict", &v)?,
                passed: r.get::<i64, _>("passed") as usize,
                total: r.get::<i64, _>("total") as usize,
                wall: Duration::from_secs_f64(r.get::<f64, _>("wall_ms") / 1e3),
                cpu: Duration::from_secs_f64(
                    r.get::<Option<f64>, _>("cpu_ms").unwrap_or(0.0) / 1e3,
                ),
                cases: self.cases(batch, idx, r.get("cases"))?,
                restarts: r.get::<Option<i64>, _>("restarts").unwrap_or(0) as usize,
                peak_processes: r.get::<Option<i64>, _>("peak_processes").map(|p| p as u64),
                stderr: String::new(),
            }),
            None => None,
        };
        Ok(CandidateRow {
            idx: idx as usize,
            pool: r.get("pool"),
            model: r.get("model"),
            completion_tokens: r
                .get::<Option<i64>, _>("completion_tokens")
                .map(|t| t as u64),
            extraction,
            fingerprint: r.get("fingerprint"),
            dup_of: r.get::<Option<i64>, _>("dup_of").map(|d| d as usize),
            probe,
            error_file: r.get("error_file"),
            admitted: flag(r, "admitted"),
            score,
            alpha_fingerprint: r.get("alpha_fingerprint"),
            exact_dup_of: r.get::<Option<i64>, _>("exact_dup_of").map(|d| d as usize),
            alpha_dup_of: r.get::<Option<i64>, _>("alpha_dup_of").map(|d| d as usize),
            rank: r.get::<Option<i64>, _>("rank").map(|d| d as usize),
            admission: r.get("admission"),
        })
    }
}
