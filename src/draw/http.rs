//! An OpenAI-compatible pool: streaming chat completions (or, for a suite
//! drawn from a base model, plain completions of a prompt with stop tokens,
//! `/v1/completions`) through `async-openai`, with assay's own bounded
//! retry policy.
//!
//! async-openai's default executor retries 429 and 5xx inside the client,
//! where nobody sees the attempts. Here the client gets a tower service that
//! never retries ([`NoRetry`]) and hands every non-2xx response back as an
//! [`HttpFailure`] carrying the status, `Retry-After` and the raw body (the
//! library would drop the status of non-5xx errors whose body does not
//! parse, as vLLM's integer error codes do not). [`HttpPool::request`] then
//! decides, records every attempt, and retries at most `max_attempts` times.
//!
//! The key lives in a `SecretString` and goes into one header marked
//! sensitive; it is never formatted into a message, a log line or the store.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use async_openai::config::Config;
use async_openai::error::OpenAIError;
use async_openai::middleware::HttpRequestFactory;
use async_openai::Client;
use futures::StreamExt;
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{json, Value};

use super::pools::{CapField, PoolConfig};
use super::{Attempt, ErrorText, Outcome, Reply};
use crate::extract::Watch;
use crate::markdown::{self, Kind};

/// First retry waits this long; each later one twice the one before.
const BACKOFF_BASE: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(8);
/// Error bodies are kept up to this many bytes.
const BODY_LIMIT: usize = 4096;

/// One OpenAI-compatible endpoint with its settings.
pub struct HttpPool {
    name: String,
    cfg: PoolConfig,
    client: Client<PoolAuth>,
    /// The request body without the per-request seed.
    body: Value,
    /// Which endpoint the body is for.
    completion: bool,
    early_stop: EarlyStop,
}

/// When a stream is closed before the server ends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EarlyStop {
    /// Every stream is read to its end.
    Never,
    /// The prompt asks for one code block: a stream is closed once its
    /// content so far holds what extraction takes for `entry`, whatever
    /// may follow ([`Watch`]).
    AtAnswer { entry: String },
}

impl EarlyStop {
    fn watch(&self) -> Option<Watch> {
        match self {
            EarlyStop::Never => None,
            EarlyStop::AtAnswer { entry } => Some(Watch::new(entry)),
        }
    }
}

/// What a pool is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompt {
    /// One user message to `/v1/chat/completions`.
    Chat(String),
    /// A text to continue, cut at any of `stop`, to `/v1/completions`
    /// (what base models need, and how MultiPL-E draws).
    Completion { prompt: String, stop: Vec<String> },
}

impl std::fmt::Debug for HttpPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The client holds the key: never print it.
        f.debug_struct("HttpPool")
            .field("name", &self.name)
            .field("base_url", &self.cfg.base_url)
            .field("model", &self.cfg.model)
            .finish_non_exhaustive()
    }
}

impl HttpPool {
    /// A pool from its configuration. `prompt` is sent as the one user
    /// message. Errors are one-line messages about the configuration.
    pub fn new(
        name: &str,
        cfg: PoolConfig,
        key: Option<SecretString>,
        prompt: &str,
        early_stop: EarlyStop,
    ) -> Result<HttpPool, String> {
        if let Some(k) = &key {
            if HeaderValue::from_str(&format!("Bearer {}", k.expose_secret())).is_err() {
                return Err("the key holds characters a header cannot carry".into());
            }
        }
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(cfg.max_in_flight)
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        let auth = PoolAuth {
            base: cfg.base_url.trim_end_matches('/').to_owned(),
            key,
            none: SecretString::from(String::new()),
        };
        let client = Client::with_config(auth).with_http_service(NoRetry { http });
        let body = request_body(&cfg, &Prompt::Chat(prompt.to_owned()));
        Ok(HttpPool {
            name: name.to_owned(),
            cfg,
            client,
            body,
            completion: false,
            early_stop,
        })
    }

