//! The draw stage against the test gateway (crate `assay-gateway`) on
//! 127.0.0.1: every engine dialect, every fault, race against fixed, and no
//! key anywhere it must not be. Runs of the real binary share the warm work
//! directory (tests/common) and take one lock, so their timing figures are
//! not measured while another run of this file builds candidates.

use crate::common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Mutex;
use std::time::Duration;

use assay::draw::{DrawEvent, Outcome, Plan};
use assay::spec::SplitMode;
use assay::support::progress::Progress;
use assay_gateway::{Config, Dialect, Fault, Gateway, Model, Reasoning, Recorded, Served};
use serde_json::Value;

use common::{repo, tiny, Scratch};

/// One run of the binary at a time (see the module comment).
static RUNS: Mutex<()> = Mutex::new(());

/// The tiny fixture's recorded replies, as the gateway's corpus.
fn tiny_corpus() -> Vec<Recorded> {
    std::fs::read_to_string(repo().join("tests/fixtures/tiny/replies.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            Recorded {
                content: v["content"].as_str().unwrap_or_default().to_owned(),
                reasoning: Some("First, x doubled is x + x; overflow is the caller's.".into()),
            }
        })
        .collect()
}

/// `assay` in the scratch directory with `env` added, one run at a time
/// (see the module comment).
fn assay(s: &Scratch, args: &[&str], env: &[(&str, &str)]) -> Output {
    let _one = RUNS.lock().unwrap_or_else(|e| e.into_inner());
    s.command(args)
        .envs(env.iter().copied())
        .output()
        .expect("assay starts")
}

/// `assay ... --json` with `env` added, which must succeed: its summary
/// and its stderr.
fn run_json(s: &Scratch, args: &[&str], env: &[(&str, &str)]) -> (Value, String) {
    let out = assay(s, args, env);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "assay {args:?} failed: {stderr}\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let summary = serde_json::from_slice(&out.stdout).unwrap();
    (summary, stderr)
}

const PRESET: &str = "sampling = { temperature = 0.6, top_p = 0.95, top_k = 20, seed = 1 }";

fn pool(name: &str, gw: &Gateway, model: &str, extra: &str) -> String {
    format!(
        "[pools.{name}]\nbase_url = \"{}\"\nmodel = \"{model}\"\nmax_in_flight = 1\n{PRESET}\n{extra}\n",
        gw.base_url()
    )
}

