//! A batch's draw source: where its replies come from, as stored with it
//! (issue 38). A batch records the source it was started with, and a
//! `--resume` draws from exactly that unless its flags name another, which
//! it then says and records: a resume never switches a batch's source
//! silently.
//!
//! The source is the spec's replay corpus, or HTTP pools: the pools file
//! they were read from, the split, and each pool's name, share and whole
//! configuration as the batch used it (flags' overrides applied). Never a
//! key: a pool names the environment variable holding its key
//! (`api_key_env`), and each machine's resume reads its own. Plain data,
//! no IO.
//!
//! It lives here rather than in `spec`, the configuration leaf, because a
//! pool's configuration is the pools file's type ([`PoolConfig`]), which
//! `spec` cannot see.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_with::{serde_as, DisplayFromStr};

use super::pools::PoolConfig;
use super::DrawOptions;
use crate::spec::{PoolChoice, SplitMode};

/// Where a batch's replies come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum DrawSource {
    /// The spec's recorded replay corpus.
    Replay {
        /// The corpus file, absolute.
        corpus: PathBuf,
    },
    /// OpenAI-compatible pools of a pools file.
    Http(HttpSource),
}

/// HTTP pools as a batch drew from them.
#[serde_as]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSource {
    /// The pools file they were read from, absolute. A resume without
    /// `--pools` also looks the repair rounds' pools up there.
    pub pools_file: PathBuf,
    #[serde_as(as = "DisplayFromStr")]
    pub split: SplitMode,
    /// In the order they were named.
    pub pools: Vec<SourcePool>,
}

/// One pool of an [`HttpSource`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourcePool {
    pub name: String,
    /// `NAME=SHARE`'s share; `None` when named without one.
    pub share: Option<u64>,
    /// As the batch used it: the file's, with `--max-completion-tokens`
    /// and `--max-in-flight` applied. Its key is only a variable's name.
    pub config: PoolConfig,
}

/// A stored source that cannot be read back.
#[derive(Debug, thiserror::Error)]
#[error("its stored draw source cannot be read: {0}")]
pub struct BadSource(#[from] serde_json::Error);

/// A resume that draws from another source than the batch's stored one,
/// as its flags asked: what the batch had and what it has now, as stored
/// JSON, and the sentence that says so.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceChange {
    pub was: String,
    pub now: String,
    /// One line for stderr.
    pub sentence: String,
}

