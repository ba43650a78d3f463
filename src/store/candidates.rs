//! The `candidates` table, and the read that joins every stage's verdict
//! onto each candidate.

use super::scores::ScoreColumns;
use super::{flag, BatchId, Store, StoreError};
use crate::score::Scored;
use crate::text::extract::Extraction;

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
    pub probe: Option<crate::build::probe::ProbeVerdict>,
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

record! {
    /// A candidate's row of `candidates`, with its reply's, its probe
    /// verdict's and its score's columns, as stored.
    struct CandidateRecord {
        idx: i64,
        pool: String,
        model: Option<String>,
        completion_tokens: Option<i64>,
        extract: String,
        extract_detail: Option<String>,
        source: Option<String>,
        fingerprint: Option<String>,
        dup_of: Option<i64>,
        probe: Option<String>,
        error_file: Option<String>,
        #[flatten]
        score: ScoreColumns,
        admitted: Option<i64>,
        alpha_fingerprint: Option<String>,
        exact_dup_of: Option<i64>,
        alpha_dup_of: Option<i64>,
        rank: Option<i64>,
        admission: Option<String>,
    }
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
        grouping: &crate::text::dedup::Grouping,
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
        let rows: Vec<CandidateRecord> = sqlx::query_as(
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
        rows.into_iter().map(|r| r.candidate(self, batch)).collect()
    }

    /// What extraction made of reply `idx`, from its row of `candidates`
    /// (`extract`, `source`, `extract_detail`): a batch's candidates and a
    /// suite's programs are read alike.
    pub(super) fn extraction(
        &self,
        batch: BatchId,
        idx: i64,
        kind: String,
        source: Option<String>,
        detail: Option<&str>,
    ) -> Result<Extraction, StoreError> {
        match source {
            Some(source) if kind == "extracted" => Ok(Extraction::Source(source)),
            _ => crate::text::extract::NoCode::from_stored(&kind, detail)
                .map(Extraction::Failed)
                .ok_or_else(|| self.bad(batch, idx, "extraction", &kind)),
        }
    }
}

impl CandidateRecord {
    fn candidate(self, store: &Store, batch: BatchId) -> Result<CandidateRow, StoreError> {
        let idx = self.idx;
        let to_index = |v: Option<i64>| v.map(|v| v as usize);
        Ok(CandidateRow {
            idx: idx as usize,
            pool: self.pool,
            model: self.model,
            completion_tokens: self.completion_tokens.map(|t| t as u64),
            extraction: store.extraction(
                batch,
                idx,
                self.extract,
                self.source,
                self.extract_detail.as_deref(),
            )?,
            fingerprint: self.fingerprint,
            dup_of: to_index(self.dup_of),
            probe: store.parse_stored(batch, idx, "probe verdict", self.probe)?,
            error_file: self.error_file,
            admitted: flag(self.admitted),
            score: self.score.scored(
                store,
                batch,
                crate::build::package::ModuleKey::Candidate(idx as usize),
                "score verdict",
            )?,
            alpha_fingerprint: self.alpha_fingerprint,
            exact_dup_of: to_index(self.exact_dup_of),
            alpha_dup_of: to_index(self.alpha_dup_of),
            rank: to_index(self.rank),
            admission: self.admission,
        })
    }
}
