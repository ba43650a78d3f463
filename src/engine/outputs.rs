//! Outputs: where a command that runs batches writes, resolved and checked
//! before anything is written.
//!
//! Three steps, as flags become a configuration: `Outputs::resolve` turns
//! the flags into absolute paths (no IO but asking the toolchain for the
//! default work directory's key), `Outputs::check` proves, writing nothing,
//! that the database, the output folder and the work directory can be
//! made or written, and `prepare_work_dir` / `prepare_out` (or `prepare`,
//! both) create them. A bad path is bad input (exit 2) naming the flag and
//! the path; what a prepare created before it failed is removed again, so
//! a refused run leaves no empty folder and no empty database behind.
//!
//! The default output folder is named after the database (`assay.db` ->
//! `assay-out/` beside it, `my.db` -> `my-out/`), so two databases never
//! share `batch-N` folders; and a batch folder is never reused
//! (`new_batch_dir` takes `batch-N`, else `batch-N.2`, ...). The default
//! work directory is shared by every database: one per toolchain in the
//! user's cache folder (`work_dir`).

use std::path::{Path, PathBuf};

use crate::build::work_dir::{self, WorkDirLock};
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
    pub work: WorkDir,
}

/// Where a command builds: the generated packages and their cargo target
/// directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkDir {
    /// Absolute.
    pub path: PathBuf,
    /// The default one in the user's cache folder (shared by every
    /// database, pruned of other toolchains' folders), not the user's
    /// choice.
    default: bool,
}

/// How a refusal names the default work directory, which the user never
/// typed.
const DEFAULT_WORK: &str = "the default work directory";

/// What a refusal of the default work directory tells the user to do.
const CHOOSE_WORK: &str = "choose another with --work-dir or ASSAY_WORK_DIR";

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
    /// the work directory to the toolchain's in the user's cache folder
    /// ([`WorkDir::resolve`]). No IO besides reading the current directory
    /// and asking the toolchain its name. A PostgreSQL store has no folder:
    /// its output folder defaults to `assay-out` in the current directory.
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
        Ok(Outputs {
            db,
            out,
            work: WorkDir::resolve(work_dir)?,
        })
    }

    /// Step two, writing nothing: the database is a regular file or can be
    /// created, and the output folder and the work directory are folders
    /// that can be written or created. A run checks this before its first
    /// write, so `--out afile` is refused before the task's check builds.
    pub fn check(&self) -> Result<(), PathError> {
        check_db(&self.db)?;
        check_dir("--out", &self.out)?;
        self.work.check()
    }

    /// Step three, for what must build before the batch may write anything
    /// else (the task's check): the work directory ([`WorkDir::prepare`]).
    pub fn prepare_work_dir(&self) -> Result<WorkDirLock, PathError> {
        self.work.prepare()
    }

    /// Step four: creates the output folder and checks that it and the
    /// database (or, if it does not exist yet, its folder) can be written.
    /// On failure, the folders it created are removed again.
    pub fn prepare_out(&self) -> Result<(), PathError> {
        let mut created = Vec::new();
        let result =
            check_db(&self.db).and_then(|()| make_writable_dir("--out", &self.out, &mut created));
        if result.is_err() {
            remove_created(&created);
        }
        result
    }

    /// Steps two to four, for a command with nothing to do between them.
    pub fn prepare(&self) -> Result<WorkDirLock, PathError> {
        self.check()?;
        let lock = self.prepare_work_dir()?;
        self.prepare_out()?;
        Ok(lock)
    }
}

impl WorkDir {
    /// `--work-dir` (or `ASSAY_WORK_DIR`) made absolute, else the current
    /// toolchain's folder under the user's cache folder
    /// (`work_dir::default_root`; one `rustc -vV` names the toolchain).
    pub fn resolve(given: Option<&Path>) -> Result<WorkDir, PathError> {
        if let Some(path) = given {
            return Ok(WorkDir {
                path: absolute("--work-dir", path)?,
                default: false,
            });
        }
        let root = work_dir::default_root().ok_or_else(|| PathError {
            flag: DEFAULT_WORK,
            path: PathBuf::from("~/.cache/assay/work"),
            why: format!("neither XDG_CACHE_HOME nor HOME is set; {CHOOSE_WORK}"),
        })?;
        let key = work_dir::toolchain_key(&root).map_err(|why| PathError {
            flag: DEFAULT_WORK,
            path: root.clone(),
            why: format!("cannot name the toolchain's folder: {why}; {CHOOSE_WORK}"),
        })?;
        Ok(WorkDir {
            path: root.join(key),
            default: true,
        })
    }

