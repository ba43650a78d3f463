//! A test gateway for assay: an OpenAI-compatible chat endpoint on
//! 127.0.0.1 that serves recorded replies in the wire formats of the engines
//! assay meets in the field, with injectable latency and faults.
//!
//! Each model alias the gateway knows is a [`Model`]: a [`Dialect`] (how the
//! engine packs tokens into chunks and whether it sends usage), a corpus of
//! replies served in turn, where reasoning goes, the latency before the
//! first chunk and the time per token, and optionally a [`Fault`] applied to
//! the first `fault_times` requests for that alias. A request for an alias
//! the gateway does not know gets vLLM's 404; a wrong bearer key gets 401.
//!
//! The gateway counts tokens itself (whitespace runs and runs of up to four
//! other characters are one token each) and logs what it served
//! ([`Served`]), so tests compare what assay recorded with the gateway's own
//! figures rather than with a guess.
//!
//! Timing: the response headers go out at once (unless the fault is a slow
//! first byte); the first chunk goes out `latency` after the request arrived;
//! every later chunk goes out `per_token` times its token count after the one
//! before, scheduled against absolute deadlines so sleeps do not drift.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};

pub mod recorder;
pub use recorder::{Exchange, Recorder};

/// How an engine puts a stream on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// vLLM: several tokens per chunk; with `stream_options.include_usage`
    /// a final chunk with empty `choices` carries `usage`; with
    /// `continuous_usage_stats` every chunk carries usage so far.
    Vllm { tokens_per_chunk: usize },
    /// llama.cpp server, as measured against the real one
    /// (tests/it/llama.rs compares the shapes): a role-only first delta with
    /// `"content": null`, then one token per chunk (the gateway's tokens
    /// are never split characters), a finish chunk with an empty delta,
    /// then with `include_usage` a separate chunk with `"choices": []`
    /// carrying `usage` and `timings` (without it, `timings` ride on the
    /// finish chunk). On `stop`, `completion_tokens` counts the end token,
    /// which is never streamed: chunks + 1. With `timings_per_token`, every
    /// text chunk carries running `timings`. Errors are JSON bodies with an
    /// integer `code`.
    LlamaCpp,
    /// TabbyAPI: one token per chunk and never a usage block.
    Tabby,
}

/// Where a reasoning model writes its reasoning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reasoning {
    /// Not a reasoning model: reasoning in the corpus is not served.
    None,
    /// Inside `content`, as a leading `<think>...</think>` block.
    InContent,
    /// In a separate delta field (vLLM's `reasoning_content`).
    Field(String),
}

/// A fault served instead of (or in the middle of) a normal reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// 429 with a `Retry-After` header (seconds) and an OpenAI-style body.
    RateLimit { retry_after_s: u64 },
    /// 500 with this body (verbatim).
    ServerError { body: String },
    /// The connection is dropped after this many tokens of the reply: the
    /// chunked body ends without its terminating chunk.
    ResetAfter { tokens: usize },
    /// The response headers wait this long.
    SlowFirstByte(Duration),
    /// After this many tokens, a chunk whose JSON is cut in half.
    MalformedChunk { after_tokens: usize },
    /// After this many tokens, an error event inside the stream (`event`,
    /// sent as one `data:` line as it is), then the stream ends without
    /// `[DONE]`, as llama.cpp's server does when its output fails a format.
    StreamError { after_tokens: usize, event: String },
    /// Deltas with `"content": null`, then `finish_reason: stop`.
    NullContent,
    /// One delta with `"content": ""`, then `finish_reason: stop`.
    EmptyReply,
    /// The model repeats itself until the request's token cap.
    RunToCap,
}

/// One recorded reply in the gateway's corpus.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recorded {
    pub content: String,
    pub reasoning: Option<String>,
}

