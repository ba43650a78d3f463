//! Draw: ask one or more pools for N replies.
//!
//! Only this module talks to model servers. A [`Plan`] says which pools a
//! batch draws from and how the work is split: a fixed share per pool, or a
//! race in which every pool keeps its slots full until N replies are in (so
//! a slow pool no longer sets the batch's wall time). A pool is the spec's
//! recorded replay corpus ([`ReplayPool`]) or an OpenAI-compatible endpoint
//! ([`http::HttpPool`]) described in a pools file ([`pools::PoolsFile`]).
//!
//! Replies are handed to the caller one by one as they arrive, as
//! [`DrawEvent`]s, so each is stored before the next. Failures are replies
//! too: a request that ends in an HTTP error, a reset or a timeout is a
//! [`Reply`] whose [`Outcome`] says so, with the server's own sentence; it
//! never aborts the batch.
//!
//! Figures are the server's or measured, never guessed: token counts come
//! from the usage block (`None` when the server sent none), TTFT and latency
//! are measured from the request's start (queue wait and retries included).

pub mod http;
pub mod pools;
mod replay;
mod schedule;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use secrecy::SecretString;
use tokio::sync::mpsc;

pub use replay::ReplayPool;

use crate::progress::Progress;
use crate::spec::{PoolChoice, Spec, SplitMode};
pub use http::EarlyStop;
use http::HttpPool;
use pools::PoolsFile;

/// One reply as the server gave it, with what it cost to get.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reply {
    /// The answer, reasoning removed. `None`: the server never sent content.
    pub content: Option<String>,
    /// Reasoning kept apart: `reasoning_content` deltas and every `<think>`
    /// block (`markdown::split_reasoning`), one a line.
    pub reasoning: Option<String>,
    pub finish_reason: Option<String>,
    /// The server's own counts: its usage block, else llama.cpp's `timings`
    /// (running counts when the stream was closed early), else, for the
    /// prompt, an error body's `n_prompt_tokens`. `None` is unknown, never
    /// zero or estimated.
    pub prompt_tokens: Option<u64>,
    /// Prompt tokens the server took from its cache
    /// (`prompt_tokens_details.cached_tokens`, llama.cpp's `cache_n`).
    pub cached_prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub model: Option<String>,
    /// Request start to the first answer byte that is not whitespace
    /// (reasoning and `<think>` blocks excluded).
    pub ttft_ms: Option<f64>,
    /// Request start to the first reasoning byte that is not whitespace
    /// (a `reasoning_content` delta or inside a `<think>` block).
    pub ttft_reasoning_ms: Option<f64>,
    /// Request start to the end of the stream.
    pub latency_ms: Option<f64>,
    /// Stream chunks that carried text (content or reasoning). Not a token
    /// count: vLLM packs several tokens a chunk, llama.cpp sends a character
    /// split over byte tokens as one chunk and counts a stop's end token,
    /// which it never streams (docs/gateway.md).
    pub chunks: Option<u64>,
    /// The reply stopped at the token cap.
    pub hit_cap: bool,
    /// The stream was closed by assay once it held the fence extraction
    /// takes (`EarlyStop`).
    pub cut_early: bool,
    /// When cut early and usage allowed: tokens the cap still allowed, an
    /// upper bound on the tokens saved.
    pub cap_tokens_left: Option<u64>,
    pub outcome: Outcome,
    /// For a failed reply: the engine's own sentence, and its raw body.
    pub error: Option<ErrorText>,
    /// Every attempt made, the last one included. Empty for replay.
    pub attempts: Vec<Attempt>,
}

/// What the server said when it refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorText {
    /// The sentence (`error.message`, `message` or `detail` of a JSON body,
    /// else the body or the transport's own words).
    pub message: String,
    /// The body as sent, truncated to 4 KiB; `None` when there was none.
    pub body: Option<String>,
}

