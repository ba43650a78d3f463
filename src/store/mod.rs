//! Store: a SQLite file or a PostgreSQL database, through sqlx's `Any`
//! driver (`backend`). The only module that runs SQL; one file per group
//! of tables (`batches`, `draws`, `candidates`, `probe`, `scores`,
//! `suites`, `phases`, `queue`, `repair`), and here the one place that maps
//! a statement's error.
//!
//! The schemas are in `migrations/sqlite` and `migrations/postgres`,
//! embedded and applied on open. Every write
//! is its own statement (or a small transaction) issued as the result
//! arrives, so a killed batch keeps everything it had. Verdicts are stored in
//! their stable string forms.

use std::str::FromStr;

use sqlx::AnyPool;

#[macro_use]
mod record;

mod backend;
mod batches;
mod blobs;
mod candidates;
mod draws;
mod migrations;
mod phases;
// The tests' PostgreSQL helper, shared with the end-to-end tests.
#[cfg(test)]
#[path = "../../tests/common/pg.rs"]
mod pg_test;
mod probe;
mod queue;
mod real;
mod repair;
mod scores;
mod suite_parts;
mod suite_rounds;
mod suites;

pub use backend::{Backend, Db, DbError};

pub use batches::{BatchRow, BatchStatus, Claim, Kept, NewBatch, ResumeRow, RunningBatch};
pub use candidates::CandidateRow;
pub use probe::{ProbeRunRow, ProbeRunStats, ProbeVerdictRow};
pub use queue::{Claimed, WorkItemRow, WorkKind, WorkState};
pub use repair::{Lineage, PlannedParent, RoundRow};
pub use scores::PromotionRow;
pub use suite_parts::SuitePart;
pub use suite_rounds::{ProblemRound, SuiteRoundRow};
pub use suites::{
    NewCompletion, NewProblem, NewSuite, SuiteCompletionRow, SuiteId, SuiteOrigin, SuiteOutcomeRow,
    SuiteProblemRow, SuiteRow,
};

pub type BatchId = i64;

#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    db: Db,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{db}: {message}")]
    Open { db: Db, message: String },
    #[error("{db}: cannot migrate the database")]
    Migrate {
        db: Db,
        source: sqlx::migrate::MigrateError,
    },
    #[error("{db}")]
    Sql { db: Db, source: sqlx::Error },
    #[error("{db}: no batch {id}")]
    NoBatch { db: Db, id: BatchId },
    #[error("{db}: no suite {id} (`{}` names them)", suites_listed(.db))]
    NoSuite { db: Db, id: i64 },
    #[error("{db}: the database has schema version {found}, newer than this assay knows ({known}); use a newer assay")]
    TooNew { db: Db, found: i64, known: i64 },
    #[error("{db}: the database is read-only")]
    ReadOnly { db: Db },
    /// A reading command names a database that is not there: it never
    /// creates one.
    #[error("{db}: no such database (check --db or ASSAY_DB)")]
    Missing { db: Db },
    #[error("{db}: batch {id} {why}")]
    NotResumable { db: Db, id: BatchId, why: String },
    #[error("{db}: batch {batch}, candidate {idx}: bad stored {field} `{value}`")]
    BadValue {
        db: Db,
        batch: BatchId,
        idx: i64,
        field: &'static str,
        value: String,
    },
}

impl Store {
    /// Opens an existing store and brings its schema up to date; for
    /// commands that read, which never create a database (a mistyped
    /// `--db` would otherwise answer with an empty one).
    pub async fn open_existing(db: impl Into<Db>) -> Result<Store, StoreError> {
        let db = db.into();
        if let Db::Sqlite(path) = &db {
            if !path.is_file() {
                return Err(StoreError::Missing { db });
            }
        }
        Store::open(db).await
    }

    /// Opens the store (creating a missing SQLite file) and brings its
    /// schema up to date.
    pub async fn open(db: impl Into<Db>) -> Result<Store, StoreError> {
        let db = db.into();
        let pool = backend::open(&db).await?;
        Ok(Store { pool, db })
    }

    /// Where the store lives.
    pub fn db(&self) -> &Db {
        &self.db
    }

    pub fn backend(&self) -> Backend {
        self.db.backend()
    }

    fn sql(&self) -> impl Fn(sqlx::Error) -> StoreError + '_ {
        // A write refused because the store is read-only is the user's
        // setup, wherever it surfaces.
        move |source| {
            if backend::is_read_only(self.backend(), &source) {
                StoreError::ReadOnly {
                    db: self.db.clone(),
                }
            } else {
                StoreError::Sql {
                    db: self.db.clone(),
                    source,
                }
            }
        }
    }

    fn parse<T: FromStr>(
        &self,
        batch: BatchId,
        idx: i64,
        field: &'static str,
        value: &str,
    ) -> Result<T, StoreError> {
        value
            .parse()
            .map_err(|_| self.bad(batch, idx, field, value))
    }

    /// A value of a nullable column, parsed where stored.
    fn parse_stored<T: FromStr>(
        &self,
        batch: BatchId,
        idx: i64,
        field: &'static str,
        value: Option<String>,
    ) -> Result<Option<T>, StoreError> {
        value.map(|v| self.parse(batch, idx, field, &v)).transpose()
    }

    /// Stored case letters; none stored (an older batch) reads as no cases.
    fn cases(
        &self,
        batch: BatchId,
        idx: i64,
        text: Option<String>,
    ) -> Result<Vec<crate::score::CaseOutcome>, StoreError> {
        match text {
            None => Ok(Vec::new()),
            Some(t) => crate::score::parse_case_letters(&t)
                .ok_or_else(|| self.bad(batch, idx, "cases", &t)),
        }
    }

    /// What a read of batch `id`'s row says when there is no such row.
    fn no_batch(&self, id: BatchId) -> StoreError {
        StoreError::NoBatch {
            db: self.db.clone(),
            id,
        }
    }

    /// What a read of suite `id`'s row says when there is no such row.
    fn no_suite(&self, id: i64) -> StoreError {
        StoreError::NoSuite {
            db: self.db.clone(),
            id,
        }
    }

    fn bad(&self, batch: BatchId, idx: i64, field: &'static str, value: &str) -> StoreError {
        StoreError::BadValue {
            db: self.db.clone(),
            batch,
            idx,
            field,
            value: value.to_owned(),
        }
    }

    /// Closes every connection before it returns ([`close_pool`]).
    pub async fn close(&self) {
        close_pool(&self.pool).await;
    }

    /// Fails with `ReadOnly` if nothing can be written (a write lock is
    /// taken and given back; nothing changes).
    pub async fn check_writable(&self) -> Result<(), StoreError> {
        backend::check_writable(&self.db, &self.pool)
            .await
            .map_err(self.sql())
    }
}

