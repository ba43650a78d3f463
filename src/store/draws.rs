//! The `replies` and `draw_attempts` tables: every reply with its draw
//! figures, and every HTTP attempt behind it.

use super::real::Real;
use super::{flag, BatchId, Store, StoreError};
use crate::draw::{Drawn, ErrorText, Reply};

/// The columns of `replies` a `ReplyRecord` reads, from a table named `r`:
/// the batch's own replies and a suite's completions are read alike.
pub(super) const REPLY_COLUMNS: &str =
    "r.idx, r.pool, r.model, r.content, r.reasoning, r.finish_reason, r.prompt_tokens,
     r.completion_tokens, r.cached_prompt_tokens, r.ttft_ms, r.ttft_reasoning_ms, r.latency_ms,
     r.outcome, r.error_message, r.error_body, r.chunks, r.hit_cap, r.cut_early,
     r.cap_tokens_left";

record! {
    /// A row of `replies`, as stored (`REPLY_COLUMNS`).
    pub(super) struct ReplyRecord {
        pub idx: i64,
        pool: String,
        model: Option<String>,
        content: Option<String>,
        reasoning: Option<String>,
        finish_reason: Option<String>,
        prompt_tokens: Option<i64>,
        completion_tokens: Option<i64>,
        cached_prompt_tokens: Option<i64>,
        ttft_ms: Option<f64>,
        ttft_reasoning_ms: Option<f64>,
        latency_ms: Option<f64>,
        outcome: String,
        error_message: Option<String>,
        error_body: Option<String>,
        chunks: Option<i64>,
        hit_cap: Option<i64>,
        cut_early: Option<i64>,
        cap_tokens_left: Option<i64>,
    }
}

record! {
    /// A row of `draw_attempts`, as stored.
    struct AttemptRecord {
        idx: Option<i64>,
        pool: String,
        attempt: i64,
        started_ms: f64,
        duration_ms: f64,
        outcome: String,
        error_message: Option<String>,
        error_body: Option<String>,
        retry_after_ms: Option<f64>,
        delay_ms: Option<f64>,
    }
}

impl ReplyRecord {
    /// The reply of batch `batch` this row stores, with its attempts.
    pub(super) fn drawn(
        self,
        store: &Store,
        batch: BatchId,
        attempts: Vec<crate::draw::Attempt>,
    ) -> Result<Drawn, StoreError> {
        let count = |v: Option<i64>| v.map(|v| v as u64);
        Ok(Drawn {
            idx: self.idx as usize,
            pool: self.pool,
            reply: Reply {
                content: self.content,
                reasoning: self.reasoning,
                finish_reason: self.finish_reason,
                prompt_tokens: count(self.prompt_tokens),
                cached_prompt_tokens: count(self.cached_prompt_tokens),
                completion_tokens: count(self.completion_tokens),
                model: self.model,
                ttft_ms: self.ttft_ms,
                ttft_reasoning_ms: self.ttft_reasoning_ms,
                latency_ms: self.latency_ms,
                chunks: count(self.chunks),
                hit_cap: flag(self.hit_cap),
                cut_early: flag(self.cut_early),
                cap_tokens_left: count(self.cap_tokens_left),
                outcome: store.parse(batch, self.idx, "reply outcome", &self.outcome)?,
                error: error_text(self.error_message, self.error_body),
                attempts,
            },
        })
    }
}

/// A stored error's message and body; no message, no error.
fn error_text(message: Option<String>, body: Option<String>) -> Option<ErrorText> {
    message.map(|message| ErrorText { message, body })
}

