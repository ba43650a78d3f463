//! Building a plan from the user's choices and the spec's, and checking it
//! before a batch starts: which pools, with which keys, split how. Sends
//! nothing but the reachability check's connection.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use secrecy::SecretString;

use super::http::{self, EarlyStop, HttpPool};
use super::pools::{PoolConfig, PoolsFile};
use super::schedule::apportion;
use super::source::{DrawSource, HttpSource, SourceChange, SourcePool};
use super::{DrawError, DrawOptions, Plan, Pool, ReplayPool, Split};
use crate::spec::{PoolChoice, Spec, SplitMode};

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
        Plan::replay_of(&spec.draw.replay)
    }

    /// The replay corpus `corpus` alone.
    fn replay_of(corpus: &Path) -> Result<Plan, DrawError> {
        Ok(Plan {
            pools: vec![Pool::Replay(ReplayPool::open("replay", corpus)?)],
            split: Split::Fixed(vec![1]),
            endpoints: Vec::new(),
            source: Some(DrawSource::Replay {
                corpus: std::path::absolute(corpus).unwrap_or_else(|_| corpus.to_path_buf()),
            }),
        })
    }

    /// Where the plan's replies come from, as a batch stores it.
    pub fn source(&self) -> Option<&DrawSource> {
        self.source.as_ref()
    }

    /// The plan that resumes batch `batch`, which stored `stored` (its
    /// draw source's JSON; `None` for a batch stored before sources
    /// were). Without flags that name a source (`opts.names_a_source`),
    /// the stored source itself: its pools as the batch used them, keys
    /// read from their variables here, `--max-in-flight` applied. With
    /// such flags, the plan they ask for, what they leave open taken from
    /// the stored source, and the change from it when they draw
    /// otherwise. A batch without a stored source is planned as a new
    /// one, as it always was.
    pub fn resume(
        spec: &Spec,
        opts: &DrawOptions,
        batch: i64,
        stored: Option<&str>,
    ) -> Result<(Plan, Vec<String>, Option<SourceChange>), DrawError> {
        let Some(json) = stored else {
            let (plan, warnings) = Plan::build(spec, opts)?;
            return Ok((plan, warnings, None));
        };
        let was = DrawSource::from_json(json).map_err(|e| DrawError::BadChoice {
            what: format!("batch {batch}"),
            message: e.to_string(),
        })?;
        if !opts.names_a_source() {
            let (plan, warnings) = Plan::from_source(spec, &was, opts)?;
            return Ok((plan, warnings, None));
        }
        let (plan, warnings) = Plan::build(spec, &was.under(opts))?;
        let change = plan
            .source
            .as_ref()
            .and_then(|now| DrawSource::change(batch, &was, json, now));
        Ok((plan, warnings, change))
    }

    /// The plan of a stored source, as the batch used it.
    fn from_source(
        spec: &Spec,
        source: &DrawSource,
        opts: &DrawOptions,
    ) -> Result<(Plan, Vec<String>), DrawError> {
        match source {
            DrawSource::Replay { corpus } => Ok((Plan::replay_of(corpus)?, Vec::new())),
            DrawSource::Http(h) => {
                let file = PoolsFile {
                    path: h.pools_file.clone(),
                    pools: h
                        .pools
                        .iter()
                        .map(|p| (p.name.clone(), p.config.clone()))
                        .collect::<BTreeMap<String, PoolConfig>>(),
                };
                let choices = source.choices();
                let split = split_of(&choices, h.split).map_err(|message| DrawError::BadPool {
                    file: h.pools_file.clone(),
                    pool: choices[0].name.clone(),
                    field: String::new(),
                    message,
                })?;
                // The stored configuration is the one the batch used: only
                // how many requests are in flight may differ here.
                let opts = DrawOptions {
                    max_completion_tokens: None,
                    ..opts.clone()
                };
                Plan::http_pools(
                    &file,
                    &choices,
                    split,
                    h.split,
                    &opts,
                    &spec.prompt,
                    early_stop(spec),
                )
            }
        }
    }

    /// Builds the plan from the user's choices and the spec's. Reads the
    /// pools file and the keys' environment variables; sends nothing.
    /// Returns warnings to show (a pool without a sampling preset).
    /// Whether a draw from `choices` (empty: the spec's `draw.pools`) is
    /// the spec's replay corpus, as [`Plan::build`] decides it: without
    /// reading the pools file or a key (a queued batch's lane has its own).
    pub fn draws_replay(spec: &Spec, choices: &[PoolChoice]) -> bool {
        let choices = if choices.is_empty() {
            &spec.draw.pools[..]
        } else {
            choices
        };
        choices.is_empty() || choices.iter().any(|c| c.name == "replay")
    }

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
            mode,
            opts,
            &spec.prompt,
            early_stop(spec),
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
        let mode = opts.split.unwrap_or(SplitMode::Fixed);
        let split = split_of(choices, mode).map_err(bad)?;
        let file = PoolsFile::load(pools_file)?;
        Plan::http_pools(&file, choices, split, mode, opts, "", EarlyStop::Never)
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
            source: self.source.clone(),
        }
    }

    /// The HTTP pools `choices` names in `file`, with their keys read.
    fn http_pools(
        file: &PoolsFile,
        choices: &[PoolChoice],
        split: Split,
        mode: SplitMode,
        opts: &DrawOptions,
        prompt: &str,
        early_stop: EarlyStop,
    ) -> Result<(Plan, Vec<String>), DrawError> {
        let mut pools = Vec::new();
        let mut endpoints = Vec::new();
        let mut warnings = Vec::new();
        let mut used = Vec::new();
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
            used.push(SourcePool {
                name: c.name.clone(),
                share: c.share,
                config: cfg.clone(),
            });
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
        let source = DrawSource::Http(HttpSource {
            pools_file: std::path::absolute(&file.path).unwrap_or_else(|_| file.path.clone()),
            split: mode,
            pools: used,
        });
        Ok((
            Plan {
                pools,
                split,
                endpoints,
                source: Some(source),
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
            source: None,
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
}

/// How the spec's streams end: at the answer's fence when it asks for one.
fn early_stop(spec: &Spec) -> EarlyStop {
    if spec.draw.single_fence {
        EarlyStop::AtAnswer {
            entry: spec.entry.clone(),
        }
    } else {
        EarlyStop::Never
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