/// How a request (or one attempt of it) ended. Stable strings in the store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Outcome {
    #[default]
    Ok,
    /// A non-2xx status.
    HttpError { status: u16 },
    /// Connect failure, reset, or a stream that broke off.
    ConnectionError,
    /// The pool's request timeout passed.
    Timeout,
    /// A stream chunk that is not JSON.
    MalformedChunk,
    /// Not sent: the pool had refused an earlier request (bad key, unknown
    /// model) and was stopped.
    PoolStopped,
    /// Cancelled: a race had its N replies.
    Cancelled,
}

/// One attempt of a request.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    /// 1-based.
    pub number: u32,
    /// Since the request's start.
    pub started_ms: f64,
    pub duration_ms: f64,
    pub outcome: Outcome,
    pub error: Option<ErrorText>,
    /// What the server asked for in `Retry-After`.
    pub retry_after_ms: Option<f64>,
    /// The wait taken before the next attempt; `None` when there was none.
    pub delay_ms: Option<f64>,
}

/// A reply with its place in the batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Drawn {
    pub idx: usize,
    pub pool: String,
    pub reply: Reply,
}

/// What the draw hands to its caller, in order of arrival.
#[derive(Debug, Clone, PartialEq)]
pub enum DrawEvent {
    Reply(Drawn),
    /// A request cancelled when a race was full; it is no reply, but its
    /// attempts are kept.
    Cancelled {
        pool: String,
        attempts: Vec<Attempt>,
    },
    /// A pool refused a request for good and takes no more work.
    PoolStopped {
        pool: String,
        reason: String,
    },
}

/// What the user chose for the draw, before anything is opened. Flags and
/// environment are merged into it by the binary; the spec fills what they
/// leave open.
#[derive(Debug, Clone, Default)]
pub struct DrawOptions {
    /// `--pools`; default `pools.toml` beside the spec or in the working
    /// directory.
    pub pools_file: Option<PathBuf>,
    /// `--pool` (repeatable); empty: the spec's choice.
    pub pools: Vec<PoolChoice>,
    /// `--split`; `None`: the spec's choice, else fixed.
    pub split: Option<SplitMode>,
    /// `NEV_CONCURRENCY`: in-flight limit of every pool.
    pub max_in_flight: Option<usize>,
    /// `MAX_COMPLETION_TOKENS`: token cap of every pool.
    pub max_completion_tokens: Option<u64>,
    /// `NEV_MODEL_API_KEY`: the key of pools that name no key variable.
    pub default_key: Option<SecretString>,
}

/// The variable that holds the key of pools that name no key variable.
pub const DEFAULT_KEY_VARIABLE: &str = "NEV_MODEL_API_KEY";

/// The draw flags every drawing command takes, as given: clap checked only
/// their types. [`DrawFlags::check`] is the second step, to the options a
/// draw runs with.
#[derive(Debug, Clone, Default)]
pub struct DrawFlags {
    pub pools_file: Option<PathBuf>,
    pub pools: Vec<PoolChoice>,
    pub split: Option<SplitMode>,
    pub max_in_flight: Option<usize>,
    pub max_completion_tokens: Option<u64>,
}

/// A draw flag out of range, in the words the command line shows.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct FlagError(String);

impl DrawFlags {
    /// Checks each flag's range and reads the default key from
    /// [`DEFAULT_KEY_VARIABLE`]; held as a secret from here on, and never
    /// a flag (a flag would show in `ps`).
    pub fn check(self) -> Result<DrawOptions, FlagError> {
        if self
            .max_in_flight
            .is_some_and(|k| k == 0 || k > pools::MAX_IN_FLIGHT)
        {
            return Err(FlagError(format!(
                "--max-in-flight (NEV_CONCURRENCY): must be between 1 and {}",
                pools::MAX_IN_FLIGHT
            )));
        }
        if self.max_completion_tokens == Some(0) {
            return Err(FlagError(
                "--max-completion-tokens (MAX_COMPLETION_TOKENS): must be at least 1".into(),
            ));
        }
        Ok(DrawOptions {
            pools_file: self.pools_file,
            pools: self.pools,
            split: self.split,
            max_in_flight: self.max_in_flight,
            max_completion_tokens: self.max_completion_tokens,
            default_key: std::env::var(DEFAULT_KEY_VARIABLE)
                .ok()
                .filter(|k| !k.is_empty())
                .map(SecretString::from),
        })
    }
}

