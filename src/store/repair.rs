//! Repair rounds' tables (migration 0013): each reply's round and parent,
//! each round's plan (its parents, their prompts, the replies it asks for)
//! and end, the outputs of failed visible cases, and what the run asked of
//! repair.

use std::collections::BTreeMap;

use sqlx::Row;

use super::{BatchId, Store, StoreError};
use crate::draw::Drawn;

/// Where a reply sits in a batch's rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lineage {
    pub idx: usize,
    /// 0: the first draw.
    pub round: u32,
    /// The candidate it repairs; `None` in round 0.
    pub parent: Option<usize>,
}

/// A parent of a round as planned: its children are replies `first_idx`
/// to `first_idx + children - 1`, asked with `prompt`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedParent {
    pub parent: usize,
    pub first_idx: usize,
    pub children: usize,
    pub prompt: String,
}

/// A stored round.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundRow {
    pub round: u32,
    /// Its replies are `first_idx .. first_idx + n`.
    pub first_idx: usize,
    pub n: usize,
    pub started_at: String,
    /// `None` while it runs (or when it was cut off).
    pub wall_s: Option<f64>,
    /// Why no round followed this one, on the last round that ended.
    pub stopped: Option<String>,
    pub parents: Vec<PlannedParent>,
}

impl Store {
    /// Records what the run asked of repair (JSON of
    /// `repair::RepairSettings`), so that a resume goes on with it.
    pub async fn set_repair_settings(&self, batch: BatchId, json: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE batches SET repair = $1 WHERE id = $2")
            .bind(json)
            .bind(batch)
            .execute(&self.pool)
            .await
            .map_err(self.sql())?;
        Ok(())
    }

    /// What the run asked of repair; `None`: nothing.
    pub async fn repair_settings(&self, batch: BatchId) -> Result<Option<String>, StoreError> {
        sqlx::query_scalar("SELECT repair FROM batches WHERE id = $1")
            .bind(batch)
            .fetch_optional(&self.pool)
            .await
            .map_err(self.sql())?
            .ok_or_else(|| self.no_batch(batch))
    }

    /// Begins a round: its row and its parents with their prompts, in one
    /// transaction, before any of its replies is asked for, so a resume
    /// asks the same parents the same prompts.
    pub async fn begin_round(
        &self,
        batch: BatchId,
        round: u32,
        first_idx: usize,
        n: usize,
        parents: &[PlannedParent],
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(self.sql())?;
        let now = crate::support::clock::utc_now();
        self.insert_round(&mut tx, batch, round, first_idx, n, &now, parents)
            .await?;
        tx.commit().await.map_err(self.sql())
    }

    /// A batch's round row and its parents, for a task's round or a
    /// problem's share of a suite's.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn insert_round(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        batch: BatchId,
        round: u32,
        first_idx: usize,
        n: usize,
        started_at: &str,
        parents: &[PlannedParent],
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO repair_rounds (batch_id, round, first_idx, n, started_at)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(batch)
        .bind(i64::from(round))
        .bind(first_idx as i64)
        .bind(n as i64)
        .bind(started_at)
        .execute(&mut **tx)
        .await
        .map_err(self.sql())?;
        for p in parents {
            sqlx::query(
                "INSERT INTO repair_parents (batch_id, round, parent, first_idx, children, prompt)
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(batch)
            .bind(i64::from(round))
            .bind(p.parent as i64)
            .bind(p.first_idx as i64)
            .bind(p.children as i64)
            .bind(&p.prompt)
            .execute(&mut **tx)
            .await
            .map_err(self.sql())?;
        }
        Ok(())
    }

    /// Ends a round with its wall time and, if no round follows, why.
    pub async fn end_round(
        &self,
        batch: BatchId,
        round: u32,
        wall_s: f64,
        stopped: Option<&str>,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE repair_rounds SET wall_s = $1, stopped = $2 WHERE batch_id = $3 AND round = $4",
        )
        .bind(wall_s)
        .bind(stopped)
        .bind(batch)
        .bind(i64::from(round))
        .execute(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(())
    }

    /// Says why no round follows `round` (which has ended).
    pub async fn stop_rounds(
        &self,
        batch: BatchId,
        round: u32,
        why: &str,
    ) -> Result<(), StoreError> {
        sqlx::query("UPDATE repair_rounds SET stopped = $1 WHERE batch_id = $2 AND round = $3")
            .bind(why)
            .bind(batch)
            .bind(i64::from(round))
            .execute(&self.pool)
            .await
            .map_err(self.sql())?;
        Ok(())
    }

