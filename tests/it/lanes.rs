//! Lanes draining a shared PostgreSQL queue (issue 18), as separate
//! processes of the real binary on this machine, each with its own output
//! folder: one is SIGKILLed in the middle of an item; its lease runs out,
//! another lane resumes the item, and every batch ends as a run on one
//! machine ends, with nothing done twice.

use crate::common;
use crate::common::json;
use crate::common::llama;
use crate::common::pg;

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{shared_work_dir, tiny, Scratch};
use serde_json::Value;

fn assay(db: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_assay"))
        .args(args)
        .env("ASSAY_DB", db)
        .env_remove("ASSAY_TEST_POINT")
        .env_remove("RUST_LOG")
        .output()
        .expect("assay starts")
}

pub(crate) fn ok_json(db: &str, args: &[&str]) -> Value {
    let out = assay(db, args);
    assert!(
        out.status.success(),
        "assay {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

pub(crate) fn ok_text(db: &str, args: &[&str]) -> String {
    let out = assay(db, args);
    assert!(out.status.success(), "assay {args:?}");
    String::from_utf8(out.stdout).unwrap()
}

const SECRET: &str = "lane-secret-5b1e9c";

pub(crate) fn lane(db: &str, name: &str, out: &Scratch, test_point: Option<&str>) -> Child {
    lane_command(db, name, out, test_point)
        .spawn()
        .expect("lane starts")
}

/// A lane as `lane` starts it, for a test to add to.
fn lane_command(db: &str, name: &str, out: &Scratch, test_point: Option<&str>) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_assay"));
    cmd.args(["lane", "--lane", name, "--until-empty", "--lease", "3"])
        .arg("--out")
        .arg(out.path())
        .arg("--work-dir")
        .arg(shared_work_dir())
        .env("ASSAY_DB", db)
        // A password as a lane would have one (the test server trusts
        // loopback and ignores it): it must reach no file and no row.
        .env("PGPASSWORD", SECRET)
        // And a model key, each lane's own, for a live draw.
        .env("NEV_MODEL_API_KEY", SECRET)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    match test_point {
        Some(point) => cmd.env("ASSAY_TEST_POINT", point),
        None => cmd.env_remove("ASSAY_TEST_POINT"),
    };
    cmd
}

/// A lane that is killed if the test ends before it does.
pub(crate) struct Running(pub(crate) Child);

impl Running {
    pub(crate) fn wait(mut self) -> std::process::ExitStatus {
        self.0.wait().unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Polls the queue until `ready` holds for it (a lane's progress is seen
/// only through the store).
fn wait_for_queue(db: &str, what: &str, ready: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let items = ok_json(db, &["queue", "--json"]);
        let items = items.as_array().unwrap().clone();
        if ready(&items) {
            return items;
        }
        assert!(
            start.elapsed() < Duration::from_secs(900),
            "never {what}: {items:#?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Processes whose command line names work item `item` of the store `db`
/// (other tests' stores have an item 1 too), leaving out a run's own
/// children forked from it that have not exec'd yet (the image placer's
/// copying child, a spawn in progress): they carry their parent's command
/// line.
fn runs_of_item(db: &str, item: i64) -> Vec<i32> {
    let (item, db) = (format!("--work-item\0{item}\0"), format!("--db\0{db}\0"));
    let names_item = |pid: i32| {
        std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
            let c = String::from_utf8_lossy(&c);
            c.contains(&item) && c.contains(&db)
        })
    };
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| names_item(pid) && !parent_of(pid).is_some_and(names_item))
        .collect()
}

/// A process's parent, from `/proc/PID/stat` (the field after the command,
/// which is in parentheses and may hold spaces).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_comm = &stat[stat.rfind(')')? + 1..];
    after_comm.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn lanes_drain_a_queue_and_a_killed_lane_s_item_is_resumed_not_redone() {
    let schema = pg::PgSchema::new();
    let db = schema.url.as_str();
    for _ in 0..3 {
        let queued = ok_json(db, &["run", &tiny(), "--queue", "--json"]);
        assert!(queued["work_item"].as_i64().is_some(), "{queued}");
    }

    // Lane a stops every run it starts once the scorer is built (after the
    // probe's verdicts are stored), and is killed there.
    let a_out = Scratch::new();
    let mut a = lane(db, "a", &a_out, Some("pause@score.built"));
    let items = wait_for_queue(db, "item 1 began a batch on lane a", |items| {
        items[0]["state"] == "running" && items[0]["batch_id"].is_i64()
    });
    assert_eq!(items[0]["lane"], "a");
    let batch = items[0]["batch_id"].as_i64().unwrap();
    let start = Instant::now();
    while ok_json(db, &["show", &batch.to_string(), "--json"])["probe_run"].is_null() {
        assert!(start.elapsed() < Duration::from_secs(900), "never probed");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(runs_of_item(db, 1).len(), 1, "lane a runs item 1");
    a.kill().unwrap();
    a.wait().unwrap();
    // Its run dies with it.
    let start = Instant::now();
    while !runs_of_item(db, 1).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "a killed lane's run still runs"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    wait_for_queue(db, "item 1's lease ran out", |items| {
        items[0]["lease_expired"] == true
    });

    // Two more lanes take the rest, item 1 included.
    let (b_out, c_out) = (Scratch::new(), Scratch::new());
    let lanes = [lane(db, "b", &b_out, None), lane(db, "c", &c_out, None)];
    for mut l in lanes {
        assert!(l.wait().unwrap().success());
    }

    let items = ok_json(db, &["queue", "--json"]);
    let items = items.as_array().unwrap();
    assert_eq!(items.len(), 3);
    for w in items {
        assert_eq!(w["state"], "done", "{w:#}");
        assert_ne!(w["lane"], "a", "{w:#}");
    }
    assert_eq!(items[0]["claims"], 2, "item 1 was claimed twice");
    assert_eq!(
        items[0]["batch_id"], batch,
        "item 1 was resumed, not begun again"
    );
    assert!(items[1..].iter().all(|w| w["claims"] == 1));

    // Three batches for three items, each as a run on one machine gives.
    let batches = ok_json(db, &["batches", "--json"]);
    assert_eq!(batches.as_array().unwrap().len(), 3, "{batches:#}");
    let local = Scratch::new();
    let reference = local.json(&["run", &tiny(), "--json"]);
    let want = json::batch_verdicts(reference, local.path());
    assert!(want.0.to_string().contains("scored(10/10)"), "{want:?}");
    for w in items {
        let id = w["batch_id"].as_i64().unwrap().to_string();
        let shown = ok_json(db, &["show", &id, "--json"]);
        assert_eq!(shown["status"], "finished", "{shown:#}");
        let ran_on = if id == batch.to_string() {
            "a"
        } else {
            w["lane"].as_str().unwrap()
        };
        assert_eq!(shown["lane"], ran_on, "the lane that began batch {id}");
        let out = if w["lane"] == "b" { &b_out } else { &c_out };
        assert_eq!(json::batch_verdicts(shown, out.path()), want, "batch {id}");
    }
    // The resume kept what lane a had stored: the replies and the probe.
    let resumed = ok_json(db, &["show", &batch.to_string(), "--json"]);
    let resumes = resumed["resumes"]
        .as_array()
        .expect("a resumed batch lists its resumes");
    assert_eq!(resumes.len(), 1, "{resumed:#}");
    assert_eq!(resumes[0]["replies_kept"], 6, "{resumed:#}");
    assert!(
        resumes[0]["probed_kept"].as_u64().unwrap() > 0,
        "{resumed:#}"
    );

    // The lanes' password is in no output file and no stored row.
    for out in [&a_out, &b_out, &c_out] {
        assert_no_secret(out.path());
    }
    let dump = Command::new("pg_dump")
        .args(["-d", pg::server(), "--schema", schema.name(), "--data-only"])
        .output()
        .expect("pg_dump runs");
    assert!(
        dump.status.success(),
        "{}",
        String::from_utf8_lossy(&dump.stderr)
    );
    assert!(dump.stdout.len() > 1000, "the dump holds the batches");
    assert!(!String::from_utf8_lossy(&dump.stdout).contains(SECRET));
}

fn assert_no_secret(dir: &std::path::Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            assert_no_secret(&path);
        } else if let Ok(bytes) = std::fs::read(&path) {
            assert!(
                !String::from_utf8_lossy(&bytes).contains(SECRET),
                "{} holds the password",
                path.display()
            );
        }
    }
}

/// A server of this test's own (scripts/pg-test-server in another folder),
/// which the test stops and starts again; removed at the end.
struct OwnServer {
    dir: std::path::PathBuf,
    url: String,
}

impl OwnServer {
    fn start(dir: &std::path::Path) -> String {
        let out = Command::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/pg-test-server"
        ))
        .env("ASSAY_PG_DIR", dir)
        .output()
        .expect("the script runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    fn new() -> OwnServer {
        let dir = std::env::temp_dir().join(format!("assay-pg-fault-{}", std::process::id()));
        let url = OwnServer::start(&dir);
        OwnServer { dir, url }
    }

    fn stop(&self) {
        let out = Command::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/pg-test-server"
        ))
        .arg("stop")
        .env("ASSAY_PG_DIR", &self.dir)
        .output()
        .expect("the script runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        self.stop();
        for path in [
            self.dir.clone(),
            self.dir.with_extension("lock"),
            self.dir.with_extension("log"),
        ] {
            let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
        }
    }
}