/// Which pools a batch draws from, and how.
#[derive(Debug, Clone)]
pub struct Plan {
    pools: Vec<Pool>,
    split: Split,
    /// Each HTTP pool's pools file, name and base URL, for
    /// [`Plan::check_reachable`]. Empty for replay and hand-built plans.
    endpoints: Vec<(PathBuf, String, String)>,
}

#[derive(Debug, Clone)]
enum Pool {
    Replay(ReplayPool),
    Http(Arc<HttpPool>),
}

#[derive(Debug, Clone)]
enum Split {
    /// Weights per pool, apportioned over N at draw time.
    Fixed(Vec<u64>),
    Race,
}

/// Why a draw could not start. Every variant is the user's input.
#[derive(Debug, thiserror::Error)]
pub enum DrawError {
    #[error("{file}: cannot read")]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}:{line}: {message}")]
    BadLine {
        file: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{file}: the replay corpus holds {available} replies, {wanted} were asked for")]
    NotEnough {
        file: PathBuf,
        available: usize,
        wanted: usize,
    },
    #[error("{file}: pool `{pool}`{}: {message}", if field.is_empty() { String::new() } else { format!(": `{field}`") })]
    BadPool {
        file: PathBuf,
        pool: String,
        field: String,
        message: String,
    },
    #[error("{file}: no pool `{pool}` (pools: {known})")]
    UnknownPool {
        file: PathBuf,
        pool: String,
        known: String,
    },
    #[error("pool `{pool}` needs a pools file: --pools FILE, or pools.toml beside the spec or in the working directory")]
    NoPoolsFile { pool: String },
    #[error("{file}: pool `{pool}`: `api_key_env` names {var}, which {why}")]
    MissingKey {
        file: PathBuf,
        pool: String,
        var: String,
        why: &'static str,
    },
    #[error("{what}: {message}")]
    BadChoice { what: String, message: String },
}

/// The split `choices` ask for in `mode`: each pool named once, none
/// with a share of 0, shares for every pool or none in a fixed split, none
/// in a race. The error is the sentence to show.
fn split_of(choices: &[PoolChoice], mode: SplitMode) -> Result<Split, String> {
    let mut seen = BTreeSet::new();
    for c in choices {
        if !seen.insert(c.name.as_str()) {
            return Err(format!("pool `{}` is named twice", c.name));
        }
    }
    if let Some(c) = choices.iter().find(|c| c.share == Some(0)) {
        return Err(format!("pool `{}`: a share must be at least 1", c.name));
    }
    let shares: Vec<Option<u64>> = choices.iter().map(|c| c.share).collect();
    match mode {
        SplitMode::Race if shares.iter().any(Option::is_some) => {
            Err("a race takes no shares (NAME=SHARE needs --split fixed)".into())
        }
        SplitMode::Race => Ok(Split::Race),
        SplitMode::Fixed => match shares.iter().copied().collect::<Option<Vec<u64>>>() {
            Some(all) => Ok(Split::Fixed(all)),
            None if shares.iter().all(Option::is_none) => Ok(Split::Fixed(vec![1; choices.len()])),
            None => Err("give every pool a share, or none (an even split)".into()),
        },
    }
}

impl Plan {
    /// The spec's replay corpus alone: the default.
    pub fn replay(spec: &Spec) -> Result<Plan, DrawError> {
        Ok(Plan {
            pools: vec![Pool::Replay(ReplayPool::open("replay", &spec.draw.replay)?)],
            split: Split::Fixed(vec![1]),
            endpoints: Vec::new(),
        })
    }

