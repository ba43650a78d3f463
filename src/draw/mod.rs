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
//!
//! The types a draw hands out are in `reply`; a plan is built and checked
//! in `plan` and run in `schedule`; what a batch stores of its plan, to
//! resume from exactly that, is its `source`.

pub mod http;
mod plan;
pub mod pools;
mod replay;
mod reply;
mod schedule;
pub mod source;

use std::path::PathBuf;
use std::sync::Arc;

use secrecy::SecretString;

use crate::spec::{PoolChoice, SplitMode};
pub use http::EarlyStop;
use http::HttpPool;
pub use replay::ReplayPool;
pub use reply::{all_failed, Attempt, DrawEvent, Drawn, ErrorText, Outcome, Reply};
pub use source::{DrawSource, SourceChange};

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

impl DrawOptions {
    /// Whether these options name where replies come from (`--pool`,
    /// `--pools`, `--split`, the token cap), so that a resume draws from
    /// them rather than from the batch's stored source. How many requests
    /// are in flight decides how fast, not what.
    pub fn names_a_source(&self) -> bool {
        !self.pools.is_empty()
            || self.pools_file.is_some()
            || self.split.is_some()
            || self.max_completion_tokens.is_some()
    }
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
    /// Where the replies come from, as a batch stores it; `None` for a
    /// plan built by hand (tests, benchmarks).
    source: Option<DrawSource>,
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

impl Pool {
    fn name(&self) -> &str {
        match self {
            Pool::Replay(r) => &r.name,
            Pool::Http(h) => h.name(),
        }
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
}
