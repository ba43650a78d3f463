//! End-to-end: `assay compare --spec` and `assay ladder` against the test
//! gateway on 127.0.0.1, with pools of known speed and quality. The figures
//! assay reports are checked against what the gateway injected, from its own
//! log of what it served: throughput never above what the schedule allows,
//! TTFT between the injected delay and the reply's end, the right peak
//! level (how close the figures come is for bench/draw_throughput.rs). Runs of
//! the real binary share the warm work directory (tests/common) and take
//! one lock, so no two runs of this file compete for the CPU while timed.

use crate::common;

use std::path::Path;
use std::process::Output;
use std::sync::Mutex;
use std::time::Duration;

use assay_gateway::{Config, Dialect, Gateway, Model, Recorded, Served};
use serde_json::Value;

use common::{repo, tiny, Scratch};

/// One run of the binary at a time (see the module comment).
static RUNS: Mutex<()> = Mutex::new(());

/// Replies of the tiny fixture's corpus by index (see its expected.jsonl):
/// 0 and 1 are correct, 2 does not compile, 4 passes half the cases.
fn tiny_replies(indices: &[usize]) -> Vec<Recorded> {
    let lines: Vec<Value> =
        std::fs::read_to_string(repo().join("tests/fixtures/tiny/replies.jsonl"))
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    indices
        .iter()
        .map(|&i| Recorded {
            content: lines[i]["content"].as_str().unwrap().to_owned(),
            reasoning: None,
        })
        .collect()
}

/// `assay` in the scratch directory, one run at a time (see the module
/// comment).
fn assay(s: &Scratch, args: &[&str]) -> Output {
    let _one = RUNS.lock().unwrap_or_else(|e| e.into_inner());
    s.assay(args)
}

/// `assay ... --json`, which must succeed, one run at a time.
fn json(s: &Scratch, args: &[&str]) -> Value {
    let _one = RUNS.lock().unwrap_or_else(|e| e.into_inner());
    s.json(args)
}

/// With `ASSAY_KEEP_CHARTS=DIR`, a report and its chart are copied there
/// (how the examples and images in docs/reports.md were made).
fn keep(s: &Scratch, chart: &str, report: &Value, name: &str) {
    if let Some(dir) = std::env::var_os("ASSAY_KEEP_CHARTS") {
        let dir = Path::new(&dir);
        std::fs::copy(s.join(chart), dir.join(format!("{name}.svg"))).unwrap();
        std::fs::write(
            dir.join(format!("{name}.json")),
            serde_json::to_string_pretty(report).unwrap(),
        )
        .unwrap();
        std::fs::copy(s.db(), dir.join(format!("{name}.db"))).unwrap();
    }
}

fn pool(name: &str, gw: &Gateway, in_flight: usize) -> String {
    format!(
        "[pools.{name}]\nbase_url = \"{}\"\nmodel = \"{name}\"\nmax_in_flight = {in_flight}\n\
         sampling = {{ temperature = 0.6, top_p = 0.95, seed = 1 }}\n",
        gw.base_url()
    )
}

/// Output tokens per second the gateway's schedule allows for one round of
/// requests sent at once: its tokens over the longest injected duration.
fn injected_tok_per_s(round: &[&Served]) -> f64 {
    let tokens: usize = round.iter().map(|s| s.completion_tokens).sum();
    let wall = round.iter().map(|s| s.last_due).max().unwrap();
    tokens as f64 / wall.as_secs_f64()
}

/// A rate assay measured against the rate the gateway's schedule allows.
/// Only the upper bound holds on any machine: a loaded machine makes the
/// client slower, never faster, than the injected schedule (how close it
/// comes is measured by `bench/draw_throughput.rs`).
fn bounded_by(measured: f64, injected: f64, what: &str) {
    eprintln!("{what}: measured {measured:.2}, injected {injected:.2}");
    assert!(
        measured > 0.0 && measured <= injected * 1.01,
        "{what}: measured {measured}, injected {injected}"
    );
}

