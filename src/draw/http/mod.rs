//! An OpenAI-compatible pool: streaming chat completions (or, for a suite
//! drawn from a base model, plain completions of a prompt with stop tokens,
//! `/v1/completions`) through `async-openai`, with assay's own bounded
//! retry policy.
//!
//! async-openai's default executor retries 429 and 5xx inside the client,
//! where nobody sees the attempts. Here the client gets a transport that
//! never retries and hands every non-2xx response back whole
//! ([`transport`]); [`HttpPool::request`] then decides ([`retry`]), records
//! every attempt, and retries at most `max_attempts` times. Each attempt's
//! stream is read by [`stream`], and how it ended by [`ending`]; [`wire`]
//! holds the request body and the chunk types, [`auth`] the key.
//!
//! The key lives in a `SecretString` and goes into one header marked
//! sensitive; it is never formatted into a message, a log line or the store.

mod auth;
mod ending;
mod retry;
mod stream;
mod transport;
mod wire;

use std::time::{Duration, Instant};

use async_openai::Client;
use futures::StreamExt;
use secrecy::SecretString;
use serde_json::{json, Value};

use self::auth::PoolAuth;
use self::ending::End;
use self::stream::Accum;
use self::transport::NoRetry;
use self::wire::{request_body, Chunk};
use super::pools::PoolConfig;
use super::{Attempt, Reply};
use crate::text::extract::Watch;

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
        let auth = PoolAuth::new(&cfg.base_url, key)?;
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(cfg.max_in_flight)
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
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
        let mut waits = retry::BACKOFF.start();
        let mut number = 1;
        loop {
            let started = start.elapsed();
            let mut acc = Accum::new(self.early_stop.watch());
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
            if let Some(delay) = retry::wait_before_next(&end, number, &self.cfg, &mut waits) {
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
                    if let Some(fault) = chunk.fault() {
                        // What came before stays in `acc`, beside the error.
                        return End::stream_error(fault);
                    }
                    if acc.add(chunk, ms(start.elapsed())) && acc.answer_settled() {
                        // Dropping the stream closes the connection; the
                        // engine stops generating for it.
                        acc.cut_early();
                        return End::ok();
                    }
                }
            }
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    use async_openai::config::Config;
    use reqwest::header::AUTHORIZATION;

    use super::*;

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