    /// Builds the plan from the user's choices and the spec's. Reads the
    /// pools file and the keys' environment variables; sends nothing.
    /// Returns warnings to show (a pool without a sampling preset).
    pub fn build(spec: &Spec, opts: &DrawOptions) -> Result<(Plan, Vec<String>), DrawError> {
        let (choices, what) = if opts.pools.is_empty() {
            (
                &spec.draw.pools,
                format!("{}: `draw.pools`", spec.path.display()),
            )
        } else {
            (&opts.pools, "--pool".to_owned())
        };
        let mode = opts.split.or(spec.draw.split).unwrap_or(SplitMode::Fixed);
        if choices.is_empty() {
            return Ok((Plan::replay(spec)?, Vec::new()));
        }
        let bad = |message: String| DrawError::BadChoice {
            what: what.clone(),
            message,
        };
        // A pool that is to serve nothing is a mistake, whichever pool it is
        // (the replay pool returns early below, before the shares' sum).
        let split = split_of(choices, mode).map_err(bad)?;
        if choices.iter().any(|c| c.name == "replay") {
            if choices.len() > 1 || mode == SplitMode::Race {
                return Err(bad(
                    "`replay` cannot be mixed with other pools or raced".into()
                ));
            }
            return Ok((Plan::replay(spec)?, Vec::new()));
        }
        let file = match opts
            .pools_file
            .clone()
            .or_else(|| PoolsFile::default_path(&spec.dir))
        {
            Some(path) => PoolsFile::load(&path)?,
            None => {
                return Err(DrawError::NoPoolsFile {
                    pool: choices[0].name.clone(),
                })
            }
        };
        Plan::http_pools(
            &file,
            choices,
            split,
            opts,
            &spec.prompt,
            if spec.draw.single_fence {
                EarlyStop::AtAnswer {
                    entry: spec.entry.clone(),
                }
            } else {
                EarlyStop::Never
            },
        )
    }

    /// The plan of a suite's live draw: the named pools of the pools file,
    /// split as asked, each asked `prompt` until [`Plan::for_prompt`] asks
    /// it a problem's (and says when to close a stream early). No replay pool: a suite's corpus is its completions
    /// file.
    pub fn for_suite(
        pools_file: &std::path::Path,
        choices: &[PoolChoice],
        opts: &DrawOptions,
    ) -> Result<(Plan, Vec<String>), DrawError> {
        let bad = |message: String| DrawError::BadChoice {
            what: "--pool".into(),
            message,
        };
        let split = split_of(choices, opts.split.unwrap_or(SplitMode::Fixed)).map_err(bad)?;
        let file = PoolsFile::load(pools_file)?;
        Plan::http_pools(&file, choices, split, opts, "", EarlyStop::Never)
    }

    /// The same pools, split the same way, asked `prompt`, closing a
    /// stream early as `early_stop` says.
    pub fn for_prompt(&self, prompt: &http::Prompt, early_stop: &EarlyStop) -> Plan {
        Plan {
            pools: self
                .pools
                .iter()
                .map(|p| match p {
                    Pool::Http(h) => Pool::Http(Arc::new(h.for_prompt(prompt, early_stop.clone()))),
                    Pool::Replay(r) => Pool::Replay(r.clone()),
                })
                .collect(),
            split: self.split.clone(),
            endpoints: self.endpoints.clone(),
        }
    }

    /// The HTTP pools `choices` names in `file`, with their keys read.
    fn http_pools(
        file: &PoolsFile,
        choices: &[PoolChoice],
        split: Split,
        opts: &DrawOptions,
        prompt: &str,
        early_stop: EarlyStop,
    ) -> Result<(Plan, Vec<String>), DrawError> {
        let mut pools = Vec::new();
        let mut endpoints = Vec::new();
        let mut warnings = Vec::new();
        for c in choices {
            let Some(cfg) = file.pools.get(&c.name) else {
                return Err(DrawError::UnknownPool {
                    file: file.path.clone(),
                    pool: c.name.clone(),
                    known: file.pools.keys().cloned().collect::<Vec<_>>().join(", "),
                });
            };
            let key = match &cfg.api_key_env {
                Some(var) => match std::env::var_os(var) {
                    Some(k) if !k.is_empty() => match k.into_string() {
                        Ok(k) => Some(SecretString::from(k)),
                        Err(_) => return Err(missing_key(file, c, var, "is not UTF-8")),
                    },
                    Some(_) => return Err(missing_key(file, c, var, "is set but empty")),
                    None => return Err(missing_key(file, c, var, "is not set")),
                },
                None => opts.default_key.clone(),
            };
            if cfg.sampling.is_none() {
                warnings.push(format!(
                    "{}: pool `{}` has no sampling preset: the engine's fallback sampler decides, and can turn a good model into word salad",
                    file.path.display(),
                    c.name
                ));
            }
            let mut cfg = cfg.clone();
            let base_url = cfg.base_url.clone();
            if let Some(k) = opts.max_in_flight {
                cfg.max_in_flight = k;
            }
            if let Some(t) = opts.max_completion_tokens {
                cfg.max_completion_tokens = Some(t);
            }
            let pool = HttpPool::new(&c.name, cfg, key, prompt, early_stop.clone()).map_err(
                |message| DrawError::BadPool {
                    file: file.path.clone(),
                    pool: c.name.clone(),
                    field: String::new(),
                    message,
                },
            )?;
            endpoints.push((file.path.clone(), c.name.clone(), base_url));
            pools.push(Pool::Http(Arc::new(pool)));
        }
        Ok((
            Plan {
                pools,
                split,
                endpoints,
            },
            warnings,
        ))
    }

