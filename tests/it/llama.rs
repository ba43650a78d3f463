//! The draw against a real llama.cpp server (issue 15): `llama-server` with
//! the tiny random-weights model of `scripts/llama-setup`, on 127.0.0.1. A
//! GBNF grammar in each pool's `extra_body` forces the model to write exactly
//! the text a test chooses, so the real engine writes real candidates. A
//! recording proxy (`assay_gateway::Recorder`) between assay and the server
//! keeps every chunk the server sent, and the tests compare what assay
//! stored with it.
//!
//! The model's vocabulary is the 256 bytes, so an ASCII text of L bytes is
//! L tokens in L chunks, and a reply that stops counts L + 1 (the end token,
//! never streamed).

use crate::common;
use crate::common::llama;

use std::path::Path;

use assay::draw::{DrawEvent, Drawn, Outcome, Plan};
use assay::spec::SplitMode;
use assay::support::progress::Progress;
use assay_gateway::{Exchange, Recorder};
use common::{repo, Scratch};
use llama::{LlamaServer, Options};
use serde_json::Value;

const SOLUTION: &str = "```rust\npub fn double(x: u64) -> u64 {\n    x * 2\n}\n```\n";
const TYPE_ERROR: &str = "```rust\npub fn double(x: u64) -> u64 {\n    \"twice\"\n}\n```\n";
/// Compiles, and passes only `1 -> 2` of the tiny task's cases.
const WRONG_ANSWER: &str = "```rust\npub fn double(x: u64) -> u64 {\n    x + 1\n}\n```\n";
const UNPARSABLE: &str = "```rust\npub fn double(x: u64) -> u64 {\n    x *\n```\n";
const SEED: u64 = 7;

/// A GBNF grammar whose only sentence is `text` (a JSON string literal is a
/// GBNF literal).
fn grammar(text: &str) -> String {
    format!("root ::= {}", serde_json::to_string(text).unwrap())
}

/// A pools-file table for a pool that writes `text`; `extra` lines follow.
fn pool(name: &str, base_url: &str, text: &str, extra: &str) -> String {
    // A JSON string literal is a TOML basic string too.
    let grammar = serde_json::to_string(&grammar(text)).unwrap();
    let in_flight = if extra.contains("max_in_flight") {
        ""
    } else {
        "max_in_flight = 2\n"
    };
    format!(
        "[pools.{name}]\nbase_url = \"{base_url}\"\nmodel = \"tiny\"\n{in_flight}\
         sampling = {{ temperature = 0.8, seed = {SEED} }}\nextra_body = {{ grammar = {grammar} }}\n{extra}\n"
    )
}

/// A task folder in the scratch directory: the tiny fixture's files, with
/// `draw` lines in its `[draw]` table and `pools` beside it.
fn task(s: &Scratch, draw: &str, pools: &str) -> String {
    let t = repo().join("tests/fixtures/tiny");
    let p = |f: &str| t.join(f).display().to_string();
    let text = format!(
        "name = \"tiny\"\nprompt = \"{}\"\nharness = \"{}\"\nentry = \"double\"\ncases = \"{}\"\n\
         committed = \"{}\"\n\n[draw]\nn = 2\nreplay = \"{}\"\n{draw}\n\n[admit]\nmin_score = 0.9\n\n[limits]\nwall_ms = 60000\n",
        p("prompt.md"),
        p("harness"),
        p("cases.jsonl"),
        p("committed.rs"),
        p("replies.jsonl"),
    );
    let dir = s.path().join("task");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("spec.toml"), text).unwrap();
    std::fs::write(dir.join("pools.toml"), pools).unwrap();
    dir.display().to_string()
}

/// The exchange of request `k` of a pool (its seed is the base seed + k).
fn exchange_of(exchanges: &[Exchange], k: usize) -> &Exchange {
    let seed = SEED + k as u64;
    let found: Vec<&Exchange> = exchanges
        .iter()
        .filter(|e| e.request["seed"].as_u64() == Some(seed))
        .collect();
    assert_eq!(found.len(), 1, "one request with seed {seed}");
    found[0]
}

