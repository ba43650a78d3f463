//! Schema versioning: a database made by the first schema is migrated
//! forward on open and keeps everything it had.
//!
//! tests/fixtures/schema1.db was written by the walking skeleton's own
//! binary (schema 1, commit 5497100) running tests/fixtures/tiny: batch 1
//! finished; batch 2 (`-n 4`) SIGKILLed after its candidates were stored,
//! so it was left `running` with no owner record.

use crate::common;

use common::{repo, tiny, Scratch};

fn with_schema1_db() -> Scratch {
    let scratch = Scratch::new();
    std::fs::copy(repo().join("tests/fixtures/schema1.db"), scratch.db()).unwrap();
    scratch
}

#[test]
fn a_schema1_database_is_migrated_forward_and_keeps_its_batches() {
    let scratch = with_schema1_db();
    let versions: Vec<i64> = scratch.sql(async |db| {
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations ORDER BY version")
            .fetch_all(db)
            .await
            .unwrap()
    });
    assert_eq!(versions, [1], "the fixture is a schema-1 database");

    let listed = scratch.json(&["batches", "--json"]);
    assert_eq!(listed[0]["status"], "finished");
    // Left running by a process that knew no owners: taken as interrupted.
    assert_eq!(listed[1]["status"], "interrupted");
    assert!(
        listed[1]["failure"]
            .as_str()
            .unwrap()
            .contains("left running by an older assay"),
        "{listed}"
    );
    let (versions, integrity): (Vec<i64>, String) = scratch.sql(async |db| {
        let v = sqlx::query_scalar("SELECT version FROM _sqlx_migrations ORDER BY version")
            .fetch_all(db)
            .await
            .unwrap();
        let i = sqlx::query_scalar("PRAGMA integrity_check")
            .fetch_one(db)
            .await
            .unwrap();
        (v, i)
    });
    assert_eq!(versions.first(), Some(&1));
    assert!(versions.contains(&5), "{versions:?}");
    assert!(versions.contains(&6), "{versions:?}");
    assert_eq!(integrity, "ok");

    // The finished batch reads back as the tiny corpus's expected verdicts.
    let shown = scratch.json(&["show", "1", "--json"]);
    let expected: Vec<serde_json::Value> =
        std::fs::read_to_string(repo().join("tests/fixtures/tiny/expected.jsonl"))
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    let candidates = shown["candidates"].as_array().unwrap();
    assert_eq!(candidates.len(), expected.len());
    for (got, want) in candidates.iter().zip(&expected) {
        for field in ["extract", "dup_of", "probe", "score"] {
            assert_eq!(
                got[field], want[field],
                "candidate {}: {field}",
                want["idx"]
            );
        }
    }
    assert_eq!(shown["resumes"], serde_json::json!([]));
}

#[test]
fn a_batch_killed_under_schema1_is_resumed_under_the_current_one() {
    let scratch = with_schema1_db();
    // The old batch stored its spec path relative to where it ran; name it.
    // Its outputs were under a directory of the machine that made the
    // fixture; put this attempt's in the scratch directory.
    let out = scratch.path().join("assay-out").display().to_string();
    let summary = scratch.json(&["run", &tiny(), "--resume", "2", "--out", &out, "--json"]);
    assert_eq!(summary["status"], "finished");
    assert_eq!(summary["replies"], 4);
    assert_eq!(summary["resumes"][0]["replies_kept"], 4);
    assert_eq!(summary["resumes"][0]["extracted_kept"], 4);

    // Its four candidates come out as the first four of the tiny corpus.
    let expected: Vec<serde_json::Value> =
        std::fs::read_to_string(repo().join("tests/fixtures/tiny/expected.jsonl"))
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    let shown = scratch.json(&["show", "2", "--json"]);
    for (got, want) in shown["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .zip(&expected)
    {
        for field in ["extract", "dup_of", "probe", "score"] {
            assert_eq!(
                got[field], want[field],
                "candidate {}: {field}",
                want["idx"]
            );
        }
    }
    let replies: Vec<(i64, i64)> = scratch.sql(async |db| {
        sqlx::query_as("SELECT idx, COUNT(*) FROM replies WHERE batch_id = 2 GROUP BY idx")
            .fetch_all(db)
            .await
            .unwrap()
    });
    assert_eq!(replies, [(0, 1), (1, 1), (2, 1), (3, 1)]);
}

/// Migration 0006: a probe run stored before it has no toolchain and no
/// retries (NULL, shown as unknown), and a batch run after it on the same
/// database records both.
#[test]
fn old_probe_runs_have_no_toolchain_and_new_ones_do() {
    let scratch = with_schema1_db();
    let shown = scratch.json(&["show", "1", "--json"]);
    let old = &shown["probe_run"];
    assert_eq!(old["origin"], "batch", "{shown}");
    assert_eq!(old["rustc_version"], serde_json::Value::Null, "{old}");
    assert_eq!(old["cargo_version"], serde_json::Value::Null, "{old}");
    assert_eq!(old["retries"], serde_json::Value::Null, "{old}");
    let text = scratch.assay_ok(&["show", "1"]);
    assert!(text.lines().any(|l| l == "toolchain: unknown"), "{text}");

    let out = scratch.path().join("assay-out").display().to_string();
    let summary = scratch.json(&["run", &tiny(), "--out", &out, "--json"]);
    let new = &summary["probe_run"];
    assert!(
        new["rustc_version"].as_str().unwrap().starts_with("rustc "),
        "{new}"
    );
    assert!(
        new["cargo_version"].as_str().unwrap().starts_with("cargo "),
        "{new}"
    );
    assert_eq!(new["retries"], serde_json::json!([]), "{new}");
    let nulls: Vec<(i64, bool)> = scratch.sql(async |db| {
        sqlx::query_as("SELECT batch_id, rustc_version IS NULL FROM probe_runs ORDER BY id")
            .fetch_all(db)
            .await
            .unwrap()
    });
    let new_batch = summary["batch_id"].as_i64().unwrap();
    for (batch, null) in nulls {
        assert_eq!(null, batch != new_batch, "batch {batch}");
    }
}