/// Two pools, one fast and right, one slow and wrong: compare shows which
/// is which, and its throughput figures are the gateway's.
#[test]
fn compare_runs_a_batch_per_pool_and_matches_the_gateway() {
    let gw = Gateway::start_on_thread(
        Config::new()
            .model(
                "fast",
                Model::new(
                    Dialect::Vllm {
                        tokens_per_chunk: 4,
                    },
                    tiny_replies(&[0, 1]),
                )
                .latency(Duration::from_millis(300), Duration::from_millis(10)),
            )
            .model(
                "slow",
                Model::new(Dialect::LlamaCpp, tiny_replies(&[2, 4]))
                    .latency(Duration::from_millis(600), Duration::from_millis(40)),
            ),
    )
    .unwrap();
    let s = Scratch::new();
    let pools = s.write(
        "pools.toml",
        &(pool("fast", &gw, 8) + &pool("slow", &gw, 8)),
    );
    let pools = pools.display().to_string();
    let tiny = tiny();
    let report = json(
        &s,
        &[
            "compare",
            "--spec",
            &tiny,
            "--pool",
            "fast",
            "--pool",
            "slow",
            "-n",
            "8",
            "--pools",
            &pools,
            "--sequential",
            "--json",
            "--svg",
            "cmp.svg",
        ],
    );
    let figures = report["pools"].as_array().unwrap();
    assert_eq!(figures.len(), 2);
    let (fast, slow) = (&figures[0], &figures[1]);
    assert_eq!(
        (fast["pool"].as_str(), slow["pool"].as_str()),
        (Some("fast"), Some("slow"))
    );

    let served = gw.served();
    for (fig, alias) in [(fast, "fast"), (slow, "slow")] {
        let round: Vec<&Served> = served.iter().filter(|s| s.model == alias).collect();
        assert_eq!(round.len(), 8);
        assert_eq!(fig["replies"], 8);
        assert_eq!(fig["failed"], 0);
        assert_eq!(fig["replayed"], false);
        let tokens: usize = round.iter().map(|s| s.completion_tokens).sum();
        assert_eq!(fig["output_tokens"], tokens, "{alias}: tokens from usage");
        bounded_by(
            fig["output_tok_per_s"].as_f64().unwrap(),
            injected_tok_per_s(&round),
            &format!("{alias} output tok/s"),
        );
        let wall = round.iter().map(|s| s.last_due).max().unwrap();
        bounded_by(
            fig["completions_per_s"].as_f64().unwrap(),
            8.0 / wall.as_secs_f64(),
            &format!("{alias} completions/s"),
        );
        let chunks: usize = round.iter().map(|s| s.text_chunks).sum();
        let per_chunk = fig["tokens_per_chunk"].as_f64().unwrap();
        assert!((per_chunk - tokens as f64 / chunks as f64).abs() < 1e-9);
        // TTFT comes after the injected first-chunk delay and before the
        // reply's end.
        let first = round[0].first_due.as_secs_f64() * 1e3;
        let ttft = fig["ttft_ms"]["mean"].as_f64().unwrap();
        let latency = fig["latency_ms"]["mean"].as_f64().unwrap();
        assert!(
            ttft >= first && ttft <= latency,
            "{alias}: TTFT {ttft} ms, injected {first}, latency {latency}"
        );
    }
    // llama.cpp: one token a chunk, and the end token counted but never
    // streamed.
    let slow_per_chunk = slow["tokens_per_chunk"].as_f64().unwrap();
    assert!(
        slow_per_chunk > 1.0 && slow_per_chunk < 2.0,
        "llama.cpp tokens per chunk {slow_per_chunk}"
    );
    assert!(
        fast["tokens_per_chunk"].as_f64().unwrap() > 2.0,
        "vLLM packs tokens"
    );
    // An order, not a ratio: the fast pool's schedule allows about four
    // times the slow one's throughput.
    assert!(
        fast["output_tok_per_s"].as_f64().unwrap() > slow["output_tok_per_s"].as_f64().unwrap()
    );
    // Quality: the fast pool's replies are right, the slow pool's are not.
    assert_eq!(fast["best"]["passed"], fast["best"]["total"]);
    assert_eq!(fast["admitted"], 1, "one unique correct candidate");
    assert_eq!(fast["largest_duplicate_group"], 8);
    assert_eq!(slow["admitted"], 0);
    assert_eq!(slow["compiled"], 1);
    assert_eq!(slow["best"]["passed"], 5);
    assert!(fast["admitted_per_1k_output_tokens"].as_f64().unwrap() > 0.0);
    assert_eq!(slow["admitted_per_draw_minute"], 0.0);

    keep(&s, "cmp.svg", &report, "compare");
    let svg = std::fs::read_to_string(s.join("cmp.svg")).unwrap();
    assert!(svg.contains("(fast)") && svg.contains("(slow)"));
}

/// The default schedule runs both batches at once; both finish and are
/// stored.
#[test]
fn compare_runs_pools_at_once_by_default() {
    let gw = Gateway::start_on_thread(
        Config::new()
            .model(
                "a",
                Model::new(Dialect::LlamaCpp, tiny_replies(&[0]))
                    .latency(Duration::from_millis(20), Duration::from_millis(1)),
            )
            .model(
                "b",
                Model::new(Dialect::Tabby, tiny_replies(&[4]))
                    .latency(Duration::from_millis(20), Duration::from_millis(1)),
            ),
    )
    .unwrap();
    let s = Scratch::new();
    let pools = s.write("pools.toml", &(pool("a", &gw, 2) + &pool("b", &gw, 2)));
    let pools = pools.display().to_string();
    let tiny = tiny();
    let out = assay(
        &s,
        &[
            "compare", "--spec", &tiny, "--pool", "a", "--pool", "b", "-n", "2", "--pools", &pools,
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Columns in the order of the pools, whichever batch started first.
    let header: Vec<&str> = text.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header.len(), 6, "{text}");
    assert_eq!((header[2], header[5]), ("(a)", "(b)"), "{text}");
    // TabbyAPI sends no usage: its tokens are unknown, never zero.
    let row = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .unwrap()
            .to_owned()
    };
    assert!(
        row("output tokens").ends_with("unknown (no usage)"),
        "{text}"
    );
    assert!(row("output tok/s").ends_with("unknown"), "{text}");
    assert!(text.contains("--sequential for separate figures"), "{text}");
    let listed = json(&s, &["batches", "--json"]);
    assert_eq!(listed.as_array().unwrap().len(), 2);
}