    /// A plan over HTTP pools built directly (tests, benchmarks).
    pub fn http(pools: Vec<HttpPool>, mode: SplitMode, shares: Option<Vec<u64>>) -> Plan {
        let split = match mode {
            SplitMode::Race => Split::Race,
            SplitMode::Fixed => Split::Fixed(shares.unwrap_or_else(|| vec![1; pools.len()])),
        };
        Plan {
            pools: pools.into_iter().map(|p| Pool::Http(Arc::new(p))).collect(),
            split,
            endpoints: Vec::new(),
        }
    }

    /// Checks that every HTTP pool's server accepts a connection, before a
    /// batch exists: a gateway that is down, or a wrong port, is bad input,
    /// not a batch of connection errors. A server that goes down later is
    /// the draw's business (retries, `connection_error`).
    pub async fn check_reachable(&self) -> Result<(), DrawError> {
        for (file, pool, base_url) in &self.endpoints {
            let bad = |message: String| DrawError::BadPool {
                file: file.clone(),
                pool: pool.clone(),
                field: "base_url".into(),
                message,
            };
            let url = reqwest::Url::parse(base_url)
                .map_err(|e| bad(format!("{base_url} is not a URL: {e}")))?;
            let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
                return Err(bad(format!("{base_url} has no host")));
            };
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let connect = tokio::net::TcpStream::connect((host, port));
            match tokio::time::timeout(std::time::Duration::from_secs(10), connect).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    return Err(bad(format!(
                        "{base_url} is unreachable: {}",
                        e.to_string().to_lowercase()
                    )))
                }
                Err(_) => {
                    return Err(bad(format!(
                        "{base_url} is unreachable: no answer within 10 s"
                    )))
                }
            }
        }
        Ok(())
    }

    /// Checks that the plan can serve `n` replies, before a batch starts.
    pub fn check(&self, n: usize) -> Result<(), DrawError> {
        if n == 0 {
            return Err(DrawError::BadChoice {
                what: "-n".into(),
                message: "must be at least 1".into(),
            });
        }
        for pool in &self.pools {
            if let Pool::Replay(r) = pool {
                r.check_capacity(n)?;
            }
        }
        if let Split::Fixed(w) = &self.split {
            if w.iter().sum::<u64>() == 0 {
                return Err(DrawError::BadChoice {
                    what: "--pool".into(),
                    message: "the shares add up to zero".into(),
                });
            }
        }
        Ok(())
    }

    /// Requests the plan keeps in flight at most (one for a replay pool).
    pub fn max_in_flight(&self) -> usize {
        self.pools
            .iter()
            .map(|p| match p {
                Pool::Replay(_) => 1,
                Pool::Http(h) => h.max_in_flight(),
            })
            .sum()
    }

    /// The plan's name in the store and reports: `replay`, `fast`,
    /// `fast+flash` (fixed) or `race(fast+flash)`.
    pub fn label(&self) -> String {
        let names: Vec<&str> = self.pools.iter().map(Pool::name).collect();
        match self.split {
            Split::Race => format!("race({})", names.join("+")),
            Split::Fixed(_) => names.join("+"),
        }
    }

    /// How many replies each pool serves in a fixed split of `n`
    /// (largest remainders); `None` for a race.
    pub fn shares(&self, n: usize) -> Option<Vec<usize>> {
        match &self.split {
            Split::Fixed(w) => Some(apportion(n, w)),
            Split::Race => None,
        }
    }

    /// Draws replies `skip..n` (the first `skip` are already stored),
    /// sending each event as it happens. Returns when every reply is sent.
    pub async fn draw(
        &self,
        n: usize,
        skip: usize,
        tx: mpsc::Sender<DrawEvent>,
        progress: &Progress,
    ) -> Result<(), DrawError> {
        self.check(n)?;
        if let [Pool::Replay(r)] = self.pools.as_slice() {
            let bar = progress.pool_bar(&r.name, n);
            let (rtx, mut rrx) = mpsc::channel(64);
            let pool = r.clone();
            let serving = tokio::spawn(async move { pool.draw(n, skip, rtx).await });
            while let Some(d) = rrx.recv().await {
                bar.inc(1);
                if tx.send(DrawEvent::Reply(d)).await.is_err() {
                    break;
                }
            }
            bar.finish();
            return serving.await.expect("the replay task panicked");
        }
        let http: Vec<Arc<HttpPool>> = self
            .pools
            .iter()
            .map(|p| match p {
                Pool::Http(h) => h.clone(),
                Pool::Replay(_) => unreachable!("replay is never mixed (checked in build)"),
            })
            .collect();
        // Requests hand their replies to an unbounded queue, so a slot is
        // free again the moment its request ends, however long the caller
        // takes to store what came before. It holds at most N replies.
        let (qtx, mut qrx) = mpsc::unbounded_channel();
        let forward = async move {
            while let Some(e) = qrx.recv().await {
                if tx.send(e).await.is_err() {
                    break;
                }
            }
        };
        let schedule = async {
            match &self.split {
                Split::Fixed(w) => {
                    schedule::fixed(&http, &apportion(n, w), skip, qtx, progress).await
                }
                Split::Race => schedule::race(&http, n, skip, qtx, progress).await,
            }
        };
        tokio::join!(schedule, forward);
        Ok(())
    }
}