    /// Stores a repair round's reply, with its round and parent, in one
    /// transaction (the reply, its attempts, its lineage).
    pub async fn record_repair_draw(
        &self,
        batch: BatchId,
        drawn: &Drawn,
        round: u32,
        parent: usize,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(self.sql())?;
        self.insert_draw(&mut tx, batch, drawn).await?;
        sqlx::query("UPDATE replies SET round = $1, parent = $2 WHERE batch_id = $3 AND idx = $4")
            .bind(i64::from(round))
            .bind(parent as i64)
            .bind(batch)
            .bind(drawn.idx as i64)
            .execute(&mut *tx)
            .await
            .map_err(self.sql())?;
        tx.commit().await.map_err(self.sql())
    }

    /// Every reply's round and parent, by index.
    pub async fn lineage(&self, batch: BatchId) -> Result<Vec<Lineage>, StoreError> {
        let rows =
            sqlx::query("SELECT idx, round, parent FROM replies WHERE batch_id = $1 ORDER BY idx")
                .bind(batch)
                .fetch_all(&self.pool)
                .await
                .map_err(self.sql())?;
        Ok(rows
            .iter()
            .map(|r| Lineage {
                idx: r.get::<i64, _>("idx") as usize,
                round: r.get::<i64, _>("round") as u32,
                parent: r.get::<Option<i64>, _>("parent").map(|p| p as usize),
            })
            .collect())
    }

