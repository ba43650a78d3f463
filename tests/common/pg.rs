//! A PostgreSQL store for tests: a schema of its own on the machine's test
//! server, which `scripts/pg-test-server` starts (or `ASSAY_TEST_PG` names).
//! A test that needs it fails when there is none: it never skips. (Also
//! compiled into the library's tests, for the store's.)

#![allow(dead_code)]

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The server's URL (its `postgres` database), started once per process.
pub fn server() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("ASSAY_TEST_PG") {
            return url;
        }
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/pg-test-server");
        let out = Command::new(script)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {script}: {e}"));
        assert!(
            out.status.success(),
            "{script} failed (the store's tests need PostgreSQL):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    })
}

/// A schema made for one test, dropped with it.
pub struct PgSchema {
    name: String,
    /// The store's address: the server, with this schema first on the
    /// search path.
    pub url: String,
}

impl PgSchema {
    /// The schema's name, for tools that take one (`pg_dump --schema`).
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn new() -> PgSchema {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "t_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        psql(&format!(
            "DROP SCHEMA IF EXISTS {name} CASCADE; CREATE SCHEMA {name}"
        ));
        let url = format!("{}?options[search_path]={name}", server());
        PgSchema { name, url }
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        psql(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name));
    }
}

impl PgSchema {
    /// The one value `sql` selects in this schema, as psql prints it.
    pub fn value(&self, sql: &str) -> String {
        psql(&format!("SET search_path TO {}; {sql}", self.name))
            .trim()
            .to_owned()
    }
}

/// Runs `sql` on the server; returns what it printed, unaligned and bare.
fn psql(sql: &str) -> String {
    let out = Command::new("psql")
        .args([
            "-X",
            "-q",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            server(),
            "-c",
            sql,
        ])
        .output()
        .expect("psql runs");
    assert!(
        out.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