/// What the gateway does for one model alias.
#[derive(Debug, Clone)]
pub struct Model {
    pub dialect: Dialect,
    pub reasoning: Reasoning,
    /// Served in turn, round robin.
    pub replies: Vec<Recorded>,
    /// Time from the request's arrival to the first chunk.
    pub latency: Duration,
    /// Time per token between chunks.
    pub per_token: Duration,
    pub fault: Option<Fault>,
    /// The fault applies to the first this many requests for the alias
    /// (`usize::MAX`: every request).
    pub fault_times: usize,
    /// A scripted model: a request whose messages contain a rule's text is
    /// answered with that rule's reply (the first rule that matches), any
    /// other with the corpus. So a test can answer a repair prompt that
    /// carries a given compiler error or failed case with fixed code, and
    /// everything else with broken code.
    pub rules: Vec<(String, Recorded)>,
    /// A server that thrashes past this many concurrent streams: while
    /// `active` streams of the alias are open, each token takes
    /// `(active / knee)^2` times `per_token` (never less than `per_token`),
    /// so aggregate throughput rises up to `knee` streams and falls after.
    pub knee: Option<usize>,
}

impl Model {
    pub fn new(dialect: Dialect, replies: Vec<Recorded>) -> Model {
        Model {
            dialect,
            reasoning: Reasoning::None,
            replies,
            latency: Duration::ZERO,
            per_token: Duration::ZERO,
            fault: None,
            fault_times: usize::MAX,
            rules: Vec::new(),
            knee: None,
        }
    }

    /// The reply to the `nth` request for the alias, whose messages read
    /// `asked`, and the rule that chose it.
    fn reply_for(&self, asked: &str, nth: usize) -> (&Recorded, Option<&str>) {
        match self
            .rules
            .iter()
            .find(|(text, _)| asked.contains(text.as_str()))
        {
            Some((text, reply)) => (reply, Some(text)),
            None => (&self.replies[nth % self.replies.len().max(1)], None),
        }
    }

    /// Answers a request whose messages contain `text` with `reply`
    /// (see [`Model::rules`]).
    pub fn answer_when(mut self, text: &str, reply: Recorded) -> Model {
        self.rules.push((text.to_owned(), reply));
        self
    }

    /// Slows every token down once more than `knee` streams are open (see
    /// [`Model::knee`]).
    pub fn overload(mut self, knee: usize) -> Model {
        self.knee = Some(knee.max(1));
        self
    }

    pub fn latency(mut self, latency: Duration, per_token: Duration) -> Model {
        self.latency = latency;
        self.per_token = per_token;
        self
    }

    pub fn reasoning(mut self, reasoning: Reasoning) -> Model {
        self.reasoning = reasoning;
        self
    }

    /// Applies `fault` to the first `times` requests.
    pub fn fault(mut self, fault: Fault, times: usize) -> Model {
        self.fault = Some(fault);
        self.fault_times = times;
        self
    }
}

/// The whole gateway.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// The bearer key every request must carry; `None` accepts any.
    pub key: Option<String>,
    pub models: HashMap<String, Model>,
}

impl Config {
    pub fn new() -> Config {
        Config::default()
    }

    pub fn key(mut self, key: &str) -> Config {
        self.key = Some(key.to_owned());
        self
    }

    pub fn model(mut self, alias: &str, model: Model) -> Config {
        self.models.insert(alias.to_owned(), model);
        self
    }
}

/// What the gateway served for one request, by its own count.
#[derive(Debug, Clone, PartialEq)]
pub struct Served {
    pub model: String,
    /// HTTP status sent.
    pub status: u16,
    /// Completion tokens the gateway reported in its usage block (llama.cpp
    /// counts the unstreamed end token of a `stop`: `streamed_tokens + 1`).
    pub completion_tokens: usize,
    /// Tokens of the reply streamed (reasoning included), by the gateway's
    /// count.
    pub streamed_tokens: usize,
    pub prompt_tokens: usize,
    /// Chunks that carried text.
    pub text_chunks: usize,
    /// The fault served, if any.
    pub fault: Option<Fault>,
    /// The answer text served (reasoning and `<think>` blocks excluded).
    pub content: String,
    /// The rule's text that chose the reply, for a scripted model.
    pub rule: Option<String>,
    /// When the first chunk was due, from the request's arrival: the
    /// injected latency.
    pub first_due: Duration,
    /// When the last text chunk was due: latency plus the per-token time of
    /// every chunk after the first.
    pub last_due: Duration,
}

