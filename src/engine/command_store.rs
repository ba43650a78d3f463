//! The store as a command holds it: opened the way the command needs
//! (never created by a command that reads; an existing one opened before a
//! run writes anything), and closed however the command ends.
//!
//! Closing is what this module is for. sqlx's SQLite connections each live
//! on a worker thread that closes its handle only when told; a pool that
//! is dropped instead (an error returned with `?`) leaves that to threads
//! the process exit may kill first, and SQLite then leaves `DB-wal` and
//! `DB-shm` beside the database. So a command never holds a store
//! directly: it runs inside [`reading`], [`writing`] or [`running`], which
//! await the close on every path out, error or not. How a close closes
//! every connection, one at a time, is `store::close_pool`'s.

use std::future::Future;

use anyhow::Result;

use crate::store::{Db, Store, StoreError};

/// Runs `f` on the existing store `db`, for a command that reads: a
/// missing database is `StoreError::Missing`, never created. Batches whose
/// process died are marked interrupted first, so the command sees the
/// truth.
pub async fn reading<T>(db: &Db, f: impl AsyncFnOnce(&Store) -> Result<T>) -> Result<T> {
    crate::engine::outputs::check_db_file(db)?;
    let store = Store::open_existing(db).await?;
    mark_dead_batches(&store).await;
    closing(store, f).await
}

/// Runs `f` on the store `db`, created if missing.
pub async fn writing<T>(db: &Db, f: impl AsyncFnOnce(&Store) -> Result<T>) -> Result<T> {
    let store = Store::open(db).await?;
    mark_dead_batches(&store).await;
    closing(store, f).await
}

/// For a command that continues stored work (`--resume`): the store must
/// be there. A missing SQLite file is `StoreError::Missing`, never made.
pub fn must_exist(db: &Db) -> Result<()> {
    crate::engine::outputs::check_db_file(db)?;
    match db {
        Db::Sqlite(path) if !path.is_file() => Err(StoreError::Missing { db: db.clone() }.into()),
        _ => Ok(()),
    }
}

/// Runs `f` with the store of a run, which must find a bad database before
/// it builds anything and must not leave a new one behind when it refuses
/// the task: an existing database (or a server's) is opened now, so a file
/// that is not SQLite, a newer schema or a server that refuses is found
/// first; a new SQLite file is created by the first [`RunStore::get`],
/// which a run calls once its checks have passed.
pub async fn running<T>(db: &Db, f: impl AsyncFnOnce(&mut RunStore) -> Result<T>) -> Result<T> {
    let exists = match db {
        Db::Sqlite(path) => path.exists(),
        Db::Postgres(_) => true,
    };
    let mut run = RunStore {
        db: db.clone(),
        store: None,
    };
    if exists {
        run.get().await?;
    }
    let result = f(&mut run).await;
    if let Some(store) = run.store.take() {
        store.close().await;
    }
    result
}

/// A run's store: open, or (a new SQLite file) not created yet.
#[derive(Debug)]
pub struct RunStore {
    db: Db,
    store: Option<Store>,
}

impl RunStore {
    /// The store, opened (and, a new file, created) on first use.
    pub async fn get(&mut self) -> Result<&Store, StoreError> {
        if self.store.is_none() {
            let store = Store::open(&self.db).await?;
            mark_dead_batches(&store).await;
            self.store = Some(store);
        }
        Ok(self.store.as_ref().expect("opened above"))
    }

    /// The store if it is open: an existing database is, from the start.
    pub fn opened(&self) -> Option<&Store> {
        self.store.as_ref()
    }
}

/// Runs `f` and closes the store, whatever `f` returned.
async fn closing<T>(store: Store, f: impl AsyncFnOnce(&Store) -> Result<T>) -> Result<T> {
    let result = f(&store).await;
    store.close().await;
    result
}

/// Runs `fut` and then closes `store`: for a library caller that opened a
/// store itself and hands it on.
pub async fn close_after<T>(store: &Store, fut: impl Future<Output = T>) -> T {
    let out = fut.await;
    store.close().await;
    out
}

/// The marking is best effort: a database that cannot be written is still
/// readable.
async fn mark_dead_batches(store: &Store) {
    if let Err(e) = crate::engine::resume::interrupt_dead_batches(store).await {
        tracing::warn!("cannot mark dead batches interrupted: {e}");
    }
}