impl Plan {
    /// Draws a repair round: reply `idx` asks `asks[idx]`, the pools
    /// sharing the round's replies as their weights say (a race shares
    /// them evenly: a reply's index names its parent, so no pool may take
    /// another's). Replies in `stored` are not asked again. A replay corpus
    /// cannot answer a prompt it has never seen, and is refused.
    pub async fn draw_asking(
        &self,
        asks: BTreeMap<usize, String>,
        stored: &BTreeSet<usize>,
        tx: mpsc::Sender<DrawEvent>,
        progress: &Progress,
    ) -> Result<(), DrawError> {
        let http = self.every_http_pool().ok_or_else(|| DrawError::BadChoice {
            what: "a repair round".into(),
            message: "a replay corpus cannot answer a repair prompt: name HTTP pools".into(),
        })?;
        let weights = match &self.split {
            Split::Fixed(w) => w.clone(),
            Split::Race => vec![1; http.len()],
        };
        let mut order = asks.keys().copied();
        let todo: Vec<Vec<usize>> = apportion(asks.len(), &weights)
            .into_iter()
            .map(|count| {
                order
                    .by_ref()
                    .take(count)
                    .filter(|i| !stored.contains(i))
                    .collect()
            })
            .collect();
        let (qtx, mut qrx) = mpsc::unbounded_channel();
        let forward = async move {
            while let Some(e) = qrx.recv().await {
                if tx.send(e).await.is_err() {
                    break;
                }
            }
        };
        let schedule = schedule::fixed_lists(&http, todo, Some(Arc::new(asks)), qtx, progress);
        tokio::join!(schedule, forward);
        Ok(())
    }

    /// The plan's pools when every one is an HTTP pool.
    fn every_http_pool(&self) -> Option<Vec<Arc<HttpPool>>> {
        self.pools
            .iter()
            .map(|p| match p {
                Pool::Http(h) => Some(h.clone()),
                Pool::Replay(_) => None,
            })
            .collect()
    }

