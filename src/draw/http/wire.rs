//! What goes over the wire: the request body a pool sends, and the stream
//! chunks it reads back, leniently, taking only the fields assay uses.

use serde::Deserialize;
use serde_json::{json, Value};

use super::Prompt;
use crate::draw::pools::{CapField, PoolConfig};

/// The request body every request of a pool shares.
pub(super) fn request_body(cfg: &PoolConfig, prompt: &Prompt) -> Value {
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

/// A stream chunk: only what assay reads, leniently (engines add fields,
/// send `null` for absent ones, or leave `choices` empty on the usage chunk).
#[derive(Debug, Deserialize)]
pub(super) struct Chunk {
    #[serde(default)]
    pub(super) choices: Vec<Choice>,
    #[serde(default)]
    pub(super) usage: Option<Usage>,
    /// llama.cpp's counts: on the last chunk, or on every chunk with
    /// `timings_per_token`.
    #[serde(default)]
    pub(super) timings: Option<Timings>,
    #[serde(default)]
    pub(super) model: Option<String>,
    /// An error sent where a chunk was due: `{"error": {...}}` (llama.cpp,
    /// OpenAI, newer vLLM, Anthropic's `error` event) or `{"error": "..."}`.
    #[serde(default)]
    error: Option<Value>,
    /// Older vLLM sends the error object itself, `{"object": "error",
    /// "message": ..., "code": ...}`.
    #[serde(default)]
    object: Option<String>,
    #[serde(default)]
    message: Option<Value>,
    #[serde(default)]
    code: Option<Value>,
}

/// An error the server sent inside the stream, after it had answered 200.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct StreamFault {
    /// The HTTP-like status the server gave the error (`error.code`), when
    /// it gave a number; OpenAI sends a word there instead.
    pub(super) code: Option<u16>,
    /// The server's own sentence.
    pub(super) message: String,
    /// The error as sent (re-serialized from the chunk).
    pub(super) body: String,
}

impl Chunk {
    /// The error this chunk carries instead of text, if it does.
    pub(super) fn fault(&self) -> Option<StreamFault> {
        let error = match (&self.error, self.object.as_deref()) {
            (Some(e), _) => e.clone(),
            (None, Some("error")) => json!({
                "object": "error",
                "message": self.message,
                "code": self.code,
            }),
            (None, _) => return None,
        };
        let body = if self.error.is_some() {
            json!({ "error": error }).to_string()
        } else {
            error.to_string()
        };
        let message = match &error {
            Value::String(s) => s.clone(),
            e => e["message"]
                .as_str()
                .or(e["type"].as_str())
                .unwrap_or("an error inside the stream, without a message")
                .to_owned(),
        };
        let code = error["code"]
            .as_u64()
            .or_else(|| error["code"].as_str()?.parse().ok())
            .and_then(|c| u16::try_from(c).ok())
            .filter(|c| (100..600).contains(c));
        Some(StreamFault {
            code,
            message,
            body,
        })
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct Choice {
    #[serde(default)]
    pub(super) delta: Option<Delta>,
    /// `/v1/completions`: the text a chunk adds (no delta there).
    #[serde(default)]
    pub(super) text: Option<String>,
    #[serde(default)]
    pub(super) finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct Delta {
    #[serde(default)]
    pub(super) content: Option<String>,
    /// vLLM (older), DeepSeek, llama.cpp with a reasoning format.
    #[serde(default)]
    pub(super) reasoning_content: Option<String>,
    /// vLLM (newer), OpenRouter.
    #[serde(default)]
    pub(super) reasoning: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub(super) struct Usage {
    #[serde(default)]
    pub(super) prompt_tokens: Option<u64>,
    #[serde(default)]
    pub(super) completion_tokens: Option<u64>,
    #[serde(default)]
    pub(super) prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub(super) struct PromptDetails {
    #[serde(default)]
    pub(super) cached_tokens: Option<u64>,
}

/// llama.cpp's `timings`: tokens generated so far, prompt tokens evaluated
/// and prompt tokens taken from the cache.
#[derive(Debug, Clone, Copy, Deserialize)]
pub(super) struct Timings {
    #[serde(default)]
    pub(super) predicted_n: Option<u64>,
    #[serde(default)]
    pub(super) prompt_n: Option<u64>,
    #[serde(default)]
    pub(super) cache_n: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(line: &str) -> Option<StreamFault> {
        serde_json::from_str::<Chunk>(line).unwrap().fault()
    }

    #[test]
    fn errors_inside_a_stream_are_read_in_every_servers_shape() {
        let cases: &[(&str, Option<u16>, &str)] = &[
            // llama.cpp's server (a grammar or format failure mid-stream).
            (
                r#"{"error":{"code":500,"message":"The model produced output that does not match the expected peg-native format","type":"server_error"}}"#,
                Some(500),
                "The model produced output that does not match the expected peg-native format",
            ),
            // OpenAI: a word where the code is.
            (
                r#"{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":"server_error"}}"#,
                None,
                "The server had an error while processing your request.",
            ),
            // Newer vLLM.
            (
                r#"{"error":{"object":"error","message":"Engine died","type":"InternalServerError","param":null,"code":503}}"#,
                Some(503),
                "Engine died",
            ),
            // Older vLLM: the error object itself.
            (
                r#"{"object":"error","message":"out of KV cache","type":"BadRequestError","param":null,"code":400}"#,
                Some(400),
                "out of KV cache",
            ),
            // Anthropic's `error` event.
            (
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                None,
                "Overloaded",
            ),
            // A proxy's bare string; a code given as a string.
            (r#"{"error":"upstream closed"}"#, None, "upstream closed"),
            (
                r#"{"error":{"message":"busy","code":"429"}}"#,
                Some(429),
                "busy",
            ),
        ];
        for (line, code, message) in cases {
            let f = fault(line).unwrap_or_else(|| panic!("no fault read in {line}"));
            assert_eq!((f.code, f.message.as_str()), (*code, *message), "{line}");
            assert!(f.body.contains(message), "{}", f.body);
        }
    }

    #[test]
    fn a_chunk_with_text_or_a_null_error_is_no_fault() {
        for line in [
            r#"{"choices":[{"delta":{"content":"fn"},"finish_reason":null}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#,
            r#"{"error":null,"choices":[{"text":"x"}]}"#,
            r#"{"object":"chat.completion.chunk","choices":[]}"#,
        ] {
            assert_eq!(fault(line), None, "{line}");
        }
    }
}
