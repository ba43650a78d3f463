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
