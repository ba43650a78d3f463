//! The schema's migrations, embedded in the binary as `sqlx::migrate!`
//! would embed them: each file's version and description from its name,
//! its SQL as written, its checksum sqlx's own (`Migration::new`, SHA-384
//! of the SQL), so a database migrated by an assay built with the macro
//! opens unchanged. Built without sqlx's macros: their proc-macro crate
//! compiles a second copy of sqlx, tokio and SQLite into every cold build
//! (126 of its 481 units).

use std::borrow::Cow;

use sqlx::migrate::{Migration, MigrationType, Migrator};

/// One list of files for both backends: a migration is written for each.
macro_rules! migrations {
    ($($file:literal),* $(,)?) => {
        const SQLITE: &[(&str, &str)] =
            &[$(($file, include_str!(concat!("../../migrations/sqlite/", $file)))),*];
        const POSTGRES: &[(&str, &str)] =
            &[$(($file, include_str!(concat!("../../migrations/postgres/", $file)))),*];
    };
}

migrations!(
    "0001_init.sql",
    "0002_draw.sql",
    "0003_probe.sql",
    "0004_score.sql",
    "0005_resume.sql",
    "0006_probe_toolchain.sql",
    "0007_cached_tokens.sql",
    "0008_suites.sql",
    "0009_queue.sql",
    "0010_phase_order.sql",
    "0011_work_items.sql",
    "0012_suite_refused.sql",
    "0013_repair.sql",
    "0014_suite_repair.sql",
    "0015_suite_diagnostics.sql",
    "0016_draw_source.sql",
    "0017_suite_edition.sql",
    "0018_blobs.sql",
);

/// The SQLite schema's migrations, in order.
pub(crate) fn sqlite() -> Migrator {
    migrator(SQLITE)
}

/// The PostgreSQL schema's migrations, in order.
pub(crate) fn postgres() -> Migrator {
    migrator(POSTGRES)
}

fn migrator(files: &[(&'static str, &'static str)]) -> Migrator {
    Migrator {
        migrations: Cow::Owned(
            files
                .iter()
                .map(|&(name, sql)| migration(name, sql))
                .collect(),
        ),
        ..Migrator::DEFAULT
    }
}

/// The migrations of `all` before `version`: a schema as an older assay
/// left it, for the tests of what a migration does to its rows.
#[cfg(test)]
pub(crate) fn before(all: Migrator, version: i64) -> Migrator {
    Migrator {
        migrations: Cow::Owned(
            all.iter()
                .filter(|m| m.version < version)
                .cloned()
                .collect(),
        ),
        ..all
    }
}

/// What `sqlx::migrate::resolve_blocking` makes of the file `name`:
/// `0007_cached_tokens.sql` is version 7, "cached tokens".
fn migration(name: &str, sql: &'static str) -> Migration {
    let (version, rest) = name
        .split_once('_')
        .expect("a migration's name is VERSION_DESCRIPTION.sql");
    let version = version.parse().expect("a migration's version is a number");
    let kind = MigrationType::from_filename(rest);
    let description = rest.trim_end_matches(kind.suffix()).replace('_', " ");
    let no_tx = sql.starts_with("-- no-transaction");
    Migration::new(
        version,
        Cow::Owned(description),
        kind,
        Cow::Borrowed(sql),
        no_tx,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of both folders is embedded, and nothing else.
    #[test]
    fn every_migration_file_is_embedded() {
        for (dir, embedded) in [("sqlite", SQLITE), ("postgres", POSTGRES)] {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("migrations")
                .join(dir);
            let mut files: Vec<String> = std::fs::read_dir(&path)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            files.sort();
            let names: Vec<&str> = embedded.iter().map(|(name, _)| *name).collect();
            assert_eq!(names, files, "{}", path.display());
        }
    }

    /// Each released migration's version, description and the first 16
    /// hex digits of its checksum on SQLite and on PostgreSQL, as the
    /// assay built with `sqlx::migrate!` stored them (read from a database
    /// and a schema it migrated: `SELECT version, description,
    /// hex(checksum) FROM _sqlx_migrations`): a released migration never
    /// changes, and its checksum stays the one sqlx computes.
    const RELEASED: [(i64, &str, &str, &str); 18] = [
        (1, "init", "1f57f22c0abd3caa", "def592e1613a1ec9"),
        (2, "draw", "a0454007987e9600", "ad7e905e02a5b30b"),
        (3, "probe", "a56536b8f495f85a", "f361c1df1f55ad76"),
        (4, "score", "d9662d8e7be66ed4", "584aec8875ee0c2d"),
        (5, "resume", "31fabfffd593e9e9", "c1a7115b85670202"),
        (6, "probe toolchain", "06899f9c31783e9e", "496e05ea2a5146a5"),
        (7, "cached tokens", "de4ac041a7dd4d58", "9d01c77a3f7417dc"),
        (8, "suites", "c9bf50db7b07be42", "b33afd3e5c753068"),
        (9, "queue", "971ffce0f74e9cc4", "62faa871dcbf678a"),
        (10, "phase order", "66b0367d42b10b17", "ce396b4bee76c63a"),
        (11, "work items", "95517a39b57b071e", "ecbf5964976a9640"),
        (12, "suite refused", "e8abffd0e49e6cfd", "e8abffd0e49e6cfd"),
        (13, "repair", "3493aeeb4755a825", "42659f7dc49140ec"),
        (14, "suite repair", "f03ec669078bbe12", "2ec4115d98689798"),
        (
            15,
            "suite diagnostics",
            "edcd1d63a9b95e60",
            "edcd1d63a9b95e60",
        ),
        (16, "draw source", "ed26d670dcbedd0a", "ed26d670dcbedd0a"),
        (17, "suite edition", "5322d6bb7eb347ca", "5322d6bb7eb347ca"),
        (18, "blobs", "4c5bc19260a3b32d", "303d2272a5fe2b26"),
    ];

    #[test]
    fn released_migrations_keep_their_versions_names_and_checksums() {
        let hex = |m: &Migration| -> String {
            m.checksum[..8].iter().map(|b| format!("{b:02x}")).collect()
        };
        let (sqlite, postgres) = (super::sqlite(), super::postgres());
        assert_eq!(sqlite.iter().count(), RELEASED.len());
        for ((s, p), (version, description, s_sum, p_sum)) in
            sqlite.iter().zip(postgres.iter()).zip(RELEASED)
        {
            for m in [s, p] {
                assert_eq!((m.version, &*m.description), (version, description));
                assert_eq!(m.migration_type, MigrationType::Simple);
                assert!(!m.no_tx);
            }
            assert_eq!(
                (hex(s), hex(p)),
                (s_sum.to_owned(), p_sum.to_owned()),
                "{version}"
            );
        }
    }
}