/// One request as the gateway received it.
#[derive(Debug, Clone)]
pub struct Received {
    pub authorization: Option<String>,
    pub body: Value,
}

/// A running gateway. Dropping it stops the server.
pub struct Gateway {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
}

struct Shared {
    config: Config,
    counters: HashMap<String, AtomicUsize>,
    /// Streams open per alias (for [`Model::knee`]).
    active: HashMap<String, AtomicUsize>,
    served: Mutex<Vec<Served>>,
    received: Mutex<Vec<Received>>,
}

impl Gateway {
    /// Binds 127.0.0.1 on a free port and serves on the current tokio runtime.
    pub async fn start(config: Config) -> std::io::Result<Gateway> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let counters = config
            .models
            .keys()
            .map(|k| (k.clone(), AtomicUsize::new(0)))
            .collect();
        let active = config
            .models
            .keys()
            .map(|k| (k.clone(), AtomicUsize::new(0)))
            .collect();
        let shared = Arc::new(Shared {
            config,
            counters,
            active,
            served: Mutex::new(Vec::new()),
            received: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .with_state(shared.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(Gateway {
            addr,
            shared,
            stop: Some(stop),
        })
    }

    /// Starts the gateway on a runtime of its own thread, so it keeps serving
    /// whatever the caller's runtime does (benchmarks, blocking tests).
    pub fn start_on_thread(config: Config) -> std::io::Result<Gateway> {
        Gateway::start_on_threads(config, 1)
    }

    /// As [`Gateway::start_on_thread`], with `workers` runtime threads.
    pub fn start_on_threads(config: Config, workers: usize) -> std::io::Result<Gateway> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers.max(1))
                .enable_all()
                .build()
                .expect("gateway runtime");
            rt.block_on(async move {
                match Gateway::start(config).await {
                    Ok(mut gw) => {
                        let stop = gw.stop.take();
                        let (done_tx, done_rx) = oneshot::channel::<()>();
                        let _ = tx.send(Ok((gw, done_tx)));
                        let _ = done_rx.await;
                        if let Some(stop) = stop {
                            let _ = stop.send(());
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                    }
                }
            });
        });
        let (mut gw, done) = rx
            .recv()
            .map_err(|_| std::io::Error::other("gateway thread died"))??;
        gw.stop = Some(done);
        Ok(gw)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL a pool names, `/v1` included.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Everything served so far, in order of completion.
    pub fn served(&self) -> Vec<Served> {
        self.shared.served.lock().unwrap().clone()
    }

