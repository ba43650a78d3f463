//! What a draw hands out: a reply with what it cost, how each request and
//! attempt ended (`Outcome`, stable strings in the store), and the events
//! of a draw in order of arrival.

use std::fmt;
use std::str::FromStr;

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
    /// The server sent an error inside the stream, after answering 200
    /// (llama.cpp, vLLM and OpenAI-style gateways do): the reply failed on
    /// the server's side, whatever text came before. `code` is the status
    /// the error named, when it named a number.
    StreamError { code: Option<u16> },
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
#[expect(
    clippy::large_enum_variant,
    reason = "nearly every event is a reply, moved once through a channel; a box would only add an allocation to each"
)]
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

impl Outcome {
    /// Worth another attempt: the server may answer next time.
    pub fn is_retryable(&self) -> bool {
        match self {
            Outcome::HttpError { status } => retryable_status(*status),
            // Without a code, the server failed mid-answer: as a 500 would.
            Outcome::StreamError { code } => code.is_none_or(retryable_status),
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
    /// An error inside a stream never is: the server took the request.
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

/// A status worth another attempt: the server may answer next time.
fn retryable_status(status: u16) -> bool {
    matches!(status, 408 | 429 | 500 | 502 | 503 | 504)
}

const STREAM_ERROR: &str = "stream_error";

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Ok => f.write_str("ok"),
            Outcome::HttpError { status } => write!(f, "http_error({status})"),
            Outcome::ConnectionError => f.write_str("connection_error"),
            Outcome::Timeout => f.write_str("timeout"),
            Outcome::MalformedChunk => f.write_str("malformed_chunk"),
            Outcome::StreamError { code: None } => f.write_str(STREAM_ERROR),
            Outcome::StreamError { code: Some(c) } => write!(f, "{STREAM_ERROR}({c})"),
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
            STREAM_ERROR => Outcome::StreamError { code: None },
            "pool_stopped" => Outcome::PoolStopped,
            "cancelled" => Outcome::Cancelled,
            _ => {
                let (name, code) = s
                    .strip_suffix(')')
                    .and_then(|r| r.split_once('('))
                    .ok_or(())?;
                let code = code.parse().map_err(|_| ())?;
                match name {
                    "http_error" => Outcome::HttpError { status: code },
                    STREAM_ERROR => Outcome::StreamError { code: Some(code) },
                    _ => return Err(()),
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_round_trip_through_their_strings() {
        for o in [
            Outcome::Ok,
            Outcome::HttpError { status: 429 },
            Outcome::ConnectionError,
            Outcome::Timeout,
            Outcome::MalformedChunk,
            Outcome::StreamError { code: None },
            Outcome::StreamError { code: Some(500) },
            Outcome::PoolStopped,
            Outcome::Cancelled,
        ] {
            assert_eq!(o.to_string().parse::<Outcome>(), Ok(o));
        }
        assert!("http_error(x)".parse::<Outcome>().is_err());
        assert!("timeout(3)".parse::<Outcome>().is_err());
        assert_eq!(
            Outcome::StreamError { code: Some(500) }.to_string(),
            "stream_error(500)"
        );
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
        let mid = |code| Outcome::StreamError { code };
        assert!(mid(None).is_retryable() && mid(Some(500)).is_retryable());
        assert!(!mid(Some(400)).is_retryable());
        assert!(!mid(Some(400)).is_refusal() && !mid(None).is_ok());
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
}