    /// Whether the plan can draw a repair round (every pool is HTTP).
    pub fn can_repair(&self) -> bool {
        self.every_http_pool().is_some()
    }
}

impl Pool {
    fn name(&self) -> &str {
        match self {
            Pool::Replay(r) => &r.name,
            Pool::Http(h) => h.name(),
        }
    }
}

/// Why a draw failed as a whole: `Some` when no reply of the batch is `ok`
/// (every request refused, broke or was never sent), with the engine's own
/// sentence of the first request that got an answer.
pub fn all_failed(replies: &[Drawn]) -> Option<String> {
    if replies.is_empty() || replies.iter().any(|d| d.reply.outcome.is_ok()) {
        return None;
    }
    let sent = replies
        .iter()
        .filter(|d| d.reply.outcome != Outcome::PoolStopped)
        .min_by_key(|d| d.idx)
        .unwrap_or(&replies[0]);
    let sentence = sent
        .reply
        .error
        .as_ref()
        .map_or("(no message)", |e| e.message.as_str());
    Some(format!(
        "the draw failed: none of {} requests got a reply; pool `{}`: {}: {sentence}",
        replies.len(),
        sent.pool,
        sent.reply.outcome
    ))
}

/// Splits `n` over `weights` by largest remainders; ties go to the first.
fn apportion(n: usize, weights: &[u64]) -> Vec<usize> {
    let total: u64 = weights.iter().sum();
    if total == 0 {
        return vec![0; weights.len()];
    }
    let mut counts: Vec<usize> = weights
        .iter()
        .map(|w| (n as u128 * *w as u128 / total as u128) as usize)
        .collect();
    let mut rest: Vec<(u128, usize)> = weights
        .iter()
        .enumerate()
        .map(|(i, w)| (n as u128 * *w as u128 % total as u128, i))
        .collect();
    rest.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let short = n - counts.iter().sum::<usize>();
    for (_, i) in rest.into_iter().take(short) {
        counts[i] += 1;
    }
    counts
}

impl Outcome {
    /// Worth another attempt: the server may answer next time.
    pub fn is_retryable(&self) -> bool {
        match self {
            Outcome::HttpError { status } => matches!(status, 408 | 429 | 500 | 502 | 503 | 504),
            Outcome::ConnectionError | Outcome::Timeout => true,
            Outcome::Ok | Outcome::MalformedChunk | Outcome::PoolStopped | Outcome::Cancelled => {
                false
            }
        }
    }

    /// The pool will refuse every request like this one: a bad key (401,
    /// 403), an unknown model (404), or a request the server will not take
    /// (400, 413, 422: a prompt over the context, a bad parameter). A
    /// pool's requests differ only in their seed, so what one gets, all get.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            Outcome::HttpError {
                status: 400 | 401 | 403 | 404 | 413 | 422
            }
        )
    }

    pub fn is_ok(&self) -> bool {
        matches!(self, Outcome::Ok)
    }

    pub fn status(&self) -> Option<u16> {
        match self {
            Outcome::HttpError { status } => Some(*status),
            _ => None,
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Ok => f.write_str("ok"),
            Outcome::HttpError { status } => write!(f, "http_error({status})"),
            Outcome::ConnectionError => f.write_str("connection_error"),
            Outcome::Timeout => f.write_str("timeout"),
            Outcome::MalformedChunk => f.write_str("malformed_chunk"),
            Outcome::PoolStopped => f.write_str("pool_stopped"),
            Outcome::Cancelled => f.write_str("cancelled"),
        }
    }
}

impl FromStr for Outcome {
    type Err = ();
    fn from_str(s: &str) -> Result<Outcome, ()> {
        Ok(match s {
            "ok" => Outcome::Ok,
            "connection_error" => Outcome::ConnectionError,
            "timeout" => Outcome::Timeout,
            "malformed_chunk" => Outcome::MalformedChunk,
            "pool_stopped" => Outcome::PoolStopped,
            "cancelled" => Outcome::Cancelled,
            _ => {
                let status = s
                    .strip_prefix("http_error(")
                    .and_then(|r| r.strip_suffix(')'))
                    .and_then(|d| d.parse().ok())
                    .ok_or(())?;
                Outcome::HttpError { status }
            }
        })
    }
}

