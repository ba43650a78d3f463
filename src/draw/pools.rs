//! The pools file: one `[pools.NAME]` table per OpenAI-compatible endpoint.
//!
//! Only the *name* of the environment variable holding a pool's key is in
//! the file; the key is read from the environment when the plan is built and
//! lives in a `SecretString` from then on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::DrawError;

/// A parsed pools file.
#[derive(Debug, Clone)]
pub struct PoolsFile {
    pub path: PathBuf,
    pub pools: BTreeMap<String, PoolConfig>,
}

/// One pool as the file describes it. Serialised only into a batch's
/// draw source (`source`), which holds no key: the key's variable name is
/// all there is.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PoolConfig {
    /// The endpoint's base, `/v1` included (`http://127.0.0.1:8000/v1`).
    pub base_url: String,
    /// The model alias sent in every request.
    pub model: String,
    /// The name of the environment variable holding the bearer key. Without
    /// it, `NEV_MODEL_API_KEY` is used when set, else no key is sent.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Requests in flight at once.
    #[serde(default = "default_in_flight")]
    pub max_in_flight: usize,
    /// Whole-request timeout (one attempt, first byte to last chunk).
    #[serde(default = "default_timeout")]
    pub timeout_s: f64,
    #[serde(default)]
    pub max_completion_tokens: Option<u64>,
    /// Which request field carries the token cap: engines differ.
    #[serde(default)]
    pub cap_field: CapField,
    /// Attempts per request, the first included (429, 5xx, resets, timeouts
    /// are retried; other errors are not).
    #[serde(default = "default_attempts")]
    pub max_attempts: u32,
    /// The longest `Retry-After` honoured; a server asking for more ends the
    /// request with its 429 recorded.
    #[serde(default = "default_max_retry_wait")]
    pub max_retry_wait_s: f64,
    #[serde(default)]
    pub sampling: Option<Sampling>,
    /// Merged into every request body last (engine-specific switches).
    #[serde(default)]
    pub extra_body: Option<toml::Table>,
    /// Ask for running token counts in every chunk, in both dialects that
    /// offer them (llama.cpp's `timings_per_token`, vLLM's
    /// `stream_options.continuous_usage_stats`), so a reply closed early
    /// still knows what it spent. Engines ignore the field they do not know;
    /// `false` for a server that refuses unknown fields.
    #[serde(default = "default_running_counts")]
    pub running_counts: bool,
}

/// Which request field the token cap goes in.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CapField {
    /// Both `max_tokens` and `max_completion_tokens` (vLLM, llama.cpp,
    /// TabbyAPI and LiteLLM accept either).
    #[default]
    Both,
    MaxTokens,
    MaxCompletionTokens,
}

/// A sampling preset, sent with every request. Fields left out are not sent.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Sampling {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<i64>,
    pub min_p: Option<f64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub repetition_penalty: Option<f64>,
    /// The base seed: request k of a batch sends `seed + k`, so replies
    /// differ but a batch is reproducible where the engine honours seeds.
    pub seed: Option<u64>,
}

fn default_in_flight() -> usize {
    8
}
fn default_timeout() -> f64 {
    600.0
}
fn default_attempts() -> u32 {
    3
}
fn default_running_counts() -> bool {
    true
}
fn default_max_retry_wait() -> f64 {
    60.0
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    pools: BTreeMap<String, PoolConfig>,
}