/// A server that thrashes past 4 streams: the ladder finds the peak at 4,
/// and each level's aggregate throughput is the gateway's.
#[test]
fn ladder_finds_the_peak_the_gateway_injected() {
    let gw = Gateway::start_on_thread(
        Config::new().model(
            "knee",
            Model::new(Dialect::LlamaCpp, tiny_replies(&[0, 4]))
                .latency(Duration::from_millis(200), Duration::from_millis(20))
                .overload(4),
        ),
    )
    .unwrap();
    let s = Scratch::new();
    let pools = s.write("pools.toml", &pool("knee", &gw, 1));
    let pools = pools.display().to_string();
    let tiny = tiny();
    let ladder = json(
        &s,
        &[
            "ladder",
            "--spec",
            &tiny,
            "--pool",
            "knee",
            "--levels",
            "1,2,4,8",
            "--pools",
            &pools,
            "--json",
            "--svg",
            "ladder.svg",
        ],
    );
    assert_eq!(ladder["ranking"], "aggregate_output_tok_per_s");
    assert_eq!(ladder["peak_level"], 4, "{ladder:#}");
    let levels = ladder["levels"].as_array().unwrap();
    let served = gw.served();
    let mut at = 0;
    for level in levels {
        let l = level["level"].as_u64().unwrap() as usize;
        assert_eq!(level["replies"], l);
        let round: Vec<&Served> = served[at..at + l].iter().collect();
        at += l;
        bounded_by(
            level["aggregate_output_tok_per_s"].as_f64().unwrap(),
            injected_tok_per_s(&round),
            &format!("level {l} aggregate output tok/s"),
        );
        // Never the aggregate times the level: every reply ends within the
        // round's wall, so the aggregate is at most all the round's tokens
        // over its longest reply (a level times that would exceed it).
        let aggregate = level["aggregate_output_tok_per_s"].as_f64().unwrap();
        let tokens = level["output_tokens"].as_f64().unwrap();
        let longest_s = level["latency_max_ms"].as_f64().unwrap() / 1e3;
        assert!(
            aggregate <= tokens / longest_s * 1.0001,
            "level {l}: aggregate {aggregate} tok/s from {tokens} tokens, longest reply {longest_s} s"
        );
        assert!(level["per_stream_tok_per_s"].as_f64().unwrap() > 0.0);
        // Each level is a stored batch.
        let shown = json(&s, &["show", &level["batch_id"].to_string(), "--json"]);
        assert_eq!(shown["replies"], l);
    }
    assert_eq!(at, served.len());
    keep(&s, "ladder.svg", &ladder, "ladder");
    let svg = std::fs::read_to_string(s.join("ladder.svg")).unwrap();
    assert!(svg.contains("peak at 4"));

    // A zero level is refused before anything runs.
    let out = assay(
        &s,
        &[
            "ladder", "--spec", &tiny, "--pool", "knee", "--levels", "1,0", "--pools", &pools,
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("0 is not a concurrency level"));
}

/// Issue 30, item 1: a suite's problems are batches in the store, and the
/// batch commands showed them with wrong figures (`show 1`: compiled 0/2,
/// most passed none, where the suite had both compiled and one OK) or
/// failed on a path (`replay 1`). Each refuses them and names the suite's
/// own view, with the database that holds it.
#[test]
fn a_suites_batches_are_refused_by_the_batch_commands() {
    let s = Scratch::new();
    let (problems, completions) = s.small_suite();
    let suite = json(
        &s,
        &[
            "suite",
            "run",
            &problems,
            "--completions",
            &completions,
            "--db",
            "s.db",
            "--json",
        ],
    );
    assert_eq!(suite["suite_id"], 1);
    let listed = json(&s, &["batches", "--db", "s.db", "--json"]);
    assert_eq!(listed, serde_json::json!([]), "a suite's batch is listed");
    let before = json(&s, &["suite", "show", "1", "--db", "s.db", "--json"]);
    for args in [
        &["show", "1"][..],
        &["show", "1", "--json"],
        &["export", "1"],
        &["export", "1", "--format", "csv"],
        &["compare", "1", "1"],
        &["replay", "1"],
        &["promote", "1", "0", "--yes"],
        &["run", "--resume", "1"],
    ] {
        let mut with_db = args.to_vec();
        with_db.extend(["--db", "s.db"]);
        common::assert_refused(
            &assay(&s, &with_db),
            &with_db,
            &[
                "s.db: batch 1 is problem `fx_add_two` of suite 1, not a batch of its own",
                "`assay suite show 1 --db s.db` shows it",
            ],
        );
    }
    // The suite reads as it did.
    assert_eq!(
        json(&s, &["suite", "show", "1", "--db", "s.db", "--json"]),
        before
    );
}