    /// A batch's rounds in order, each with its parents.
    pub async fn repair_rounds(&self, batch: BatchId) -> Result<Vec<RoundRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT round, first_idx, n, started_at, wall_s, stopped FROM repair_rounds
             WHERE batch_id = $1 ORDER BY round",
        )
        .bind(batch)
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        let parents = sqlx::query(
            "SELECT round, parent, first_idx, children, prompt FROM repair_parents
             WHERE batch_id = $1 ORDER BY round, first_idx",
        )
        .bind(batch)
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        let mut by_round: BTreeMap<i64, Vec<PlannedParent>> = BTreeMap::new();
        for p in &parents {
            by_round
                .entry(p.get("round"))
                .or_default()
                .push(PlannedParent {
                    parent: p.get::<i64, _>("parent") as usize,
                    first_idx: p.get::<i64, _>("first_idx") as usize,
                    children: p.get::<i64, _>("children") as usize,
                    prompt: p.get("prompt"),
                });
        }
        Ok(rows
            .iter()
            .map(|r| {
                let round: i64 = r.get("round");
                RoundRow {
                    round: round as u32,
                    first_idx: r.get::<i64, _>("first_idx") as usize,
                    n: r.get::<i64, _>("n") as usize,
                    started_at: r.get("started_at"),
                    wall_s: r.get("wall_s"),
                    stopped: r.get("stopped"),
                    parents: by_round.remove(&round).unwrap_or_default(),
                }
            })
            .collect())
    }

    /// Keeps what a candidate's run answered on its failed visible cases
    /// (case position, output), in one transaction. A run again (a
    /// resume that scores a candidate whose answers were kept before its
    /// score was) replaces what was kept.
    pub async fn record_case_outputs(
        &self,
        batch: BatchId,
        idx: usize,
        outputs: &[(usize, String)],
    ) -> Result<(), StoreError> {
        if outputs.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await.map_err(self.sql())?;
        for (pos, output) in outputs {
            sqlx::query(
                "INSERT INTO case_outputs (batch_id, idx, case_pos, output) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (batch_id, idx, case_pos) DO UPDATE SET output = excluded.output",
            )
            .bind(batch)
            .bind(idx as i64)
            .bind(*pos as i64)
            .bind(output)
            .execute(&mut *tx)
            .await
            .map_err(self.sql())?;
        }
        tx.commit().await.map_err(self.sql())
    }

    /// The kept outputs of a batch: by candidate, by case position.
    pub async fn case_outputs(
        &self,
        batch: BatchId,
    ) -> Result<BTreeMap<usize, BTreeMap<usize, String>>, StoreError> {
        let rows =
            sqlx::query("SELECT idx, case_pos, output FROM case_outputs WHERE batch_id = $1")
                .bind(batch)
                .fetch_all(&self.pool)
                .await
                .map_err(self.sql())?;
        let mut out: BTreeMap<usize, BTreeMap<usize, String>> = BTreeMap::new();
        for r in &rows {
            out.entry(r.get::<i64, _>("idx") as usize)
                .or_default()
                .insert(r.get::<i64, _>("case_pos") as usize, r.get("output"));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::tests::{on_both_backends, pg_store, sqlite_store};
    use super::*;
    use crate::draw::Reply;
    use crate::store::NewBatch;

    on_both_backends!(
        rounds_parents_and_lineage_round_trip,
        case_outputs_round_trip
    );

    fn reply(idx: usize) -> Drawn {
        Drawn {
            idx,
            pool: "fast".into(),
            reply: Reply {
                content: Some(format!("reply {idx}")),
                completion_tokens: Some(10 + idx as u64),
                ..Reply::default()
            },
        }
    }

    async fn batch(store: &Store) -> BatchId {
        store
            .begin_batch(&NewBatch {
                task: "demo",
                spec_path: Path::new("s.toml"),
                pool: "fast",
                n: 2,
                draw: None,
            })
            .await
            .unwrap()
    }

    async fn rounds_parents_and_lineage_round_trip(store: Store) {
        let batch = batch(&store).await;
        assert_eq!(store.repair_settings(batch).await.unwrap(), None);
        store
            .set_repair_settings(batch, "{\"rounds\":2}")
            .await
            .unwrap();
        assert_eq!(
            store.repair_settings(batch).await.unwrap().as_deref(),
            Some("{\"rounds\":2}")
        );
        store.begin_round(batch, 0, 0, 2, &[]).await.unwrap();
        for idx in 0..2 {
            store.record_draw(batch, &reply(idx)).await.unwrap();
        }
        store.end_round(batch, 0, 1.5, None).await.unwrap();
        let parents = [
            PlannedParent {
                parent: 1,
                first_idx: 2,
                children: 2,
                prompt: "fix 1".into(),
            },
            PlannedParent {
                parent: 0,
                first_idx: 4,
                children: 1,
                prompt: "fix 0".into(),
            },
        ];
        store.begin_round(batch, 1, 2, 3, &parents).await.unwrap();
        for (idx, parent) in [(2, 1), (4, 0)] {
            store
                .record_repair_draw(batch, &reply(idx), 1, parent)
                .await
                .unwrap();
        }
        let lineage = store.lineage(batch).await.unwrap();
        let got: Vec<(usize, u32, Option<usize>)> =
            lineage.iter().map(|l| (l.idx, l.round, l.parent)).collect();
        assert_eq!(
            got,
            [(0, 0, None), (1, 0, None), (2, 1, Some(1)), (4, 1, Some(0))]
        );
        let rounds = store.repair_rounds(batch).await.unwrap();
        assert_eq!(rounds.len(), 2);
        assert_eq!(
            (
                rounds[0].round,
                rounds[0].n,
                rounds[0].wall_s,
                rounds[0].parents.len()
            ),
            (0, 2, Some(1.5), 0)
        );
        assert_eq!((rounds[1].first_idx, rounds[1].n), (2, 3));
        assert_eq!(rounds[1].wall_s, None, "round 1 was cut off");
        assert_eq!(rounds[1].parents, parents);
        store
            .end_round(batch, 1, 2.0, Some("all_pass"))
            .await
            .unwrap();
        let rounds = store.repair_rounds(batch).await.unwrap();
        assert_eq!(rounds[1].stopped.as_deref(), Some("all_pass"));
        // A reply keeps its figures whatever its round.
        let replies = store.draw_replies(batch).await.unwrap();
        assert_eq!(replies[3].reply.completion_tokens, Some(14));
        // A round is begun once.
        assert!(store.begin_round(batch, 1, 2, 3, &[]).await.is_err());
    }

    async fn case_outputs_round_trip(store: Store) {
        let batch = batch(&store).await;
        store.record_case_outputs(batch, 3, &[]).await.unwrap();
        store
            .record_case_outputs(batch, 3, &[(0, "[1]".into()), (7, "\"x\"".into())])
            .await
            .unwrap();
        store
            .record_case_outputs(batch, 5, &[(2, "null".into())])
            .await
            .unwrap();
        let outputs = store.case_outputs(batch).await.unwrap();
        assert_eq!(outputs.len(), 2);
        assert_eq!(outputs[&3][&7], "\"x\"");
        assert_eq!(outputs[&5][&2], "null");
        // A run again (a resume) replaces what was kept.
        store
            .record_case_outputs(batch, 5, &[(2, "[2]".into())])
            .await
            .unwrap();
        let outputs = store.case_outputs(batch).await.unwrap();
        assert_eq!(outputs[&5].len(), 1);
        assert_eq!(outputs[&5][&2], "[2]");
    }
}