impl Store {
    pub async fn record_reply(&self, batch: BatchId, drawn: &Drawn) -> Result<(), StoreError> {
        let r = &drawn.reply;
        sqlx::query(
            "INSERT INTO replies (batch_id, idx, pool, model, content, reasoning, finish_reason,
                                  prompt_tokens, completion_tokens, ttft_ms, latency_ms, received_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(batch)
        .bind(drawn.idx as i64)
        .bind(&drawn.pool)
        .bind(&r.model)
        .bind(&r.content)
        .bind(&r.reasoning)
        .bind(&r.finish_reason)
        .bind(r.prompt_tokens.map(|t| t as i64))
        .bind(r.completion_tokens.map(|t| t as i64))
        .bind(Real(r.ttft_ms))
        .bind(Real(r.latency_ms))
        .bind(crate::support::clock::utc_now())
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    /// Stores a drawn reply with all its draw figures and every attempt, in
    /// one transaction.
    pub async fn record_draw(&self, batch: BatchId, drawn: &Drawn) -> Result<(), StoreError> {
        self.record_draws(batch, std::slice::from_ref(drawn)).await
    }

    /// Stores replies that arrived together in one transaction (one commit
    /// instead of one per reply, so storing keeps up with hundreds of
    /// streams finishing at once).
    pub async fn record_draws(&self, batch: BatchId, drawn: &[Drawn]) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(self.sql())?;
        for d in drawn {
            self.insert_draw(&mut tx, batch, d).await?;
        }
        tx.commit().await.map_err(self.sql())
    }

    pub(super) async fn insert_draw(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        batch: BatchId,
        drawn: &Drawn,
    ) -> Result<(), StoreError> {
        let r = &drawn.reply;
        sqlx::query(
            "INSERT INTO replies (batch_id, idx, pool, model, content, reasoning, finish_reason,
                                  prompt_tokens, completion_tokens, ttft_ms, latency_ms, received_at,
                                  outcome, http_status, error_message, error_body, ttft_reasoning_ms,
                                  chunks, hit_cap, cut_early, cap_tokens_left, attempts,
                                  cached_prompt_tokens)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $23,
                     $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22)",
        )
        .bind(batch)
        .bind(drawn.idx as i64)
        .bind(&drawn.pool)
        .bind(&r.model)
        .bind(&r.content)
        .bind(&r.reasoning)
        .bind(&r.finish_reason)
        .bind(r.prompt_tokens.map(|t| t as i64))
        .bind(r.completion_tokens.map(|t| t as i64))
        .bind(Real(r.ttft_ms))
        .bind(Real(r.latency_ms))
        .bind(r.outcome.to_string())
        .bind(r.outcome.status().map(i64::from))
        .bind(r.error.as_ref().map(|e| e.message.as_str()))
        .bind(r.error.as_ref().and_then(|e| e.body.as_deref()))
        .bind(Real(r.ttft_reasoning_ms))
        .bind(r.chunks.map(|c| c as i64))
        .bind(i64::from(r.hit_cap))
        .bind(i64::from(r.cut_early))
        .bind(r.cap_tokens_left.map(|t| t as i64))
        .bind(r.attempts.len() as i64)
        .bind(r.cached_prompt_tokens.map(|t| t as i64))
        .bind(crate::support::clock::utc_now())
        .execute(&mut **tx)
        .await
        .map_err(self.sql())?;
        for a in &r.attempts {
            self.insert_attempt(tx, batch, Some(drawn.idx), &drawn.pool, a)
                .await?;
        }
        Ok(())
    }

    /// Stores the attempts of a request that became no reply (cancelled
    /// when a race was full).
    pub async fn record_cancelled(
        &self,
        batch: BatchId,
        pool: &str,
        attempts: &[crate::draw::Attempt],
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(self.sql())?;
        for a in attempts {
            self.insert_attempt(&mut tx, batch, None, pool, a).await?;
        }
        tx.commit().await.map_err(self.sql())
    }

    async fn insert_attempt(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        batch: BatchId,
        idx: Option<usize>,
        pool: &str,
        a: &crate::draw::Attempt,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO draw_attempts (batch_id, idx, pool, attempt, started_ms, duration_ms, outcome,
                                        http_status, error_message, error_body, retry_after_ms, delay_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(batch)
        .bind(idx.map(|i| i as i64))
        .bind(pool)
        .bind(i64::from(a.number))
        .bind(a.started_ms)
        .bind(a.duration_ms)
        .bind(a.outcome.to_string())
        .bind(a.outcome.status().map(i64::from))
        .bind(a.error.as_ref().map(|e| e.message.as_str()))
        .bind(a.error.as_ref().and_then(|e| e.body.as_deref()))
        .bind(Real(a.retry_after_ms))
        .bind(Real(a.delay_ms))
        .execute(&mut **tx)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    /// Every reply of a batch with its draw figures, by index.
    pub async fn draw_replies(&self, batch: BatchId) -> Result<Vec<Drawn>, StoreError> {
        let rows: Vec<ReplyRecord> = sqlx::query_as(&format!(
            "SELECT {REPLY_COLUMNS} FROM replies r WHERE r.batch_id = $1 ORDER BY r.idx"
        ))
        .bind(batch)
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        let attempts = self.draw_attempts(batch).await?;
        rows.into_iter()
            .map(|r| {
                let attempts = attempts
                    .iter()
                    .filter(|(i, _, _)| *i == Some(r.idx as usize))
                    .map(|(_, _, a)| a.clone())
                    .collect();
                r.drawn(self, batch, attempts)
            })
            .collect()
    }

    /// Every attempt of a batch: (reply index or `None` when cancelled,
    /// pool, attempt), in the order written.
    pub async fn draw_attempts(
        &self,
        batch: BatchId,
    ) -> Result<Vec<(Option<usize>, String, crate::draw::Attempt)>, StoreError> {
        let rows: Vec<AttemptRecord> = sqlx::query_as(
            "SELECT idx, pool, attempt, started_ms, duration_ms, outcome, error_message, error_body,
                    retry_after_ms, delay_ms
             FROM draw_attempts WHERE batch_id = $1 ORDER BY id",
        )
        .bind(batch)
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        rows.into_iter()
            .map(|r| {
                let idx = r.idx;
                let outcome =
                    self.parse(batch, idx.unwrap_or(-1), "attempt outcome", &r.outcome)?;
                Ok((
                    idx.map(|i| i as usize),
                    r.pool,
                    crate::draw::Attempt {
                        number: r.attempt as u32,
                        started_ms: r.started_ms,
                        duration_ms: r.duration_ms,
                        outcome,
                        error: error_text(r.error_message, r.error_body),
                        retry_after_ms: r.retry_after_ms,
                        delay_ms: r.delay_ms,
                    },
                ))
            })
            .collect()
    }

    /// Every stored reply of a batch, in index order (what a resume keeps).
    pub async fn replies(&self, batch: BatchId) -> Result<Vec<Drawn>, StoreError> {
        self.draw_replies(batch).await
    }
}
