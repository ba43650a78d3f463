//! Outputs: where a command that runs batches writes, resolved and checked
//! before anything is written.
//!
//! Two steps, as flags become a configuration: `Outputs::resolve` turns the
//! flags into absolute paths (no IO), `Outputs::prepare` creates the output
//! and work folders and proves that they and the database's folder can be
//! written. A bad path is bad input (exit 2) naming the flag and the path;
//! what `prepare` created before it failed is removed again, so a refused
//! run leaves no empty folder and no empty database behind.
//!
//! The default output folder is named after the database (`assay.db` ->
//! `assay-out/` beside it, `my.db` -> `my-out/`), so two databases never
//! share `batch-N` folders; and a batch folder is never reused
//! (`new_batch_dir` takes `batch-N`, else `batch-N.2`, ...).

use std::path::{Path, PathBuf};

use crate::store::Db;

/// A path the user gave (or defaulted) that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{flag} {path}: {why}")]
pub struct PathError {
    pub flag: &'static str,
    pub path: PathBuf,
    pub why: String,
}

/// The database, the output folder and the work directory of a command
/// that runs batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outputs {
    /// A SQLite file's path is absolute.
    pub db: Db,
    /// Each batch's outputs go to `out/batch-N/`.
    pub out: PathBuf,
    /// The generated packages and their cargo target directory.
    pub work_dir: PathBuf,
    /// The flag the work directory comes from: `--work-dir`, or `--out`
    /// when it defaulted to `OUT/work` (what the user has to fix).
    work_flag: &'static str,
}

/// The output folder that belongs to a database: beside it, named after it.
pub fn default_out(db: &Path) -> PathBuf {
    let stem = db
        .file_stem()
        .map_or_else(|| "assay".into(), |s| s.to_string_lossy().into_owned());
    db.with_file_name(format!("{stem}-out"))
}

impl Outputs {
    /// Step one: the paths, absolute (scoring runs each candidate in its own
    /// directory), from the flags; `out` defaults to the database's folder,
    /// `work_dir` to `OUT/work`. No IO besides reading the current directory.
    /// A PostgreSQL store has no folder: its output folder defaults to
    /// `assay-out` in the current directory.
    pub fn resolve(
        db: &Db,
        out: Option<&Path>,
        work_dir: Option<&Path>,
    ) -> Result<Outputs, PathError> {
        let db = match db {
            Db::Sqlite(path) => Db::Sqlite(absolute("--db", path)?),
            Db::Postgres(_) => db.clone(),
        };
        let out = match (out, &db) {
            (Some(out), _) => absolute("--out", out)?,
            (None, Db::Sqlite(path)) => default_out(path),
            (None, Db::Postgres(_)) => absolute("--out", Path::new("assay-out"))?,
        };
        let (work_dir, work_flag) = match work_dir {
            Some(w) => (absolute("--work-dir", w)?, "--work-dir"),
            None => (out.join("work"), "--out"),
        };
        Ok(Outputs {
            db,
            out,
            work_dir,
            work_flag,
        })
    }

    /// The first part of step two, for what must build before the batch
    /// may write anything else (the cases' check): checks the database's
    /// path and creates the work directory only.
    pub fn prepare_work_dir(&self) -> Result<(), PathError> {
        let mut created = Vec::new();
        let result = check_db(&self.db)
            .and_then(|()| make_writable_dir(self.work_flag, &self.work_dir, &mut created));
        if result.is_err() {
            remove_created(&created);
        }
        result
    }

    /// For a command that only builds in the work directory (`task
    /// check`): creates it, and nothing else.
    pub fn prepare_work_dir_alone(&self) -> Result<(), PathError> {
        let mut created = Vec::new();
        let result = make_writable_dir(self.work_flag, &self.work_dir, &mut created);
        if result.is_err() {
            remove_created(&created);
        }
        result
    }

    /// Step two: creates the output and work folders, and checks that they
    /// and the database (or, if it does not exist yet, its folder) can be
    /// written. On failure, the folders it created are removed again.
    pub fn prepare(&self) -> Result<(), PathError> {
        let mut created = Vec::new();
        let result = self.prepare_into(&mut created);
        if result.is_err() {
            remove_created(&created);
        }
        result
    }