/// What assay stored equals what the server sent.
fn assert_stored_as_sent(d: &Drawn, e: &Exchange) {
    assert!(stored_as_sent(d, e), "stored {d:?}\nsent {}", e.body);
    assert!(
        d.reply.cached_prompt_tokens.is_some(),
        "llama.cpp says: {}",
        e.body
    );
}

fn stored_as_sent(d: &Drawn, e: &Exchange) -> bool {
    let r = &d.reply;
    let Some(usage) = e.usage() else { return false };
    r.outcome == Outcome::Ok
        && r.content.as_deref() == Some(e.content().as_str())
        && r.chunks == Some(e.text_chunks() as u64)
        && r.finish_reason == e.finish_reason()
        && r.completion_tokens == usage["completion_tokens"].as_u64()
        && r.prompt_tokens == usage["prompt_tokens"].as_u64()
        && r.cached_prompt_tokens == usage["prompt_tokens_details"]["cached_tokens"].as_u64()
}

/// A grammar-forced batch through a recording proxy: the committed kind of
/// solution, a type error, an unparsable fence, prose after the fence, and a
/// reply cut by the token cap. Every stored figure equals what the server
/// sent, and the candidates get the verdicts their texts call for.
#[test]
fn a_grammar_forced_batch_stores_what_the_server_sent() {
    let server = llama::shared();
    let proxy = Recorder::start_on_thread(&server.url()).unwrap();
    let url = proxy.base_url();
    let prose = format!("{SOLUTION}\nThis doubles x.\n");
    let pools = pool("solution", &url, SOLUTION, "")
        + &pool("type_error", &url, TYPE_ERROR, "")
        + &pool("unparsable", &url, UNPARSABLE, "")
        + &pool("prose", &url, &prose, "")
        + &pool("capped", &url, SOLUTION, "max_completion_tokens = 10");
    let s = Scratch::new();
    let dir = task(
        &s,
        "pools = [\"solution=2\", \"type_error=2\", \"unparsable=2\", \"prose=2\", \"capped=1\"]",
        &pools,
    );
    let summary = s.json(&["run", &dir, "--json", "-n", "9"]);
    assert_eq!(summary["status"], "finished", "{summary}");
    let batch = summary["batch_id"].as_i64().unwrap();
    let stored = s.draw_replies(batch);
    assert_eq!(stored.len(), 9);
    let exchanges = proxy.settled();
    assert_eq!(exchanges.len(), 9, "one request per reply, no retry");

    // Pools draw indices in order: solution 0-1, type_error 2-3,
    // unparsable 4-5, prose 6-7, capped 8; request k of a pool is index k.
    for d in &stored {
        let e = exchange_of(&exchanges, d.idx);
        assert_eq!(e.request["timings_per_token"], true, "running counts asked");
        assert!(e.finished && !e.client_closed);
        assert_stored_as_sent(d, e);
        let text = match d.pool.as_str() {
            "solution" => SOLUTION,
            "type_error" => TYPE_ERROR,
            "unparsable" => UNPARSABLE,
            "prose" => &prose,
            _ => &SOLUTION[..10],
        };
        assert_eq!(d.reply.content.as_deref(), Some(text), "{}", d.pool);
        // One byte, one token, one chunk; a stop adds the end token.
        let len = text.len() as u64;
        assert_eq!(d.reply.chunks, Some(len));
        if d.pool == "capped" {
            assert_eq!(d.reply.finish_reason.as_deref(), Some("length"));
            assert_eq!(d.reply.completion_tokens, Some(10));
            assert!(d.reply.hit_cap);
        } else {
            assert_eq!(d.reply.finish_reason.as_deref(), Some("stop"));
            assert_eq!(d.reply.completion_tokens, Some(len + 1));
            assert!(!d.reply.hit_cap);
        }
    }

    let shown = s.json(&["show", &batch.to_string(), "--json"]);
    let cands = shown["candidates"].as_array().unwrap();
    let of = |pool: &str, field: &str| -> Vec<String> {
        cands
            .iter()
            .filter(|c| c["pool"] == pool)
            .map(|c| c[field].as_str().unwrap_or("none").to_owned())
            .collect()
    };
    // The second solution is a duplicate of the first: not probed again.
    assert_eq!(of("solution", "probe"), ["compiled", "none"]);
    assert_eq!(of("type_error", "probe"), ["compile_error(E0308)", "none"]);
    assert!(
        of("unparsable", "extract").iter().all(|x| x != "extracted"),
        "{cands:?}"
    );
    assert_eq!(of("capped", "extract"), ["hit_token_cap"]);
    // The prose after the fence does not change the candidate: the same
    // fingerprint as the solution's.
    let fp = |pool: &str| -> Vec<Value> {
        cands
            .iter()
            .filter(|c| c["pool"] == pool)
            .map(|c| c["fingerprint"].clone())
            .collect()
    };
    let _ = fp;
    let dup: Vec<&Value> = cands
        .iter()
        .filter(|c| c["pool"] == "prose")
        .map(|c| &c["dup_of"])
        .collect();
    assert_eq!(dup, [&Value::from(0), &Value::from(0)], "{cands:?}");
    let figures = &shown["figures"];
    assert!(figures["cached_prompt_tokens"].is_u64(), "{figures}");
    assert!(figures["prompt_tokens"].as_u64().unwrap() > 0, "{figures}");
}