    /// The same pool (its settings, key and connections) asked `prompt`
    /// instead, closing streams early as `early_stop` says: a suite draws
    /// every problem from the pools the user named.
    pub fn for_prompt(&self, prompt: &Prompt, early_stop: EarlyStop) -> HttpPool {
        let completion = matches!(prompt, Prompt::Completion { .. });
        HttpPool {
            name: self.name.clone(),
            cfg: self.cfg.clone(),
            client: self.client.clone(),
            body: request_body(&self.cfg, prompt),
            completion,
            // A completion continues code; it has no fence to close.
            early_stop: if completion {
                EarlyStop::Never
            } else {
                early_stop
            },
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn max_in_flight(&self) -> usize {
        self.cfg.max_in_flight
    }

    /// The JSON body of request number `k` of a batch.
    pub fn body(&self, k: u64) -> Value {
        self.seeded(self.body.clone(), k)
    }

    /// The JSON body of request number `k` asking `prompt` as its one user
    /// message instead of the pool's own (a repair round's prompt).
    pub fn body_asking(&self, k: u64, prompt: &str) -> Value {
        self.seeded(request_body(&self.cfg, &Prompt::Chat(prompt.to_owned())), k)
    }

    fn seeded(&self, mut body: Value, k: u64) -> Value {
        if let Some(seed) = self.cfg.sampling.as_ref().and_then(|s| s.seed) {
            body["seed"] = json!(seed.wrapping_add(k));
        }
        body
    }

    /// Runs request number `k` to its end, retrying what is worth retrying,
    /// and returns the reply with every attempt. Never fails: a failure is a
    /// reply whose outcome says what happened.
    pub async fn request(&self, k: u64) -> Reply {
        self.send(self.body(k), k).await
    }

    /// Runs request number `k` asking `prompt` (see [`HttpPool::body_asking`]).
    pub async fn request_asking(&self, k: u64, prompt: &str) -> Reply {
        self.send(self.body_asking(k, prompt), k).await
    }

    async fn send(&self, body: Value, k: u64) -> Reply {
        let start = Instant::now();
        let mut attempts = Vec::new();
        let mut number = 1;
        loop {
            let started = start.elapsed();
            let mut acc = Accum {
                watch: self.early_stop.watch(),
                ..Accum::default()
            };
            let end = self.attempt(&body, start, &mut acc).await;
            let mut attempt = Attempt {
                number,
                started_ms: ms(started),
                duration_ms: ms(start.elapsed() - started),
                outcome: end.outcome,
                error: end.error.clone(),
                retry_after_ms: end.retry_after.map(ms),
                delay_ms: None,
            };
            let delay = retry_delay(number, end.retry_after);
            let retry = end.outcome.is_retryable()
                && number < self.cfg.max_attempts
                && end
                    .retry_after
                    .is_none_or(|r| r.as_secs_f64() <= self.cfg.max_retry_wait_s);
            if retry {
                attempt.delay_ms = Some(ms(delay));
                tracing::info!(
                    pool = %self.name, request = k, attempt = number, outcome = %end.outcome,
                    delay_ms = ms(delay), "retrying"
                );
                attempts.push(attempt);
                tokio::time::sleep(delay).await;
                number += 1;
                continue;
            }
            attempts.push(attempt);
            return acc.into_reply(
                end,
                attempts,
                ms(start.elapsed()),
                self.cfg.max_completion_tokens,
            );
        }
    }

    /// One attempt: send, read the stream to its end (or the cut, or the
    /// deadline), and say how it ended.
    async fn attempt(&self, body: &Value, start: Instant, acc: &mut Accum) -> End {
        let deadline = tokio::time::Instant::now() + self.cfg.timeout();
        let opened = if self.completion {
            tokio::time::timeout_at(
                deadline,
                self.client
                    .completions()
                    .create_stream_byot::<&Value, Chunk>(body),
            )
            .await
        } else {
            tokio::time::timeout_at(
                deadline,
                self.client.chat().create_stream_byot::<&Value, Chunk>(body),
            )
            .await
        };
        let mut stream = match opened {
            Err(_) => return End::timeout(&self.cfg),
            Ok(Err(e)) => return End::from_error(e),
            Ok(Ok(s)) => s,
        };
        loop {
            match tokio::time::timeout_at(deadline, stream.next()).await {
                Err(_) => return End::timeout(&self.cfg),
                Ok(None) => return End::ok(),
                Ok(Some(Err(e))) => return End::from_error(e),
                Ok(Some(Ok(chunk))) => {
                    if acc.add(chunk, ms(start.elapsed())) && acc.answer_settled() {
                        // Dropping the stream closes the connection; the
                        // engine stops generating for it.
                        acc.cut_early = true;
                        return End::ok();
                    }
                }
            }
        }
    }
}

/// How one attempt ended.
#[derive(Debug, Clone)]
struct End {
    outcome: Outcome,
    error: Option<ErrorText>,
    retry_after: Option<Duration>,
    /// The prompt's size as an error body gave it (llama.cpp's
    /// `n_prompt_tokens` on a context overflow).
    prompt_tokens: Option<u64>,
}

impl End {
    fn ok() -> End {
        End {
            outcome: Outcome::Ok,
            error: None,
            retry_after: None,
            prompt_tokens: None,
        }
    }

    fn timeout(cfg: &PoolConfig) -> End {
        End {
            outcome: Outcome::Timeout,
            error: Some(ErrorText {
                message: format!("no complete reply within {} s", cfg.timeout_s),
                body: None,
            }),
            retry_after: None,
            prompt_tokens: None,
        }
    }

    fn from_error(e: OpenAIError) -> End {
        let plain = |outcome, message: String| End {
            outcome,
            error: Some(ErrorText {
                message,
                body: None,
            }),
            retry_after: None,
            prompt_tokens: None,
        };
        match e {
            OpenAIError::Boxed(b) => match b.downcast::<HttpFailure>() {
                Ok(f) => End {
                    outcome: Outcome::HttpError { status: f.status },
                    error: Some(ErrorText {
                        message: sentence(&f.body).unwrap_or_else(|| format!("HTTP {}", f.status)),
                        body: (!f.body.is_empty()).then(|| f.body.clone()),
                    }),
                    retry_after: f.retry_after,
                    prompt_tokens: body_prompt_tokens(&f.body),
                },
                Err(other) => plain(Outcome::ConnectionError, error_chain(&*other)),
            },
            OpenAIError::Reqwest(e) if e.is_timeout() => plain(Outcome::Timeout, error_chain(&e)),
            OpenAIError::Reqwest(e) => plain(Outcome::ConnectionError, error_chain(&e)),
            OpenAIError::StreamError(e) => plain(Outcome::ConnectionError, e.to_string()),
            OpenAIError::JSONDeserialize(e, content) => End {
                outcome: Outcome::MalformedChunk,
                error: Some(ErrorText {
                    message: format!("a stream chunk is not valid JSON: {e}"),
                    body: Some(truncate(content)),
                }),
                retry_after: None,
                prompt_tokens: None,
            },
            OpenAIError::ApiError(api) => End {
                outcome: Outcome::HttpError {
                    status: api.status_code.as_u16(),
                },
                error: Some(ErrorText {
                    message: api.api_error.message.clone(),
                    body: None,
                }),
                retry_after: None,
                prompt_tokens: None,
            },
            other => plain(Outcome::ConnectionError, other.to_string()),
        }
    }
}

/// The wait before attempt `number + 1`: exponential backoff, or what the
/// server asked for when that is longer.
fn retry_delay(number: u32, retry_after: Option<Duration>) -> Duration {
    let backoff = BACKOFF_BASE
        .saturating_mul(1 << (number - 1).min(16))
        .min(BACKOFF_MAX);
    retry_after.map_or(backoff, |r| r.max(backoff))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn truncate(mut s: String) -> String {
    if s.len() > BODY_LIMIT {
        let mut end = BODY_LIMIT;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// An error and its causes on one line (reqwest's own Display hides the
/// cause, which is where "connection reset" is).
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

/// The engine's sentence in an error body: `error.message` (OpenAI, LiteLLM),
/// `message` (vLLM), `detail` (TabbyAPI, FastAPI), `error` as a string
/// (llama.cpp's proxies), else the body itself, trimmed.
fn sentence(body: &str) -> Option<String> {
    let body = body.trim();
    if body.is_empty() {
        return None;
    }
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        let candidates = [
            &v["error"]["message"],
            &v["message"],
            &v["detail"],
            &v["error"],
        ];
        for c in candidates {
            if let Some(s) = c.as_str() {
                return Some(s.to_owned());
            }
        }
        if let Some(s) = v["detail"][0]["msg"].as_str() {
            return Some(s.to_owned());
        }
    }
    Some(body.lines().next().unwrap_or(body).to_owned())
}

/// The prompt's size in an error body: llama.cpp's `error.n_prompt_tokens`
/// (sent with `exceed_context_size_error`).
fn body_prompt_tokens(body: &str) -> Option<u64> {
    let v: Value = serde_json::from_str(body).ok()?;
    v["error"]["n_prompt_tokens"].as_u64()
}

/// The request body every request of a pool shares.
fn request_body(cfg: &PoolConfig, prompt: &Prompt) -> Value {
    let mut body = json!({
        "model": cfg.model,
        // byot: the library does not set it for us.
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    match prompt {
        Prompt::Chat(text) => body["messages"] = json!([{"role": "user", "content": text}]),
        Prompt::Completion { prompt, stop } => {
            body["prompt"] = json!(prompt);
            if !stop.is_empty() {
                body["stop"] = json!(stop);
            }
        }
    }
    if cfg.running_counts {
        // Running token counts in every chunk: llama.cpp's `timings`
        // (`predicted_n`, `prompt_n`, `cache_n`) and vLLM's usage so far.
        // Each engine ignores the other's field.
        body["timings_per_token"] = json!(true);
        body["stream_options"]["continuous_usage_stats"] = json!(true);
    }
    if let Some(cap) = cfg.max_completion_tokens {
        match cfg.cap_field {
            CapField::Both => {
                body["max_tokens"] = json!(cap);
                body["max_completion_tokens"] = json!(cap);
            }
            CapField::MaxTokens => body["max_tokens"] = json!(cap),
            CapField::MaxCompletionTokens => body["max_completion_tokens"] = json!(cap),
        }
    }
    if let Some(s) = &cfg.sampling {
        let fields = [
            ("temperature", s.temperature.map(|v| json!(v))),
            ("top_p", s.top_p.map(|v| json!(v))),
            ("top_k", s.top_k.map(|v| json!(v))),
            ("min_p", s.min_p.map(|v| json!(v))),
            ("presence_penalty", s.presence_penalty.map(|v| json!(v))),
            ("frequency_penalty", s.frequency_penalty.map(|v| json!(v))),
            ("repetition_penalty", s.repetition_penalty.map(|v| json!(v))),
        ];
        for (k, v) in fields {
            if let Some(v) = v {
                body[k] = v;
            }
        }
    }
    if let Some(extra) = &cfg.extra_body {
        let extra = serde_json::to_value(extra).unwrap_or(Value::Null);
        merge(&mut body, extra);
    }
    body
}

/// Deep merge: objects merge key by key, anything else replaces.
fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (slot, v) => *slot = v,
    }
}

/// The pool's endpoint and key, as async-openai asks for them.
#[derive(Clone)]
struct PoolAuth {
    base: String,
    key: Option<SecretString>,
    /// What `api_key` returns for a pool without a key.
    none: SecretString,
}

impl Config for PoolAuth {
    fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(key) = &self.key {
            // Checked in `HttpPool::new`.
            if let Ok(mut v) = HeaderValue::from_str(&format!("Bearer {}", key.expose_secret())) {
                v.set_sensitive(true);
                headers.insert(AUTHORIZATION, v);
            }
        }
        headers
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    fn query(&self) -> Vec<(&str, &str)> {
        Vec::new()
    }

    fn api_base(&self) -> &str {
        &self.base
    }

    fn api_key(&self) -> &SecretString {
        self.key.as_ref().unwrap_or(&self.none)
    }
}

/// A non-2xx response, kept whole for the caller to record.
#[derive(Debug)]
struct HttpFailure {
    status: u16,
    retry_after: Option<Duration>,
    body: String,
}

impl std::fmt::Display for HttpFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {}", self.status)
    }
}

impl std::error::Error for HttpFailure {}

/// The transport: one plain send per call, no retry, non-2xx as
/// [`HttpFailure`].
#[derive(Clone)]
struct NoRetry {
    http: reqwest::Client,
}

type HttpFuture =
    Pin<Box<dyn Future<Output = Result<reqwest::Response, OpenAIError>> + Send + 'static>>;

impl tower::Service<HttpRequestFactory> for NoRetry {
    type Response = reqwest::Response;
    type Error = OpenAIError;
    type Future = HttpFuture;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), OpenAIError>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, factory: HttpRequestFactory) -> HttpFuture {
        let http = self.http.clone();
        Box::pin(async move {
            let request = factory.build().await?;
            let response = http.execute(request).await?;
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s >= 0.0)
                .map(Duration::from_secs_f64);
            let body = match response.bytes().await {
                Ok(b) => truncate(String::from_utf8_lossy(&b).into_owned()),
                Err(e) => format!("(the body could not be read: {e})"),
            };
            Err(OpenAIError::Boxed(Box::new(HttpFailure {
                status: status.as_u16(),
                retry_after,
                body,
            })))
        })
    }
}

