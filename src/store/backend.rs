//! Where the store lives, and opening it: a SQLite file (the embedded
//! default) or a PostgreSQL database that many machines share.
//!
//! Both are reached through sqlx's `Any` driver, so each statement of the
//! store is written once, in the SQL both engines speak (`$N` parameters,
//! `RETURNING`, `IS NOT DISTINCT FROM`, `string_agg`, timestamps as text
//! made by `crate::support::clock`). What cannot be shared lives here: creating and
//! locking a new SQLite file, the two migration sets, and how each engine
//! says "read-only".

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{AnyConnection, AnyPool, ConnectOptions, Connection, Executor};

use super::StoreError;

/// A store's address: `--db` or `ASSAY_DB`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Db {
    /// A SQLite file: a path, or `sqlite:PATH`.
    Sqlite(PathBuf),
    /// A PostgreSQL URL. It never carries a password: sqlx takes that from
    /// `PGPASSWORD` or `~/.pgpass`, so it reaches no flag, log line or row.
    Postgres(String),
}

impl Db {
    /// The store as it names itself, for a hint made where the `--db` the
    /// user typed is not at hand (a store's error, a report built from
    /// stored rows). `sqlite:x.db` comes back as `x.db`, which opens the
    /// same file.
    pub fn reach(&self) -> crate::support::hint::Reach {
        crate::support::hint::Reach::db(&self.to_string())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Why a `--db` value is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DbError {
    #[error("a password does not go in the database URL, where `ps`, shell history and logs keep it: set PGPASSWORD or use ~/.pgpass")]
    Password,
    #[error("not a PostgreSQL URL: {0}")]
    BadUrl(String),
    #[error("unknown database scheme `{0}`: a path, sqlite:PATH or postgres://...")]
    Scheme(String),
}

impl Db {
    pub fn backend(&self) -> Backend {
        match self {
            Db::Sqlite(_) => Backend::Sqlite,
            Db::Postgres(_) => Backend::Postgres,
        }
    }

    /// The file, for a SQLite store.
    pub fn sqlite_path(&self) -> Option<&Path> {
        match self {
            Db::Sqlite(p) => Some(p),
            Db::Postgres(_) => None,
        }
    }
}

impl FromStr for Db {
    type Err = DbError;

    fn from_str(s: &str) -> Result<Db, DbError> {
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            let url = url::Url::parse(s).map_err(|e| DbError::BadUrl(e.to_string()))?;
            let password_param = url.query_pairs().any(|(k, _)| k == "password");
            if url.password().is_some() || password_param {
                return Err(DbError::Password);
            }
            return Ok(Db::Postgres(s.to_owned()));
        }
        if let Some(rest) = s.strip_prefix("sqlite:") {
            let rest = rest.strip_prefix("//").unwrap_or(rest);
            return Ok(Db::Sqlite(PathBuf::from(rest)));
        }
        match s.split_once("://") {
            Some((scheme, _)) if !scheme.contains('/') => Err(DbError::Scheme(scheme.to_owned())),
            _ => Ok(Db::Sqlite(PathBuf::from(s))),
        }
    }
}

impl fmt::Display for Db {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Db::Sqlite(p) => write!(f, "{}", p.display()),
            Db::Postgres(url) => f.write_str(url),
        }
    }
}

impl From<&Path> for Db {
    fn from(p: &Path) -> Db {
        Db::Sqlite(p.to_path_buf())
    }
}

impl From<PathBuf> for Db {
    fn from(p: PathBuf) -> Db {
        Db::Sqlite(p)
    }
}

impl From<&PathBuf> for Db {
    fn from(p: &PathBuf) -> Db {
        Db::Sqlite(p.clone())
    }
}

impl From<&Db> for Db {
    fn from(db: &Db) -> Db {
        db.clone()
    }
}