/// With `single_fence`, the stream is closed when the fence closes: the
/// server's running counts (`timings_per_token`) still say what the reply
/// cost, so the tokens and what the cap still allowed are known.
#[test]
fn an_early_stop_knows_its_tokens() {
    let server = llama::shared();
    let proxy = Recorder::start_on_thread(&server.url()).unwrap();
    let text = format!("{SOLUTION}{}", "\nThis doubles x, ".repeat(60));
    let s = Scratch::new();
    let dir = task(
        &s,
        "pools = [\"cutter\"]\nsingle_fence = true",
        &pool(
            "cutter",
            &proxy.base_url(),
            &text,
            "max_completion_tokens = 1000",
        ),
    );
    let summary = s.json(&["run", &dir, "--json", "-n", "2"]);
    assert_eq!(summary["compiled"], 1, "{summary}");
    let stored = s.draw_replies(summary["batch_id"].as_i64().unwrap());
    let exchanges = proxy.settled();
    for d in &stored {
        let r = &d.reply;
        assert!(r.cut_early, "{r:?}");
        assert_eq!(r.finish_reason, None, "the server never finished it");
        assert_eq!(r.content.as_deref(), Some(SOLUTION));
        // The chunk that closed the fence was token number len(SOLUTION).
        let spent = SOLUTION.len() as u64;
        assert_eq!(r.completion_tokens, Some(spent), "{r:?}");
        assert_eq!(r.cap_tokens_left, Some(1000 - spent));
        assert!(r.prompt_tokens.is_some() && r.cached_prompt_tokens.is_some());
        let e = exchange_of(&exchanges, d.idx);
        assert!(e.client_closed && !e.finished, "assay closed the stream");
        assert!(!e.body.contains("[DONE]"));
        // Every chunk assay read carried the server's running count, and
        // the last one it read is the figure stored.
        let counted = e
            .events()
            .iter()
            .filter_map(|ev| ev["timings"]["predicted_n"].as_u64())
            .find(|n| *n == spent);
        assert_eq!(
            counted,
            Some(spent),
            "the server counted {spent} at the cut"
        );
    }
}