/// A pool's key variable that gives no key: unset, empty or not UTF-8.
fn missing_key(file: &PoolsFile, c: &PoolChoice, var: &str, why: &'static str) -> DrawError {
    DrawError::MissingKey {
        file: file.path.clone(),
        pool: c.name.clone(),
        var: var.to_owned(),
        why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draw_flags_out_of_range_are_refused_in_the_flags_words() {
        let zero_in_flight = DrawFlags {
            max_in_flight: Some(0),
            ..Default::default()
        };
        assert_eq!(
            zero_in_flight.check().unwrap_err().to_string(),
            format!(
                "--max-in-flight (NEV_CONCURRENCY): must be between 1 and {}",
                pools::MAX_IN_FLIGHT
            )
        );
        let too_many = DrawFlags {
            max_in_flight: Some(pools::MAX_IN_FLIGHT + 1),
            ..Default::default()
        };
        assert!(too_many.check().is_err());
        let zero_tokens = DrawFlags {
            max_completion_tokens: Some(0),
            ..Default::default()
        };
        assert_eq!(
            zero_tokens.check().unwrap_err().to_string(),
            "--max-completion-tokens (MAX_COMPLETION_TOKENS): must be at least 1"
        );
        let fine = DrawFlags {
            max_in_flight: Some(pools::MAX_IN_FLIGHT),
            max_completion_tokens: Some(1),
            ..Default::default()
        }
        .check()
        .unwrap();
        assert_eq!(
            (fine.max_in_flight, fine.max_completion_tokens),
            (Some(pools::MAX_IN_FLIGHT), Some(1))
        );
    }

    #[test]
    fn outcomes_round_trip_through_their_strings() {
        for o in [
            Outcome::Ok,
            Outcome::HttpError { status: 429 },
            Outcome::ConnectionError,
            Outcome::Timeout,
            Outcome::MalformedChunk,
            Outcome::PoolStopped,
            Outcome::Cancelled,
        ] {
            assert_eq!(o.to_string().parse::<Outcome>(), Ok(o));
        }
        assert!("http_error(x)".parse::<Outcome>().is_err());
    }

    #[test]
    fn retry_and_refusal_classes() {
        let http = |status| Outcome::HttpError { status };
        assert!(http(429).is_retryable() && http(503).is_retryable());
        assert!(!http(400).is_retryable() && !http(401).is_retryable());
        assert!(http(401).is_refusal() && http(404).is_refusal());
        assert!(http(400).is_refusal(), "a context overflow recurs");
        assert!(!http(500).is_refusal());
        assert!(Outcome::ConnectionError.is_retryable());
        assert!(!Outcome::MalformedChunk.is_retryable());
    }

    #[test]
    fn a_draw_fails_only_when_no_reply_is_ok() {
        let drawn = |idx, outcome, message: &str| Drawn {
            idx,
            pool: "p".into(),
            reply: Reply {
                outcome,
                error: (!message.is_empty()).then(|| ErrorText {
                    message: message.into(),
                    body: None,
                }),
                ..Reply::default()
            },
        };
        let refused = drawn(1, Outcome::HttpError { status: 401 }, "Invalid API Key");
        let stopped = drawn(0, Outcome::PoolStopped, "not sent");
        let why = all_failed(&[stopped.clone(), refused.clone()]).unwrap();
        assert_eq!(
            why,
            "the draw failed: none of 2 requests got a reply; pool `p`: http_error(401): Invalid API Key"
        );
        assert_eq!(all_failed(&[refused, drawn(2, Outcome::Ok, "")]), None);
        assert_eq!(all_failed(&[]), None);
    }

    #[test]
    fn apportion_by_largest_remainder() {
        assert_eq!(apportion(32, &[16, 16]), [16, 16]);
        assert_eq!(apportion(10, &[1, 1, 1]), [4, 3, 3]);
        assert_eq!(apportion(5, &[3, 1]), [4, 1]);
        assert_eq!(apportion(7, &[0, 2]), [0, 7]);
    }
}