/// A stream chunk: only what assay reads, leniently (engines add fields,
/// send `null` for absent ones, or leave `choices` empty on the usage chunk).
#[derive(Debug, Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
    /// llama.cpp's counts: on the last chunk, or on every chunk with
    /// `timings_per_token`.
    #[serde(default)]
    timings: Option<Timings>,
    #[serde(default)]
    model: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Option<Delta>,
    /// `/v1/completions`: the text a chunk adds (no delta there).
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    /// vLLM (older), DeepSeek, llama.cpp with a reasoning format.
    #[serde(default)]
    reasoning_content: Option<String>,
    /// vLLM (newer), OpenRouter.
    #[serde(default)]
    reasoning: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

/// llama.cpp's `timings`: tokens generated so far, prompt tokens evaluated
/// and prompt tokens taken from the cache.
#[derive(Debug, Clone, Copy, Deserialize)]
struct Timings {
    #[serde(default)]
    predicted_n: Option<u64>,
    #[serde(default)]
    prompt_n: Option<u64>,
    #[serde(default)]
    cache_n: Option<u64>,
}

/// What one attempt's stream has brought so far.
#[derive(Debug, Default)]
struct Accum {
    /// Content as sent, `<think>` blocks included.
    raw: String,
    /// (byte offset where a content chunk starts in `raw`, ms since the
    /// request's start when it arrived).
    marks: Vec<(usize, f64)>,
    content_seen: bool,
    /// Reasoning from `reasoning_content` / `reasoning` deltas.
    reasoning_field: String,
    first_reasoning_field_ms: Option<f64>,
    chunks: u64,
    /// The latest usage block (every chunk's with vLLM's continuous usage).
    usage: Option<Usage>,
    /// The latest `timings` (every chunk's with `timings_per_token`).
    timings: Option<Timings>,
    finish_reason: Option<String>,
    model: Option<String>,
    /// Extraction's rule over the content so far, when the stream may be
    /// closed early.
    watch: Option<Watch>,
    cut_early: bool,
}