/// A server with a key and a small context: a wrong key stops the pool after
/// one request and the batch fails with the server's sentence; so does a
/// prompt over the context, whose size is stored from the error body.
#[test]
fn a_wrong_key_and_a_context_overflow_fail_the_draw_after_one_request() {
    let server = LlamaServer::start(&Options {
        slots: 1,
        ctx_per_slot: 64,
        api_key: Some("the-right-key".into()),
    });
    // llama-server pads a slot's context to a multiple of 256 tokens, so
    // the overflow case sends a prompt of well over 256 bytes (tokens).
    for (key, sentence) in [
        ("not-the-key", "Invalid API Key"),
        ("the-right-key", "exceeds the available context size"),
    ] {
        let proxy = Recorder::start_on_thread(&server.url()).unwrap();
        let s = Scratch::new();
        let dir = task(
            &s,
            "pools = [\"p\"]",
            &pool(
                "p",
                &proxy.base_url(),
                SOLUTION,
                "api_key_env = \"LLAMA_KEY\"\nmax_in_flight = 1",
            ),
        );
        if key == "the-right-key" {
            let prompt = Path::new(&dir).join("prompt.md");
            let tiny =
                std::fs::read_to_string(repo().join("tests/fixtures/tiny/prompt.md")).unwrap();
            std::fs::write(
                &prompt,
                format!("{tiny}\n{}\n", "Think it through. ".repeat(40)),
            )
            .unwrap();
            let spec = Path::new(&dir).join("spec.toml");
            let text = std::fs::read_to_string(&spec).unwrap().replace(
                &repo()
                    .join("tests/fixtures/tiny/prompt.md")
                    .display()
                    .to_string(),
                &prompt.display().to_string(),
            );
            std::fs::write(&spec, text).unwrap();
        }
        let out = s
            .command(&["run", &dir, "-n", "4"])
            .env("LLAMA_KEY", key)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{key}: {stderr}");
        assert!(stderr.contains("the draw failed"), "{key}: {stderr}");
        assert!(stderr.contains(sentence), "{key}: {stderr}");
        let listed = s.json(&["batches", "--json"]);
        assert_eq!(listed[0]["status"], "failed", "{listed}");
        let failure = listed[0]["failure"].as_str().unwrap();
        assert!(
            failure.contains("the draw failed") && failure.contains(sentence),
            "{failure}"
        );

        let exchanges = proxy.settled();
        assert_eq!(
            exchanges.len(),
            1,
            "{key}: the pool stopped after one request"
        );
        let body: Value = serde_json::from_str(&exchanges[0].body).unwrap();
        assert!(body["error"]["code"].is_u64(), "an integer code: {body}");
        let stored = s.draw_replies(1);
        assert_eq!(stored.len(), 4);
        let status = exchanges[0].status;
        assert_eq!(stored[0].reply.outcome, Outcome::HttpError { status });
        assert!(stored[1..]
            .iter()
            .all(|d| d.reply.outcome == Outcome::PoolStopped));
        if key == "the-right-key" {
            assert_eq!(status, 400);
            assert_eq!(body["error"]["type"], "exceed_context_size_error");
            assert_eq!(
                stored[0].reply.prompt_tokens,
                body["error"]["n_prompt_tokens"].as_u64()
            );
            assert!(stored[0].reply.prompt_tokens.unwrap() > 256);
        } else {
            assert_eq!(status, 401);
        }
    }
}