/// Every dialect: tokens as the gateway counted them (unknown for TabbyAPI),
/// chunk counts apart from token counts where vLLM packs them and where
/// llama.cpp counts its unstreamed end token, reasoning kept apart, and TTFT
/// and latency measured in order (after the injected latency, TTFT before
/// the end). How close they come to the injected delays is a figure of
/// bench/draw_throughput.rs, not an assertion: a loaded machine stretches it.
#[test]
fn every_dialect_records_the_gateways_counts_and_timings() {
    let corpus = tiny_corpus();
    let latency = Duration::from_millis(40);
    let per_token = Duration::from_millis(1);
    let m = |d| Model::new(d, corpus.clone()).latency(latency, per_token);
    let vllm = Dialect::Vllm {
        tokens_per_chunk: 4,
    };
    let gw = Gateway::start_on_thread(
        Config::new()
            .model("vllm", m(vllm))
            .model("llamacpp", m(Dialect::LlamaCpp))
            .model("tabby", m(Dialect::Tabby))
            .model("think-content", m(vllm).reasoning(Reasoning::InContent))
            .model(
                "think-field",
                m(vllm).reasoning(Reasoning::Field("reasoning_content".into())),
            ),
    )
    .unwrap();
    let s = Scratch::new();
    let names = ["vllm", "llamacpp", "tabby", "think-content", "think-field"];
    let pools: String = names.iter().map(|n| pool(n, &gw, n, "")).collect();
    let file = s.write("pools.toml", &pools);
    let mut args = vec!["run", &*tiny(), "--json", "-n", "10"]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
    args.extend(["--pools".into(), file.display().to_string()]);
    for n in names {
        args.extend(["--pool".into(), format!("{n}=2")]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (summary, stderr) = run_json(&s, &args, &[]);
    assert_eq!(summary["status"], "finished", "{summary}");
    assert_eq!(
        summary["pool"],
        "vllm+llamacpp+tabby+think-content+think-field"
    );
    assert!(!stderr.contains("warning"), "{stderr}");
    let replies = s.draw_replies(summary["batch_id"].as_i64().unwrap());
    assert_eq!(replies.len(), 10);

    let served = gw.served();
    for d in &replies {
        let r = &d.reply;
        assert_eq!(r.outcome, Outcome::Ok, "{d:?}");
        let content = r.content.as_deref().unwrap();
        let g: &Served = served
            .iter()
            .find(|g| g.model == d.pool && g.content == content)
            .unwrap_or_else(|| panic!("no served reply matches {d:?}"));
        let tokens = g.completion_tokens as u64;
        let chunks = r.chunks.unwrap();
        assert_eq!(chunks, g.text_chunks as u64, "{}", d.pool);
        match d.pool.as_str() {
            "tabby" => assert_eq!(r.completion_tokens, None, "no usage: unknown, not zero"),
            pool => assert_eq!(r.completion_tokens, Some(tokens), "{pool}"),
        }
        match d.pool.as_str() {
            "tabby" => assert_eq!(chunks, tokens, "tabby: one token a chunk"),
            "llamacpp" => assert_eq!(chunks + 1, tokens, "llama.cpp: the end token is counted"),
            pool => assert!(
                chunks < tokens,
                "{pool}: {chunks} chunks for {tokens} tokens"
            ),
        }
        assert!(!r.hit_cap && !r.cut_early);
        assert_eq!(r.finish_reason.as_deref(), Some("stop"));
        assert_eq!(r.attempts.len(), 1);
        if d.pool.starts_with("think") {
            let reasoning = r.reasoning.as_deref().unwrap_or_default();
            assert!(reasoning.contains("x doubled"), "{}: {reasoning:?}", d.pool);
            assert!(!content.contains("<think>") && !content.contains("x doubled"));
            let tr = r.ttft_reasoning_ms.unwrap();
            assert!(tr >= ms(g.first_due), "not before the injected latency");
            assert!(r.ttft_ms.unwrap() > tr, "content comes after reasoning");
        } else {
            assert_eq!(r.reasoning, None);
            assert_eq!(r.ttft_reasoning_ms, None);
        }
        // A timer never fires early: the first text is not seen before the
        // injected latency, and the stream does not end before its last
        // chunk was due.
        let (ttft, latency) = (r.ttft_ms.unwrap(), r.latency_ms.unwrap());
        assert!(ttft >= ms(g.first_due), "{}: TTFT {ttft} ms", d.pool);
        assert!(ttft <= latency, "{}: TTFT after the end", d.pool);
        assert!(
            latency >= ms(g.last_due),
            "{}: latency {latency} ms",
            d.pool
        );
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Every fault yields its recorded outcome with the server's sentence and
/// bounded attempts, a refusing pool stops with one line, and the batch
/// completes with the rest.
#[test]
fn every_fault_is_recorded_and_the_batch_completes() {
    let corpus = tiny_corpus();
    let vllm = Dialect::Vllm {
        tokens_per_chunk: 3,
    };
    let m = || Model::new(vllm, corpus.clone());
    let always = usize::MAX;
    let gw = Gateway::start_on_thread(
        Config::new()
            .key("the-right-key")
            .model("ok", m())
            .model("r429", m().fault(Fault::RateLimit { retry_after_s: 1 }, 1))
            .model(
                "r500",
                m().fault(
                    Fault::ServerError {
                        body:
                            "{\"object\":\"error\",\"message\":\"CUDA out of memory\",\"code\":500}"
                                .into(),
                    },
                    always,
                ),
            )
            .model("reset", m().fault(Fault::ResetAfter { tokens: 3 }, always))
            .model(
                "slow",
                m().fault(Fault::SlowFirstByte(Duration::from_secs(3)), always),
            )
            .model(
                "malformed",
                m().fault(Fault::MalformedChunk { after_tokens: 2 }, always),
            )
            .model("null", m().fault(Fault::NullContent, always))
            .model("empty", m().fault(Fault::EmptyReply, always))
            .model("cap", m().fault(Fault::RunToCap, always))
            .model("midstream", m().fault(mid_stream(LLAMA_FORMAT_ERROR), always))
            .model(
                "midstream400",
                m().fault(
                    mid_stream(r#"{"object":"error","message":"too long","type":"BadRequestError","param":null,"code":400}"#),
                    always,
                ),
            )
            .model(
                "midonce",
                m().fault(
                    mid_stream(r#"{"error":{"message":"The server had an error","type":"server_error","code":"server_error"}}"#),
                    1,
                ),
            ),
    )
    .unwrap();
    let s = Scratch::new();
    let key = "api_key_env = \"GW_KEY\"";
    let mut pools = String::new();
    for name in [
        "ok",
        "r429",
        "r500",
        "reset",
        "malformed",
        "null",
        "empty",
        "midstream",
        "midstream400",
        "midonce",
    ] {
        pools += &pool(name, &gw, name, key);
    }
    pools += &pool(
        "slow",
        &gw,
        "slow",
        &format!("{key}\ntimeout_s = 0.3\nmax_attempts = 2"),
    );
    pools += &pool(
        "cap",
        &gw,
        "cap",
        &format!("{key}\nmax_completion_tokens = 20"),
    );
    pools += &pool("badkey", &gw, "ok", "api_key_env = \"WRONG_KEY\"");
    pools += &pool("nomodel", &gw, "no-such-model", key);
    let file = s.write("pools.toml", &pools);
    let shares = [
        ("ok", 2),
        ("r429", 1),
        ("r500", 1),
        ("reset", 1),
        ("slow", 1),
        ("malformed", 1),
        ("null", 1),
        ("empty", 1),
        ("cap", 1),
        ("midstream", 1),
        ("midstream400", 1),
        ("midonce", 1),
        ("badkey", 3),
        ("nomodel", 2),
    ];
    let n: usize = shares.iter().map(|s| s.1).sum();
    let mut args: Vec<String> = ["run", &tiny(), "--json", "-n", &n.to_string(), "--pools"]
        .into_iter()
        .map(String::from)
        .collect();
    args.push(file.display().to_string());
    for (name, share) in shares {
        args.extend(["--pool".into(), format!("{name}={share}")]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (summary, stderr) = run_json(
        &s,
        &args,
        &[("GW_KEY", "the-right-key"), ("WRONG_KEY", "not-the-key")],
    );
    assert_eq!(summary["status"], "finished", "{summary}");
    assert_eq!(summary["replies"], n);
    let stopped: Vec<&str> = stderr.lines().filter(|l| l.contains("stopped")).collect();
    assert_eq!(stopped.len(), 2, "one line per refusing pool: {stderr}");
    assert!(stopped
        .iter()
        .any(|l| l.contains("`badkey`") && l.contains("http_error(401)")));
    assert!(stopped.iter().any(
        |l| l.contains("`nomodel`") && l.contains("The model `no-such-model` does not exist.")
    ));

    let batch = summary["batch_id"].as_i64().unwrap();
    let replies = s.draw_replies(batch);
    let by_pool = |p: &str| -> Vec<&assay::draw::Reply> {
        replies
            .iter()
            .filter(|d| d.pool == p)
            .map(|d| &d.reply)
            .collect()
    };
    let one = |p: &str| by_pool(p)[0].clone();
    let sentence = |r: &assay::draw::Reply| r.error.as_ref().map(|e| e.message.clone());

    for r in by_pool("ok") {
        assert_eq!(r.outcome, Outcome::Ok);
    }
    let r = one("r429");
    assert_eq!(r.outcome, Outcome::Ok, "{r:?}");
    assert_eq!(r.attempts.len(), 2);
    assert_eq!(r.attempts[0].outcome, Outcome::HttpError { status: 429 });
    assert_eq!(r.attempts[0].retry_after_ms, Some(1000.0));
    assert!(
        r.attempts[0].delay_ms.unwrap() >= 1000.0,
        "Retry-After honoured"
    );
    assert!(r.attempts[0]
        .error
        .as_ref()
        .unwrap()
        .message
        .contains("Rate limit reached"));
    assert!(r.attempts[1].started_ms >= 1000.0);

    let r = one("r500");
    assert_eq!(r.outcome, Outcome::HttpError { status: 500 });
    assert_eq!(sentence(&r).as_deref(), Some("CUDA out of memory"));
    assert!(r
        .error
        .as_ref()
        .unwrap()
        .body
        .as_ref()
        .unwrap()
        .contains("\"code\":500"));
    assert_eq!(r.attempts.len(), 3, "bounded: max_attempts");

    let r = one("reset");
    assert_eq!(r.outcome, Outcome::ConnectionError, "{r:?}");
    assert_eq!(r.attempts.len(), 3);
    assert!(sentence(&r).is_some());

    let r = one("slow");
    assert_eq!(r.outcome, Outcome::Timeout, "{r:?}");
    assert_eq!(r.attempts.len(), 2);
    assert!(
        r.attempts.iter().all(|a| a.duration_ms >= 290.0),
        "no attempt ended before its timeout"
    );

    let r = one("malformed");
    assert_eq!(r.outcome, Outcome::MalformedChunk, "{r:?}");
    assert_eq!(r.attempts.len(), 1, "a malformed stream is not retried");
    assert!(r
        .error
        .as_ref()
        .unwrap()
        .body
        .as_ref()
        .unwrap()
        .contains("unterminated"));

    // An error inside the stream is the server's failure, with its own
    // sentence and code, the text before it kept; retried as a 500 is.
    let r = one("midstream");
    assert_eq!(r.outcome, Outcome::StreamError { code: Some(500) }, "{r:?}");
    assert_eq!(
        sentence(&r).as_deref(),
        Some("The model produced output that does not match the expected peg-native format")
    );
    assert!(r
        .error
        .as_ref()
        .unwrap()
        .body
        .as_ref()
        .unwrap()
        .contains("server_error"));
    assert_eq!(r.attempts.len(), 3, "retried as an error before the stream");
    assert!(r.content.as_deref().is_some_and(|c| !c.is_empty()), "{r:?}");
    let r = one("midstream400");
    assert_eq!(r.outcome, Outcome::StreamError { code: Some(400) }, "{r:?}");
    assert_eq!(sentence(&r).as_deref(), Some("too long"));
    assert_eq!(r.attempts.len(), 1, "a 400 is not retried");
    let r = one("midonce");
    assert_eq!(r.outcome, Outcome::Ok, "the second attempt answered: {r:?}");
    assert_eq!(r.attempts[0].outcome, Outcome::StreamError { code: None });
    assert_eq!(
        r.attempts[0].error.as_ref().unwrap().message,
        "The server had an error"
    );

    let r = one("null");
    assert_eq!((r.outcome, r.content.clone()), (Outcome::Ok, None));
    let r = one("empty");
    assert_eq!((r.outcome, r.content.as_deref()), (Outcome::Ok, Some("")));
    let r = one("cap");
    assert!(
        r.hit_cap && r.finish_reason.as_deref() == Some("length"),
        "{r:?}"
    );
    assert_eq!(r.completion_tokens, Some(20));

    let bad = by_pool("badkey");
    assert_eq!(bad[0].outcome, Outcome::HttpError { status: 401 });
    assert_eq!(sentence(bad[0]).as_deref(), Some("Unauthorized"));
    assert!(bad[1..]
        .iter()
        .all(|r| r.outcome == Outcome::PoolStopped && r.attempts.is_empty()));
    let nomodel = by_pool("nomodel");
    assert_eq!(nomodel[0].outcome, Outcome::HttpError { status: 404 });
    assert_eq!(nomodel[1].outcome, Outcome::PoolStopped);
    // The stopped pools sent one request each, not one per share.
    let received = gw.received();
    let sent_to = |model: &str, auth: &str| {
        received
            .iter()
            .filter(|r| r.body["model"] == model && r.authorization.as_deref() == Some(auth))
            .count()
    };
    assert_eq!(sent_to("ok", "Bearer not-the-key"), 1);
    assert_eq!(sent_to("no-such-model", "Bearer the-right-key"), 1);

    // What extraction made of them: failed draws are not extracted.
    let shown = assay(&s, &["show", &batch.to_string(), "--json"], &[]);
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    let extract: HashMap<String, Vec<String>> = shown["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .fold(HashMap::new(), |mut m, c| {
            m.entry(c["pool"].as_str().unwrap().to_owned())
                .or_default()
                .push(c["extract"].as_str().unwrap().to_owned());
            m
        });
    assert_eq!(extract["r500"], ["draw_failed"]);
    assert_eq!(extract["midstream"], ["draw_failed"]);
    assert_eq!(extract["midstream400"], ["draw_failed"]);
    assert_eq!(extract["null"], ["null_content"]);
    assert_eq!(extract["empty"], ["empty_reply"]);
    assert_eq!(extract["cap"], ["hit_token_cap"]);
    assert_eq!(extract["badkey"], ["draw_failed"; 3]);
}

/// What llama.cpp's server sends inside a stream whose output fails its
/// format (seen from a real server with `tool_choice: "required"`).
const LLAMA_FORMAT_ERROR: &str = r#"{"error":{"code":500,"message":"The model produced output that does not match the expected peg-native format","type":"server_error"}}"#;

/// A fault that sends `event` inside the stream after two tokens.
fn mid_stream(event: &str) -> Fault {
    Fault::StreamError {
        after_tokens: 2,
        event: event.into(),
    }
}

/// No key reaches the database, the logs (at trace level), the error files,
/// the probe's build environment or the scorer's run environment.
#[test]
fn no_key_appears_anywhere() {
    let key = format!("sk-assay-{}", std::process::id());
    let default_key = format!("sk-default-{}", std::process::id());
    // One candidate that compiles only if neither variable reaches the
    // probe's rustc, and fails its cases if either reaches the scorer; and a
    // control that shows the check bites (PATH does reach the probe).
    let guarded = "```rust\nconst _: () = assert!(option_env!(\"POOL_KEY\").is_none());\nconst _: () = assert!(option_env!(\"NEV_MODEL_API_KEY\").is_none());\npub fn double(x: u64) -> u64 {\n    if std::env::var_os(\"POOL_KEY\").is_some() || std::env::var_os(\"NEV_MODEL_API_KEY\").is_some() { return 0; }\n    x * 2\n}\n```\n";
    let control = "```rust\nconst _: () = assert!(option_env!(\"PATH\").is_none());\npub fn double(x: u64) -> u64 { x * 2 }\n```\n";
    let corpus = vec![
        Recorded {
            content: guarded.into(),
            reasoning: None,
        },
        Recorded {
            content: control.into(),
            reasoning: None,
        },
    ];
    let gw = Gateway::start_on_thread(
        Config::new()
            .key(&key)
            .model("m", Model::new(Dialect::LlamaCpp, corpus.clone()))
            .model(
                "fails",
                Model::new(Dialect::LlamaCpp, corpus).fault(
                    Fault::ServerError {
                        body: "upstream error".into(),
                    },
                    usize::MAX,
                ),
            ),
    )
    .unwrap();
    let s = Scratch::new();
    // `keyed` names its variable; `default` uses NEV_MODEL_API_KEY (the
    // gateway refuses it: its 401 body goes to the store and must not echo
    // the key either).
    let pools = pool("keyed", &gw, "m", "api_key_env = \"POOL_KEY\"")
        + &pool(
            "failing",
            &gw,
            "fails",
            "api_key_env = \"POOL_KEY\"\nmax_attempts = 1",
        )
        + &pool("default", &gw, "m", "");
    let file = s.write("pools.toml", &pools);
    let out = assay(
        &s,
        &[
            "run",
            &tiny(),
            "-n",
            "4",
            "-vv",
            "--pools",
            &file.display().to_string(),
            "--pool",
            "keyed=2",
            "--pool",
            "failing=1",
            "--pool",
            "default=1",
        ],
        &[
            ("POOL_KEY", &key),
            ("NEV_MODEL_API_KEY", &default_key),
            ("RUST_LOG", "trace"),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\n{stdout}");
    assert!(stderr.contains("TRACE"), "trace logs were on: {stderr}");
    // The key was really sent.
    let received = gw.received();
    assert!(received
        .iter()
        .any(|r| r.authorization.as_deref() == Some(&*format!("Bearer {key}"))));
    assert!(received
        .iter()
        .any(|r| r.authorization.as_deref() == Some(&*format!("Bearer {default_key}"))));

    let mut places = vec![("stdout".to_owned(), stdout.as_bytes().to_vec())];
    places.push(("stderr".to_owned(), stderr.as_bytes().to_vec()));
    let mut files = Vec::new();
    walk(s.dir.path(), &mut files);
    assert!(files.iter().any(|f| f.ends_with("assay.db")));
    assert!(
        files
            .iter()
            .any(|f| f.to_string_lossy().contains("errors/")),
        "an error file was written: {files:?}"
    );
    for f in files {
        places.push((f.display().to_string(), std::fs::read(&f).unwrap()));
    }
    for (place, bytes) in &places {
        for secret in [&key, &default_key] {
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{secret} found in {place}"
            );
        }
    }

    // The probe and the scorer did not see the keys; the control shows the
    // probe check can fail.
    let summary = assay(&s, &["show", "1", "--json"], &[]);
    let shown: Value = serde_json::from_slice(&summary.stdout).unwrap();
    let cands = shown["candidates"].as_array().unwrap();
    let keyed: Vec<&Value> = cands.iter().filter(|c| c["pool"] == "keyed").collect();
    assert_eq!(keyed.len(), 2);
    let guarded = keyed.iter().find(|c| c["probe"] == "compiled");
    let guarded = guarded.unwrap_or_else(|| panic!("the guarded candidate compiles: {keyed:?}"));
    assert_eq!(guarded["score"], "scored(10/10)", "{keyed:?}");
    assert!(
        keyed
            .iter()
            .any(|c| c["probe"].as_str().unwrap().starts_with("compile_error")),
        "the control does not compile: {keyed:?}"
    );
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// A race fills the batch from whoever is faster and cancels what is still
/// out; a fixed split waits for every share.
#[test]
fn a_race_takes_from_the_faster_pool_and_cancels_the_rest() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let corpus = tiny_corpus();
        let d = Dialect::Vllm {
            tokens_per_chunk: 4,
        };
        let gw = Gateway::start(
            Config::new()
                .model(
                    "fast",
                    Model::new(d, corpus.clone())
                        .latency(Duration::from_millis(10), Duration::from_micros(200)),
                )
                // Never answers before the race is full: which pool wins
                // is decided by order, not by how fast the machine is.
                .model(
                    "slow",
                    Model::new(d, corpus)
                        .fault(Fault::SlowFirstByte(Duration::from_secs(600)), usize::MAX),
                ),
        )
        .await
        .unwrap();
        let pools_toml = pool("fast", &gw, "fast", "max_in_flight = 2")
            .replace("max_in_flight = 1\n", "")
            + &pool("slow", &gw, "slow", "max_in_flight = 2").replace("max_in_flight = 1\n", "");
        let scratch = Scratch::new();
        let path = scratch.write("pools.toml", &pools_toml);
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
        let plan = Plan::http(vec![http("fast"), http("slow")], SplitMode::Race, None);
        assert_eq!(plan.label(), "race(fast+slow)");
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let progress = Progress::hidden();
        let drawing = async { plan.draw(8, 0, tx, &progress).await.unwrap() };
        let collecting = async {
            let mut events = Vec::new();
            while let Some(e) = rx.recv().await {
                events.push(e);
            }
            events
        };
        let ((), events) = tokio::join!(drawing, collecting);
        let mut idx: Vec<usize> = Vec::new();
        let mut from = HashMap::<String, usize>::new();
        let mut cancelled = HashMap::<String, usize>::new();
        for e in &events {
            match e {
                DrawEvent::Reply(d) => {
                    assert_eq!(d.reply.outcome, Outcome::Ok);
                    idx.push(d.idx);
                    *from.entry(d.pool.clone()).or_default() += 1;
                }
                DrawEvent::Cancelled { pool, attempts } => {
                    assert_eq!(attempts.last().unwrap().outcome, Outcome::Cancelled);
                    *cancelled.entry(pool.clone()).or_default() += 1;
                }
                DrawEvent::PoolStopped { .. } => panic!("no pool refused"),
            }
        }
        idx.sort();
        assert_eq!(idx, (0..8).collect::<Vec<_>>(), "every index exactly once");
        assert_eq!(from.get("slow"), None, "the slow pool never finished first");
        assert_eq!(
            cancelled["slow"], 2,
            "the slow pool's two slots were cancelled"
        );
        // The fast pool's other slot may have been out when the race filled.
        assert!(
            cancelled.get("fast").copied().unwrap_or(0) <= 1,
            "{cancelled:?}"
        );
    });
}

/// A spec in a scratch folder that uses the tiny fixture's files by
/// absolute path, with `extra` added to its `[draw]` table.
fn tiny_spec(s: &Scratch, extra: &str) -> String {
    let t = repo().join("tests/fixtures/tiny");
    let p = |f: &str| t.join(f).display().to_string();
    let text = format!(
        "name = \"tiny\"\nprompt = \"{}\"\nharness = \"{}\"\nentry = \"double\"\ncases = \"{}\"\ncommitted = \"{}\"\n\n[draw]\nn = 2\nreplay = \"{}\"\n{extra}\n\n[admit]\nmin_score = 0.9\n\n[limits]\nwall_ms = 1000\n",
        p("prompt.md"),
        p("harness"),
        p("cases.jsonl"),
        p("committed.rs"),
        p("replies.jsonl"),
    );
    std::fs::create_dir_all(s.join("task")).unwrap();
    std::fs::write(s.join("task/spec.toml"), text).unwrap();
    s.join("task").display().to_string()
}

/// With `single_fence`, the stream is closed once the reply holds the
/// fence extraction takes: recorded as cut, with the tokens counted so far
/// (vLLM's continuous usage) and what the cap still allowed. The second
/// reply's code is in a `~~~` fence after a second think block that holds a
/// draft in a Rust fence: it is closed after the `~~~` fence, not inside
/// the reasoning (issue 25). The spec chose the pool; the pools file was
/// found beside the spec.
#[test]
fn a_single_fence_reply_is_cut_when_its_fence_closes() {
    let tail = "\n\nThis doubles x. ".repeat(40);
    let code = "pub fn double(x: u64) -> u64 { x * 2 }";
    let replies = vec![
        Recorded {
            content: format!("```rust\n{code}\n```{tail}"),
            reasoning: None,
        },
        Recorded {
            content: format!(
                "<think>Twice x.</think>\nA check first.\n<think>\n```rust\npub fn double(x: u64) -> u64 {{ x }}\n```\nNo: twice.\n</think>\n~~~\n{code}\n~~~{tail}"
            ),
            reasoning: None,
        },
    ];
    let full: Vec<usize> = replies
        .iter()
        .map(|r| assay_gateway::tokens(&r.content).len())
        .collect();
    let gw = Gateway::start_on_thread(
        Config::new().model(
            "m",
            Model::new(
                Dialect::Vllm {
                    tokens_per_chunk: 2,
                },
                replies,
            )
            .latency(Duration::from_millis(5), Duration::from_millis(3)),
        ),
    )
    .unwrap();
    let s = Scratch::new();
    let dir = tiny_spec(&s, "pools = [\"cutter\"]\nsingle_fence = true");
    std::fs::write(
        s.join("task/pools.toml"),
        pool(
            "cutter",
            &gw,
            "m",
            "max_completion_tokens = 1000\nextra_body = { stream_options = { continuous_usage_stats = true } }",
        ),
    )
    .unwrap();
    let (summary, _) = run_json(&s, &["run", &dir, "--json"], &[]);
    assert_eq!(summary["pool"], "cutter");
    assert_eq!(summary["extracted"], 2, "{summary}");
    assert_eq!(summary["compiled"], 1, "{summary}");
    let replies = s.draw_replies(summary["batch_id"].as_i64().unwrap());
    assert_eq!(replies.len(), 2);
    for d in &replies {
        let r = &d.reply;
        assert!(r.cut_early, "{r:?}");
        assert_eq!(r.finish_reason, None, "the server never finished it");
        let t = r.completion_tokens.expect("continuous usage");
        let most = full.iter().max().unwrap();
        assert!(t < *most as u64 / 2, "{t} of {full:?} tokens");
        assert_eq!(r.cap_tokens_left, Some(1000 - t));
        let content = r.content.as_deref().unwrap();
        assert!(content.contains(code), "{content:?}");
        assert!(!content.contains("This doubles"), "{content:?}");
    }
}

/// Flags beat the environment, which beats the files: N, the token cap,
/// the in-flight limit. A pool without a sampling preset is warned about.
#[test]
fn flags_beat_environment_beats_files() {
    let gw = Gateway::start_on_thread(
        Config::new().model("m", Model::new(Dialect::LlamaCpp, tiny_corpus())),
    )
    .unwrap();
    let s = Scratch::new();
    let bare = format!(
        "[pools.bare]\nbase_url = \"{}\"\nmodel = \"m\"\nmax_completion_tokens = 300\n",
        gw.base_url()
    );
    let file = s.write("pools.toml", &bare);
    let f = file.display().to_string();
    let base = ["run", &*tiny(), "--json", "--pools", &f, "--pool", "bare"];
    let env = [("NEV_CANDIDATES", "3"), ("MAX_COMPLETION_TOKENS", "200")];
    let (summary, stderr) = run_json(&s, &base, &env);
    assert_eq!(summary["replies"], 3, "NEV_CANDIDATES beats the spec's n");
    assert!(
        stderr.contains("pool `bare` has no sampling preset"),
        "{stderr}"
    );
    let mut args = base.to_vec();
    args.extend(["-n", "2", "--max-completion-tokens", "100"]);
    let (summary, _) = run_json(&s, &args, &env);
    assert_eq!(summary["replies"], 2, "-n beats NEV_CANDIDATES");
    let caps: Vec<u64> = gw
        .received()
        .iter()
        .map(|r| r.body["max_tokens"].as_u64().unwrap())
        .collect();
    assert_eq!(caps, [200, 200, 200, 100, 100]);
}

/// Bad draw input: one line naming the file, pool and field; exit 2;
/// nothing stored.
#[test]
fn bad_draw_input_is_one_line_and_exit_2() {
    let s = Scratch::new();
    let good = "[pools.a]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\napi_key_env = \"ASSAY_UNSET_KEY_VAR\"\n";
    // Not in the working directory, where it would be the default file.
    std::fs::create_dir(s.join("cfg")).unwrap();
    let file = s.write("cfg/pools.toml", good);
    let bad = s.write(
        "cfg/bad.toml",
        "[pools.a]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = 3\n",
    );
    let f = file.display().to_string();
    let b = bad.display().to_string();
    let t = tiny();
    let cases: &[(&[&str], &str)] = &[
        (
            &["run", &t, "--pools", &f, "--pool", "zzz"],
            "pools.toml: no pool `zzz` (pools: a)",
        ),
        (
            &["run", &t, "--pools", &f, "--pool", "a"],
            "pools.toml: pool `a`: `api_key_env` names ASSAY_UNSET_KEY_VAR, which is not set",
        ),
        (
            &["run", &t, "--pools", &b, "--pool", "a"],
            "bad.toml:3: invalid type",
        ),
        (&["run", &t, "--pool", "a"], "pool `a` needs a pools file"),
        (
            &["run", &t, "--pool", "a=x"],
            "the share must be a whole number",
        ),
        (
            &["run", &t, "--pools", &f, "--pool", "a=1", "--split", "race"],
            "a race takes no shares",
        ),
        (
            &["run", &t, "--split", "fast"],
            "`fast`: the split is `fixed` or `race`",
        ),
    ];
    for (args, want) in cases {
        let out = assay(&s, args, &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        // clap reports a flag value it cannot parse in its own style (a
        // hint line follows); everything else is one line.
        let lines = if args.iter().any(|a| *a == "a=x" || *a == "fast") {
            3
        } else {
            1
        };
        assert_eq!(err.trim_end().lines().count(), lines, "{args:?}: {err}");
    }
    assert!(!s.db().exists(), "nothing was stored");
}

use crate::common::llama;

/// One chunk of a stream, by shape: what a client can tell apart.
fn shape(event: &Value) -> String {
    if event == "[DONE]" {
        return "[DONE]".into();
    }
    let timed = if event["timings"].is_object() {
        "+timings"
    } else {
        ""
    };
    let choices = event["choices"].as_array().cloned().unwrap_or_default();
    let Some(choice) = choices.first() else {
        let usage = if event["usage"].is_object() {
            "usage"
        } else {
            "nothing"
        };
        return format!("no choices+{usage}{timed}");
    };
    let delta = &choice["delta"];
    let kind = if let Some(reason) = choice["finish_reason"].as_str() {
        format!("finish({reason}) delta {delta}")
    } else if delta["role"] == "assistant" && delta["content"].is_null() {
        format!("role-only {delta}")
    } else if delta["content"].is_string() && delta.as_object().unwrap().len() == 1 {
        "content".into()
    } else {
        format!("other {delta}")
    };
    format!("{kind}{timed}")
}

/// The shapes of a stream, runs of content chunks collapsed into one.
fn shapes(body: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in assay_gateway::recorder::sse_events(body) {
        let s = shape(&e);
        if out.last() != Some(&s) || !s.starts_with("content") {
            out.push(s);
        }
    }
    out
}

fn post(url: &str, key: Option<&str>, body: &Value) -> (u16, String) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut req = reqwest::Client::new()
            .post(format!("{url}/v1/chat/completions"))
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(key) = key {
            req = req.header("authorization", format!("Bearer {key}"));
        }
        let resp = req.send().await.unwrap();
        (resp.status().as_u16(), resp.text().await.unwrap())
    })
}

/// The test gateway's llama.cpp dialect has the real server's stream shape
/// (with and without `include_usage` and `timings_per_token`), the same
/// token accounting (the end token of a stop is counted, never streamed),
/// and the same 401 body.
#[test]
fn the_llama_cpp_dialect_has_the_real_servers_shape() {
    let text = "```rust\nfn f() {}\n```\n";
    let gw = Gateway::start_on_thread(Config::new().key("k").model(
        "m",
        Model::new(
            Dialect::LlamaCpp,
            vec![Recorded {
                content: text.into(),
                reasoning: None,
            }],
        ),
    ))
    .unwrap();
    let real = llama::LlamaServer::start(&llama::Options {
        slots: 1,
        api_key: Some("k".into()),
        ..llama::Options::default()
    });
    let grammar = format!("root ::= {}", serde_json::to_string(text).unwrap());
    let gw_url = format!("http://{}", gw.addr());
    for (usage, per_token) in [(true, true), (true, false), (false, true), (false, false)] {
        let body = serde_json::json!({
            "model": "m",
            "messages": [{"role": "user", "content": "write f"}],
            "stream": true,
            "stream_options": {"include_usage": usage},
            "timings_per_token": per_token,
            "grammar": grammar,
            "seed": 1,
        });
        let (gs, gbody) = post(&gw_url, Some("k"), &body);
        let (rs, rbody) = post(&real.url(), Some("k"), &body);
        assert_eq!((gs, rs), (200, 200), "{rbody}");
        assert_eq!(
            shapes(&gbody),
            shapes(&rbody),
            "include_usage {usage}, timings_per_token {per_token}\ngateway: {gbody}\nreal: {rbody}"
        );
        for body in [&gbody, &rbody] {
            let events = assay_gateway::recorder::sse_events(body);
            let chunks = events
                .iter()
                .filter(|e| e["choices"][0]["delta"]["content"].is_string())
                .count() as u64;
            let counted = events
                .iter()
                .rev()
                .find_map(|e| e["timings"]["predicted_n"].as_u64())
                .unwrap();
            assert_eq!(counted, chunks + 1, "the end token: {body}");
            if usage {
                let usage = events.iter().find_map(|e| e["usage"].as_object()).unwrap();
                assert_eq!(usage["completion_tokens"], chunks + 1, "{body}");
                assert!(usage["prompt_tokens_details"]["cached_tokens"].is_u64());
            }
        }
    }
    let body = serde_json::json!({"model": "m", "messages": [], "stream": true});
    let (gs, gbody) = post(&gw_url, Some("wrong"), &body);
    let (rs, rbody) = post(&real.url(), Some("wrong"), &body);
    assert_eq!((gs, rs), (401, 401));
    let (g, r): (Value, Value) = (
        serde_json::from_str(&gbody).unwrap(),
        serde_json::from_str(&rbody).unwrap(),
    );
    assert_eq!(g, r, "the 401 body");
}

/// The gateway on a thread of its own, serving the tiny corpus under each
/// of `models`, and a pools file (not `pools.toml`, so only `--pools`
/// finds it) with one pool per `(pool, model)`.
fn pool_gateway(s: &Scratch, pools: &[(&str, &str)]) -> (Gateway, PathBuf) {
    let mut config = Config::new();
    for (_, model) in pools {
        let d = Dialect::Vllm {
            tokens_per_chunk: 4,
        };
        config = config.model(model, Model::new(d, tiny_corpus()));
    }
    let gw = Gateway::start_on_thread(config).unwrap();
    let text: String = pools
        .iter()
        .map(|(name, model)| pool(name, &gw, model, ""))
        .collect();
    let file = s.write("models.toml", &text);
    (gw, file)
}

/// Starts `run SPEC --pools FILE --pool NAME -n N` and stops it with
/// SIGINT at its second stored reply; returns its stderr.
fn interrupted_pool_batch(s: &Scratch, spec: &str, file: &Path, pool: &str, n: &str) -> String {
    let file = file.display().to_string();
    let args = ["run", spec, "--pools", &file, "--pool", pool, "-n", n];
    let stopped = s.start_at("pause@draw.reply#2", &args);
    stopped.signal(libc::SIGINT);
    let (status, stderr) = stopped.wait(Duration::from_secs(60));
    assert_eq!(status.code(), Some(130), "{stderr}");
    stderr
}

/// Each stored reply of `batch`, as (pool, model).
fn reply_sources(s: &Scratch, batch: i64) -> Vec<(String, String)> {
    s.draw_replies(batch)
        .into_iter()
        .map(|d| (d.pool, d.reply.model.unwrap_or_default()))
        .collect()
}

/// Issue 38: the hint an interrupted pool batch prints finishes it from
/// its own pools. It used to resume from the spec's default source, the
/// replay corpus (24 of 30 replies from the corpus under `pool local`, or
/// a refusal when the corpus held fewer replies than the batch), unless
/// the user said `--pool` again.
#[test]
fn a_resumed_pool_batch_draws_from_its_own_pools() {
    let _one = RUNS.lock().unwrap_or_else(|e| e.into_inner());
    let s = Scratch::new();
    let spec = tiny_spec(&s, "");
    let (_gw, file) = pool_gateway(&s, &[("local", "local-model")]);
    // More replies than the spec's corpus holds (6).
    let stderr = interrupted_pool_batch(&s, &spec, &file, "local", "10");
    let hint = stderr
        .split("finish it with `")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap_or_else(|| panic!("no hint: {stderr}"));
    let words = shlex::split(hint).unwrap();
    assert_eq!(&words[..4], ["assay", "run", "--resume", "1"], "{hint}");
    let out = s
        .command(&words[1..].iter().map(String::as_str).collect::<Vec<_>>())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "`{hint}` failed: {err}");
    assert!(!err.contains("note:"), "the batch's own source: {err}");
    let sources = reply_sources(&s, 1);
    assert_eq!(sources.len(), 10, "{sources:?}");
    for source in &sources {
        assert_eq!(
            source,
            &("local".into(), "local-model".into()),
            "{sources:?}"
        );
    }
    let shown = s.json(&["show", "1", "--json"]);
    assert_eq!(shown["status"], "finished");
    assert_eq!(shown["pool"], "local");
}

/// A resume whose flags name another pool draws from it, and says so in
/// one line and in the store; the batch draws from that pool from then on.
#[test]
fn a_resume_naming_other_pools_says_so_and_records_it() {
    let _one = RUNS.lock().unwrap_or_else(|e| e.into_inner());
    let s = Scratch::new();
    let spec = tiny_spec(&s, "");
    let (_gw, file) = pool_gateway(&s, &[("local", "local-model"), ("other", "other-model")]);
    interrupted_pool_batch(&s, &spec, &file, "local", "8");
    let kept = reply_sources(&s, 1).len();
    assert!(kept < 8, "the interrupted batch left replies to draw");
    let out = s.assay(&["run", "--resume", "1", "--pool", "other"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let notes: Vec<&str> = err.lines().filter(|l| l.starts_with("note: ")).collect();
    assert_eq!(notes.len(), 1, "{err}");
    assert!(
        notes[0].starts_with(
            "note: batch 1: this resume draws from pools `other` (model `other-model`"
        ) && notes[0].contains("not from pools `local` (model `local-model`"),
        "{err}"
    );
    let sources = reply_sources(&s, 1);
    assert_eq!(sources.len(), 8);
    let drawn_now = sources.iter().filter(|(pool, _)| pool == "other").count();
    assert_eq!(drawn_now, 8 - kept, "{sources:?}");
    for (pool, model) in &sources {
        assert_eq!(model, &format!("{pool}-model"));
    }
    let (changes, draw) = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let store = s.store().await;
        let changes = store.draw_changes(1).await.unwrap();
        let draw = store.draw_source(1).await.unwrap();
        store.close().await;
        (changes, draw)
    });
    assert_eq!(changes.len(), 1, "{changes:?}");
    let (attempt, was, now) = &changes[0];
    assert_eq!(*attempt, 1);
    let name = |json: &str| {
        let v: Value = serde_json::from_str(json).unwrap();
        v["pools"][0]["name"].as_str().unwrap().to_owned()
    };
    assert_eq!((name(was), name(now)), ("local".into(), "other".into()));
    assert_eq!(
        draw.as_ref(),
        Some(now),
        "the batch's source is now `other`"
    );
}
