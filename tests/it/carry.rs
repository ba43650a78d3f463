//! A queued task travels by content (issue 36): a lane runs the task as
//! it was when queued, whatever became of its folder, and an item an
//! older assay queued by path runs where the path exists or fails saying
//! how to queue it again. Real lanes on the PostgreSQL test server, as in
//! `lanes`.

use crate::common;
use crate::common::json;
use crate::common::pg;
use crate::lanes::{lane, ok_json, Running};

use std::path::Path;

use common::Scratch;

/// The digest a task's folder packs to now.
fn digest_of(task: &Path) -> String {
    let spec = assay::spec::Spec::load(task).unwrap();
    assay::queue::carry::pack_task(&spec).unwrap().task.digest
}

#[test]
fn issue_36_a_task_edited_then_deleted_after_queueing_runs_as_queued() {
    let schema = pg::PgSchema::new();
    let db = schema.url.as_str();
    let s = Scratch::new();
    let task = s.tiny_copy();
    let queued_digest = digest_of(&task);
    let queued = ok_json(
        db,
        &["run", &task.display().to_string(), "--queue", "--json"],
    );
    assert!(queued["work_item"].as_i64().is_some(), "{queued}");
    // Queued again: its files are stored once.
    ok_json(
        db,
        &["run", &task.display().to_string(), "--queue", "--json"],
    );

    // `queue --json` shows the digest: the task's content, with no path.
    let items = ok_json(db, &["queue", "--json"]);
    let item = &items[0]["item"];
    assert_eq!(item["task"]["digest"], queued_digest.as_str(), "{item:#}");
    assert_eq!(items[1]["item"]["task"]["digest"], queued_digest.as_str());
    assert!(item.get("spec").is_none(), "{item:#}");
    let text = item.to_string();
    assert!(!text.contains(&s.path().display().to_string()), "{item:#}");
    let mut blobs: Vec<&str> = item["task"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["blob"].as_str().unwrap())
        .collect();
    assert!(blobs.len() >= 6, "{item:#}");
    blobs.sort_unstable();
    blobs.dedup();
    assert_eq!(
        schema.value("SELECT COUNT(*) FROM blobs"),
        blobs.len().to_string()
    );

    // Edited after queueing: every case's answer wrong, the committed
    // candidate broken, the replies gone.
    let cases = std::fs::read_to_string(task.join("cases.jsonl")).unwrap();
    std::fs::write(
        task.join("cases.jsonl"),
        cases.replace("\"expected\": ", "\"expected\": 1"),
    )
    .unwrap();
    std::fs::write(task.join("committed.rs"), "pub fn double(").unwrap();
    std::fs::write(task.join("replies.jsonl"), "").unwrap();
    assert_ne!(
        blake3::hash(std::fs::read(task.join("committed.rs")).unwrap().as_slice()),
        blake3::hash(
            std::fs::read(common::repo().join("tests/fixtures/tiny/committed.rs"))
                .unwrap()
                .as_slice()
        )
    );
    // And then deleted.
    std::fs::remove_dir_all(&task).unwrap();

    let out = Scratch::new();
    assert!(Running(lane(db, "carry", &out, None)).wait().success());
    let items = ok_json(db, &["queue", "--json"]);
    let local = Scratch::new();
    let want = json::batch_verdicts(
        local.json(&["run", &common::tiny(), "--json"]),
        local.path(),
    );
    assert!(want.0.to_string().contains("scored(10/10)"), "{want:?}");
    for w in items.as_array().unwrap() {
        assert_eq!(w["state"], "done", "{w:#}");
        let id = w["batch_id"].as_i64().unwrap().to_string();
        let shown = ok_json(db, &["show", &id, "--json"]);
        assert_eq!(shown["status"], "finished", "{shown:#}");
        assert_eq!(json::batch_verdicts(shown, out.path()), want, "batch {id}");
    }
}

/// Items as an assay before migration 0018 queued them: the task and the
/// pools file by path. One names a task this lane sees: it runs. One
/// names a folder of the queueing machine: it fails, saying how to queue
/// it again, on one line.
#[test]
fn issue_36_an_item_queued_by_path_runs_where_the_path_is_or_says_to_queue_it_again() {
    let schema = pg::PgSchema::new();
    let db = schema.url.as_str();
    let s = Scratch::new();
    let task = s.tiny_copy();
    let gone = "/queueing-machine/specs/tiny/spec.toml";
    // The schema made, by a command that opens the store.
    assert_eq!(ok_json(db, &["queue", "--json"]), serde_json::json!([]));
    for spec in [&task.join("spec.toml").display().to_string(), gone] {
        let item = serde_json::json!({
            "kind": "batch",
            "spec": spec,
            "n": 6,
            "probe": "shared",
            "wave_size": 16,
            "wave_wait": 1.5,
            "build_timeout": 600.0,
            "draw": {"pools": [], "split": null, "max_in_flight": null, "max_completion_tokens": null}
        });
        schema.value(&format!(
            "INSERT INTO work_items (kind, item, state, queued_at)
             VALUES ('batch', '{item}', 'queued', '2026-12-01T00:00:00.000Z')"
        ));
    }
    let out = Scratch::new();
    assert!(Running(lane(db, "older", &out, None)).wait().success());
    let items = ok_json(db, &["queue", "--json"]);
    let items = items.as_array().unwrap();
    assert_eq!(items[0]["state"], "done", "{:#}", items[0]);
    let id = items[0]["batch_id"].as_i64().unwrap().to_string();
    let shown = ok_json(db, &["show", &id, "--json"]);
    let local = Scratch::new();
    let want = json::batch_verdicts(
        local.json(&["run", &common::tiny(), "--json"]),
        local.path(),
    );
    assert_eq!(json::batch_verdicts(shown, out.path()), want);

    assert_eq!(items[1]["state"], "failed", "{:#}", items[1]);
    let why = items[1]["failure"].as_str().unwrap();
    assert_eq!(
        why,
        format!(
            "{gone}: queued by an older assay as a path on the queueing machine, which this \
             lane cannot read: queue it again with this assay (`assay run TASK --queue`)"
        )
    );
    assert!(items[1]["batch_id"].is_null(), "nothing began");
    let table = crate::lanes::ok_text(db, &["queue"]);
    assert!(
        table.contains(&format!("batch {gone} (by path) -n 6")),
        "{table}"
    );
}
