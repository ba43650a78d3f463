//! The replay pool: recorded replies from a JSONL file, served in order.
//! The bundled default, and how old batches are re-run offline.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use tokio::sync::mpsc;

use super::{DrawError, Drawn, Reply};

/// A pool that serves recorded replies.
#[derive(Debug, Clone)]
pub struct ReplayPool {
    pub name: String,
    pub path: PathBuf,
    replies: Vec<Reply>,
}

impl ReplayPool {
    /// Reads and checks a whole corpus; a bad line is an error naming it.
    pub fn open(name: &str, path: &Path) -> Result<ReplayPool, DrawError> {
        let text =
            crate::support::input::read_to_string(path).map_err(|source| DrawError::Read {
                file: path.to_path_buf(),
                source,
            })?;
        let mut replies = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let recorded: Recorded =
                serde_json::from_str(line).map_err(|e| DrawError::BadLine {
                    file: path.to_path_buf(),
                    line: i + 1,
                    message: e.to_string(),
                })?;
            replies.push(recorded.into());
        }
        Ok(ReplayPool {
            name: name.to_owned(),
            path: path.to_path_buf(),
            replies,
        })
    }

    pub fn len(&self) -> usize {
        self.replies.len()
    }

    pub fn is_empty(&self) -> bool {
        self.replies.is_empty()
    }

    /// Checks that the corpus can serve `n` replies, before a batch starts.
    pub fn check_capacity(&self, n: usize) -> Result<(), DrawError> {
        if n > self.replies.len() {
            return Err(DrawError::NotEnough {
                file: self.path.clone(),
                available: self.replies.len(),
                wanted: n,
            });
        }
        Ok(())
    }

    /// Sends replies `skip..n` in order. Stops early if the receiver is gone.
    pub async fn draw(
        &self,
        n: usize,
        skip: usize,
        tx: mpsc::Sender<Drawn>,
    ) -> Result<(), DrawError> {
        self.check_capacity(n)?;
        for (idx, reply) in self.replies.iter().enumerate().take(n).skip(skip) {
            let drawn = Drawn {
                idx,
                pool: self.name.clone(),
                reply: reply.clone(),
            };
            if tx.send(drawn).await.is_err() {
                break;
            }
        }
        Ok(())
    }
}

/// One line of a replay corpus, as documented in docs/tasks.md.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Recorded {
    content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    ttft_ms: Option<f64>,
    #[serde(default)]
    latency_ms: Option<f64>,
}

#[derive(Debug, Deserialize)]
struct Usage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
}

impl From<Recorded> for Reply {
    fn from(r: Recorded) -> Reply {
        Reply {
            hit_cap: r.finish_reason.as_deref() == Some("length"),
            content: r.content,
            reasoning: r.reasoning,
            finish_reason: r.finish_reason,
            prompt_tokens: r.usage.as_ref().and_then(|u| u.prompt_tokens),
            completion_tokens: r.usage.as_ref().and_then(|u| u.completion_tokens),
            model: r.model,
            ttft_ms: r.ttft_ms,
            latency_ms: r.latency_ms,
            ..Reply::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("replies.jsonl");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[tokio::test]
    async fn serves_lines_in_order_with_usage() {
        let (_d, path) = corpus(concat!(
            r#"{"content": "a", "usage": {"prompt_tokens": 10, "completion_tokens": 3}, "finish_reason": "stop"}"#,
            "\n\n",
            r#"{"content": null, "model": "m", "ttft_ms": 12.5}"#,
            "\n"
        ));
        let pool = ReplayPool::open("replay", &path).unwrap();
        assert_eq!(pool.len(), 2);
        let (tx, mut rx) = mpsc::channel(4);
        pool.draw(2, 0, tx).await.unwrap();
        let a = rx.recv().await.unwrap();
        assert_eq!((a.idx, a.reply.content.as_deref()), (0, Some("a")));
        assert_eq!(a.reply.completion_tokens, Some(3));
        let b = rx.recv().await.unwrap();
        assert_eq!(
            (b.idx, b.reply.content, b.reply.completion_tokens),
            (1, None, None)
        );
        assert!(rx.recv().await.is_none());
    }

    #[tokio::test]
    async fn skip_resumes_after_stored_replies() {
        let (_d, path) = corpus("{\"content\":\"a\"}\n{\"content\":\"b\"}\n{\"content\":\"c\"}\n");
        let pool = ReplayPool::open("replay", &path).unwrap();
        let (tx, mut rx) = mpsc::channel(4);
        pool.draw(3, 2, tx).await.unwrap();
        assert_eq!(rx.recv().await.unwrap().idx, 2);
        assert!(rx.recv().await.is_none());
    }

    #[test]
    fn asking_for_more_than_the_corpus_is_an_error() {
        let (_d, path) = corpus("{\"content\":\"a\"}\n");
        let pool = ReplayPool::open("replay", &path).unwrap();
        let err = pool.check_capacity(2).unwrap_err().to_string();
        assert!(err.contains("holds 1 replies, 2 were asked for"), "{err}");
    }

    #[test]
    fn a_bad_line_is_named() {
        let (_d, path) = corpus("{\"content\":\"a\"}\n{\"contnet\":\"b\"}\n");
        let err = ReplayPool::open("replay", &path).unwrap_err().to_string();
        assert!(
            err.contains("replies.jsonl:2: unknown field `contnet`"),
            "{err}"
        );
    }
}
