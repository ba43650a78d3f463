//! The `replies` and `draw_attempts` tables: every reply with its draw
//! figures, and every HTTP attempt behind it.

use sqlx::Row;

use super::{flag, BatchId, Store, StoreError};
use crate::draw::Drawn;

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
        .bind(r.ttft_ms)
        .bind(r.latency_ms)
        .bind(crate::clock::utc_now())
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
        .bind(r.ttft_ms)
        .bind(r.latency_ms)
        .bind(r.outcome.to_string())
        .bind(r.outcome.status().map(i64::from))
        .bind(r.error.as_ref().map(|e| e.message.as_str()))
        .bind(r.error.as_ref().and_then(|e| e.body.as_deref()))
        .bind(r.ttft_reasoning_ms)
        .bind(r.chunks.map(|c| c as i64))
        .bind(i64::from(r.hit_cap))
        .bind(i64::from(r.cut_early))
        .bind(r.cap_tokens_left.map(|t| t as i64))
        .bind(r.attempts.len() as i64)
        .bind(r.cached_prompt_tokens.map(|t| t as i64))
        .bind(crate::clock::utc_now())
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
        .bind(a.retry_after_ms)
        .bind(a.delay_ms)
        .execute(&mut **tx)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    /// Every reply of a batch with its draw figures, by index.
    pub async fn draw_replies(&self, batch: BatchId) -> Result<Vec<Drawn>, StoreError> {
        let rows = sqlx::query(
            "SELECT idx, pool, model, content, reasoning, finish_reason, prompt_tokens,
                    completion_tokens, ttft_ms, latency_ms, outcome, error_message, error_body,
                    ttft_reasoning_ms, chunks, hit_cap, cut_early, cap_tokens_left,
                    cached_prompt_tokens
             FROM replies WHERE batch_id = $1 ORDER BY idx",
        )
        .bind(batch)
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        let attempts = self.draw_attempts(batch).await?;
        rows.iter()
            .map(|r| {
                let idx: i64 = r.get("idx");
                let attempts = attempts
                    .iter()
                    .filter(|(i, _, _)| *i == Some(idx as usize))
                    .map(|(_, _, a)| a.clone())
                    .collect();
                Ok(Drawn {
                    idx: idx as usize,
                    pool: r.get("pool"),
                    reply: self.reply_of_row(r, batch, "outcome", attempts)?,
                })
            })
            .collect()
    }

    /// A stored reply from its row of `replies` (selected with the columns
    /// `draw_replies` names; its outcome in `outcome_column`).
    pub(crate) fn reply_of_row(
        &self,
        r: &sqlx::any::AnyRow,
        batch: BatchId,
        outcome_column: &str,
        attempts: Vec<crate::draw::Attempt>,
    ) -> Result<crate::draw::Reply, StoreError> {
        let idx: i64 = r.get("idx");
        let outcome: String = r.get(outcome_column);
        let u = |name: &str| r.get::<Option<i64>, _>(name).map(|v| v as u64);
        Ok(crate::draw::Reply {
            content: r.get("content"),
            reasoning: r.get("reasoning"),
            finish_reason: r.get("finish_reason"),
            prompt_tokens: u("prompt_tokens"),
            cached_prompt_tokens: u("cached_prompt_tokens"),
            completion_tokens: u("completion_tokens"),
            model: r.get("model"),
            ttft_ms: r.get("ttft_ms"),
            ttft_reasoning_ms: r.get("ttft_reasoning_ms"),
            latency_ms: r.get("latency_ms"),
            chunks: u("chunks"),
            hit_cap: flag(r, "hit_cap"),
            cut_early: flag(r, "cut_early"),
            cap_tokens_left: u("cap_tokens_left"),
            outcome: self.parse(batch, idx, "reply outcome", &outcome)?,
            error: r.get::<Option<String>, _>("error_message").map(|message| {
                crate::draw::ErrorText {
                    message,
                    body: r.get("error_body"),
                }
            }),
            attempts,
        })
    }

    /// Every attempt of a batch: (reply index or `None` when cancelled,
    /// pool, attempt), in the order written.
    pub async fn draw_attempts(
        &self,
        batch: BatchId,
    ) -> Result<Vec<(Option<usize>, String, crate::draw::Attempt)>, StoreError> {
        let rows = sqlx::query(
            "SELECT idx, pool, attempt, started_ms, duration_ms, outcome, error_message, error_body,
                    retry_after_ms, delay_ms
             FROM draw_attempts WHERE batch_id = $1 ORDER BY id",
        )
        .bind(batch)
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        rows.iter()
            .map(|r| {
                let idx = r.get::<Option<i64>, _>("idx");
                let outcome: String = r.get("outcome");
                Ok((
                    idx.map(|i| i as usize),
                    r.get("pool"),
                    crate::draw::Attempt {
                        number: r.get::<i64, _>("attempt") as u32,
                        started_ms: r.get("started_ms"),
                        duration_ms: r.get("duration_ms"),
                        outcome: self.parse(
                            batch,
                            idx.unwrap_or(-1),
                            "attempt outcome",
                            &outcome,
                        )?,
                        error: r.get::<Option<String>, _>("error_message").map(|message| {
                            crate::draw::ErrorText {
                                message,
                                body: r.get("error_body"),
                            }
                        }),
                        retry_after_ms: r.get("retry_after_ms"),
                        delay_ms: r.get("delay_ms"),
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