/// The command that lists a store's suites, with the `--db` that reaches it.
fn suites_listed(db: &Db) -> crate::support::hint::CommandLine {
    crate::support::hint::CommandLine::assay(["suite", "list"]).reaching(&db.reach())
}

/// `Pool::close`, finished: every connection closed, one at a time, before
/// it returns.
///
/// One at a time is what deletes `DB-wal` and `DB-shm`. A SQLite
/// connection closing in WAL mode deletes them only if it can take the
/// database file's EXCLUSIVE lock, which it gets only when no other
/// connection of the process still holds its SHARED lock
/// (`sqlite3WalClose`, `unixLock`). Two connections that close at once on
/// two threads each see the other still open, and both leave the files.
/// sqlx closes at once in just that way: a query's connection goes back
/// to the pool in a spawned task (`PoolConnection`'s drop), and a task
/// that runs after `close` has begun closes its connection itself, on its
/// own thread, while `close` closes the idle ones on theirs. So this first
/// waits until every connection is back in the idle queue (no return in
/// flight), and only then closes: `close` then closes them in turn, and
/// the last one to go finds itself alone.
///
/// The close is still repeated while the pool counts a connection: sqlx
/// 0.8's close can return with one open (launchbadge/sqlx#3217, fixed after
/// 0.8.6 by #3952), landed in the idle queue after close last drained it.
/// sqlx has no event for "all connections idle" or "last connection
/// closed", so both waits poll, every millisecond, for at most five
/// seconds together.
///
/// Two pools on one file in one process (`compare --spec` runs its batches
/// on threads of their own, each with its store) would race the same way,
/// so pools close one at a time ([`CLOSING`]).
pub(crate) async fn close_pool<DB: sqlx::Database>(pool: &sqlx::Pool<DB>) {
    let _one_pool_at_a_time = CLOSING.lock().await;
    let give_up = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    let pause = || tokio::time::sleep(std::time::Duration::from_millis(1));
    while pool.num_idle() < pool.size() as usize && tokio::time::Instant::now() < give_up {
        pause().await;
    }
    pool.close().await;
    while pool.size() > 0 && tokio::time::Instant::now() < give_up {
        pause().await;
        pool.close().await;
    }
}

/// Held while a pool closes ([`close_pool`]): a tokio mutex, since the
/// batches of `compare --spec` each close on a runtime of their own.
static CLOSING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A 0/1 column (both backends store flags as integers); NULL is false.
fn flag(value: Option<i64>) -> bool {
    value.is_some_and(|v| v != 0)
}