/// How long a connection waits for a lock another connection holds.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens the store's pool with its schema current. A SQLite file is
/// created if missing; a PostgreSQL database must exist (assay creates its
/// tables, not databases).
pub(super) async fn open(db: &Db) -> Result<AnyPool, StoreError> {
    sqlx::any::install_default_drivers();
    match db {
        Db::Sqlite(path) => open_sqlite(db, path).await,
        Db::Postgres(url) => open_postgres(db, url).await,
    }
}

async fn open_sqlite(db: &Db, path: &Path) -> Result<AnyPool, StoreError> {
    let open_err = |message: String| StoreError::Open {
        db: db.clone(),
        message,
    };
    // A device or a folder is no database: SQLite would write its
    // journal beside it (`/dev/full-journal`).
    if path.exists() && !path.is_file() {
        return Err(open_err("not a regular file".to_owned()));
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !parent.is_dir() {
            return Err(open_err(format!(
                "cannot create the database: directory {} does not exist",
                parent.display()
            )));
        }
    }
    let options = SqliteConnectOptions::new()
        .filename(path)
        .busy_timeout(BUSY_TIMEOUT)
        .foreign_keys(true);
    {
        // Held until the schema is current: creating the database,
        // switching it to WAL and migrating it happen in one opener at a
        // time, on a connection of its own.
        let _opening = OpenLock::acquire(db, path).await?;
        let first = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(
                options
                    .clone()
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal),
            )
            .await
            .map_err(|e| connect_error(db, path, e))?;
        let migrated = migrate_sqlite(db, &first).await;
        super::close_pool(&first).await;
        migrated?;
    }
    // The file exists, in WAL mode (which it keeps), with its schema: the
    // pool's connections need only ordinary locks.
    let any = AnyConnectOptions::from_url(&options.to_url_lossy())
        .map_err(|e| open_err(format!("cannot open the database: {e}")))?;
    AnyPoolOptions::new()
        .max_connections(4)
        .after_connect(|conn, _| {
            Box::pin(async move {
                conn.execute(
                    format!(
                        "PRAGMA busy_timeout = {}; PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL",
                        BUSY_TIMEOUT.as_millis(),
                    )
                    .as_str(),
                )
                .await
                .map(|_| ())
            })
        })
        .connect_with(any)
        .await
        .map_err(|e| connect_error(db, path, e))
}

fn connect_error(db: &Db, path: &Path, e: sqlx::Error) -> StoreError {
    if is_read_only(Backend::Sqlite, &e) {
        return StoreError::ReadOnly { db: db.clone() };
    }
    let message = if !path.exists() {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        format!(
            "cannot create the database: directory {} is not writable",
            dir.display()
        )
    } else {
        format!("cannot open the database: {e}")
    };
    StoreError::Open {
        db: db.clone(),
        message,
    }
}

/// How long connecting to a PostgreSQL server may take, the handshake
/// included. A host that drops packets (down, or behind a firewall) would
/// otherwise hold the command for the kernel's TCP retries, minutes; a
/// server on a loaded network still answers well within it.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a statement waits for one of the pool's connections once the
/// store is open: the pool's connections may all be busy with other tasks'
/// statements.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(30);

async fn open_postgres(db: &Db, url: &str) -> Result<AnyPool, StoreError> {
    let cannot_connect = |why: String| StoreError::Open {
        db: db.clone(),
        message: format!("cannot connect: {why}"),
    };
    let options =
        AnyConnectOptions::from_str(url).map_err(|e| cannot_connect(connect_failure(&e)))?;
    // One connection first, made directly and closed: a pool retries a
    // refused connection until its acquire timeout (sqlx takes it for a
    // server still starting up) and then says only "pool timed out", 30 s
    // later, where the user needs "connection refused" now.
    let first = tokio::time::timeout(CONNECT_TIMEOUT, AnyConnection::connect_with(&options))
        .await
        .map_err(|_| cannot_connect(format!("no answer within {} s", CONNECT_TIMEOUT.as_secs())))?
        .map_err(|e| cannot_connect(connect_failure(&e)))?;
    // Closing says goodbye to the server; a failure to is no failure to open.
    let _ = first.close().await;
    let pool = AnyPoolOptions::new()
        .max_connections(8)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_with(options)
        .await
        .map_err(|e| cannot_connect(connect_failure(&e)))?;
    migrate_postgres(db, &pool).await?;
    Ok(pool)
}