#[test]
fn a_lane_outlives_its_store_going_away_and_nothing_is_lost_or_doubled() {
    let server = OwnServer::new();
    let db = server.url.as_str();
    for _ in 0..2 {
        ok_json(db, &["run", &tiny(), "--queue", "--json"]);
    }
    let out = Scratch::new();
    let mut lane = lane(db, "solo", &out, None);
    wait_for_queue(db, "item 1 began a batch", |items| {
        items[0]["batch_id"].is_i64()
    });
    // The store goes away while the lane works, for longer than a lease,
    // and comes back on the same address.
    server.stop();
    std::thread::sleep(Duration::from_secs(5));
    assert!(lane.try_wait().unwrap().is_none(), "the lane gave up");
    OwnServer::start(&server.dir);
    assert!(lane.wait().unwrap().success());

    let items = ok_json(db, &["queue", "--json"]);
    let items = items.as_array().unwrap();
    assert!(items.iter().all(|w| w["state"] == "done"), "{items:#?}");
    let batches = ok_json(db, &["batches", "--json"]);
    assert_eq!(batches.as_array().unwrap().len(), 2, "{batches:#}");
    let local = Scratch::new();
    let want = json::comparable(local.json(&["run", &tiny(), "--json"]), local.path());
    for w in items {
        let id = w["batch_id"].as_i64().unwrap().to_string();
        let shown = json::comparable(ok_json(db, &["show", &id, "--json"]), out.path());
        assert_eq!(shown["status"], "finished");
        assert_eq!(shown["candidates"], want["candidates"], "batch {id}");
    }
}