impl PoolsFile {
    /// Reads and checks a pools file. Errors name the file, the line where
    /// the parser knows it, and the pool and field.
    pub fn load(path: &Path) -> Result<PoolsFile, DrawError> {
        let text =
            crate::support::input::read_to_string(path).map_err(|source| DrawError::Read {
                file: path.to_path_buf(),
                source,
            })?;
        let raw: RawFile = toml::from_str(&text).map_err(|e| DrawError::BadLine {
            file: path.to_path_buf(),
            line: e.span().map_or(0, |s| crate::spec::line_of(&text, s.start)),
            message: crate::support::input::one_line(e.message()),
        })?;
        let bad = |pool: &str, field: &str, message: &str| DrawError::BadPool {
            file: path.to_path_buf(),
            pool: pool.to_owned(),
            field: field.to_owned(),
            message: message.to_owned(),
        };
        for (name, p) in &raw.pools {
            if name == "replay" {
                return Err(bad(
                    name,
                    "",
                    "`replay` is the spec's recorded pool; pick another name",
                ));
            }
            if !(p.base_url.starts_with("http://") || p.base_url.starts_with("https://")) {
                return Err(bad(name, "base_url", "must start with http:// or https://"));
            }
            // A batch stores its pools' settings, and no secret reaches the
            // store: a key goes in the variable `api_key_env` names.
            if reqwest::Url::parse(&p.base_url).is_ok_and(|u| u.password().is_some()) {
                return Err(bad(
                    name,
                    "base_url",
                    "holds a password, which would be stored with every batch; \
                     put the key in an environment variable and name it in api_key_env",
                ));
            }
            if p.model.is_empty() {
                return Err(bad(name, "model", "must not be empty"));
            }
            if p.max_in_flight == 0 {
                return Err(bad(name, "max_in_flight", "must be at least 1"));
            }
            // Bounded, so that every duration made of them exists.
            if !(p.timeout_s > 0.0 && p.timeout_s <= MAX_SECONDS) {
                return Err(bad(
                    name,
                    "timeout_s",
                    "must be a positive number of seconds, at most 86400",
                ));
            }
            if !(0.0..=MAX_SECONDS).contains(&p.max_retry_wait_s) {
                return Err(bad(
                    name,
                    "max_retry_wait_s",
                    "must be between 0 and 86400 seconds",
                ));
            }
            if p.max_in_flight > MAX_IN_FLIGHT {
                return Err(bad(name, "max_in_flight", "must be at most 100000"));
            }
            if p.max_attempts == 0 {
                return Err(bad(name, "max_attempts", "must be at least 1"));
            }
            if p.max_completion_tokens == Some(0) {
                return Err(bad(name, "max_completion_tokens", "must be at least 1"));
            }
            if let Some(var) = &p.api_key_env {
                if var.is_empty() || var.contains('=') {
                    return Err(bad(
                        name,
                        "api_key_env",
                        "must be the name of an environment variable, not a key",
                    ));
                }
            }
        }
        Ok(PoolsFile {
            path: path.to_path_buf(),
            pools: raw.pools,
        })
    }

    /// The default pools file: `pools.toml` beside the spec, else in the
    /// working directory; `None` when neither exists.
    pub fn default_path(spec_dir: &Path) -> Option<PathBuf> {
        [spec_dir.join("pools.toml"), PathBuf::from("pools.toml")]
            .into_iter()
            .find(|p| p.is_file())
    }
}

/// The longest time limit or wait a pool may set: one day.
const MAX_SECONDS: f64 = 86_400.0;
/// The most requests in flight a pool may allow.
pub const MAX_IN_FLIGHT: usize = 100_000;

impl PoolConfig {
    pub fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.timeout_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<PoolsFile, DrawError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pools.toml");
        std::fs::write(&path, text).unwrap();
        PoolsFile::load(&path)
    }

    #[test]
    fn a_full_pool_parses() {
        let file = load(
            r#"
[pools.fast]
base_url = "http://127.0.0.1:8000/v1"
model = "qwen"
api_key_env = "FAST_KEY"
max_in_flight = 16
timeout_s = 30
max_completion_tokens = 2048
cap_field = "max_tokens"
sampling = { temperature = 0.7, top_p = 0.8, top_k = 20, min_p = 0.0, repetition_penalty = 1.05, seed = 7 }
extra_body = { chat_template_kwargs = { enable_thinking = false } }
"#,
        )
        .unwrap();
        let p = &file.pools["fast"];
        assert_eq!(p.max_in_flight, 16);
        assert_eq!(p.cap_field, CapField::MaxTokens);
        assert_eq!(p.sampling.as_ref().unwrap().top_k, Some(20));
        assert_eq!(p.max_attempts, 3, "default");
        assert!(p.extra_body.as_ref().unwrap()["chat_template_kwargs"].is_table());
    }

    /// Each bad file and a fragment its one-line error must contain.
    #[test]
    fn bad_files_name_file_line_pool_and_field() {
        let ok = "[pools.a]\nbase_url = \"http://h/v1\"\nmodel = \"m\"\n";
        let cases: &[(&str, &str)] = &[
            (
                &format!("{ok}colour = 1\n"),
                "pools.toml:4: unknown field `colour`",
            ),
            (&ok.replace("http://h/v1", "h/v1"), "pool `a`: `base_url`"),
            (
                &format!("{ok}max_in_flight = 0\n"),
                "pool `a`: `max_in_flight`",
            ),
            (&format!("{ok}api_key_env = \"sk=1\"\n"), "`api_key_env`"),
            (&format!("{ok}timeout_s = -1\n"), "`timeout_s`"),
            (&format!("{ok}timeout_s = 1e300\n"), "`timeout_s`"),
            (
                &format!("{ok}max_retry_wait_s = -1\n"),
                "`max_retry_wait_s`",
            ),
            (&format!("{ok}max_in_flight = 100001\n"), "`max_in_flight`"),
            ("[pools.a]\nmodel = \"m\"\n", "missing field `base_url`"),
            (&ok.replace("pools.a", "pools.replay"), "pool `replay`"),
        ];
        for (text, want) in cases {
            let err = load(text).unwrap_err().to_string();
            assert!(err.contains(want), "{err:?} lacks {want:?}");
            assert!(err.contains("pools.toml"), "{err:?} names no file");
            assert!(!err.contains('\n'), "{err:?} is not one line");
        }
    }
}