/// Why a connection could not be made, on one line: the socket's error as
/// the system words it (sqlx wraps it in "error communicating with
/// database"), anything else as sqlx says it.
fn connect_failure(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            "connection refused".to_owned()
        }
        sqlx::Error::Io(io) => crate::support::input::one_line(&io.to_string()),
        other => crate::support::input::one_line(&other.to_string()),
    }
}

/// Brings a SQLite schema up to date, refusing a database from a newer
/// assay. Runs under `OpenLock`: SQLite has no migration lock (sqlx's is a
/// no-op there), so no other opener is migrating and a failure is real.
async fn migrate_sqlite(db: &Db, pool: &sqlx::SqlitePool) -> Result<(), StoreError> {
    let migrator = super::migrations::sqlite();
    let found = match sqlx::query_scalar::<_, i64>(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
    )
    .fetch_one(pool)
    .await
    {
        Ok(0) => None,
        Ok(_) => sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations")
            .fetch_one(pool)
            .await
            .ok()
            .flatten(),
        Err(e) => {
            return Err(StoreError::Open {
                db: db.clone(),
                message: format!("cannot read the database: {e}"),
            })
        }
    };
    refuse_newer(db, &migrator, found)?;
    migrator
        .run(pool)
        .await
        .map_err(|source| StoreError::Migrate {
            db: db.clone(),
            source,
        })
}

/// Brings a PostgreSQL schema up to date. sqlx's migrator takes an
/// advisory lock there, so lanes starting together migrate once.
async fn migrate_postgres(db: &Db, pool: &AnyPool) -> Result<(), StoreError> {
    let migrator = super::migrations::postgres();
    let found: Option<i64> =
        match sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM pg_tables WHERE tablename = '_sqlx_migrations' AND schemaname = current_schema()")
            .fetch_one(pool)
            .await
        {
            Ok(0) => None,
            Ok(_) => sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations")
                .fetch_one(pool)
                .await
                .ok()
                .flatten(),
            Err(e) => {
                return Err(StoreError::Open {
                    db: db.clone(),
                    message: format!("cannot read the database: {e}"),
                })
            }
        };
    refuse_newer(db, &migrator, found)?;
    migrator
        .run(pool)
        .await
        .map_err(|source| StoreError::Migrate {
            db: db.clone(),
            source,
        })
}

fn refuse_newer(
    db: &Db,
    migrator: &sqlx::migrate::Migrator,
    found: Option<i64>,
) -> Result<(), StoreError> {
    let known = migrator.iter().map(|m| m.version).max().unwrap_or(0);
    match found.filter(|v| *v > known) {
        Some(found) => Err(StoreError::TooNew {
            db: db.clone(),
            found,
            known,
        }),
        None => Ok(()),
    }
}

/// Serialises opening a SQLite file across connections, tasks and
/// processes.
///
/// SQLite's busy handler does not cover opening a new database from several
/// connections at once: switching it to WAL and a deferred migration
/// transaction that upgrades to a write can get `SQLITE_BUSY` at once,
/// without waiting, and two openers that both find the schema missing both
/// try to apply it. So every opener takes an exclusive `flock` first and
/// holds it until the schema is current; later opens find a WAL database
/// with every migration applied, which needs only ordinary locks.
///
/// The lock is on the database's directory, not on the database file: a
/// second descriptor on the database file, when closed, would drop the
/// POSIX locks SQLite holds on it in this process. `flock` locks are per
/// open file description, so two opens in one process exclude each other
/// as two processes do.
struct OpenLock {
    // Unlocked when closed, on drop.
    _dir: std::fs::File,
}

