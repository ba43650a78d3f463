//! How one attempt ended: the outcome, the engine's sentence and what the
//! server asked for, read from whatever the client handed back.

use std::time::Duration;

use async_openai::error::OpenAIError;
use serde_json::Value;

use super::transport::{truncate, HttpFailure};
use super::wire::StreamFault;
use crate::draw::pools::PoolConfig;
use crate::draw::{ErrorText, Outcome};

/// How one attempt ended.
#[derive(Debug, Clone)]
pub(super) struct End {
    pub(super) outcome: Outcome,
    pub(super) error: Option<ErrorText>,
    pub(super) retry_after: Option<Duration>,
    /// The prompt's size as an error body gave it (llama.cpp's
    /// `n_prompt_tokens` on a context overflow).
    pub(super) prompt_tokens: Option<u64>,
}

impl End {
    pub(super) fn ok() -> End {
        End {
            outcome: Outcome::Ok,
            error: None,
            retry_after: None,
            prompt_tokens: None,
        }
    }

    pub(super) fn timeout(cfg: &PoolConfig) -> End {
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

    /// The server's error inside the stream: its sentence and code, the
    /// error as sent beside them.
    pub(super) fn stream_error(fault: StreamFault) -> End {
        End {
            outcome: Outcome::StreamError { code: fault.code },
            error: Some(ErrorText {
                message: fault.message,
                body: Some(truncate(fault.body)),
            }),
            retry_after: None,
            prompt_tokens: None,
        }
    }

    pub(super) fn from_error(e: OpenAIError) -> End {
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
pub(super) fn body_prompt_tokens(body: &str) -> Option<u64> {
    let v: Value = serde_json::from_str(body).ok()?;
    v["error"]["n_prompt_tokens"].as_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