/// A duration stored in milliseconds; none stored reads as zero.
fn millis(value: Option<f64>) -> std::time::Duration {
    std::time::Duration::from_secs_f64(value.unwrap_or(0.0) / 1e3)
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use sqlx::Row;

    use super::*;
    use crate::build::package::ModuleKey;
    use crate::build::probe::ProbeVerdict;
    use crate::build::probe::Probed;
    use crate::draw::Drawn;
    use crate::draw::Reply;
    use crate::score::ScoreVerdict;
    use crate::score::Scored;
    use crate::support::account::{Phase, PhaseFigures};
    use crate::support::owner::Owner;
    use crate::text::extract::Extraction;

    pub(super) async fn sqlite_store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).await.unwrap();
        (dir, store)
    }

    pub(super) async fn pg_store() -> (pg_test::PgSchema, Store) {
        let schema = pg_test::PgSchema::new();
        let store = Store::open(schema.url.parse::<Db>().unwrap())
            .await
            .unwrap();
        (schema, store)
    }

    /// Each case runs once on SQLite and once on PostgreSQL
    /// (`CASE::sqlite`, `CASE::postgres`).
    macro_rules! on_both_backends {
        ($($case:ident),* $(,)?) => {$(
            mod $case {
                #[tokio::test]
                async fn sqlite() {
                    let (_dir, store) = super::sqlite_store().await;
                    super::$case(store.clone()).await;
                    store.close().await;
                }

                #[tokio::test]
                async fn postgres() {
                    let (_schema, store) = super::pg_store().await;
                    super::$case(store.clone()).await;
                    store.close().await;
                }
            }
        )*};
    }
    // For the store's other files' tests.
    pub(super) use on_both_backends;

    on_both_backends!(
        a_batch_round_trips,
        an_owned_batch_is_claimed_once_and_only_when_stopped,
        resumes_are_numbered_and_remember_where_their_phases_begin,
        a_draw_source_is_kept_and_a_resume_that_changes_it_is_recorded,
        replies_read_back_as_drawn,
        draw_figures_and_attempts_round_trip,
        a_missing_figure_then_a_present_one_are_both_stored,
        lanes_claiming_at_once_take_each_item_once,
        a_lease_that_ran_out_hands_the_item_on_and_disarms_the_old_claim,
        the_two_schemas_are_the_same,
        phases_recorded_at_once_by_many_writers_are_all_kept,
        a_bad_stored_value_is_named_by_its_batch_candidate_and_field,
    );

    async fn a_batch_round_trips(store: Store) {
        let batch = store
            .begin_batch(&NewBatch {
                task: "demo",
                spec_path: Path::new("specs/demo/spec.toml"),
                pool: "replay",
                n: 2,
                draw: None,
            })
            .await
            .unwrap();
        for idx in 0..2 {
            let drawn = Drawn {
                idx,
                pool: "replay".into(),
                reply: Reply {
                    content: Some(format!("reply {idx}")),
                    completion_tokens: (idx == 0).then_some(42),
                    ..Reply::default()
                },
            };
            store.record_reply(batch, &drawn).await.unwrap();
        }
        store
            .record_candidate(
                batch,
                0,
                &Extraction::Source("fn f() {}".into()),
                Some("ab"),
                None,
            )
            .await
            .unwrap();
        store
            .record_candidate(
                batch,
                1,
                &Extraction::Failed(crate::text::extract::NoCode::Unparsable {
                    detail: "line 1: x".into(),
                }),
                None,
                None,
            )
            .await
            .unwrap();
        let run = store.begin_probe_run(batch, "shared").await.unwrap();
        let probed = Probed {
            idx: 0,
            verdict: ProbeVerdict::CompileError {
                codes: vec!["E0308".into()],
            },
            diagnostics: "error[E0308]".into(),
            warnings: 1,
        };
        let figures = PhaseFigures {
            phase: Phase::Probe,
            wall_s: 1.0,
            cpu_s: 1.5,
            avg_busy: 1.5,
            peak_busy: 2.0,
        };
        store
            .record_probe_verdicts(run, batch, &[(probed, Some("e/c0.txt".into()))], &figures)
            .await
            .unwrap();
        store.record_phase(batch, &figures).await.unwrap();
        let committed = Scored {
            key: ModuleKey::Committed,
            verdict: ScoreVerdict::Scored {
                passed: 3,
                total: 4,
            },
            passed: 3,
            total: 4,
            wall: Duration::from_millis(5),
            cpu: Duration::from_millis(4),
            cases: crate::score::parse_case_letters("ppfp").unwrap(),
            restarts: 0,
            peak_processes: None,
            stderr: String::new(),
        };
        store.record_committed(batch, &committed).await.unwrap();
        store.record_run_details(batch, &committed).await.unwrap();
        store
            .finish_batch(batch, BatchStatus::Finished, None)
            .await
            .unwrap();

        let row = store.batch(batch).await.unwrap();
        assert_eq!(row.status, BatchStatus::Finished);
        let stored = row.committed.unwrap();
        assert_eq!(stored.verdict, committed.verdict);
        assert_eq!(stored.cases, committed.cases);
        assert_eq!(stored.cpu, committed.cpu);
        let cands = store.candidates(batch).await.unwrap();
        assert_eq!(cands.len(), 2);
        assert_eq!(cands[0].completion_tokens, Some(42));
        assert_eq!(cands[1].completion_tokens, None, "unknown stays unknown");
        assert_eq!(
            cands[0].probe.as_ref().unwrap().to_string(),
            "compile_error(E0308)"
        );
        assert_eq!(cands[0].error_file.as_deref(), Some("e/c0.txt"));
        assert_eq!(cands[1].extraction.kind(), "unparsable");
        assert_eq!(store.phases(batch).await.unwrap(), vec![figures]);
        assert!(matches!(
            store.batch(99).await,
            Err(StoreError::NoBatch { .. })
        ));
    }

    fn new_batch() -> NewBatch<'static> {
        NewBatch {
            task: "demo",
            spec_path: Path::new("/specs/demo/spec.toml"),
            pool: "replay",
            n: 3,
            draw: None,
        }
    }

    async fn an_owned_batch_is_claimed_once_and_only_when_stopped(store: Store) {
        let me = Owner::current();
        let batch = store
            .begin_owned_batch(&new_batch(), &me, "d1")
            .await
            .unwrap();
        assert_eq!(
            store.spec_digest(batch).await.unwrap().as_deref(),
            Some("d1")
        );
        let running = store.running_batches().await.unwrap();
        assert_eq!(running.len(), 1);
        assert_eq!(running[0].owner.as_ref(), Some(&me));

        // A running batch is not taken over.
        assert_eq!(
            store.claim_for_resume(batch, &me).await.unwrap(),
            Claim::Running(Some(me.clone()))
        );
        // Marking it interrupted needs the owner that was read.
        let other = Owner {
            pid: me.pid + 1,
            ..me.clone()
        };
        assert!(!store
            .interrupt_if_owned(batch, Some(&other), "x")
            .await
            .unwrap());
        assert!(store
            .interrupt_if_owned(batch, Some(&me), "gone")
            .await
            .unwrap());
        let row = store.batch(batch).await.unwrap();
        assert_eq!(row.status, BatchStatus::Interrupted);
        assert_eq!(row.failure.as_deref(), Some("gone"));

        // Of two claims at once, one wins.
        let (a, b) = tokio::join!(
            store.claim_for_resume(batch, &me),
            store.claim_for_resume(batch, &other)
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(
            (a == Claim::Claimed) != (b == Claim::Claimed),
            "{a:?} {b:?}"
        );
        let row = store.batch(batch).await.unwrap();
        assert_eq!(row.status, BatchStatus::Running);
        assert_eq!(row.failure, None);

        // A failed batch may be resumed too, once its cause is fixed.
        store
            .finish_batch(batch, BatchStatus::Failed, Some("disk full"))
            .await
            .unwrap();
        assert_eq!(
            store.claim_for_resume(batch, &me).await.unwrap(),
            Claim::Claimed
        );
        store
            .finish_batch(batch, BatchStatus::Finished, None)
            .await
            .unwrap();
        assert_eq!(
            store.claim_for_resume(batch, &me).await.unwrap(),
            Claim::Finished
        );
        assert!(matches!(
            store.claim_for_resume(99, &me).await,
            Err(StoreError::NoBatch { .. })
        ));
    }

    async fn a_draw_source_is_kept_and_a_resume_that_changes_it_is_recorded(store: Store) {
        let was = r#"{"kind":"replay","corpus":"/r.jsonl"}"#;
        let batch = store
            .begin_owned_batch(
                &NewBatch {
                    draw: Some(was),
                    ..new_batch()
                },
                &Owner::current(),
                "d",
            )
            .await
            .unwrap();
        let plain = store.begin_batch(&new_batch()).await.unwrap();
        assert_eq!(
            store.draw_source(batch).await.unwrap().as_deref(),
            Some(was)
        );
        assert_eq!(store.draw_source(plain).await.unwrap(), None);
        assert_eq!(
            store
                .record_resume(batch, &Kept::default(), None)
                .await
                .unwrap(),
            1
        );
        assert_eq!(
            store.draw_source(batch).await.unwrap().as_deref(),
            Some(was)
        );
        let change = crate::draw::SourceChange {
            was: was.to_owned(),
            now: r#"{"kind":"replay","corpus":"/s.jsonl"}"#.to_owned(),
            sentence: String::new(),
        };
        assert_eq!(
            store
                .record_resume(batch, &Kept::default(), Some(&change))
                .await
                .unwrap(),
            2
        );
        assert_eq!(
            store.draw_source(batch).await.unwrap(),
            Some(change.now.clone()),
            "the batch draws from the new source from now on"
        );
        assert_eq!(
            store.draw_changes(batch).await.unwrap(),
            vec![(2, change.was, change.now)]
        );
        assert!(store.draw_source(99).await.is_err());
    }

    async fn resumes_are_numbered_and_remember_where_their_phases_begin(store: Store) {
        let batch = store
            .begin_owned_batch(&new_batch(), &Owner::current(), "d")
            .await
            .unwrap();
        let figures = PhaseFigures {
            phase: Phase::Draw,
            wall_s: 1.0,
            cpu_s: 1.0,
            avg_busy: 1.0,
            peak_busy: 1.0,
        };
        store.record_phase(batch, &figures).await.unwrap();
        let kept = Kept {
            replies: 2,
            extracted: 1,
            probed: 0,
            scored: 0,
            committed: false,
        };
        assert_eq!(store.record_resume(batch, &kept, None).await.unwrap(), 1);
        store.record_phase(batch, &figures).await.unwrap();
        store.record_phase(batch, &figures).await.unwrap();
        assert_eq!(
            store
                .record_resume(batch, &Kept::default(), None)
                .await
                .unwrap(),
            2
        );
        let resumes = store.resumes(batch).await.unwrap();
        assert_eq!(resumes.len(), 2);
        assert_eq!(
            (
                resumes[0].attempt,
                resumes[0].first_phase,
                resumes[0].replies_kept
            ),
            (1, 1, 2)
        );
        assert_eq!((resumes[1].attempt, resumes[1].first_phase), (2, 3));
    }

    /// Figures that say who recorded them: writer `w`'s `k`-th phase.
    fn figures_of(phase: Phase, w: usize, k: usize) -> PhaseFigures {
        PhaseFigures {
            phase,
            wall_s: w as f64,
            cpu_s: k as f64,
            avg_busy: 0.0,
            peak_busy: 0.0,
        }
    }

    /// Issue 25: the parts of one suite, run by lanes on many machines, end
    /// at once, and each records its phases; so may two writers of one
    /// batch's phases. No row is refused (the parts used to number their
    /// rows from the rows they saw, and collided on the key), and each
    /// writer's rows read back together, in the order it wrote them.
    async fn phases_recorded_at_once_by_many_writers_are_all_kept(store: Store) {
        const WRITERS: usize = 12;
        const PHASES: [Phase; 4] = [Phase::Prepare, Phase::Draw, Phase::Probe, Phase::ScoreRun];
        let problems: Vec<crate::suite::Problem> = (0..WRITERS)
            .map(|i| crate::suite::Problem {
                name: format!("p{i}"),
                prompt: String::new(),
                tests: String::new(),
                stop_tokens: Vec::new(),
            })
            .collect();
        let new_problems: Vec<NewProblem> = problems
            .iter()
            .map(|problem| NewProblem {
                problem,
                n: 1,
                completions: Vec::new(),
            })
            .collect();
        let (suite, _) = store
            .begin_suite(
                &NewSuite {
                    problems_path: Path::new("problems.jsonl"),
                    problems_digest: "d",
                    origin: SuiteOrigin::Completions,
                    source: "completions.jsonl",
                    mode: crate::suite::ProgramMode::Completion,
                    edition: crate::spec::Edition::default(),
                    problems: &new_problems,
                },
                &Owner::current(),
            )
            .await
            .unwrap();
        let batch = store.begin_batch(&new_batch()).await.unwrap();
        // Each writer has connections of its own, as a lane on another
        // machine has, and they all start at once.
        let start = std::sync::Arc::new(tokio::sync::Barrier::new(WRITERS));
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (db, start) = (store.db().clone(), start.clone());
                tokio::spawn(async move {
                    let store = Store::open(db).await.unwrap();
                    let part = SuitePart {
                        start: w,
                        end: w + 1,
                    };
                    start.wait().await;
                    for (k, phase) in PHASES.into_iter().enumerate() {
                        let f = figures_of(phase, w, k);
                        let (of_suite, of_batch) = tokio::join!(
                            store.record_suite_phase(suite, &part, &f),
                            store.record_phase(batch, &f)
                        );
                        of_suite.unwrap();
                        of_batch.unwrap();
                    }
                    store.close().await;
                })
            })
            .collect();
        for w in writers {
            w.await.unwrap();
        }

        // The suite's: part by part, each part's phases in its order.
        let rows = store.suite_phases(suite).await.unwrap();
        assert_eq!(rows.len(), WRITERS * PHASES.len());
        let mut parts_seen = Vec::new();
        for part in rows.chunks(PHASES.len()) {
            let w = part[0].wall_s as usize;
            let want: Vec<PhaseFigures> = (0..PHASES.len())
                .map(|k| figures_of(PHASES[k], w, k))
                .collect();
            assert_eq!(part, want.as_slice(), "part {w}");
            parts_seen.push(w);
        }
        parts_seen.sort();
        assert_eq!(parts_seen, (0..WRITERS).collect::<Vec<_>>());
        // The batch's: every row, each writer's in the order it wrote them.
        let rows = store.phases(batch).await.unwrap();
        assert_eq!(rows.len(), WRITERS * PHASES.len());
        for w in 0..WRITERS {
            let mine: Vec<&PhaseFigures> = rows.iter().filter(|f| f.wall_s == w as f64).collect();
            let want: Vec<PhaseFigures> = (0..PHASES.len())
                .map(|k| figures_of(PHASES[k], w, k))
                .collect();
            assert_eq!(mine, want.iter().collect::<Vec<_>>(), "writer {w}");
        }
    }

    /// A database from before migration 0010 keeps its phase rows in
    /// their order, and the rows recorded after it follow them.
    async fn a_schema9_database_keeps_its_phases_in_order(db: Db) {
        let (batch, suite) = (1_i64, 1_i64);
        sqlx::any::install_default_drivers();
        let pool = match &db {
            Db::Sqlite(path) => {
                let options = sqlx::sqlite::SqliteConnectOptions::new()
                    .filename(path)
                    .create_if_missing(true);
                let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
                migrations::before(migrations::sqlite(), 10)
                    .run(&pool)
                    .await
                    .unwrap();
                pool.close().await;
                let url = format!("sqlite://{}", path.display());
                AnyPool::connect(&url).await.unwrap()
            }
            Db::Postgres(url) => {
                let pool = AnyPool::connect(url).await.unwrap();
                migrations::before(migrations::postgres(), 10)
                    .run(&pool)
                    .await
                    .unwrap();
                pool
            }
        };
        // Rows written out of their order, two owners' interleaved.
        for sql in [
            "INSERT INTO batches (id, task, spec_path, pool, n, status, started_at)
             VALUES (1, 't', 's', 'p', 1, 'finished', 'x'), (2, 't', 's', 'p', 1, 'finished', 'x')",
            "INSERT INTO phases (batch_id, seq, phase, wall_s, cpu_s, avg_busy, peak_busy)
             VALUES (1, 1, 'draw', 1, 0, 0, 0), (2, 0, 'prepare', 9, 0, 0, 0),
                    (1, 0, 'prepare', 0, 0, 0, 0), (1, 2, 'probe', 2, 0, 0, 0)",
            "INSERT INTO suites (id, problems_path, problems_digest, origin, source, mode,
                                 problems, started_at)
             VALUES (1, 'p', 'd', 'completions', 's', 'completion', 1, 'x')",
            "INSERT INTO suite_phases (suite_id, seq, phase, wall_s, cpu_s, avg_busy, peak_busy)
             VALUES (1, 2, 'score run', 2, 0, 0, 0), (1, 0, 'prepare', 0, 0, 0, 0),
                    (1, 1, 'probe', 1, 0, 0, 0)",
        ] {
            sqlx::query(sql).execute(&pool).await.unwrap();
        }
        pool.close().await;

        let store = Store::open(db).await.unwrap();
        let walls = |rows: Vec<PhaseFigures>| rows.iter().map(|f| f.wall_s).collect::<Vec<_>>();
        assert_eq!(walls(store.phases(batch).await.unwrap()), [0.0, 1.0, 2.0]);
        assert_eq!(
            walls(store.suite_phases(suite).await.unwrap()),
            [0.0, 1.0, 2.0]
        );
        store
            .record_phase(batch, &figures_of(Phase::ScoreRun, 3, 0))
            .await
            .unwrap();
        let part = SuitePart { start: 0, end: 1 };
        store
            .record_suite_phase(suite, &part, &figures_of(Phase::Prepare, 3, 0))
            .await
            .unwrap();
        assert_eq!(
            walls(store.phases(batch).await.unwrap()),
            [0.0, 1.0, 2.0, 3.0]
        );
        assert_eq!(walls(store.phases(2).await.unwrap()), [9.0]);
        assert_eq!(
            walls(store.suite_phases(suite).await.unwrap()),
            [0.0, 1.0, 2.0, 3.0]
        );
        store.close().await;
    }

    #[tokio::test]
    async fn a_schema9_sqlite_database_keeps_its_phases_in_order() {
        let dir = tempfile::tempdir().unwrap();
        a_schema9_database_keeps_its_phases_in_order(Db::Sqlite(dir.path().join("t.db"))).await;
    }

    #[tokio::test]
    async fn a_schema9_postgres_database_keeps_its_phases_in_order() {
        let schema = pg_test::PgSchema::new();
        a_schema9_database_keeps_its_phases_in_order(schema.url.parse().unwrap()).await;
    }

    /// Every reader parses what it stored back, and a value that does not
    /// parse is an error naming the batch, the candidate (-1 for the
    /// batch's own) and the field: a batch's, its candidates' and replies',
    /// and a suite's completions'.
    async fn a_bad_stored_value_is_named_by_its_batch_candidate_and_field(store: Store) {
        let problem = crate::suite::Problem {
            name: "p".into(),
            prompt: String::new(),
            tests: String::new(),
            stop_tokens: Vec::new(),
        };
        let drawn = Drawn {
            idx: 0,
            pool: "completions".into(),
            reply: Reply {
                content: Some("fn main() {}".into()),
                ..Reply::default()
            },
        };
        let extraction = Extraction::Source("fn main() {}".into());
        let completions = vec![NewCompletion {
            drawn: &drawn,
            extraction: &extraction,
            fingerprint: None,
            dup_of: None,
        }];
        let problems = [NewProblem {
            problem: &problem,
            n: 1,
            completions,
        }];
        let (suite, batches) = store
            .begin_suite(
                &NewSuite {
                    problems_path: Path::new("problems.jsonl"),
                    problems_digest: "d",
                    origin: SuiteOrigin::Completions,
                    source: "completions.jsonl",
                    mode: crate::suite::ProgramMode::Completion,
                    edition: crate::spec::Edition::E2015,
                    problems: &problems,
                },
                &Owner::current(),
            )
            .await
            .unwrap();
        let edition = store.suite(suite).await.unwrap().edition;
        assert_eq!(edition, crate::spec::Edition::E2015);
        let outcome = SuiteOutcomeRow {
            probe: Some(ProbeVerdict::Compiled),
            error_file: None,
            // Kept in the store whichever machine built it (issue 36).
            diagnostics: Some("error[E0308]: mismatched types".into()),
            outcome: crate::suite::CompletionOutcome::CompileError,
            run_wall: Duration::ZERO,
            run_cpu: Duration::ZERO,
            messages: vec![None, Some("assertion failed".into())],
        };
        store
            .record_suite_outcome(batches[0], &[0], &outcome)
            .await
            .unwrap();
        let read = store.suite_completions(suite).await.unwrap();
        assert_eq!(read[0].outcome.as_ref(), Some(&outcome));

        let batch = store.begin_batch(&new_batch()).await.unwrap();
        store.record_reply(batch, &drawn).await.unwrap();
        store
            .record_candidate(batch, 0, &extraction, None, None)
            .await
            .unwrap();
        let scored = Scored {
            key: ModuleKey::Candidate(0),
            verdict: ScoreVerdict::Scored {
                passed: 1,
                total: 1,
            },
            passed: 1,
            total: 1,
            wall: Duration::from_millis(2),
            cpu: Duration::from_millis(1),
            cases: Vec::new(),
            restarts: 0,
            peak_processes: None,
            stderr: String::new(),
        };
        store.record_score(batch, 0, &scored, true).await.unwrap();
        store
            .record_committed(
                batch,
                &Scored {
                    key: ModuleKey::Committed,
                    ..scored.clone()
                },
            )
            .await
            .unwrap();
        let read = store.candidates(batch).await.unwrap();
        assert_eq!(read[0].score.as_ref().unwrap().verdict, scored.verdict);
        assert!(store.batch(batch).await.unwrap().committed.is_some());

        let spoil = |sql: String| {
            let pool = store.pool.clone();
            async move { sqlx::query(&sql).execute(&pool).await.unwrap() }
        };
        let b = batches[0];
        spoil(format!(
            "UPDATE suite_outcomes SET probe = 'bogus' WHERE batch_id = {b}"
        ))
        .await;
        let err = store.suite_completions(suite).await.unwrap_err();
        let want = format!("batch {b}, candidate 0: bad stored probe verdict `bogus`");
        assert!(err.to_string().ends_with(&want), "{err}");
        spoil(format!(
            "UPDATE scores SET verdict = 'bogus' WHERE batch_id = {batch}"
        ))
        .await;
        let err = store.candidates(batch).await.unwrap_err();
        let want = format!("batch {batch}, candidate 0: bad stored score verdict `bogus`");
        assert!(err.to_string().ends_with(&want), "{err}");
        spoil(format!(
            "UPDATE batches SET committed_verdict = 'bogus' WHERE id = {batch}"
        ))
        .await;
        let err = store.batch(batch).await.unwrap_err();
        let want = format!("batch {batch}, candidate -1: bad stored committed verdict `bogus`");
        assert!(err.to_string().ends_with(&want), "{err}");
        spoil(format!(
            "UPDATE replies SET outcome = 'bogus' WHERE batch_id = {batch}"
        ))
        .await;
        let err = store.draw_replies(batch).await.unwrap_err();
        let want = format!("batch {batch}, candidate 0: bad stored reply outcome `bogus`");
        assert!(err.to_string().ends_with(&want), "{err}");
    }

    async fn replies_read_back_as_drawn(store: Store) {
        let batch = store
            .begin_owned_batch(&new_batch(), &Owner::current(), "d")
            .await
            .unwrap();
        let drawn = Drawn {
            idx: 1,
            pool: "replay".into(),
            reply: crate::draw::Reply {
                content: Some("x".into()),
                reasoning: Some("r".into()),
                finish_reason: Some("length".into()),
                prompt_tokens: Some(7),
                completion_tokens: None,
                model: Some("m".into()),
                ttft_ms: Some(1.5),
                latency_ms: Some(9.0),
                ..crate::draw::Reply::default()
            },
        };
        store.record_reply(batch, &drawn).await.unwrap();
        assert_eq!(store.replies(batch).await.unwrap(), vec![drawn]);
    }

    #[tokio::test]
    async fn a_newer_schema_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let store = Store::open(&path).await.unwrap();
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
             VALUES (42, 'future', 1, x'00', 0)",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        store.close().await;
        let err = Store::open(&path).await.unwrap_err();
        assert!(matches!(err, StoreError::TooNew { found: 42, .. }), "{err}");
        assert!(
            err.to_string().contains("schema version 42, newer than"),
            "{err}"
        );
    }

    /// Whether a SQLite database has its `-wal` or `-shm` file beside it.
    fn wal_files_left(db: &Path) -> Vec<String> {
        ["-wal", "-shm"]
            .into_iter()
            .filter(|suffix| {
                let mut name = db.as_os_str().to_owned();
                name.push(suffix);
                Path::new(&name).exists()
            })
            .map(str::to_owned)
            .collect()
    }

    /// Issue 30 §9: a close that began while connections were still on
    /// their way back to the pool (queries from several tasks, just
    /// finished) closed two connections at once, and neither deleted
    /// `-wal` and `-shm`. Many rounds, since what it raced were threads.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn closing_right_after_concurrent_queries_leaves_no_wal_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        for round in 0..200 {
            let store = Store::open(&path).await.unwrap();
            let queries: Vec<_> = (0..6)
                .map(|_| {
                    let store = store.clone();
                    tokio::spawn(async move { store.batches().await.unwrap() })
                })
                .collect();
            for query in queries {
                query.await.unwrap();
            }
            store.close().await;
            let left = wal_files_left(&path);
            assert!(left.is_empty(), "round {round}: left {left:?}");
        }
    }

    /// Two stores of one file in one process (the batches of `compare
    /// --spec`, each on a thread and runtime of its own) closing at once.
    #[test]
    fn two_stores_of_one_file_closing_at_once_leave_no_wal_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        for round in 0..50 {
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    let (path, barrier) = (path.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        let rt = tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .build()
                            .unwrap();
                        rt.block_on(async {
                            let store = Store::open(&path).await.unwrap();
                            store.batches().await.unwrap();
                            barrier.wait();
                            store.close().await;
                        })
                    })
                })
                .collect();
            for thread in threads {
                thread.join().unwrap();
            }
            let left = wal_files_left(&path);
            assert!(left.is_empty(), "round {round}: left {left:?}");
        }
    }

    /// Two processes opening a new database at once both try to migrate it.
    #[tokio::test]
    async fn opening_a_new_database_from_many_connections_at_once_works() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let opens: Vec<_> = (0..6)
            .map(|_| {
                let path = path.clone();
                tokio::spawn(async move { Store::open(&path).await })
            })
            .collect();
        for open in opens {
            open.await.unwrap().unwrap();
        }
        assert_migrated_once(&path).await;
    }

    /// The same race between processes: each child is this test binary
    /// running `open_the_database_named_in_the_environment`.
    #[test]
    fn opening_a_new_database_from_many_processes_at_once_works() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let exe = std::env::current_exe().unwrap();
        let children: Vec<_> = (0..6)
            .map(|_| {
                std::process::Command::new(&exe)
                    .args([
                        "--exact",
                        "store::tests::open_the_database_named_in_the_environment",
                        "--ignored",
                        "--nocapture",
                    ])
                    .env(CHILD_DB, &path)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for child in children {
            let out = child.wait_with_output().unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && stdout.contains("1 passed"),
                "{stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(assert_migrated_once(&path));
    }

    const CHILD_DB: &str = "ASSAY_TEST_OPEN_DB";

    /// A child of `opening_a_new_database_from_many_processes_at_once_works`.
    #[tokio::test]
    #[ignore = "run as a child process by opening_a_new_database_from_many_processes_at_once_works"]
    async fn open_the_database_named_in_the_environment() {
        let path = std::env::var_os(CHILD_DB).expect("run by the many-processes test");
        let store = Store::open(Path::new(&path)).await.unwrap();
        store.close().await;
    }

    /// Every migration is recorded exactly once, as applied.
    async fn assert_migrated_once(path: &Path) {
        let store = Store::open(path).await.unwrap();
        let rows: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT version, CASE WHEN success THEN 1 ELSE 0 END FROM _sqlx_migrations ORDER BY version",
        )
                .fetch_all(&store.pool)
                .await
                .unwrap();
        let known: Vec<(i64, i64)> = migrations::sqlite()
            .iter()
            .map(|m| (m.version, 1))
            .collect();
        assert_eq!(rows, known);
        store.close().await;
    }

    async fn draw_figures_and_attempts_round_trip(store: Store) {
        use crate::draw::{Attempt, ErrorText, Outcome};
        let batch = store
            .begin_batch(&NewBatch {
                task: "demo",
                spec_path: Path::new("s.toml"),
                pool: "fast",
                n: 2,
                draw: None,
            })
            .await
            .unwrap();
        let attempt = |number, outcome, delay_ms| Attempt {
            number,
            started_ms: 1.0,
            duration_ms: 2.0,
            outcome,
            error: (outcome != Outcome::Ok).then(|| ErrorText {
                message: "slow down".into(),
                body: Some("{\"message\":\"slow down\"}".into()),
            }),
            retry_after_ms: (outcome != Outcome::Ok).then_some(1000.0),
            delay_ms,
        };
        let ok = Drawn {
            idx: 0,
            pool: "fast".into(),
            reply: Reply {
                content: Some("x".into()),
                reasoning: Some("hm".into()),
                completion_tokens: Some(12),
                ttft_ms: Some(5.0),
                ttft_reasoning_ms: Some(2.0),
                latency_ms: Some(9.0),
                chunks: Some(4),
                hit_cap: true,
                attempts: vec![
                    attempt(1, Outcome::HttpError { status: 429 }, Some(1000.0)),
                    attempt(2, Outcome::Ok, None),
                ],
                ..Reply::default()
            },
        };
        let failed = Drawn {
            idx: 1,
            pool: "fast".into(),
            reply: Reply {
                outcome: Outcome::HttpError { status: 500 },
                error: Some(ErrorText {
                    message: "boom".into(),
                    body: Some("boom".into()),
                }),
                ..Reply::default()
            },
        };
        store.record_draw(batch, &ok).await.unwrap();
        store.record_draw(batch, &failed).await.unwrap();
        store
            .record_cancelled(batch, "fast", &[attempt(1, Outcome::Cancelled, None)])
            .await
            .unwrap();
        let back = store.draw_replies(batch).await.unwrap();
        assert_eq!(back, vec![ok.clone(), failed]);
        let attempts = store.draw_attempts(batch).await.unwrap();
        assert_eq!(attempts.len(), 3);
        assert_eq!(attempts[2].0, None, "a cancelled request is no reply");
        // The old reader still sees both replies, unknown tokens unknown.
        let want = vec![(0, ok.reply.completion_tokens), (1, None)];
        let old: Vec<(usize, Option<u64>)> = store
            .replies(batch)
            .await
            .unwrap()
            .iter()
            .map(|d| (d.idx, d.reply.completion_tokens))
            .collect();
        assert_eq!(old, want);
        // Replies are not candidates: the candidate reader lists none.
        let cands = store.candidates(batch).await;
        assert!(cands.unwrap().is_empty(), "no candidates were recorded");
    }

    /// A statement PostgreSQL prepared for a reply without timings (NULL
    /// floats) still stores the next reply's (`real`): sqlx's `Any` would
    /// have declared them `real` and refused the 8-byte values.
    async fn a_missing_figure_then_a_present_one_are_both_stored(store: Store) {
        use crate::draw::{Attempt, Outcome};
        let batch = store.begin_batch(&new_batch()).await.unwrap();
        let drawn = |idx: usize, ms: Option<f64>| Drawn {
            idx,
            pool: "p".into(),
            reply: Reply {
                content: Some("x".into()),
                ttft_ms: ms,
                ttft_reasoning_ms: ms,
                latency_ms: ms,
                attempts: vec![Attempt {
                    number: 1,
                    started_ms: 0.0,
                    duration_ms: 1.0,
                    outcome: Outcome::Ok,
                    error: None,
                    retry_after_ms: ms,
                    delay_ms: ms,
                }],
                ..Reply::default()
            },
        };
        // As many without as the pool has connections, so each has its
        // statements prepared by one, then as many with.
        let want: Vec<Drawn> = (0..16)
            .map(|idx| drawn(idx, (idx >= 8).then_some(7.25)))
            .collect();
        for d in &want {
            store.record_draw(batch, d).await.unwrap();
        }
        assert_eq!(store.draw_replies(batch).await.unwrap(), want);
        let attempts = store.draw_attempts(batch).await.unwrap();
        let delays: Vec<Option<f64>> = attempts.iter().map(|a| a.2.delay_ms).collect();
        let wanted: Vec<Option<f64>> = want.iter().map(|d| d.reply.ttft_ms).collect();
        assert_eq!(delays, wanted);
    }

    async fn lanes_claiming_at_once_take_each_item_once(store: Store) {
        let items = 24;
        for i in 0..items {
            let kind = [WorkKind::Batch, WorkKind::Suite][i as usize % 2];
            let item = serde_json::json!({ "task": i });
            store.enqueue(kind, &item).await.unwrap();
        }
        // Eight lanes, each with its own connections, claim until none is left.
        let lanes: Vec<_> = (0..8)
            .map(|lane| {
                let db = store.db().clone();
                tokio::spawn(async move {
                    let store = Store::open(db).await.unwrap();
                    let mut taken = Vec::new();
                    while let Some(c) = store
                        .claim_work(&format!("lane{lane}"), &Owner::current(), 60_000)
                        .await
                        .unwrap()
                    {
                        assert_eq!(c.claim, 1);
                        assert!(store.finish_work(&c, None).await.unwrap());
                        taken.push(c.id);
                    }
                    store.close().await;
                    taken
                })
            })
            .collect();
        let mut taken = Vec::new();
        for lane in lanes {
            taken.extend(lane.await.unwrap());
        }
        taken.sort();
        assert_eq!(taken, (1..=items).collect::<Vec<i64>>());
        let listed = store.work_items().await.unwrap();
        assert!(listed
            .iter()
            .all(|w| w.state == WorkState::Done && w.claims == 1));
        // Each keeps the kind it was queued as.
        let kinds: Vec<WorkKind> = listed.iter().map(|w| w.kind).collect();
        let want: Vec<WorkKind> = (0..items)
            .map(|i| [WorkKind::Batch, WorkKind::Suite][i as usize % 2])
            .collect();
        assert_eq!(kinds, want);
    }

    async fn a_lease_that_ran_out_hands_the_item_on_and_disarms_the_old_claim(store: Store) {
        let me = Owner::current();
        let id = store
            .enqueue(WorkKind::Batch, &serde_json::json!({ "spec": "t", "n": 3 }))
            .await
            .unwrap();
        // A lease already over, as a killed lane's is once it lapses.
        let first = store.claim_work("a", &me, -1_000).await.unwrap().unwrap();
        assert_eq!((first.id, first.claim, first.batch), (id, 1, None));
        assert_eq!(first.item, serde_json::json!({ "spec": "t", "n": 3 }));
        assert_eq!(first.kind, WorkKind::Batch);
        let batch = store.begin_batch(&new_batch()).await.unwrap();
        store.attach_batch(id, batch).await.unwrap();
        let listed = store.work_items().await.unwrap();
        assert!(listed[0].lease_expired && listed[0].state == WorkState::Running);
        // `batches` and `show` mark it: no /proc can tell of a lane elsewhere.
        let lapsed = |b: BatchRow| (b.status, b.lease_lapsed);
        let running = BatchStatus::Running;
        assert_eq!(lapsed(store.batch(batch).await.unwrap()), (running, true));
        assert!(store.batches().await.unwrap()[0].lease_lapsed);

        let second = store.claim_work("b", &me, 60_000).await.unwrap().unwrap();
        assert_eq!(
            (second.id, second.claim, second.batch),
            (id, 2, Some(batch))
        );
        assert_eq!(lapsed(store.batch(batch).await.unwrap()), (running, false));
        assert_eq!(store.batch(batch).await.unwrap().lane.as_deref(), Some("a"));
        // The first lane can neither keep nor end what it lost.
        assert!(!store.renew_lease(&first, 60_000).await.unwrap());
        assert!(!store.finish_work(&first, Some("late")).await.unwrap());
        assert!(store.renew_lease(&second, 60_000).await.unwrap());
        assert!(store.claim_work("c", &me, 60_000).await.unwrap().is_none());
        // Nothing to claim is not a drained queue: lane b still holds one.
        assert_eq!(store.open_work_items().await.unwrap(), 1);
        assert!(store.finish_work(&second, None).await.unwrap());
        assert_eq!(store.open_work_items().await.unwrap(), 0);
        let listed = store.work_items().await.unwrap();
        assert_eq!(listed[0].state, WorkState::Done);
        assert_eq!(listed[0].lane.as_deref(), Some("b"));
        assert_eq!(listed[0].failure, None);
    }

    /// Every table and column, with its type and nullability, in the
    /// SQLite spelling: the two migration sets must stay in step.
    async fn schema_of(store: &Store) -> Vec<(String, String, String, bool)> {
        let sql = match store.backend() {
            Backend::Sqlite => {
                "SELECT m.name, p.name, lower(p.type), p.\"notnull\" + p.pk
                 FROM sqlite_master m JOIN pragma_table_info(m.name) p
                 WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'"
            }
            Backend::Postgres => {
                "SELECT table_name::text, column_name::text,
                        CASE data_type WHEN 'bigint' THEN 'integer'
                                       WHEN 'double precision' THEN 'real'
                                       WHEN 'bytea' THEN 'blob'
                                       ELSE data_type::text END,
                        CASE is_nullable WHEN 'NO' THEN 1 ELSE 0 END
                 FROM information_schema.columns WHERE table_schema = current_schema()"
            }
        };
        let mut rows: Vec<(String, String, String, bool)> = sqlx::query(sql)
            .fetch_all(&store.pool)
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get::<i64, _>(3) != 0))
            .filter(|(table, ..)| table != "_sqlx_migrations")
            .collect();
        rows.sort();
        rows
    }

    async fn the_two_schemas_are_the_same(store: Store) {
        let (_dir, sqlite) = sqlite_store().await;
        let (_schema, postgres) = pg_store().await;
        let (mine, sqlite, postgres) = (
            schema_of(&store).await,
            schema_of(&sqlite).await,
            schema_of(&postgres).await,
        );
        assert!(mine.len() > 100, "{mine:?}");
        let differ = |a: &[(String, String, String, bool)],
                      b: &[(String, String, String, bool)]| {
            a.iter()
                .filter(|r| !b.contains(r))
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(differ(&sqlite, &postgres), vec![], "only in SQLite");
        assert_eq!(differ(&postgres, &sqlite), vec![], "only in PostgreSQL");
        assert_eq!(mine, sqlite);
    }

    #[tokio::test]
    async fn a_missing_directory_is_named() {
        let err = Store::open(Path::new("/nonexistent-dir/x.db"))
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent-dir does not exist"),
            "{err}"
        );
    }
}