    fn prepare_into(&self, created: &mut Vec<PathBuf>) -> Result<(), PathError> {
        check_db(&self.db)?;
        make_writable_dir("--out", &self.out, created)?;
        make_writable_dir(self.work_flag, &self.work_dir, created)?;
        Ok(())
    }
}

/// Deepest first, and only folders this process made (still empty).
fn remove_created(created: &[PathBuf]) {
    for dir in created.iter().rev() {
        let _ = std::fs::remove_dir(dir);
    }
}

/// A new folder for batch `batch` under `out`: `batch-N`, or `batch-N.2`,
/// `batch-N.3`, ... when an earlier one exists (another database's, or one
/// left from a deleted database). Created here, so two runs cannot take
/// the same one.
pub fn new_batch_dir(out: &Path, batch: i64) -> std::io::Result<PathBuf> {
    new_dir(out, "batch", batch)
}

/// A new folder for suite `suite` under `out`: `suite-N` (or `suite-N.2`,
/// ...), as [`new_batch_dir`] makes a batch's.
pub fn new_suite_dir(out: &Path, suite: i64) -> std::io::Result<PathBuf> {
    new_dir(out, "suite", suite)
}

fn new_dir(out: &Path, kind: &str, id: i64) -> std::io::Result<PathBuf> {
    for k in 1u32.. {
        let name = if k == 1 {
            format!("{kind}-{id}")
        } else {
            format!("{kind}-{id}.{k}")
        };
        let dir = out.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    unreachable!("some {kind}-N.k is free")
}

fn absolute(flag: &'static str, path: &Path) -> Result<PathBuf, PathError> {
    if path.as_os_str().is_empty() {
        return Err(PathError {
            flag,
            path: path.to_path_buf(),
            why: "empty path".into(),
        });
    }
    std::path::absolute(path).map_err(|e| PathError {
        flag,
        path: path.to_path_buf(),
        why: e.to_string(),
    })
}

/// The database is a regular file, or does not exist yet in a folder that
/// can be written. (Whether an existing file can be written is the store's
/// check: it knows SQLite's answer.)
fn check_db(db: &Db) -> Result<(), PathError> {
    // A server's store is checked by the store, on connecting.
    let Db::Sqlite(db) = db else {
        return Ok(());
    };
    let bad = |why: String| PathError {
        flag: "--db",
        path: db.to_path_buf(),
        why,
    };
    match std::fs::metadata(db) {
        // Opened for writing and closed again, which changes nothing: a
        // database this user cannot write is refused before any work.
        Ok(m) if m.is_file() => {
            return match std::fs::OpenOptions::new().write(true).open(db) {
                Ok(_) => Ok(()),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::PermissionDenied
                            | std::io::ErrorKind::ReadOnlyFilesystem
                    ) =>
                {
                    Err(bad("the database is read-only".into()))
                }
                Err(e) => Err(bad(e.to_string())),
            };
        }
        Ok(_) => return Err(bad("not a regular file".into())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(bad(e.to_string())),
    }
    let parent = db.parent().unwrap_or(Path::new("/"));
    if !parent.is_dir() {
        return Err(bad(format!(
            "cannot create the database: directory {} does not exist",
            parent.display()
        )));
    }
    probe_write(parent).map_err(|e| {
        bad(format!(
            "cannot create the database: directory {} is not writable ({e})",
            parent.display()
        ))
    })
}

/// Creates `dir` (and missing parents, each recorded in `created`) and
/// proves a file can be written in it.
fn make_writable_dir(
    flag: &'static str,
    dir: &Path,
    created: &mut Vec<PathBuf>,
) -> Result<(), PathError> {
    let bad = |why: String| PathError {
        flag,
        path: dir.to_path_buf(),
        why,
    };
    let mut missing = Vec::new();
    let mut at = dir;
    loop {
        match std::fs::metadata(at) {
            Ok(m) if m.is_dir() => break,
            Ok(_) => {
                return Err(bad(if at == dir {
                    "not a folder".into()
                } else {
                    format!("{} is not a folder", at.display())
                }))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => missing.push(at.to_path_buf()),
            // A file on the way up: found (and named) one step further.
            Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {}
            Err(e) => return Err(bad(e.to_string())),
        }
        match at.parent() {
            Some(p) => at = p,
            None => break,
        }
    }
    for d in missing.into_iter().rev() {
        match std::fs::create_dir(&d) {
            Ok(()) => created.push(d),
            // Another assay (a parallel run sharing the folder) made it
            // first: it is there, and not this process's to remove.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && d.is_dir() => {}
            Err(e) => return Err(bad(format!("cannot create {}: {e}", d.display()))),
        }
    }
    probe_write(dir).map_err(|e| bad(format!("cannot write in it: {e}")))
}

/// Writes and removes a temporary file in `dir`: the only sure answer to
/// "can this be written" (permissions, a read-only mount, an immutable
/// folder, `/proc`, root's exceptions).
fn probe_write(dir: &Path) -> std::io::Result<()> {
    let file = tempfile::Builder::new()
        .prefix(".assay-probe-")
        .tempfile_in(dir)?;
    file.close()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_output_folder_is_named_after_the_database() {
        for (db, out) in [
            ("/x/assay.db", "/x/assay-out"),
            ("/x/my.db", "/x/my-out"),
            ("/x/y/data.sqlite", "/x/y/data-out"),
            ("/x/noext", "/x/noext-out"),
        ] {
            assert_eq!(default_out(Path::new(db)), PathBuf::from(out), "{db}");
        }
    }

    #[test]
    fn an_explicit_output_folder_and_work_dir_win() {
        let o = Outputs::resolve(
            &Db::from(Path::new("/d/a.db")),
            Some(Path::new("/o")),
            Some(Path::new("/w")),
        )
        .unwrap();
        assert_eq!(o.out, PathBuf::from("/o"));
        assert_eq!(o.work_dir, PathBuf::from("/w"));
        let o = Outputs::resolve(&Db::from(Path::new("/d/a.db")), None, None).unwrap();
        assert_eq!(o.work_dir, PathBuf::from("/d/a-out/work"));
        // A server's store has no folder: the output folder is here.
        let pg: Db = "postgres://assay@127.0.0.1/runs".parse().unwrap();
        let o = Outputs::resolve(&pg, None, None).unwrap();
        assert_eq!(o.db, pg);
        assert_eq!(o.out, std::env::current_dir().unwrap().join("assay-out"));
    }

    #[test]
    fn batch_folders_are_never_reused() {
        let dir = tempfile::tempdir().unwrap();
        let a = new_batch_dir(dir.path(), 1).unwrap();
        let b = new_batch_dir(dir.path(), 1).unwrap();
        let c = new_batch_dir(dir.path(), 1).unwrap();
        assert_eq!(a, dir.path().join("batch-1"));
        assert_eq!(b, dir.path().join("batch-1.2"));
        assert_eq!(c, dir.path().join("batch-1.3"));
    }

    #[test]
    fn a_file_where_a_folder_belongs_is_refused_and_nothing_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let o = Outputs {
            db: Db::from(dir.path().join("a.db")),
            out: dir.path().join("new/out"),
            work_dir: file.join("work"),
            work_flag: "--work-dir",
        };
        let e = o.prepare().unwrap_err();
        assert_eq!(e.flag, "--work-dir");
        assert!(e.why.contains("is not a folder"), "{e}");
        assert!(
            !dir.path().join("new").exists(),
            "created folders are removed"
        );
        assert!(!dir.path().join("a.db").exists());
    }

    /// Parallel runs sharing one new work directory (the tests' warm one,
    /// lanes on one machine) race to create it: every one succeeds.
    #[test]
    fn many_runs_creating_one_new_folder_at_once_all_succeed() {
        for _ in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let o = Outputs {
                db: Db::from(dir.path().join("a.db")),
                out: dir.path().join("a/b/out"),
                work_dir: dir.path().join("a/b/work"),
                work_flag: "--work-dir",
            };
            let barrier = std::sync::Barrier::new(8);
            std::thread::scope(|s| {
                let runs: Vec<_> = (0..8)
                    .map(|_| {
                        s.spawn(|| {
                            barrier.wait();
                            o.prepare()
                        })
                    })
                    .collect();
                for run in runs {
                    run.join().unwrap().unwrap();
                }
            });
            assert!(o.work_dir.is_dir() && o.out.is_dir());
        }
    }

    #[test]
    fn a_device_is_no_database() {
        let o = Outputs::resolve(
            &Db::from(Path::new("/dev/null")),
            Some(Path::new("/tmp")),
            None,
        )
        .unwrap();
        let e = o.prepare().unwrap_err();
        assert_eq!(e.flag, "--db");
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }
}