    /// The cargo target directory inside it.
    pub fn target_dir(&self) -> PathBuf {
        self.path.join("target")
    }

    /// Writing nothing: it is a folder that can be written, or created.
    pub fn check(&self) -> Result<(), PathError> {
        check_dir(self.flag(), &self.path).map_err(|e| self.explained(e))
    }

    /// Creates it (removing what it created if that fails) and takes the
    /// shared lock that keeps it from being pruned while this process uses
    /// it, held until the returned lock is dropped. The default one's
    /// parent is pruned of other toolchains' folders long unused.
    pub fn prepare(&self) -> Result<WorkDirLock, PathError> {
        let mut created = Vec::new();
        let result = make_writable_dir(self.flag(), &self.path, &mut created)
            .and_then(|()| {
                work_dir::lock(&self.path).map_err(|e| PathError {
                    flag: self.flag(),
                    path: self.path.clone(),
                    why: format!("cannot lock it: {e}"),
                })
            })
            .map_err(|e| self.explained(e));
        if result.is_err() {
            remove_created(&created);
        }
        if let (Ok(_), true, Some(root)) = (&result, self.default, self.path.parent()) {
            work_dir::prune(
                root,
                &self.path,
                work_dir::PRUNE_AFTER,
                std::time::SystemTime::now(),
            );
        }
        result
    }

    /// How a refusal names it: the flag, or the default's own words.
    fn flag(&self) -> &'static str {
        if self.default {
            DEFAULT_WORK
        } else {
            "--work-dir"
        }
    }

    /// A refusal of the default work directory says how to choose another.
    fn explained(&self, mut e: PathError) -> PathError {
        if self.default {
            e.why = format!("{}; {CHOOSE_WORK}", e.why);
        }
        e
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
        // Asked of the kernel, never by opening the file: a run checks
        // this with its store already open, and SQLite's locks are POSIX
        // locks, which a process loses on every close of any descriptor
        // of the file (sqlite.org/howtocorrupt.html, 2.2). Another
        // process's clean close would then take the WAL away under the
        // run. A database this user cannot write is refused before any
        // work.
        Ok(m) if m.is_file() => {
            use rustix::io::Errno;
            return match rustix::fs::access(db, rustix::fs::Access::WRITE_OK) {
                Ok(()) => Ok(()),
                Err(Errno::ACCESS | Errno::PERM | Errno::ROFS) => {
                    Err(bad("the database is read-only".into()))
                }
                Err(e) => Err(bad(std::io::Error::from(e).to_string())),
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

/// For a command that reads: a `--db` path that exists but is no regular
/// file (a folder, a device) is refused in the words a run uses; a
/// missing one is the store's to name.
pub fn check_db_file(db: &Db) -> Result<(), PathError> {
    let Db::Sqlite(path) = db else {
        return Ok(());
    };
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => Err(PathError {
            flag: "--db",
            path: path.clone(),
            why: "not a regular file".into(),
        }),
        _ => Ok(()),
    }
}

/// A file a command will write at its end (`--svg`), checked before the
/// work: its folder exists and takes a new file, and the path is not a
/// folder. Writes nothing that stays.
pub fn check_output_file(flag: &'static str, path: &Path) -> Result<(), PathError> {
    let bad = |why: String| PathError {
        flag,
        path: path.to_path_buf(),
        why,
    };
    if path.is_dir() {
        return Err(bad("is a folder".into()));
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        return Err(bad(format!("folder {} does not exist", parent.display())));
    }
    probe_write(parent).map_err(|e| bad(format!("cannot write in {}: {e}", parent.display())))
}

/// The output folder a stored batch wrote to, from its errors folder
/// (`OUT/batch-N/errors`): a resumed batch keeps its folder.
pub fn out_of_errors_dir(errors_dir: &str) -> Option<PathBuf> {
    Some(Path::new(errors_dir).parent()?.parent()?.to_path_buf())
}

/// Writes a chart (`--svg`) checked by [`check_output_file`] before the
/// work; the error names the file.
pub fn write_chart(path: &Path, svg: &str) -> std::io::Result<()> {
    std::fs::write(path, svg).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("{}: cannot write the chart: {e}", path.display()),
        )
    })
}