impl DrawSource {
    /// The JSON the store keeps.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a draw source serialises")
    }

    /// Reads a stored source.
    pub fn from_json(json: &str) -> Result<DrawSource, BadSource> {
        Ok(serde_json::from_str(json)?)
    }

    /// The pools file of HTTP pools.
    pub fn pools_file(&self) -> Option<&Path> {
        match self {
            DrawSource::Replay { .. } => None,
            DrawSource::Http(h) => Some(&h.pools_file),
        }
    }

    /// The pools as `--pool` would name them (`replay` for the corpus).
    pub fn choices(&self) -> Vec<PoolChoice> {
        match self {
            DrawSource::Replay { .. } => vec![PoolChoice {
                name: "replay".into(),
                share: None,
            }],
            DrawSource::Http(h) => h
                .pools
                .iter()
                .map(|p| PoolChoice {
                    name: p.name.clone(),
                    share: p.share,
                })
                .collect(),
        }
    }

    /// The split of HTTP pools; `None` for the corpus.
    pub fn split(&self) -> Option<SplitMode> {
        match self {
            DrawSource::Replay { .. } => None,
            DrawSource::Http(h) => Some(h.split),
        }
    }

    /// `opts` for a resume whose flags name a source: what they leave
    /// open (the pools, the split, the pools file) is this source's, not
    /// the spec's.
    pub fn under(&self, opts: &DrawOptions) -> DrawOptions {
        DrawOptions {
            pools: if opts.pools.is_empty() {
                self.choices()
            } else {
                opts.pools.clone()
            },
            split: opts.split.or(self.split()),
            pools_file: opts
                .pools_file
                .clone()
                .or_else(|| self.pools_file().map(Path::to_path_buf)),
            ..opts.clone()
        }
    }

    /// Whether `self` (as stored, `stored`) and `now` draw the same
    /// replies: equal but for the requests in flight, which decide how
    /// fast, not what. Compared as stored JSON, so a float reads back the
    /// same on both sides.
    fn draws_as(stored: &str, now: &DrawSource) -> bool {
        let read = |json: &str| {
            serde_json::from_str::<serde_json::Value>(json).map(|mut v| {
                if let Some(pools) = v.get_mut("pools").and_then(|p| p.as_array_mut()) {
                    for p in pools {
                        if let Some(c) = p.get_mut("config").and_then(|c| c.as_object_mut()) {
                            c.remove("max_in_flight");
                        }
                    }
                }
                v
            })
        };
        matches!((read(stored), read(&now.to_json())), (Ok(a), Ok(b)) if a == b)
    }

    /// The change from the stored source `was` (its JSON `was_json`) to
    /// `now`, for batch `batch`; `None` when they draw alike.
    pub fn change(
        batch: i64,
        was: &DrawSource,
        was_json: &str,
        now: &DrawSource,
    ) -> Option<SourceChange> {
        if DrawSource::draws_as(was_json, now) {
            return None;
        }
        let (mut from, mut to) = (was.describe(), now.describe());
        if from == to {
            from.push_str(" with its settings then");
            to.push_str(" with the pools file's settings now");
        }
        Some(SourceChange {
            was: was_json.to_owned(),
            now: now.to_json(),
            sentence: format!(
                "batch {batch}: this resume draws from {to}, as its flags ask, not from {from} \
                 as the batch began; the change is recorded with the resume"
            ),
        })
    }

    /// A few words for a message: `the replay corpus FILE`, or each
    /// pool's name, share, model and URL, the split and the file.
    pub fn describe(&self) -> String {
        match self {
            DrawSource::Replay { corpus } => format!("the replay corpus {}", corpus.display()),
            DrawSource::Http(h) => {
                let pools: Vec<String> = h
                    .pools
                    .iter()
                    .map(|p| {
                        let share = p.share.map(|s| format!("={s}")).unwrap_or_default();
                        format!(
                            "`{}{share}` (model `{}` at {})",
                            p.name, p.config.model, p.config.base_url
                        )
                    })
                    .collect();
                let race = if h.split == SplitMode::Race {
                    " raced"
                } else {
                    ""
                };
                format!(
                    "pools {}{race} of {}",
                    pools.join(", "),
                    h.pools_file.display()
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(text: &str) -> PoolConfig {
        toml::from_str(text).unwrap()
    }

    fn http() -> DrawSource {
        DrawSource::Http(HttpSource {
            pools_file: "/etc/assay/pools.toml".into(),
            split: SplitMode::Fixed,
            pools: vec![
                SourcePool {
                    name: "local".into(),
                    share: Some(3),
                    config: pool(
                        r#"
base_url = "http://127.0.0.1:8080/v1"
model = "qwen"
api_key_env = "LOCAL_KEY"
max_in_flight = 4
timeout_s = 30.5
max_completion_tokens = 2048
cap_field = "max_tokens"
running_counts = false
sampling = { temperature = 0.7, top_p = 0.8, top_k = 20, min_p = 0.05, seed = 1 }
extra_body = { repeat_penalty = 1.05, chat_template_kwargs = { enable_thinking = false } }
"#,
                    ),
                },
                SourcePool {
                    name: "flash".into(),
                    share: None,
                    config: pool("base_url = \"https://h/v1\"\nmodel = \"m\"\n"),
                },
            ],
        })
    }

    #[test]
    fn every_source_round_trips_through_its_json() {
        let sources = [
            DrawSource::Replay {
                corpus: "/specs/absolute/replies.jsonl".into(),
            },
            http(),
        ];
        for source in sources {
            let json = source.to_json();
            assert_eq!(DrawSource::from_json(&json).unwrap(), source, "{json}");
            assert_eq!(DrawSource::from_json(&json).unwrap().to_json(), json);
        }
    }

    #[test]
    fn the_json_names_the_key_variable_and_the_split_by_their_words() {
        let json: serde_json::Value = serde_json::from_str(&http().to_json()).unwrap();
        assert_eq!(json["kind"], "http");
        assert_eq!(json["split"], "fixed");
        assert_eq!(json["pools"][0]["config"]["api_key_env"], "LOCAL_KEY");
        assert_eq!(json["pools"][0]["config"]["cap_field"], "max_tokens");
        let replay = DrawSource::Replay {
            corpus: "/r.jsonl".into(),
        };
        assert_eq!(replay.to_json(), r#"{"kind":"replay","corpus":"/r.jsonl"}"#);
    }

    #[test]
    fn a_stored_source_that_is_not_one_is_refused() {
        for bad in [
            "{}",
            r#"{"kind":"replay"}"#,
            r#"{"kind":"replay","corpus":"/r","key":"sk-1"}"#,
            r#"{"kind":"http","pools_file":"/p","split":"fastest","pools":[]}"#,
            "not json",
        ] {
            assert!(DrawSource::from_json(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_what_decides_the_replies_is_a_change() {
        let was = http();
        let json = was.to_json();
        assert_eq!(DrawSource::change(7, &was, &json, &was), None);
        let with = |edit: &dyn Fn(&mut SourcePool)| {
            let mut source = was.clone();
            let DrawSource::Http(h) = &mut source else {
                unreachable!()
            };
            edit(&mut h.pools[0]);
            source
        };
        let faster = with(&|p| p.config.max_in_flight = 64);
        assert_eq!(DrawSource::change(7, &was, &json, &faster), None);
        let faster = with(&|p| p.config.model = "other".into());
        let change = DrawSource::change(7, &was, &json, &faster).unwrap();
        assert_eq!(change.was, json);
        assert_eq!(change.now, faster.to_json());
        assert!(
            change
                .sentence
                .starts_with("batch 7: this resume draws from pools `local=3` (model `other`"),
            "{}",
            change.sentence
        );
        assert!(!change.sentence.contains('\n'));
        let replay = DrawSource::Replay {
            corpus: "/r.jsonl".into(),
        };
        let change = DrawSource::change(7, &was, &json, &replay).unwrap();
        assert!(
            change
                .sentence
                .contains("draws from the replay corpus /r.jsonl"),
            "{}",
            change.sentence
        );
        let cooler = with(&|p| p.config.sampling = None);
        let change = DrawSource::change(7, &was, &json, &cooler).unwrap();
        assert!(
            change
                .sentence
                .contains("with the pools file's settings now"),
            "{}",
            change.sentence
        );
    }

    #[test]
    fn flags_that_name_part_of_a_source_keep_the_rest_of_the_stored_one() {
        let stored = http();
        let opts = DrawOptions {
            split: Some(SplitMode::Race),
            max_in_flight: Some(2),
            ..Default::default()
        };
        let under = stored.under(&opts);
        assert_eq!(under.pools, stored.choices());
        assert_eq!(under.split, Some(SplitMode::Race));
        assert_eq!(
            under.pools_file.as_deref(),
            Some(Path::new("/etc/assay/pools.toml"))
        );
        assert_eq!(under.max_in_flight, Some(2));
        let replay = DrawSource::Replay {
            corpus: "/r.jsonl".into(),
        };
        let under = replay.under(&DrawOptions::default());
        assert_eq!(under.pools, vec!["replay".parse().unwrap()]);
        assert_eq!(under.split, None);
    }
}