/// A race over two real servers: every index once, each server asked, and
/// every reply's figures are those of a stream one of them sent.
#[test]
fn a_race_over_two_real_servers() {
    let other = LlamaServer::start(&Options {
        slots: 2,
        ..Options::default()
    });
    let a = Recorder::start_on_thread(&llama::shared().url()).unwrap();
    let b = Recorder::start_on_thread(&other.url()).unwrap();
    let s = Scratch::new();
    let path = s.write(
        "pools.toml",
        &(pool("a", &a.base_url(), SOLUTION, "") + &pool("b", &b.base_url(), SOLUTION, "")),
    );
    let file = assay::draw::pools::PoolsFile::load(&path).unwrap();
    let http = |name: &str| {
        assay::draw::http::HttpPool::new(
            name,
            file.pools[name].clone(),
            None,
            "write double",
            assay::draw::EarlyStop::Never,
        )
        .unwrap()
    };
    let plan = Plan::http(vec![http("a"), http("b")], SplitMode::Race, None);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let events = rt.block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let progress = Progress::hidden();
        let drawing = async { plan.draw(6, 0, tx, &progress).await.unwrap() };
        let collecting = async {
            let mut events = Vec::new();
            while let Some(e) = rx.recv().await {
                events.push(e);
            }
            events
        };
        tokio::join!(drawing, collecting).1
    });
    let mut idx = Vec::new();
    // HTTP requests assay made: a reply's every attempt (a retried one
    // made several) and each cancelled request's.
    let mut requests = 0;
    let mut cancelled = 0;
    let (sent_a, sent_b) = (a.settled(), b.settled());
    assert!(
        !sent_a.is_empty() && !sent_b.is_empty(),
        "both servers were asked"
    );
    for e in &events {
        match e {
            DrawEvent::Reply(d) => {
                idx.push(d.idx);
                requests += d.reply.attempts.len().max(1);
                let sent = if d.pool == "a" { &sent_a } else { &sent_b };
                assert!(
                    sent.iter().any(|x| x.finished && stored_as_sent(d, x)),
                    "no stream of {} matches {d:?}",
                    d.pool
                );
            }
            DrawEvent::Cancelled { attempts, .. } => {
                requests += attempts.len().max(1);
                cancelled += 1;
            }
            DrawEvent::PoolStopped { .. } => panic!("no pool refused"),
        }
    }
    idx.sort();
    assert_eq!(idx, (0..6).collect::<Vec<_>>(), "every index exactly once");
    // Every request a server got is an attempt of a reply or a
    // cancellation; only a cancelled one may never have reached a server
    // (dropped while its connection was still being set up).
    let got = sent_a.len() + sent_b.len();
    assert!(
        got <= requests && requests - got <= cancelled,
        "the servers got {got} requests; assay made {requests}, {cancelled} of them cancelled: {events:#?}"
    );
}

/// A real draw killed in its middle is finished by `--resume`, which asks
/// only for the replies not stored.
#[test]
fn a_real_draw_killed_in_its_middle_resumes() {
    let proxy = Recorder::start_on_thread(&llama::shared().url()).unwrap();
    let s = Scratch::new();
    let dir = task(
        &s,
        "pools = [\"p\"]",
        &pool("p", &proxy.base_url(), SOLUTION, "max_in_flight = 1"),
    );
    let stopped = s.start_at("pause@draw.reply#2", &["run", &dir, "-n", "6"]);
    stopped.kill9();
    let kept: Vec<usize> = s.draw_replies(1).iter().map(|d| d.idx).collect();
    assert!(
        kept.len() >= 2 && kept.len() < 6,
        "stopped mid-draw: {kept:?}"
    );
    let before = proxy.settled().len();

    let text = s.assay_ok(&["run", "--resume", "1"]);
    assert!(text.contains("resume 1 at "), "{text}");
    let stored = s.draw_replies(1);
    assert_eq!(
        stored.iter().map(|d| d.idx).collect::<Vec<_>>(),
        (0..6).collect::<Vec<_>>()
    );
    let exchanges = proxy.settled();
    let asked_after: Vec<u64> = exchanges[before..]
        .iter()
        .map(|e| e.request["seed"].as_u64().unwrap() - SEED)
        .collect();
    for k in &asked_after {
        assert!(
            !kept.contains(&(*k as usize)),
            "reply {k} was stored, and asked again"
        );
    }
    for d in &stored {
        assert_stored_as_sent(d, exchange_of_last(&exchanges, d.idx));
    }
}

