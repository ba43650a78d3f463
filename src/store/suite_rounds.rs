//! Repair rounds of suites (migration 0014): what the run asked of repair,
//! each round's start, wall and why the rounds stopped (the suite's), each
//! problem's round plan (its batch's `repair_rounds` and `repair_parents`
//! rows, as a task's), and each repair completion's round and parent (its
//! reply's, 0013).

use sqlx::Row;

use super::suites::NewCompletion;
use super::{BatchId, PlannedParent, Store, StoreError, SuiteId};

/// A stored round of a suite.
#[derive(Debug, Clone, PartialEq)]
pub struct SuiteRoundRow {
    pub round: u32,
    pub started_at: String,
    /// `None` while it runs (or when it was cut off).
    pub wall_s: Option<f64>,
    /// Why no round followed this one, on the last round that ended.
    pub stopped: Option<String>,
}

/// One problem's share of a repair round: its batch and the completions
/// repaired, each with its child's index and prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProblemRound {
    pub batch: BatchId,
    pub parents: Vec<PlannedParent>,
}

/// The batches of a suite, with the suite bound as `$1`.
const SUITE_BATCHES: &str = "SELECT batch_id FROM suite_problems WHERE suite_id = $1";

impl Store {
    /// Records what the run asked of repair (JSON of
    /// `repair::RepairSettings`) and begins round 0, in one transaction.
    pub async fn begin_suite_repair(&self, suite: SuiteId, json: &str) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(self.sql())?;
        sqlx::query("UPDATE suites SET repair = $1 WHERE id = $2")
            .bind(json)
            .bind(suite)
            .execute(&mut *tx)
            .await
            .map_err(self.sql())?;
        sqlx::query("INSERT INTO suite_rounds (suite_id, round, started_at) VALUES ($1, 0, $2)")
            .bind(suite)
            .bind(crate::support::clock::utc_now())
            .execute(&mut *tx)
            .await
            .map_err(self.sql())?;
        tx.commit().await.map_err(self.sql())
    }

    /// What the run asked of repair; `None`: a suite without rounds.
    pub async fn suite_repair(&self, suite: SuiteId) -> Result<Option<String>, StoreError> {
        sqlx::query_scalar("SELECT repair FROM suites WHERE id = $1")
            .bind(suite)
            .fetch_optional(&self.pool)
            .await
            .map_err(self.sql())?
            .ok_or_else(|| self.no_suite(suite))
    }

    /// Begins repair round `round`: its row and every problem's plan (the
    /// parents and the prompts their children are asked with), in one
    /// transaction, before any of its requests is sent, so a resume asks
    /// the same parents the same prompts.
    pub async fn begin_suite_round(
        &self,
        suite: SuiteId,
        round: u32,
        problems: &[ProblemRound],
    ) -> Result<(), StoreError> {
        let now = crate::support::clock::utc_now();
        let mut tx = self.pool.begin().await.map_err(self.sql())?;
        sqlx::query("INSERT INTO suite_rounds (suite_id, round, started_at) VALUES ($1, $2, $3)")
            .bind(suite)
            .bind(i64::from(round))
            .bind(&now)
            .execute(&mut *tx)
            .await
            .map_err(self.sql())?;
        for p in problems {
            let first = p.parents.iter().map(|c| c.first_idx).min().unwrap_or(0);
            let n: usize = p.parents.iter().map(|c| c.children).sum();
            self.insert_round(&mut tx, p.batch, round, first, n, &now, &p.parents)
                .await?;
        }
        tx.commit().await.map_err(self.sql())
    }

    /// Ends a round of the suite (and its problems' rounds) with its wall
    /// time.
    pub async fn end_suite_round(
        &self,
        suite: SuiteId,
        round: u32,
        wall_s: f64,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(self.sql())?;
        sqlx::query("UPDATE suite_rounds SET wall_s = $2 WHERE suite_id = $1 AND round = $3")
            .bind(suite)
            .bind(wall_s)
            .bind(i64::from(round))
            .execute(&mut *tx)
            .await
            .map_err(self.sql())?;
        sqlx::query(&format!(
            "UPDATE repair_rounds SET wall_s = $2 WHERE round = $3 AND batch_id IN ({SUITE_BATCHES})"
        ))
        .bind(suite)
        .bind(wall_s)
        .bind(i64::from(round))
        .execute(&mut *tx)
        .await
        .map_err(self.sql())?;
        tx.commit().await.map_err(self.sql())
    }

    /// Says why no round follows `round` (which has ended).
    pub async fn stop_suite_rounds(
        &self,
        suite: SuiteId,
        round: u32,
        why: &str,
    ) -> Result<(), StoreError> {
        sqlx::query("UPDATE suite_rounds SET stopped = $2 WHERE suite_id = $1 AND round = $3")
            .bind(suite)
            .bind(why)
            .bind(i64::from(round))
            .execute(&self.pool)
            .await
            .map_err(self.sql())?;
        Ok(())
    }

    /// A suite's rounds in order (none for a suite without repair).
    pub async fn suite_rounds(&self, suite: SuiteId) -> Result<Vec<SuiteRoundRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT round, started_at, wall_s, stopped FROM suite_rounds
             WHERE suite_id = $1 ORDER BY round",
        )
        .bind(suite)
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        Ok(rows
            .iter()
            .map(|r| SuiteRoundRow {
                round: r.get::<i64, _>("round") as u32,
                started_at: r.get("started_at"),
                wall_s: r.get("wall_s"),
                stopped: r.get("stopped"),
            })
            .collect())
    }

    /// Every problem's plan of round `round`, by batch.
    pub async fn suite_round_plans(
        &self,
        suite: SuiteId,
        round: u32,
    ) -> Result<Vec<ProblemRound>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT batch_id, parent, first_idx, children, prompt FROM repair_parents
             WHERE round = $2 AND batch_id IN ({SUITE_BATCHES}) ORDER BY batch_id, first_idx"
        ))
        .bind(suite)
        .bind(i64::from(round))
        .fetch_all(&self.pool)
        .await
        .map_err(self.sql())?;
        let mut out: Vec<ProblemRound> = Vec::new();
        for r in &rows {
            let batch: BatchId = r.get("batch_id");
            let parent = PlannedParent {
                parent: r.get::<i64, _>("parent") as usize,
                first_idx: r.get::<i64, _>("first_idx") as usize,
                children: r.get::<i64, _>("children") as usize,
                prompt: r.get("prompt"),
            };
            match out.last_mut() {
                Some(p) if p.batch == batch => p.parents.push(parent),
                _ => out.push(ProblemRound {
                    batch,
                    parents: vec![parent],
                }),
            }
        }
        Ok(out)
    }

    /// Stores a repair round's completion with its round and parent, in
    /// one transaction (the reply, its attempts, its program, its lineage).
    pub async fn record_suite_repair(
        &self,
        batch: BatchId,
        completion: &NewCompletion<'_>,
        round: u32,
        parent: usize,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(self.sql())?;
        self.insert_completion(&mut tx, batch, completion).await?;
        sqlx::query("UPDATE replies SET round = $1, parent = $2 WHERE batch_id = $3 AND idx = $4")
            .bind(i64::from(round))
            .bind(parent as i64)
            .bind(batch)
            .bind(completion.drawn.idx as i64)
            .execute(&mut *tx)
            .await
            .map_err(self.sql())?;
        tx.commit().await.map_err(self.sql())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::tests::{on_both_backends, pg_store, sqlite_store};
    use super::super::{NewProblem, NewSuite, SuiteOrigin};
    use super::*;
    use crate::draw::{Drawn, Reply};
    use crate::suite::{Problem, ProgramMode};
    use crate::support::owner::Owner;
    use crate::text::extract::Extraction;

    on_both_backends!(suite_rounds_plans_and_lineage_round_trip);

    async fn suite_rounds_plans_and_lineage_round_trip(store: Store) {
        let problem = Problem {
            name: "p".into(),
            prompt: "fn f() -> i32 {\n".into(),
            tests: "}\n\nfn main() {\n    assert_eq!(f(), 1);\n}\n".into(),
            stop_tokens: Vec::new(),
        };
        let (suite, batches) = store
            .begin_suite(
                &NewSuite {
                    problems_path: Path::new("problems.jsonl"),
                    problems_digest: "d",
                    origin: SuiteOrigin::Pool,
                    source: "fixer",
                    mode: ProgramMode::Chat,
                    edition: crate::spec::Edition::default(),
                    problems: &[NewProblem {
                        problem: &problem,
                        n: 1,
                        completions: Vec::new(),
                    }],
                },
                &Owner::current(),
            )
            .await
            .unwrap();
        assert_eq!(store.suite_repair(suite).await.unwrap(), None);
        assert!(store.suite_rounds(suite).await.unwrap().is_empty());
        store
            .begin_suite_repair(suite, "{\"rounds\":1}")
            .await
            .unwrap();
        assert_eq!(
            store.suite_repair(suite).await.unwrap().as_deref(),
            Some("{\"rounds\":1}")
        );
        let completion = |idx: usize, code: &str| {
            (
                Drawn {
                    idx,
                    pool: "fixer".into(),
                    reply: Reply {
                        content: Some(code.into()),
                        ..Reply::default()
                    },
                },
                Extraction::Source(code.into()),
            )
        };
        let (d0, e0) = completion(0, "fn f() -> i32 { 0 }");
        store
            .record_suite_completions(
                batches[0],
                &[NewCompletion {
                    drawn: &d0,
                    extraction: &e0,
                    fingerprint: None,
                    dup_of: None,
                }],
            )
            .await
            .unwrap();
        store.end_suite_round(suite, 0, 1.5).await.unwrap();
        let plan = vec![ProblemRound {
            batch: batches[0],
            parents: vec![PlannedParent {
                parent: 0,
                first_idx: 1,
                children: 1,
                prompt: "fix 0".into(),
            }],
        }];
        store.begin_suite_round(suite, 1, &plan).await.unwrap();
        assert_eq!(store.suite_round_plans(suite, 1).await.unwrap(), plan);
        let (d1, e1) = completion(1, "fn f() -> i32 { 1 }");
        store
            .record_suite_repair(
                batches[0],
                &NewCompletion {
                    drawn: &d1,
                    extraction: &e1,
                    fingerprint: None,
                    dup_of: None,
                },
                1,
                0,
            )
            .await
            .unwrap();
        let rounds = store.suite_rounds(suite).await.unwrap();
        assert_eq!(
            rounds
                .iter()
                .map(|r| (r.round, r.wall_s, r.stopped.clone()))
                .collect::<Vec<_>>(),
            [(0, Some(1.5), None), (1, None, None)]
        );
        store.end_suite_round(suite, 1, 2.0).await.unwrap();
        store.stop_suite_rounds(suite, 1, "all_pass").await.unwrap();
        let rounds = store.suite_rounds(suite).await.unwrap();
        assert_eq!(rounds[1].stopped.as_deref(), Some("all_pass"));
        assert_eq!(rounds[1].wall_s, Some(2.0));
        // The problem's batch holds the round as a task's would.
        let batch_rounds = store.repair_rounds(batches[0]).await.unwrap();
        assert_eq!(batch_rounds[0].parents, plan[0].parents);
        assert_eq!(batch_rounds[0].wall_s, Some(2.0));
        let lineage: Vec<(usize, u32, Option<usize>)> = store
            .suite_completions(suite)
            .await
            .unwrap()
            .iter()
            .map(|c| (c.idx, c.round, c.parent))
            .collect();
        assert_eq!(lineage, [(0, 0, None), (1, 1, Some(0))]);
        // A round is begun once.
        assert!(store.begin_suite_round(suite, 1, &[]).await.is_err());
    }
}