impl OpenLock {
    async fn acquire(db: &Db, path: &Path) -> Result<OpenLock, StoreError> {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf();
        let db = db.clone();
        tokio::task::spawn_blocking(move || {
            let lock = |e: std::io::Error| StoreError::Open {
                db: db.clone(),
                message: format!(
                    "cannot lock directory {} to open the database: {e}",
                    dir.display()
                ),
            };
            let file = std::fs::File::open(&dir).map_err(lock)?;
            file.lock().map_err(lock)?;
            Ok(OpenLock { _dir: file })
        })
        .await
        .expect("taking the open lock does not panic")
    }
}

/// SQL for the store's clock in epoch milliseconds: leases are measured
/// on it, so lanes on machines whose clocks differ agree on them.
pub(super) fn now_ms_sql(backend: Backend) -> &'static str {
    match backend {
        Backend::Sqlite => "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
        Backend::Postgres => "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
    }
}

/// Whether the engine refused a write because the store is read-only.
pub(super) fn is_read_only(backend: Backend, e: &sqlx::Error) -> bool {
    let Some(code) = e.as_database_error().and_then(|d| d.code()) else {
        return false;
    };
    match backend {
        // SQLITE_READONLY is 8; its extended codes keep 8 in the low byte.
        Backend::Sqlite => code.parse::<i32>().is_ok_and(|c| c & 0xff == 8),
        // read_only_sql_transaction, and a denied privilege.
        Backend::Postgres => code == "25006" || code == "42501",
    }
}

/// Fails with `ReadOnly` if nothing can be written; changes nothing.
pub(super) async fn check_writable(db: &Db, pool: &AnyPool) -> Result<(), sqlx::Error> {
    let mut conn = pool.acquire().await?;
    match db.backend() {
        Backend::Sqlite => {
            // A write lock taken and given back.
            sqlx::query("BEGIN IMMEDIATE").execute(&mut *conn).await?;
            sqlx::query("ROLLBACK").execute(&mut *conn).await?;
        }
        Backend::Postgres => {
            // A write in a transaction rolled back: the privilege and a
            // read-only server are both tested.
            let mut tx = conn.begin().await?;
            sqlx::query("UPDATE batches SET id = id WHERE FALSE")
                .execute(&mut *tx)
                .await?;
            tx.rollback().await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn db_addresses_parse() {
        assert_eq!("assay.db".parse(), Ok(Db::Sqlite("assay.db".into())));
        assert_eq!("sqlite:x/a.db".parse(), Ok(Db::Sqlite("x/a.db".into())));
        assert_eq!(
            "sqlite:///tmp/a.db".parse(),
            Ok(Db::Sqlite("/tmp/a.db".into()))
        );
        assert_eq!(
            "postgres://assay@127.0.0.1:5432/runs".parse(),
            Ok(Db::Postgres("postgres://assay@127.0.0.1:5432/runs".into()))
        );
        assert_eq!("dir://x".parse::<Db>(), Err(DbError::Scheme("dir".into())));
        // A relative path with `://` further on is still a path.
        assert_eq!("a/b://c".parse(), Ok(Db::Sqlite("a/b://c".into())));
    }

    /// A server that takes the connection and never answers (hung, or a
    /// host whose firewall drops packets, where even the TCP handshake
    /// never ends) is given up on after `CONNECT_TIMEOUT`, and the message
    /// says so. The clock is the test's own: paused, it jumps to the
    /// timeout once nothing else can happen.
    #[tokio::test(start_paused = true)]
    async fn a_server_that_never_answers_is_given_up_on() {
        // Listening, so the connection is made, but nobody ever reads it.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!(
            "postgres://assay@127.0.0.1:{}/runs",
            silent.local_addr().unwrap().port()
        );
        let err = open(&url.parse().unwrap()).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{url}: cannot connect: no answer within 10 s")
        );
    }

    #[test]
    fn a_password_in_the_url_is_refused() {
        for url in [
            "postgres://assay:hunter2@127.0.0.1/runs",
            "postgres://assay@127.0.0.1/runs?password=hunter2",
        ] {
            let err = url.parse::<Db>().unwrap_err();
            assert_eq!(err, DbError::Password, "{url}");
            assert!(!err.to_string().contains("hunter2"));
        }
    }
}