/// `dir` is a folder that can be written, or can be created: nothing on
/// its way is a file, and the nearest existing folder takes a new entry.
/// Writes nothing that stays.
fn check_dir(flag: &'static str, dir: &Path) -> Result<(), PathError> {
    let bad = |why: String| PathError {
        flag,
        path: dir.to_path_buf(),
        why,
    };
    for at in dir.ancestors() {
        match std::fs::metadata(at) {
            Ok(m) if m.is_dir() => {
                return probe_write(at).map_err(|e| {
                    bad(if at == dir {
                        format!("cannot write in it: {e}")
                    } else {
                        format!("cannot create it in {}: {e}", at.display())
                    })
                })
            }
            Ok(_) if at == dir => return Err(bad("not a folder".into())),
            Ok(_) => return Err(bad(format!("{} is not a folder", at.display()))),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) => {}
            Err(e) => return Err(bad(e.to_string())),
        }
    }
    Err(bad("no folder above it exists".into()))
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
    fn a_resumed_batch_keeps_its_output_folder() {
        assert_eq!(
            out_of_errors_dir("/data/my-out/batch-3/errors"),
            Some(PathBuf::from("/data/my-out"))
        );
        assert_eq!(out_of_errors_dir("errors"), None);
    }

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
        assert_eq!(o.work.path, PathBuf::from("/w"));
        // The default work directory is no database's: the toolchain's,
        // in the user's cache folder.
        let o = Outputs::resolve(&Db::from(Path::new("/d/a.db")), None, None).unwrap();
        assert_eq!(o.out, PathBuf::from("/d/a-out"));
        assert!(o.work.default);
        let root = work_dir::default_root().unwrap();
        let key = work_dir::toolchain_key(&root).unwrap();
        assert_eq!(o.work.path, root.join(key));
        assert!(o.work.path.parent().unwrap().ends_with("assay/work"));
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
            work: WorkDir {
                path: file.join("work"),
                default: false,
            },
        };
        // Found by the check, before anything is made.
        let e = o.check().unwrap_err();
        assert_eq!(e.flag, "--work-dir");
        assert!(e.why.contains("is not a folder"), "{e}");
        assert!(!dir.path().join("new").exists());
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
                work: WorkDir {
                    path: dir.path().join("a/b/work"),
                    default: false,
                },
            };
            let barrier = std::sync::Barrier::new(8);
            std::thread::scope(|s| {
                let runs: Vec<_> = (0..8)
                    .map(|_| {
                        s.spawn(|| {
                            barrier.wait();
                            o.prepare().map(drop)
                        })
                    })
                    .collect();
                for run in runs {
                    run.join().unwrap().unwrap();
                }
            });
            assert!(o.work.path.is_dir() && o.out.is_dir());
        }
    }

    /// `--out` naming a file is refused as the path the user typed, not
    /// a folder below it.
    #[test]
    fn a_file_given_as_the_output_folder_is_named_as_given() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("afile");
        std::fs::write(&file, "x").unwrap();
        let o = Outputs::resolve(
            &Db::from(dir.path().join("a.db")),
            Some(&file),
            Some(&dir.path().join("w")),
        )
        .unwrap();
        let e = o.check().unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("--out {}: not a folder", file.display())
        );
        assert!(!dir.path().join("w").exists());
    }

    #[test]
    fn a_device_is_no_database() {
        let o = Outputs::resolve(
            &Db::from(Path::new("/dev/null")),
            Some(Path::new("/tmp")),
            Some(Path::new("/tmp")),
        )
        .unwrap();
        let e = o.prepare().unwrap_err();
        assert_eq!(e.flag, "--db");
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }
}