#[test]
fn three_lanes_share_a_queued_suite_and_a_killed_lane_s_part_is_resumed() {
    let schema = pg::PgSchema::new();
    let db = schema.url.as_str();
    let fixture = common::FixtureSuite::new();
    let queued = ok_json(db, &fixture.run(&["--queue", "--chunk", "4", "--json"]));
    let suite = queued["suite_id"].as_i64().unwrap().to_string();
    let parts = queued["work_items"].as_array().unwrap().len();
    assert!(parts >= 3, "{queued}");

    // Lane a stops its first part once an outcome is stored, and is killed
    // there; lanes b and c start beside it and drain the rest.
    let outs = [Scratch::new(), Scratch::new(), Scratch::new()];
    let mut a = lane(db, "a", &outs[0], Some("pause@suite.outcome"));
    wait_for_queue(db, "lane a took a part", |items| {
        items
            .iter()
            .any(|w| w["lane"] == "a" && w["state"] == "running")
    });
    let others = [lane(db, "b", &outs[1], None), lane(db, "c", &outs[2], None)];
    // Lane a's part has an outcome stored when lane a is killed.
    let start = Instant::now();
    loop {
        let shown = ok_json(db, &["suite", "show", &suite, "--json"]);
        let ran = shown["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["compiled"].as_u64().unwrap_or(0) > 0);
        if ran {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(900),
            "nothing ran: {shown:#}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let a_item = ok_json(db, &["queue", "--json"])
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["lane"] == "a")
        .map(|w| w["id"].as_i64().unwrap())
        .expect("lane a holds a part");
    a.kill().unwrap();
    a.wait().unwrap();
    for mut l in others {
        assert!(l.wait().unwrap().success());
    }

    let items = ok_json(db, &["queue", "--json"]);
    let items = items.as_array().unwrap();
    assert_eq!(items.len(), parts);
    for w in items {
        assert_eq!(w["state"], "done", "{w:#}");
        let claims = if w["id"] == a_item { 2 } else { 1 };
        assert_eq!(w["claims"], claims, "{w:#}");
    }
    // One outcome stored per completion (the table's key refuses a
    // second): none missing after the killed lane's part was taken over.
    let outcomes_and_replies = schema.value(&format!(
        "SELECT (SELECT COUNT(*) FROM suite_outcomes o JOIN suite_problems p USING (batch_id)
                  WHERE p.suite_id = {suite})
             || ' ' ||
                (SELECT COUNT(*) FROM replies r JOIN suite_problems p USING (batch_id)
                  WHERE p.suite_id = {suite})"
    ));
    let (outcomes, replies) = outcomes_and_replies.split_once(' ').unwrap();
    assert_eq!(outcomes, replies, "outcomes stored against completions");
    assert!(replies.parse::<u32>().unwrap() > 20, "{replies}");
    // The suite, run over three lanes, is what one machine makes of it.
    let local = Scratch::new();
    let want = json::comparable(local.json(&fixture.run(&["--json"])), local.path());
    let shown = ok_json(db, &["suite", "show", &suite, "--json"]);
    // The lanes that ran its parts: lane a's part was taken over, so its
    // batches name the lane that finished them.
    let lanes = shown["lanes"].as_array().unwrap();
    assert!(!lanes.is_empty(), "{shown:#}");
    assert!(lanes.iter().all(|l| l == "b" || l == "c"), "{lanes:?}");
    assert!(ok_text(db, &["suite", "show", &suite]).contains("lanes: "));
    let got = json::comparable(shown, outs[1].path());
    for key in [
        "problems",
        "pass_at_1",
        "pass_at_k",
        "completions",
        "status",
    ] {
        assert_eq!(got[key], want[key], "{key}");
    }
    assert!(
        want["problems"].to_string().contains("SyntaxError"),
        "{want}"
    );
}

/// A suite drawn live is queued too: each lane draws its parts'
/// completions from the pool (a real llama.cpp server, forced to answer
/// `x + 1`) with its own key, and runs them; no item carries the key.
#[test]
fn lanes_draw_and_run_a_queued_live_suite() {
    let server = llama::shared();
    let schema = pg::PgSchema::new();
    let db = schema.url.as_str();
    let s = Scratch::new();
    let problems = s.write("problems.jsonl", llama::LIVE_PROBLEMS);
    let pools = s.write(
        "pools.toml",
        &llama::forced_pool(&server.url(), "    x + 1\n}\n"),
    );
    let (problems, pools) = (problems.display().to_string(), pools.display().to_string());
    let queued = ok_json(
        db,
        &[
            "suite",
            "run",
            &problems,
            "--pool",
            "tiny",
            "-n",
            "2",
            "--mode",
            "completion",
            "--pools",
            &pools,
            "--queue",
            "--chunk",
            "1",
            "--json",
        ],
    );
    let suite = queued["suite_id"].as_i64().unwrap().to_string();
    assert_eq!(
        queued["work_items"].as_array().unwrap().len(),
        2,
        "{queued}"
    );
    // The pools file travels as its text (issue 36), never as a path.
    let items = ok_json(db, &["queue", "--json"]);
    let text = std::fs::read_to_string(&pools).unwrap();
    for w in items.as_array().unwrap() {
        assert_eq!(w["item"]["pools"]["text"], text.as_str(), "{w:#}");
    }
    assert!(!items.to_string().contains(&pools), "{items:#}");

    let outs = [Scratch::new(), Scratch::new()];
    let lanes = [lane(db, "a", &outs[0], None), lane(db, "b", &outs[1], None)];
    for mut l in lanes {
        assert!(l.wait().unwrap().success());
    }
    let shown = ok_json(db, &["suite", "show", &suite, "--json"]);
    assert_eq!(shown["status"], "finished", "{shown:#}");
    assert_eq!(
        (shown["origin"].as_str(), shown["source"].as_str()),
        (Some("pool"), Some("tiny"))
    );
    assert_eq!(
        json::statuses(&shown),
        [["OK", "OK"], ["Exception", "Exception"]]
    );
    let lanes = shown["lanes"].as_array().unwrap();
    assert!(
        !lanes.is_empty() && lanes.iter().all(|l| l == "a" || l == "b"),
        "{lanes:?}"
    );
    let items = ok_json(db, &["queue", "--json"]);
    for w in items.as_array().unwrap() {
        assert_eq!(
            (w["state"].as_str(), w["claims"].as_i64()),
            (Some("done"), Some(1)),
            "{w:#}"
        );
    }
    assert!(!items.to_string().contains(SECRET));
    for out in &outs {
        assert_no_secret(out.path());
    }
}

/// The variables `assay run` and `assay suite run` read as flags, as
/// their help lists them.
fn flag_variables() -> Vec<String> {
    let mut names = Vec::new();
    for args in [&["run", "--help"][..], &["suite", "run", "--help"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_assay"))
            .args(args)
            .output()
            .unwrap();
        let help = String::from_utf8(out.stdout).unwrap();
        for part in help.split("[env: ").skip(1) {
            let name = part.split(['=', ']']).next().unwrap().to_owned();
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

/// Issue 25: a batch queued with its settings in the environment
/// (`NEV_CANDIDATES=3 assay run TASK --queue`, and every other variable a
/// flag reads) runs on a lane with those settings, not the lane's own
/// variables: its size, its probe mode and the draw's token cap (a real
/// llama.cpp server, forced to answer a solution longer than the cap).
#[test]
fn issue_25_settings_given_by_environment_reach_the_lane_s_run() {
    // Every variable a flag reads is one a lane keeps from its runs.
    let variables = flag_variables();
    assert!(variables.len() >= 7, "{variables:?}");
    for name in &variables {
        assert!(
            assay::queue::item::FLAG_VARIABLES.contains(&name.as_str()),
            "{name} is read by a flag but a lane would pass its own to its runs"
        );
    }

    let server = llama::shared();
    let schema = pg::PgSchema::new();
    let db = schema.url.as_str();
    let s = Scratch::new();
    let task = s.path().join("task");
    common::copy_dir(&common::repo().join("tests/fixtures/tiny"), &task);
    let solution = "```rust\npub fn double(x: u64) -> u64 {\n    x * 2\n}\n```\n";
    std::fs::write(
        task.join("pools.toml"),
        llama::forced_pool(&server.url(), solution),
    )
    .unwrap();
    let task = task.display().to_string();
    let queued = Command::new(env!("CARGO_BIN_EXE_assay"))
        .args(["run", &task, "--pool", "tiny", "--queue", "--json"])
        .env("ASSAY_DB", db)
        .env("NEV_CANDIDATES", "3")
        .env("ASSAY_PROBE", "serial")
        .env("NEV_CONCURRENCY", "1")
        .env("MAX_COMPLETION_TOKENS", "10")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(
        queued.status.success(),
        "{}",
        String::from_utf8_lossy(&queued.stderr)
    );

    // The lane has variables of its own, each different.
    let out = Scratch::new();
    let lane = lane_command(db, "own-env", &out, None)
        .env("NEV_CANDIDATES", "4")
        .env("ASSAY_PROBE", "fast")
        .env("NEV_CONCURRENCY", "2")
        .env("MAX_COMPLETION_TOKENS", "1000")
        .spawn()
        .unwrap();
    assert!(Running(lane).wait().success());

    let items = ok_json(db, &["queue", "--json"]);
    let item = &items[0];
    assert_eq!(item["state"], "done", "{item:#}");
    let batch = item["batch_id"].as_i64().unwrap().to_string();
    let shown = ok_json(db, &["show", &batch, "--json"]);
    assert_eq!(shown["status"], "finished", "{shown:#}");
    assert_eq!(shown["replies"], 3, "NEV_CANDIDATES=3 when queued");
    assert_eq!(shown["probe_run"]["mode"], "serial", "ASSAY_PROBE=serial");
    let extracts: Vec<&Value> = shown["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["extract"])
        .collect();
    assert_eq!(
        extracts,
        [&Value::from("hit_token_cap"); 3],
        "MAX_COMPLETION_TOKENS=10 when queued: {shown:#}"
    );
    // The item holds them, and the rest it resolved where it was queued.
    let queued = &item["item"];
    assert_eq!(queued["kind"], "batch", "{queued:#}");
    assert_eq!(queued["n"], 3);
    assert_eq!(queued["draw"]["max_in_flight"], 1, "NEV_CONCURRENCY=1");
    assert_eq!(queued["draw"]["max_completion_tokens"], 10);
    assert_eq!(queued["draw"]["pools"], serde_json::json!(["tiny"]));
    // The pools file travels as its text (issue 36), never as a path.
    assert_eq!(
        queued["pools"]["text"],
        std::fs::read_to_string(std::path::Path::new(&task).join("pools.toml")).unwrap()
    );
    assert!(queued.get("pools_file").is_none(), "{queued:#}");
}

/// A lane that ran a batch to its end but could not end its item (the
/// store away for a whole lease) leaves the item running on a lapsed
/// lease. The next claim finds the batch finished and ends the item done:
/// nothing is run again, and the item is not handed back and forth.
#[test]
fn an_item_whose_batch_finished_is_done_when_claimed_again() {
    let schema = pg::PgSchema::new();
    let db = schema.url.as_str();
    ok_json(db, &["run", &tiny(), "--queue", "--json"]);
    let out = Scratch::new();
    assert!(Running(lane(db, "a", &out, None)).wait().success());
    let items = ok_json(db, &["queue", "--json"]);
    let batch = items[0]["batch_id"].as_i64().unwrap();
    // As lane a would have left it: running, its lease over.
    schema.value("UPDATE work_items SET state = 'running', lease_until_ms = 0, finished_at = NULL");

    let lane_b = Running(lane(db, "b", &out, None));
    let items = wait_for_queue(db, "item 1 ended again, or was handed on", |items| {
        items[0]["state"] != "running" || items[0]["claims"].as_i64() > Some(2)
    });
    assert_eq!(
        (
            &items[0]["state"],
            &items[0]["claims"],
            &items[0]["failure"]
        ),
        (&Value::from("done"), &Value::from(2), &Value::Null),
        "{:#}",
        items[0]
    );
    assert!(lane_b.wait().success());
    assert_eq!(items[0]["batch_id"], batch);
    let shown = ok_json(db, &["show", &batch.to_string(), "--json"]);
    assert_eq!(shown["status"], "finished");
    assert!(shown["resumes"].as_array().unwrap().is_empty(), "{shown:#}");
    assert_eq!(
        ok_json(db, &["batches", "--json"])
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

/// Issue 28 on PostgreSQL: a queued `run --rounds 1` carries its round to
/// the lane, whose run repairs as a direct run does (tests/it/repair.rs, on
/// SQLite, compares the two): against the test gateway's scripted model,
/// round 0 draws code that does not compile and code that fails cases,
/// round 1 repairs each from its feedback, and the rounds stop at the
/// first pass.
#[test]
fn a_queued_repair_run_repairs_on_its_lane() {
    use assay_gateway::{Config, Dialect, Gateway, Model, Recorded};
    let reply = |code: &str| Recorded {
        content: format!("```rust\npub fn double(x: u64) -> u64 {{ {code} }}\n```"),
        reasoning: None,
    };
    let model = Model::new(Dialect::LlamaCpp, vec![reply("x + \"a\""), reply("x + 1")])
        .answer_when("cannot add `&str` to `u64`", reply("x * 2"))
        .answer_when("expected: 0", reply("x << 1"));
    let gw = Gateway::start_on_thread(Config::new().model("fixer", model)).unwrap();
    let schema = pg::PgSchema::new();
    let db = schema.url.as_str();
    let s = Scratch::new();
    let task = s.tiny_copy();
    let spec = task.join("spec.toml");
    let text = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(&spec, format!("{text}\n[repair]\nvisible = 3\n")).unwrap();
    let pools = s.write(
        "pools.toml",
        &format!(
            "[pools.fixer]\nbase_url = \"{}\"\nmodel = \"fixer\"\nmax_in_flight = 1\n\
             sampling = {{ temperature = 0.6, top_p = 0.95, top_k = 20, seed = 1 }}\n",
            gw.base_url()
        ),
    );
    let (task, pools) = (task.display().to_string(), pools.display().to_string());
    let queued = ok_json(
        db,
        &[
            "run", &task, "-n", "2", "--pools", &pools, "--pool", "fixer", "--rounds", "1",
            "--queue", "--json",
        ],
    );
    assert_eq!(queued["work_item"], 1);
    let out = Scratch::new();
    assert!(Running(lane(db, "a", &out, None)).wait().success());
    let items = ok_json(db, &["queue", "--json"]);
    assert_eq!(items[0]["state"], "done", "{:#}", items[0]);
    assert_eq!(items[0]["item"]["repair"]["rounds"], 1);
    let shown = ok_json(db, &["show", "1", "--json"]);
    assert_eq!(shown["status"], "finished", "{shown:#}");
    // Each reply: index, round, parent (the best failing first).
    assert_eq!(
        schema.value(
            "SELECT string_agg(idx || ':' || round || ':' || COALESCE(parent::text, '-'), ',' \
             ORDER BY idx) FROM replies WHERE batch_id = 1"
        ),
        "0:0:-,1:0:-,2:1:1,3:1:0"
    );
    assert_eq!(
        schema.value(
            "SELECT string_agg(round || ':' || n || ':' || COALESCE(stopped, '-'), ',' \
             ORDER BY round) FROM repair_rounds WHERE batch_id = 1"
        ),
        "0:2:-,1:2:all_pass"
    );
}