    /// Every request received so far, in order of arrival.
    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().unwrap().clone()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The gateway's tokenizer: a run of whitespace is one token, and so is
/// each run of up to four other characters.
pub fn tokens(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut count = 0;
    let mut in_space = None;
    for (i, c) in text.char_indices() {
        let space = c.is_whitespace();
        let boundary = match in_space {
            None => false,
            Some(prev) => prev != space || (!space && count == 4),
        };
        if boundary {
            out.push(&text[start..i]);
            start = i;
            count = 0;
        }
        in_space = Some(space);
        count += 1;
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

fn error_body(message: &str, kind: &str, code: u16) -> String {
    // vLLM's shape: the code is an integer, which is what trips clients that
    // expect OpenAI's string codes.
    json!({"object": "error", "message": message, "type": kind, "param": null, "code": code})
        .to_string()
}

fn error_response(status: StatusCode, body: String, headers: &[(&str, String)]) -> Response {
    let mut resp = (status, body).into_response();
    resp.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    for (name, value) in headers {
        resp.headers_mut().insert(
            axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    resp
}

async fn chat(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let arrived = Instant::now();
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                error_body(&format!("invalid JSON: {e}"), "BadRequestError", 400),
                &[],
            )
        }
    };
    shared.received.lock().unwrap().push(Received {
        authorization: authorization.clone(),
        body: body.clone(),
    });
    let alias = body["model"].as_str().unwrap_or_default().to_owned();
    let log = |status: u16, fault: Option<Fault>| {
        shared.served.lock().unwrap().push(Served {
            model: alias.clone(),
            status,
            completion_tokens: 0,
            streamed_tokens: 0,
            prompt_tokens: 0,
            text_chunks: 0,
            fault,
            content: String::new(),
            rule: None,
            first_due: Duration::ZERO,
            last_due: Duration::ZERO,
        });
    };
    if let Some(key) = &shared.config.key {
        if authorization.as_deref() != Some(&format!("Bearer {key}")) {
            log(401, None);
            let dialect = shared.config.models.get(&alias).map(|m| m.dialect);
            let body = match dialect {
                Some(Dialect::LlamaCpp) => json!({"error": {"code": 401,
                    "message": "Invalid API Key", "type": "authentication_error"}}),
                _ => json!({"error": "Unauthorized"}),
            };
            return error_response(StatusCode::UNAUTHORIZED, body.to_string(), &[]);
        }
    }
    let Some(model) = shared.config.models.get(&alias) else {
        log(404, None);
        return error_response(
            StatusCode::NOT_FOUND,
            error_body(
                &format!("The model `{alias}` does not exist."),
                "NotFoundError",
                404,
            ),
            &[],
        );
    };
    if body["stream"] != json!(true) {
        log(400, None);
        return error_response(
            StatusCode::BAD_REQUEST,
            error_body(
                "this test gateway serves streams only",
                "BadRequestError",
                400,
            ),
            &[],
        );
    }
    let nth = shared.counters[&alias].fetch_add(1, Ordering::SeqCst);
    let fault = model.fault.clone().filter(|_| nth < model.fault_times);
    match &fault {
        Some(Fault::RateLimit { retry_after_s }) => {
            log(429, fault.clone());
            return error_response(
                StatusCode::TOO_MANY_REQUESTS,
                error_body(
                    "Rate limit reached for requests; please retry later",
                    "RateLimitError",
                    429,
                ),
                &[("retry-after", retry_after_s.to_string())],
            );
        }
        Some(Fault::ServerError { body }) => {
            log(500, fault.clone());
            return error_response(StatusCode::INTERNAL_SERVER_ERROR, body.clone(), &[]);
        }
        Some(Fault::SlowFirstByte(wait)) => tokio::time::sleep(*wait).await,
        _ => {}
    }

    let cap = body["max_completion_tokens"]
        .as_u64()
        .or(body["max_tokens"].as_u64())
        .map(|c| c as usize);
    let include_usage = body["stream_options"]["include_usage"] == json!(true);
    let continuous = body["stream_options"]["continuous_usage_stats"] == json!(true);
    let timings_per_token = body["timings_per_token"] == json!(true);
    let prompt_tokens = body["messages"]
        .as_array()
        .map(|ms| {
            ms.iter()
                .map(|m| tokens(m["content"].as_str().unwrap_or_default()).len())
                .sum()
        })
        .unwrap_or(0);
    let (recorded, rule) = model.reply_for(&messages_text(&body), nth);
    let plan = Plan::new(model, recorded, fault.clone(), cap);
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(16);
    let stream = Stream {
        alias: alias.clone(),
        dialect: model.dialect,
        reasoning: model.reasoning.clone(),
        latency: model.latency,
        per_token: model.per_token,
        knee: model.knee,
        include_usage,
        continuous,
        timings_per_token,
        prompt_tokens,
        arrived,
        fault,
        rule: rule.map(str::to_owned),
    };
    tokio::spawn(stream.run(plan, tx, shared.clone()));
    let mut resp = Response::new(Body::from_stream(
        tokio_stream::wrappers::ReceiverStream::new(rx),
    ));
    resp.headers_mut().insert(
        "content-type",
        HeaderValue::from_static("text/event-stream"),
    );
    resp.headers_mut()
        .insert("cache-control", HeaderValue::from_static("no-cache"));
    resp
}

/// The pieces of one reply, already cut into chunks.
struct Plan {
    /// (is reasoning, text, tokens) per chunk.
    chunks: Vec<(bool, String, usize)>,
    finish_reason: &'static str,
    /// A delta sent before any text: `content: null` or `content: ""`.
    lead: Option<Value>,
}

impl Plan {
    fn new(model: &Model, recorded: &Recorded, fault: Option<Fault>, cap: Option<usize>) -> Plan {
        let per_chunk = match model.dialect {
            Dialect::Vllm { tokens_per_chunk } => tokens_per_chunk.max(1),
            Dialect::LlamaCpp | Dialect::Tabby => 1,
        };
        // Reasoning and content as token lists, before the cap.
        let reasoning_text = match model.reasoning {
            Reasoning::None => None,
            _ => recorded.reasoning.clone(),
        };
        let content_text = match &fault {
            Some(Fault::RunToCap) => "fn again() {}\n".repeat(cap.unwrap_or(256) + 1),
            Some(Fault::NullContent) | Some(Fault::EmptyReply) => String::new(),
            _ => recorded.content.clone(),
        };
        let mut pieces: Vec<(bool, &str)> = Vec::new();
        let think_in_content;
        match (&model.reasoning, &reasoning_text) {
            (Reasoning::InContent, Some(r)) => {
                think_in_content = format!("<think>\n{r}\n</think>\n\n");
                pieces.extend(tokens(&think_in_content).into_iter().map(|t| (false, t)));
            }
            (Reasoning::Field(_), Some(r)) => {
                pieces.extend(tokens(r).into_iter().map(|t| (true, t)));
            }
            _ => {}
        }
        pieces.extend(tokens(&content_text).into_iter().map(|t| (false, t)));
        let mut finish_reason = "stop";
        if let Some(cap) = cap {
            if pieces.len() > cap {
                pieces.truncate(cap);
                finish_reason = "length";
            }
        }
        // Group consecutive tokens of one kind into chunks of `per_chunk`.
        let mut chunks: Vec<(bool, String, usize)> = Vec::new();
        for (reasoning, tok) in pieces {
            match chunks.last_mut() {
                Some((r, text, n)) if *r == reasoning && *n < per_chunk => {
                    text.push_str(tok);
                    *n += 1;
                }
                _ => chunks.push((reasoning, tok.to_owned(), 1)),
            }
        }
        Plan {
            lead: match fault {
                Some(Fault::NullContent) => Some(Value::Null),
                Some(Fault::EmptyReply) => Some(json!("")),
                _ => None,
            },
            chunks,
            finish_reason,
        }
    }
}

struct Stream {
    alias: String,
    dialect: Dialect,
    reasoning: Reasoning,
    latency: Duration,
    per_token: Duration,
    knee: Option<usize>,
    include_usage: bool,
    continuous: bool,
    timings_per_token: bool,
    prompt_tokens: usize,
    arrived: Instant,
    fault: Option<Fault>,
    rule: Option<String>,
}

/// Every message's text of a chat request, one after the other.
fn messages_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .map(|ms| {
            ms.iter()
                .filter_map(|m| m["content"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

impl Stream {
    fn chunk(&self, delta: Value, finish: Option<&str>, extra: Option<(&str, Value)>) -> Bytes {
        let mut obj = json!({
            "id": "chatcmpl-gateway",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": self.alias,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        if let Some((k, v)) = extra {
            obj[k] = v;
        }
        Bytes::from(format!("data: {obj}\n\n"))
    }

    fn usage(&self, completion: usize) -> Value {
        let mut usage = json!({"prompt_tokens": self.prompt_tokens, "completion_tokens": completion,
               "total_tokens": self.prompt_tokens + completion});
        if self.dialect == Dialect::LlamaCpp {
            usage["prompt_tokens_details"] = json!({"cached_tokens": 0});
        }
        usage
    }

    /// llama.cpp's `timings` after `predicted` tokens: the whole prompt
    /// evaluated, nothing from the cache.
    fn timings(&self, predicted: usize) -> Value {
        let elapsed_ms = self.arrived.elapsed().as_secs_f64() * 1e3;
        json!({
            "cache_n": 0,
            "prompt_n": self.prompt_tokens,
            "prompt_ms": self.latency.as_secs_f64() * 1e3,
            "predicted_n": predicted,
            "predicted_ms": elapsed_ms,
        })
    }

    async fn run(
        self,
        plan: Plan,
        tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
        shared: Arc<Shared>,
    ) {
        let mut sent_tokens = 0usize;
        let mut text_chunks = 0usize;
        let mut content = String::new();
        let mut due = self.arrived + self.latency;
        let reasoning_field = match &self.reasoning {
            Reasoning::Field(f) => f.clone(),
            _ => "reasoning_content".to_owned(),
        };
        let send = |b: Bytes| {
            let tx = tx.clone();
            async move { tx.send(Ok(b)).await.is_ok() }
        };
        let active = &shared.active[&self.alias];
        active.fetch_add(1, Ordering::SeqCst);
        // The slowdown of a thrashing server, read as each chunk is due.
        let slowdown = || match self.knee {
            Some(knee) => {
                let load = active.load(Ordering::SeqCst) as f64 / knee as f64;
                (load * load).max(1.0)
            }
            None => 1.0,
        };
        let mut alive = true;
        let lead = match (&plan.lead, self.dialect) {
            (None, Dialect::LlamaCpp) => Some(Value::Null),
            (lead, _) => lead.clone(),
        };
        if let Some(lead) = &lead {
            tokio::time::sleep_until(due.into()).await;
            let delta = json!({"role": "assistant", "content": lead});
            alive &= send(self.chunk(delta, None, None)).await;
        }
        for (i, (is_reasoning, text, n)) in plan.chunks.iter().enumerate() {
            if !alive {
                break;
            }
            if i > 0 {
                due += (self.per_token * (*n as u32)).mul_f64(slowdown());
            }
            tokio::time::sleep_until(due.into()).await;
            match &self.fault {
                Some(Fault::ResetAfter { tokens }) if sent_tokens >= *tokens => {
                    let _ = tx
                        .send(Err(std::io::Error::other(
                            "connection reset by the gateway",
                        )))
                        .await;
                    alive = false;
                    break;
                }
                Some(Fault::MalformedChunk { after_tokens }) if sent_tokens >= *after_tokens => {
                    // Then the stream ends: nothing after a broken chunk.
                    let _ = send(Bytes::from_static(
                        b"data: {\"id\":\"chatcmpl-gateway\",\"choices\":[{\"delta\":{\"content\":\"unterminated\n\n",
                    ))
                    .await;
                    alive = false;
                    break;
                }
                Some(Fault::StreamError {
                    after_tokens,
                    event,
                }) if sent_tokens >= *after_tokens => {
                    let _ = send(Bytes::from(format!("data: {event}\n\n"))).await;
                    alive = false;
                    break;
                }
                _ => {}
            }
            let mut delta = if *is_reasoning {
                json!({ reasoning_field.clone(): text })
            } else {
                json!({ "content": text })
            };
            if i == 0 && self.dialect != Dialect::LlamaCpp {
                delta["role"] = json!("assistant");
            }
            sent_tokens += n;
            text_chunks += 1;
            if !*is_reasoning {
                content.push_str(text);
            }
            let extra = match self.dialect {
                Dialect::Vllm { .. } if self.continuous && self.include_usage => {
                    Some(("usage", self.usage(sent_tokens)))
                }
                Dialect::LlamaCpp if self.timings_per_token => {
                    Some(("timings", self.timings(sent_tokens)))
                }
                _ => None,
            };
            alive &= send(self.chunk(delta, None, extra)).await;
        }
        // llama.cpp counts the end token of a stop, which it never streams.
        let reported_tokens = match self.dialect {
            Dialect::LlamaCpp if plan.finish_reason == "stop" => sent_tokens + 1,
            _ => sent_tokens,
        };
        if alive {
            if plan.chunks.is_empty() && lead.is_none() {
                tokio::time::sleep_until(due.into()).await;
            }
            let finish = Some(plan.finish_reason);
            let last = match self.dialect {
                Dialect::Vllm { .. } => {
                    let mut out = self.chunk(json!({}), finish, None).to_vec();
                    if self.include_usage {
                        let usage = json!({
                            "id": "chatcmpl-gateway", "object": "chat.completion.chunk",
                            "created": 0, "model": self.alias, "choices": [],
                            "usage": self.usage(sent_tokens),
                        });
                        out.extend_from_slice(format!("data: {usage}\n\n").as_bytes());
                    }
                    Bytes::from(out)
                }
                Dialect::LlamaCpp => {
                    let timings = self.timings(reported_tokens);
                    if self.include_usage {
                        let mut out = self.chunk(json!({}), finish, None).to_vec();
                        let usage = json!({
                            "id": "chatcmpl-gateway", "object": "chat.completion.chunk",
                            "created": 0, "model": self.alias, "choices": [],
                            "usage": self.usage(reported_tokens),
                            "timings": timings,
                        });
                        out.extend_from_slice(format!("data: {usage}\n\n").as_bytes());
                        Bytes::from(out)
                    } else {
                        self.chunk(json!({}), finish, Some(("timings", timings)))
                    }
                }
                Dialect::Tabby => self.chunk(json!({}), finish, None),
            };
            if send(last).await {
                let _ = send(Bytes::from_static(b"data: [DONE]\n\n")).await;
            }
        }
        active.fetch_sub(1, Ordering::SeqCst);
        shared.served.lock().unwrap().push(Served {
            model: self.alias.clone(),
            status: 200,
            completion_tokens: reported_tokens,
            streamed_tokens: sent_tokens,
            prompt_tokens: self.prompt_tokens,
            text_chunks,
            fault: self.fault.clone(),
            content: match content.find("</think>") {
                Some(i) => content[i + "</think>".len()..].to_owned(),
                None => content,
            },
            rule: self.rule.clone(),
            first_due: self.latency,
            last_due: due - self.arrived,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_split_words_spaces_and_long_runs() {
        assert_eq!(tokens("fn main() {}"), ["fn", " ", "main", "()", " ", "{}"]);
        assert_eq!(tokens("abcdefghij"), ["abcd", "efgh", "ij"]);
        assert_eq!(tokens(""), Vec::<&str>::new());
        assert_eq!(tokens("a\n\n b"), ["a", "\n\n ", "b"]);
    }

    #[test]
    fn a_scripted_model_answers_by_its_rules_then_its_corpus() {
        let reply = |c: &str| Recorded {
            content: c.into(),
            reasoning: None,
        };
        let model = Model::new(Dialect::Tabby, vec![reply("broken 0"), reply("broken 1")])
            .answer_when("error[E0308]", reply("fixed"))
            .answer_when("case `two`", reply("fixed two"));
        let body = json!({"messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "it failed:\n- case `two`\n"},
        ]});
        let asked = messages_text(&body);
        assert_eq!(
            model.reply_for(&asked, 0),
            (&reply("fixed two"), Some("case `two`"))
        );
        assert_eq!(
            model.reply_for("error[E0308]: and case `two`", 5).1,
            Some("error[E0308]"),
            "the first rule wins"
        );
        assert_eq!(model.reply_for("write f", 3), (&reply("broken 1"), None));
    }

    #[test]
    fn vllm_packs_tokens_and_the_cap_truncates() {
        let model = Model::new(
            Dialect::Vllm {
                tokens_per_chunk: 3,
            },
            vec![],
        );
        let rec = Recorded {
            content: "a b c d".into(),
            reasoning: None,
        };
        let plan = Plan::new(&model, &rec, None, None);
        assert_eq!(plan.chunks.len(), 3); // 7 tokens in chunks of 3
        assert_eq!(plan.finish_reason, "stop");
        let plan = Plan::new(&model, &rec, None, Some(4));
        let sent: usize = plan.chunks.iter().map(|c| c.2).sum();
        assert_eq!((sent, plan.finish_reason), (4, "length"));
    }
}