impl Accum {
    /// Adds a chunk; says whether content grew.
    fn add(&mut self, chunk: Chunk, at_ms: f64) -> bool {
        if chunk.model.is_some() {
            self.model = chunk.model;
        }
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        if chunk.timings.is_some() {
            self.timings = chunk.timings;
        }
        let mut grew = false;
        let mut text = false;
        if let Some(choice) = chunk.choices.into_iter().next() {
            if choice.finish_reason.is_some() {
                self.finish_reason = choice.finish_reason;
            }
            let mut delta = choice.delta.unwrap_or_default();
            if delta.content.is_none() {
                delta.content = choice.text;
            }
            if let Some(c) = delta.content {
                self.content_seen = true;
                if !c.is_empty() {
                    self.marks.push((self.raw.len(), at_ms));
                    self.raw.push_str(&c);
                    grew = true;
                    text = true;
                }
            }
            for r in [delta.reasoning_content, delta.reasoning]
                .into_iter()
                .flatten()
            {
                if !r.is_empty() {
                    self.first_reasoning_field_ms.get_or_insert(at_ms);
                    self.reasoning_field.push_str(&r);
                    text = true;
                }
            }
        }
        if text {
            self.chunks += 1;
        }
        grew
    }

    /// Extraction would take the same candidate from the content so far
    /// as from any content that may follow it (never, without a watch).
    fn answer_settled(&mut self) -> bool {
        self.watch.as_mut().is_some_and(|w| w.read(&self.raw))
    }