/// The last exchange of request `k` (a request the kill cut off was asked
/// again on resume).
fn exchange_of_last(exchanges: &[Exchange], k: usize) -> &Exchange {
    exchanges
        .iter()
        .rev()
        .find(|e| e.request["seed"].as_u64() == Some(SEED + k as u64) && e.finished)
        .unwrap_or_else(|| panic!("no finished request {k}"))
}

/// A two-round repair batch against the real server (issue 28): round 0's
/// grammar-forced replies fail (one answers wrongly, one does not
/// compile), round 1 asks for their repair with prompts that carry the
/// failures, and the tiny model, held to its grammar, writes the same
/// texts again. The loop completes, and the tokens stored, reply by reply
/// and round by round, are what the server reported: each stream's usage
/// block (through a recording proxy), and in all the server's own counter
/// of tokens predicted (`/metrics`, which adds each finished slot's
/// `n_decoded`, the figure its usage block reports as
/// `completion_tokens`).
#[test]
fn a_two_round_repair_batch_stores_the_servers_tokens_per_round() {
    // A server of its own: its counters see this test's requests alone.
    // A repair prompt carries the code and rustc's words: about a
    // thousand bytes, which are tokens to this model.
    let server = LlamaServer::start(&Options {
        slots: 2,
        ctx_per_slot: 2048,
        api_key: None,
    });
    let proxy = Recorder::start_on_thread(&server.url()).unwrap();
    let url = proxy.base_url();
    let pools = pool("wrong", &url, WRONG_ANSWER, "") + &pool("type_error", &url, TYPE_ERROR, "");
    let s = Scratch::new();
    let dir = task(
        &s,
        "pools = [\"wrong=1\", \"type_error=1\"]\n\n[repair]\nvisible = 3",
        &pools,
    );
    let predicted_before = server.metric("llamacpp:tokens_predicted_total");
    let summary = s.json(&["run", &dir, "--json", "-n", "2", "--rounds", "1"]);
    assert_eq!(summary["status"], "finished", "{summary}");
    let batch = summary["batch_id"].as_i64().unwrap();
    let predicted = server.metric("llamacpp:tokens_predicted_total") - predicted_before;

    let exchanges = proxy.settled();
    assert_eq!(exchanges.len(), 4, "two replies a round, no retry");
    let stored = s.draw_replies(batch);
    assert_eq!(stored.len(), 4);
    let round_of: Vec<(i64, i64)> = s.sql(async |pool| {
        sqlx::query_as("SELECT idx, round FROM replies WHERE batch_id = ? ORDER BY idx")
            .bind(batch)
            .fetch_all(pool)
            .await
            .unwrap()
    });
    assert_eq!(round_of, [(0, 0), (1, 0), (2, 1), (3, 1)]);
    // Reply by reply: what was stored is what its stream said.
    let mut server_said = [(0u64, 0u64); 2];
    for d in &stored {
        let e = exchange_of(&exchanges, d.idx);
        assert!(e.finished && !e.client_closed);
        assert_stored_as_sent(d, e);
        let usage = e.usage().unwrap();
        let round = usize::from(d.idx >= 2);
        server_said[round].0 += usage["prompt_tokens"].as_u64().unwrap();
        server_said[round].1 += usage["completion_tokens"].as_u64().unwrap();
        // Round 1's requests are the repair prompts, with the parent's
        // failure; round 0's are the task's prompt.
        let asked = e.request["messages"][0]["content"].as_str().unwrap();
        assert_eq!(round == 1, asked.contains("An earlier answer"), "{asked}");
    }
    let repair_prompts: Vec<String> = exchanges
        .iter()
        .filter_map(|e| e.request["messages"][0]["content"].as_str())
        .filter(|a| a.contains("An earlier answer"))
        .map(str::to_owned)
        .collect();
    assert!(
        repair_prompts
            .iter()
            .any(|p| p.contains("input: 0\n  expected: 0\n  got: 1\n")),
        "the wrong answer's parent is shown what it answered: {repair_prompts:#?}"
    );
    assert!(
        repair_prompts.iter().any(|p| p.contains("error[E0308]")),
        "{repair_prompts:#?}"
    );

    // Round by round: `show --json` sums the same figures.
    let shown = s.json(&["show", &batch.to_string(), "--json"]);
    let rounds = shown["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 2, "{shown}");
    for (r, round) in rounds.iter().enumerate() {
        assert_eq!(round["round"], r as u64);
        assert_eq!(round["replies"], 2);
        assert_eq!(
            (
                round["prompt_tokens"].as_u64(),
                round["output_tokens"].as_u64()
            ),
            (Some(server_said[r].0), Some(server_said[r].1)),
            "round {r}: {round}"
        );
    }
    assert_eq!(rounds[0]["parents"], 0);
    assert_eq!(rounds[1]["parents"], 2);
    assert_eq!(rounds[1]["stopped"], "rounds_done");
    // The repairs repeat their parents' texts: duplicates, not probed.
    assert_eq!(rounds[1]["unique"], 0, "{shown}");
    // And in all, what the server counted itself.
    let output_tokens = server_said[0].1 + server_said[1].1;
    assert_eq!(predicted, output_tokens as f64, "/metrics against usage");
    assert_eq!(summary["rounds"][1]["output_tokens"], server_said[1].1);
}

/// A request llama-server fails inside its stream: with `tools` and
/// `tool_choice: "required"`, the tiny model's output never parses as a
/// tool call, and the server ends the stream with an error event after its
/// first chunk. assay stores it as the server's failure, with the server's
/// own sentence and code, on every attempt; the draw fails as a whole.
#[test]
fn a_real_servers_error_inside_the_stream_is_stored_as_its_failure() {
    let server = llama::shared();
    let proxy = Recorder::start_on_thread(&server.url()).unwrap();
    let s = Scratch::new();
    let tools = "extra_body = { tool_choice = \"required\", tools = [{ type = \"function\", \
                 function = { name = \"double\", description = \"Doubles x.\", parameters = \
                 { type = \"object\", properties = { x = { type = \"integer\" } }, required = [\"x\"] } } }] }";
    let pools = format!(
        "[pools.p]\nbase_url = \"{}\"\nmodel = \"tiny\"\nmax_in_flight = 2\nmax_attempts = 2\n\
         max_completion_tokens = 32\nsampling = {{ temperature = 0.8, seed = {SEED} }}\n{tools}\n",
        proxy.base_url()
    );
    let dir = task(&s, "pools = [\"p\"]", &pools);
    let out = s.command(&["run", &dir, "-n", "2"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");

    let exchanges = proxy.settled();
    assert_eq!(exchanges.len(), 4, "two requests, two attempts each");
    let errors: Vec<Value> = exchanges
        .iter()
        .map(|e| {
            assert_eq!(e.status, 200, "the error came inside a stream");
            e.events()
                .into_iter()
                .find(|v| v["error"].is_object())
                .unwrap_or_else(|| panic!("no error event in {}", e.body))
        })
        .collect();
    let sentence = errors[0]["error"]["message"].as_str().unwrap();
    let code = errors[0]["error"]["code"].as_u64().unwrap() as u16;
    assert!(stderr.contains(sentence), "{stderr}");
    for d in s.draw_replies(1) {
        let r = &d.reply;
        assert_eq!(
            r.outcome,
            Outcome::StreamError { code: Some(code) },
            "{r:?}"
        );
        assert_eq!(r.error.as_ref().unwrap().message, sentence);
        assert_eq!(
            r.attempts.len(),
            2,
            "retried as a {code} before the stream is"
        );
        assert!(r
            .attempts
            .iter()
            .all(|a| a.outcome == Outcome::StreamError { code: Some(code) }));
    }
    let listed = s.json(&["batches", "--json"]);
    assert_eq!(listed[0]["status"], "failed", "{listed}");
}