    /// When the chunk holding byte `pos` of `raw` arrived.
    fn arrival(&self, pos: usize) -> Option<f64> {
        let i = self.marks.partition_point(|(start, _)| *start <= pos);
        self.marks.get(i.checked_sub(1)?).map(|m| m.1)
    }

    fn into_reply(
        self,
        end: End,
        attempts: Vec<Attempt>,
        latency_ms: f64,
        cap: Option<u64>,
    ) -> Reply {
        let segments = markdown::split_reasoning(&self.raw);
        // The first byte of `kind` that is not whitespace, and when it came.
        let first_visible = |kind: Kind| {
            let at = segments.iter().filter(|s| s.kind == kind).find_map(|s| {
                let text = &self.raw[s.range.clone()];
                text.find(|c: char| !c.is_whitespace())
                    .map(|i| s.range.start + i)
            });
            at.and_then(|p| self.arrival(p))
        };
        let think_ms = first_visible(Kind::Reasoning);
        let ttft_ms = first_visible(Kind::Answer);
        let mut reasoning = self.reasoning_field.clone();
        for s in segments.iter().filter(|s| s.kind == Kind::Reasoning) {
            let inner = self.raw[s.range.clone()].trim();
            if inner.is_empty() {
                continue;
            }
            if !reasoning.is_empty() {
                reasoning.push('\n');
            }
            reasoning.push_str(inner);
        }
        let ttft_reasoning_ms = match (self.first_reasoning_field_ms, think_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let counts = Counts::of(self.usage, self.timings, end.prompt_tokens);
        let completion_tokens = counts.completion;
        let hit_cap = self.finish_reason.as_deref() == Some("length")
            || matches!((completion_tokens, cap), (Some(t), Some(c)) if t >= c);
        Reply {
            content: self
                .content_seen
                .then(|| markdown::joined(&self.raw, &segments, Kind::Answer)),
            reasoning: (!reasoning.is_empty()).then_some(reasoning),
            finish_reason: self.finish_reason,
            prompt_tokens: counts.prompt,
            cached_prompt_tokens: counts.cached,
            completion_tokens,
            model: self.model,
            ttft_ms,
            ttft_reasoning_ms,
            latency_ms: Some(latency_ms),
            chunks: Some(self.chunks),
            hit_cap,
            cut_early: self.cut_early,
            cap_tokens_left: match (self.cut_early, cap, completion_tokens) {
                (true, Some(c), Some(t)) => Some(c.saturating_sub(t)),
                _ => None,
            },
            outcome: end.outcome,
            error: end.error,
            attempts,
        }
    }
}

/// A reply's token counts, the server's own: the usage block first, then
/// llama.cpp's `timings` (the last one read, which is a running count when
/// the stream was closed early), then an error body's prompt size.
#[derive(Debug, Default, PartialEq)]
struct Counts {
    prompt: Option<u64>,
    cached: Option<u64>,
    completion: Option<u64>,
}

impl Counts {
    fn of(usage: Option<Usage>, timings: Option<Timings>, error_prompt: Option<u64>) -> Counts {
        let timed_prompt = timings.and_then(|t| Some(t.prompt_n? + t.cache_n.unwrap_or(0)));
        Counts {
            prompt: usage
                .and_then(|u| u.prompt_tokens)
                .or(timed_prompt)
                .or(error_prompt),
            cached: usage
                .and_then(|u| u.prompt_tokens_details?.cached_tokens)
                .or(timings.and_then(|t| t.cache_n)),
            completion: usage
                .and_then(|u| u.completion_tokens)
                .or(timings.and_then(|t| t.predicted_n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Streams `reply` in chunks of `size` bytes as the draw reads a
    /// stream: the byte where it would be closed early (if it would) and
    /// the reply it stores.
    fn streamed(reply: &str, size: usize, entry: &str) -> (Option<usize>, Reply) {
        let mut acc = Accum {
            watch: Some(Watch::new(entry)),
            ..Accum::default()
        };
        let mut at = 0;
        let mut cut = None;
        while at < reply.len() {
            let mut end = at.saturating_add(size).min(reply.len());
            while !reply.is_char_boundary(end) {
                end += 1;
            }
            let chunk: Chunk = serde_json::from_value(
                json!({"choices": [{"delta": {"content": &reply[at..end]}}]}),
            )
            .unwrap();
            at = end;
            if acc.add(chunk, at as f64) && acc.answer_settled() {
                cut = Some(at);
                break;
            }
        }
        (cut, acc.into_reply(End::ok(), Vec::new(), 0.0, None))
    }

    /// Every shape on which the early stop and the extraction once read a
    /// reply differently (issue 25): the stream is closed exactly where
    /// the row says, and what is extracted from the reply stored at the cut
    /// is what would be extracted from the whole reply, for every
    /// continuation the row has.
    #[test]
    fn the_early_stop_and_the_extraction_agree_on_where_the_code_is() {
        use crate::extract::{extract, Extraction};
        const SOLVE: &str = "pub fn solve(x: u32) -> u32 { x + 1 }";
        const DRAFT: &str = "pub fn solve(x: u32) -> u32 { x }";
        let f = |s: &str| s.replace("SOLVE", SOLVE).replace("DRAFT", DRAFT);
        // (shape, reply, the part read when the stream is closed, or None
        // when it is read to its end)
        let rows: &[(&str, String, Option<String>)] = &[
            (
                "tagged fence",
                f("Here:\n```rust\nSOLVE\n```\nIt adds one.\n"),
                Some(f("Here:\n```rust\nSOLVE\n```\n")),
            ),
            (
                "untagged fence",
                f("Here:\n```\nSOLVE\n```\nIt adds one.\n"),
                Some(f("Here:\n```\nSOLVE\n```\n")),
            ),
            (
                "tilde fence",
                f("~~~rust\nSOLVE\n~~~\nIt adds one.\n"),
                Some(f("~~~rust\nSOLVE\n~~~\n")),
            ),
            (
                "capitalised tag",
                f("```Rust\nSOLVE\n```\nIt adds one.\n"),
                Some(f("```Rust\nSOLVE\n```\n")),
            ),
            (
                "longer opening fence",
                f("````rust\nSOLVE\n````\nIt adds one.\n"),
                Some(f("````rust\nSOLVE\n````\n")),
            ),
            (
                "longer closing fence",
                f("```rust\nSOLVE\n`````\nIt adds one.\n"),
                Some(f("```rust\nSOLVE\n`````\n")),
            ),
            (
                "closing fence with trailing spaces, CRLF",
                f("```rust\r\nSOLVE\r\n```  \r\nIt adds one.\r\n"),
                Some(f("```rust\r\nSOLVE\r\n```  \r\n")),
            ),
            (
                "a shorter line does not close",
                f("````rust\nSOLVE\n```\n````\nIt adds one.\n"),
                None,
            ),
            (
                "an indented closing line does not close",
                f("```rust\nSOLVE\n    ```\nIt adds one.\n```\n"),
                None,
            ),
            (
                "four spaces of indentation: not a fence",
                f("Like this:\n    ```rust\n    DRAFT\n    ```\nSo:\n```rust\nSOLVE\n```\nDone.\n"),
                Some(f("Like this:\n    ```rust\n    DRAFT\n    ```\nSo:\n```rust\nSOLVE\n```\n")),
            ),
            (
                "a fence without the entry first",
                f("```rust\nfn helper() {}\n```\nAnd:\n```rust\nSOLVE\n```\nDone.\n"),
                Some(f("```rust\nfn helper() {}\n```\nAnd:\n```rust\nSOLVE\n```\n")),
            ),
            (
                "a fence of another language",
                f("```python\ndef solve(x): return x + 1\n```\n```\nSOLVE\n```\nDone.\n"),
                Some(f("```python\ndef solve(x): return x + 1\n```\n```\nSOLVE\n```\n")),
            ),
            (
                "a fence inside the leading think block",
                f("<think>\n```rust\nDRAFT\n```\n</think>\n```rust\nSOLVE\n```\nDone.\n"),
                Some(f("<think>\n```rust\nDRAFT\n```\n</think>\n```rust\nSOLVE\n```\n")),
            ),
            (
                "a second think block with a fence inside",
                f("<think>plan</think>\nFirst a check.\n<think>\n```rust\nDRAFT\n```\n</think>\n~~~\nSOLVE\n~~~\nDone.\n"),
                Some(f("<think>plan</think>\nFirst a check.\n<think>\n```rust\nDRAFT\n```\n</think>\n~~~\nSOLVE\n~~~\n")),
            ),
            (
                "a think block never closed",
                f("<think>\n```rust\nSOLVE\n```\nhmm"),
                None,
            ),
            (
                "reasoning whose opening tag the template sent",
                f("So the answer is x + 1.</think>\n```rust\nSOLVE\n```\nDone.\n"),
                Some(f("So the answer is x + 1.</think>\n```rust\nSOLVE\n```\n")),
            ),
            (
                "a stray closing tag after the answer",
                f("<think>plan</think>\n```rust\nSOLVE\n```\n</think>\nDone.\n"),
                Some(f("<think>plan</think>\n```rust\nSOLVE\n```\n")),
            ),
        ];
        let mut wrong = Vec::new();
        for (shape, reply, stop) in rows {
            let (_, whole) = streamed(reply, usize::MAX, "solve");
            let wanted = extract(whole.content.as_deref(), None, "solve");
            if stop.is_some() && !matches!(&wanted, Extraction::Source(s) if s.trim() == SOLVE) {
                wrong.push(format!("{shape}: the whole reply gives {wanted:?}"));
            }
            for size in [1, 2, 7, 64] {
                let (cut, at_cut) = streamed(reply, size, "solve");
                let read = cut.map(|at| &reply[..at]);
                // Closed by the first chunk that completes the part.
                let closed_there = match (stop, read) {
                    (Some(part), Some(read)) => {
                        read.starts_with(part.as_str()) && read.len() < part.len() + size
                    }
                    (stop, read) => stop.is_none() && read.is_none(),
                };
                if !closed_there {
                    wrong.push(format!(
                        "{shape} ({size}-byte chunks): closed after {read:?}"
                    ));
                }
                let got = extract(at_cut.content.as_deref(), None, "solve");
                if got != wanted {
                    wrong.push(format!(
                        "{shape} ({size}-byte chunks): {got:?} at the cut, {wanted:?} from the whole"
                    ));
                }
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    /// Time to the first answer byte and to the first reasoning byte, with
    /// reasoning in more than one block: every block is reasoning, its
    /// text is kept, and the answer is what is left.
    #[test]
    fn every_think_block_is_reasoning_for_the_figures() {
        let raw = "<think>a</think>\n<think>b</think>\nans <think>c</think>end";
        let mut acc = Accum::default();
        // One byte a chunk, arriving at its end's offset in ms.
        for (i, c) in raw.char_indices() {
            let chunk: Chunk =
                serde_json::from_value(json!({"choices": [{"delta": {"content": c.to_string()}}]}))
                    .unwrap();
            acc.add(chunk, (i + 1) as f64);
        }
        let r = acc.into_reply(End::ok(), Vec::new(), 0.0, None);
        let arrival = |s: &str| Some((raw.find(s).unwrap() + 1) as f64);
        assert_eq!(r.ttft_reasoning_ms, arrival("a<"));
        assert_eq!(r.ttft_ms, arrival("ans"));
        assert_eq!(r.reasoning.as_deref(), Some("a\nb\nc"));
        assert_eq!(r.content.as_deref(), Some("\n\nans end"));
    }

    #[test]
    fn error_sentences_from_engine_bodies() {
        let cases: &[(&str, &str)] = &[
            (
                r#"{"object":"error","message":"The model `x` does not exist.","type":"NotFoundError","param":null,"code":404}"#,
                "The model `x` does not exist.",
            ),
            (
                r#"{"error":{"message":"Invalid API key","type":"auth","code":"invalid_api_key"}}"#,
                "Invalid API key",
            ),
            (r#"{"detail":"Not authenticated"}"#, "Not authenticated"),
            (r#"{"error":"Unauthorized"}"#, "Unauthorized"),
            ("Internal Server Error\nstack...", "Internal Server Error"),
        ];
        for (body, want) in cases {
            assert_eq!(sentence(body).as_deref(), Some(*want), "{body}");
        }
        assert_eq!(sentence("  "), None);
    }

    #[test]
    fn token_counts_are_the_servers_own() {
        let usage: Usage = serde_json::from_value(json!({"prompt_tokens": 21,
            "completion_tokens": 34, "prompt_tokens_details": {"cached_tokens": 20}}))
        .unwrap();
        let timings: Timings =
            serde_json::from_value(json!({"predicted_n": 12, "prompt_n": 1, "cache_n": 20}))
                .unwrap();
        let counts = |u, t, e| Counts::of(u, t, e);
        let c = |p, k, t| Counts {
            prompt: p,
            cached: k,
            completion: t,
        };
        assert_eq!(
            counts(Some(usage), Some(timings), None),
            c(Some(21), Some(20), Some(34)),
            "the usage block first"
        );
        assert_eq!(
            counts(None, Some(timings), None),
            c(Some(21), Some(20), Some(12)),
            "a stream closed early: the running counts"
        );
        assert_eq!(
            counts(None, None, Some(3443)),
            c(Some(3443), None, None),
            "a refused prompt's size"
        );
        assert_eq!(counts(None, None, None), Counts::default(), "unknown");
        assert_eq!(
            body_prompt_tokens(
                r#"{"error":{"code":400,"type":"exceed_context_size_error","n_prompt_tokens":3443,"n_ctx":2048}}"#
            ),
            Some(3443)
        );
    }

    #[test]
    fn retry_delays_back_off_and_honour_retry_after() {
        assert_eq!(retry_delay(1, None), Duration::from_millis(250));
        assert_eq!(retry_delay(3, None), Duration::from_millis(1000));
        assert_eq!(retry_delay(30, None), BACKOFF_MAX);
        assert_eq!(
            retry_delay(1, Some(Duration::from_secs(2))),
            Duration::from_secs(2)
        );
    }

    #[test]
    fn the_body_carries_preset_cap_and_merged_extras() {
        let cfg: PoolConfig = toml::from_str(
            r#"
base_url = "http://127.0.0.1:1/v1"
model = "m"
max_completion_tokens = 100
cap_field = "max_completion_tokens"
sampling = { temperature = 0.6, top_k = 20, seed = 10 }
extra_body = { chat_template_kwargs = { enable_thinking = false }, stream_options = { continuous_usage_stats = true } }
"#,
        )
        .unwrap();
        let pool = HttpPool::new("p", cfg, None, "write f", EarlyStop::Never).unwrap();
        let b = pool.body(3);
        assert_eq!(b["stream"], json!(true));
        assert_eq!(b["stream_options"]["include_usage"], json!(true));
        assert_eq!(b["stream_options"]["continuous_usage_stats"], json!(true));
        assert_eq!(b["timings_per_token"], json!(true), "running counts");
        assert_eq!(b["max_completion_tokens"], json!(100));
        assert!(b.get("max_tokens").is_none());
        assert_eq!(
            (b["temperature"].clone(), b["top_k"].clone()),
            (json!(0.6), json!(20))
        );
        assert_eq!(b["seed"], json!(13), "seed + request number");
        assert_eq!(b["chat_template_kwargs"]["enable_thinking"], json!(false));
        assert_eq!(b["messages"][0]["content"], json!("write f"));
    }

    #[test]
    fn the_key_never_shows_in_debug_output() {
        let cfg: PoolConfig =
            toml::from_str("base_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\n").unwrap();
        let pool = HttpPool::new(
            "p",
            cfg,
            Some(SecretString::from("sk-very-secret".to_owned())),
            "x",
            EarlyStop::Never,
        )
        .unwrap();
        assert!(!format!("{pool:?}").contains("sk-very-secret"));
        let headers = pool.client.config().headers();
        assert!(headers[AUTHORIZATION].is_sensitive());
        assert!(!format!("{headers:?}").contains("sk-very-secret"));
    }
}
