//! One attempt's stream read chunk by chunk: content with each chunk's
//! arrival time, reasoning, the server's counts, the early stop's watch,
//! and at its end the [`Reply`] stored.

use super::ending::End;
use super::wire::{Chunk, Timings, Usage};
use crate::draw::{Attempt, Reply};
use crate::text::extract::Watch;
use crate::text::markdown::{self, Kind};

/// What one attempt's stream has brought so far.
#[derive(Debug, Default)]
pub(super) struct Accum {
    /// Content as sent, `<think>` blocks included.
    raw: String,
    /// (byte offset where a content chunk starts in `raw`, ms since the
    /// request's start when it arrived).
    marks: Vec<(usize, f64)>,
    content_seen: bool,
    /// Reasoning from `reasoning_content` / `reasoning` deltas.
    reasoning_field: String,
    first_reasoning_field_ms: Option<f64>,
    chunks: u64,
    /// The latest usage block (every chunk's with vLLM's continuous usage).
    usage: Option<Usage>,
    /// The latest `timings` (every chunk's with `timings_per_token`).
    timings: Option<Timings>,
    finish_reason: Option<String>,
    model: Option<String>,
    /// Extraction's rule over the content so far, when the stream may be
    /// closed early.
    watch: Option<Watch>,
    cut_early: bool,
}

impl Accum {
    /// Nothing read yet; `watch` when the stream may be closed early.
    pub(super) fn new(watch: Option<Watch>) -> Accum {
        Accum {
            watch,
            ..Accum::default()
        }
    }

    /// The stream is closed here, before the server ended it.
    pub(super) fn cut_early(&mut self) {
        self.cut_early = true;
    }

    /// Adds a chunk; says whether content grew.
    pub(super) fn add(&mut self, chunk: Chunk, at_ms: f64) -> bool {
        if chunk.model.is_some() {
            self.model = chunk.model;
        }
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        if chunk.timings.is_some() {
            self.timings = chunk.timings;
        }
        let mut grew = false;
        let mut text = false;
        if let Some(choice) = chunk.choices.into_iter().next() {
            if choice.finish_reason.is_some() {
                self.finish_reason = choice.finish_reason;
            }
            let mut delta = choice.delta.unwrap_or_default();
            if delta.content.is_none() {
                delta.content = choice.text;
            }
            if let Some(c) = delta.content {
                self.content_seen = true;
                if !c.is_empty() {
                    self.marks.push((self.raw.len(), at_ms));
                    self.raw.push_str(&c);
                    grew = true;
                    text = true;
                }
            }
            for r in [delta.reasoning_content, delta.reasoning]
                .into_iter()
                .flatten()
            {
                if !r.is_empty() {
                    self.first_reasoning_field_ms.get_or_insert(at_ms);
                    self.reasoning_field.push_str(&r);
                    text = true;
                }
            }
        }
        if text {
            self.chunks += 1;
        }
        grew
    }

    /// Extraction would take the same candidate from the content so far
    /// as from any content that may follow it (never, without a watch).
    pub(super) fn answer_settled(&mut self) -> bool {
        self.watch.as_mut().is_some_and(|w| w.read(&self.raw))
    }

    /// When the chunk holding byte `pos` of `raw` arrived.
    fn arrival(&self, pos: usize) -> Option<f64> {
        let i = self.marks.partition_point(|(start, _)| *start <= pos);
        self.marks.get(i.checked_sub(1)?).map(|m| m.1)
    }

    pub(super) fn into_reply(
        self,
        end: End,
        attempts: Vec<Attempt>,
        latency_ms: f64,
        cap: Option<u64>,
    ) -> Reply {
        let segments = markdown::split_reasoning(&self.raw);
        // The first byte of `kind` that is not whitespace, and when it came.
        let first_visible = |kind: Kind| {
            let at = segments.iter().filter(|s| s.kind == kind).find_map(|s| {
                let text = &self.raw[s.range.clone()];
                text.find(|c: char| !c.is_whitespace())
                    .map(|i| s.range.start + i)
            });
            at.and_then(|p| self.arrival(p))
        };
        let think_ms = first_visible(Kind::Reasoning);
        let ttft_ms = first_visible(Kind::Answer);
        let mut reasoning = self.reasoning_field.clone();
        for s in segments.iter().filter(|s| s.kind == Kind::Reasoning) {
            let inner = self.raw[s.range.clone()].trim();
            if inner.is_empty() {
                continue;
            }
            if !reasoning.is_empty() {
                reasoning.push('\n');
            }
            reasoning.push_str(inner);
        }
        let ttft_reasoning_ms = match (self.first_reasoning_field_ms, think_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let counts = Counts::of(self.usage, self.timings, end.prompt_tokens);
        let completion_tokens = counts.completion;
        let hit_cap = self.finish_reason.as_deref() == Some("length")
            || matches!((completion_tokens, cap), (Some(t), Some(c)) if t >= c);
        Reply {
            content: self
                .content_seen
                .then(|| markdown::joined(&self.raw, &segments, Kind::Answer)),
            reasoning: (!reasoning.is_empty()).then_some(reasoning),
            finish_reason: self.finish_reason,
            prompt_tokens: counts.prompt,
            cached_prompt_tokens: counts.cached,
            completion_tokens,
            model: self.model,
            ttft_ms,
            ttft_reasoning_ms,
            latency_ms: Some(latency_ms),
            chunks: Some(self.chunks),
            hit_cap,
            cut_early: self.cut_early,
            cap_tokens_left: match (self.cut_early, cap, completion_tokens) {
                (true, Some(c), Some(t)) => Some(c.saturating_sub(t)),
                _ => None,
            },
            outcome: end.outcome,
            error: end.error,
            attempts,
        }
    }
}

/// A reply's token counts, the server's own: the usage block first, then
/// llama.cpp's `timings` (the last one read, which is a running count when
/// the stream was closed early), then an error body's prompt size.
#[derive(Debug, Default, PartialEq)]
struct Counts {
    prompt: Option<u64>,
    cached: Option<u64>,
    completion: Option<u64>,
}

impl Counts {
    fn of(usage: Option<Usage>, timings: Option<Timings>, error_prompt: Option<u64>) -> Counts {
        let timed_prompt = timings.and_then(|t| Some(t.prompt_n? + t.cache_n.unwrap_or(0)));
        Counts {
            prompt: usage
                .and_then(|u| u.prompt_tokens)
                .or(timed_prompt)
                .or(error_prompt),
            cached: usage
                .and_then(|u| u.prompt_tokens_details?.cached_tokens)
                .or(timings.and_then(|t| t.cache_n)),
            completion: usage
                .and_then(|u| u.completion_tokens)
                .or(timings.and_then(|t| t.predicted_n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::draw::http::ending::body_prompt_tokens;

    /// Streams `reply` in chunks of `size` bytes as the draw reads a
    /// stream: the byte where it would be closed early (if it would) and
    /// the reply it stores.
    fn streamed(reply: &str, size: usize, entry: &str) -> (Option<usize>, Reply) {
        let mut acc = Accum {
            watch: Some(Watch::new(entry)),
            ..Accum::default()
        };
        let mut at = 0;
        let mut cut = None;
        while at < reply.len() {
            let mut end = at.saturating_add(size).min(reply.len());
            while !reply.is_char_boundary(end) {
                end += 1;
            }
            let chunk: Chunk = serde_json::from_value(
                json!({"choices": [{"delta": {"content": &reply[at..end]}}]}),
            )
            .unwrap();
            at = end;
            if acc.add(chunk, at as f64) && acc.answer_settled() {
                cut = Some(at);
                break;
            }
        }
        (cut, acc.into_reply(End::ok(), Vec::new(), 0.0, None))
    }

    /// Every shape on which the early stop and the extraction once read a
    /// reply differently (issue 25): the stream is closed exactly where
    /// the row says, and what is extracted from the reply stored at the cut
    /// is what would be extracted from the whole reply, for every
    /// continuation the row has.
    #[test]
    fn the_early_stop_and_the_extraction_agree_on_where_the_code_is() {
        use crate::text::extract::{extract, Extraction};
        const SOLVE: &str = "pub fn solve(x: u32) -> u32 { x + 1 }";
        const DRAFT: &str = "pub fn solve(x: u32) -> u32 { x }";
        let f = |s: &str| s.replace("SOLVE", SOLVE).replace("DRAFT", DRAFT);
        // (shape, reply, the part read when the stream is closed, or None
        // when it is read to its end)
        let rows: &[(&str, String, Option<String>)] = &[
            (
                "tagged fence",
                f("Here:\n```rust\nSOLVE\n```\nIt adds one.\n"),
                Some(f("Here:\n```rust\nSOLVE\n```\n")),
            ),
            (
                "untagged fence",
                f("Here:\n```\nSOLVE\n```\nIt adds one.\n"),
                Some(f("Here:\n```\nSOLVE\n```\n")),
            ),
            (
                "tilde fence",
                f("~~~rust\nSOLVE\n~~~\nIt adds one.\n"),
                Some(f("~~~rust\nSOLVE\n~~~\n")),
            ),
            (
                "capitalised tag",
                f("```Rust\nSOLVE\n```\nIt adds one.\n"),
                Some(f("```Rust\nSOLVE\n```\n")),
            ),
            (
                "longer opening fence",
                f("````rust\nSOLVE\n````\nIt adds one.\n"),
                Some(f("````rust\nSOLVE\n````\n")),
            ),
            (
                "longer closing fence",
                f("```rust\nSOLVE\n`````\nIt adds one.\n"),
                Some(f("```rust\nSOLVE\n`````\n")),
            ),
            (
                "closing fence with trailing spaces, CRLF",
                f("```rust\r\nSOLVE\r\n```  \r\nIt adds one.\r\n"),
                Some(f("```rust\r\nSOLVE\r\n```  \r\n")),
            ),
            (
                "a shorter line does not close",
                f("````rust\nSOLVE\n```\n````\nIt adds one.\n"),
                None,
            ),
            (
                "an indented closing line does not close",
                f("```rust\nSOLVE\n    ```\nIt adds one.\n```\n"),
                None,
            ),
            (
                "four spaces of indentation: not a fence",
                f("Like this:\n    ```rust\n    DRAFT\n    ```\nSo:\n```rust\nSOLVE\n```\nDone.\n"),
                Some(f("Like this:\n    ```rust\n    DRAFT\n    ```\nSo:\n```rust\nSOLVE\n```\n")),
            ),
            (
                "a fence without the entry first",
                f("```rust\nfn helper() {}\n```\nAnd:\n```rust\nSOLVE\n```\nDone.\n"),
                Some(f("```rust\nfn helper() {}\n```\nAnd:\n```rust\nSOLVE\n```\n")),
            ),
            (
                "a fence of another language",
                f("```python\ndef solve(x): return x + 1\n```\n```\nSOLVE\n```\nDone.\n"),
                Some(f("```python\ndef solve(x): return x + 1\n```\n```\nSOLVE\n```\n")),
            ),
            (
                "a fence inside the leading think block",
                f("<think>\n```rust\nDRAFT\n```\n</think>\n```rust\nSOLVE\n```\nDone.\n"),
                Some(f("<think>\n```rust\nDRAFT\n```\n</think>\n```rust\nSOLVE\n```\n")),
            ),
            (
                "a second think block with a fence inside",
                f("<think>plan</think>\nFirst a check.\n<think>\n```rust\nDRAFT\n```\n</think>\n~~~\nSOLVE\n~~~\nDone.\n"),
                Some(f("<think>plan</think>\nFirst a check.\n<think>\n```rust\nDRAFT\n```\n</think>\n~~~\nSOLVE\n~~~\n")),
            ),
            (
                "a think block never closed",
                f("<think>\n```rust\nSOLVE\n```\nhmm"),
                None,
            ),
            (
                "reasoning whose opening tag the template sent",
                f("So the answer is x + 1.</think>\n```rust\nSOLVE\n```\nDone.\n"),
                Some(f("So the answer is x + 1.</think>\n```rust\nSOLVE\n```\n")),
            ),
            (
                "a stray closing tag after the answer",
                f("<think>plan</think>\n```rust\nSOLVE\n```\n</think>\nDone.\n"),
                Some(f("<think>plan</think>\n```rust\nSOLVE\n```\n")),
            ),
        ];
        let mut wrong = Vec::new();
        for (shape, reply, stop) in rows {
            let (_, whole) = streamed(reply, usize::MAX, "solve");
            let wanted = extract(whole.content.as_deref(), None, "solve");
            if stop.is_some() && !matches!(&wanted, Extraction::Source(s) if s.trim() == SOLVE) {
                wrong.push(format!("{shape}: the whole reply gives {wanted:?}"));
            }
            for size in [1, 2, 7, 64] {
                let (cut, at_cut) = streamed(reply, size, "solve");
                let read = cut.map(|at| &reply[..at]);
                // Closed by the first chunk that completes the part.
                let closed_there = match (stop, read) {
                    (Some(part), Some(read)) => {
                        read.starts_with(part.as_str()) && read.len() < part.len() + size
                    }
                    (stop, read) => stop.is_none() && read.is_none(),
                };
                if !closed_there {
                    wrong.push(format!(
                        "{shape} ({size}-byte chunks): closed after {read:?}"
                    ));
                }
                let got = extract(at_cut.content.as_deref(), None, "solve");
                if got != wanted {
                    wrong.push(format!(
                        "{shape} ({size}-byte chunks): {got:?} at the cut, {wanted:?} from the whole"
                    ));
                }
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    /// Time to the first answer byte and to the first reasoning byte, with
    /// reasoning in more than one block: every block is reasoning, its
    /// text is kept, and the answer is what is left.
    #[test]
    fn every_think_block_is_reasoning_for_the_figures() {
        let raw = "<think>a</think>\n<think>b</think>\nans <think>c</think>end";
        let mut acc = Accum::default();
        // One byte a chunk, arriving at its end's offset in ms.
        for (i, c) in raw.char_indices() {
            let chunk: Chunk =
                serde_json::from_value(json!({"choices": [{"delta": {"content": c.to_string()}}]}))
                    .unwrap();
            acc.add(chunk, (i + 1) as f64);
        }
        let r = acc.into_reply(End::ok(), Vec::new(), 0.0, None);
        let arrival = |s: &str| Some((raw.find(s).unwrap() + 1) as f64);
        assert_eq!(r.ttft_reasoning_ms, arrival("a<"));
        assert_eq!(r.ttft_ms, arrival("ans"));
        assert_eq!(r.reasoning.as_deref(), Some("a\nb\nc"));
        assert_eq!(r.content.as_deref(), Some("\n\nans end"));
    }

    #[test]
    fn token_counts_are_the_servers_own() {
        let usage: Usage = serde_json::from_value(json!({"prompt_tokens": 21,
            "completion_tokens": 34, "prompt_tokens_details": {"cached_tokens": 20}}))
        .unwrap();
        let timings: Timings =
            serde_json::from_value(json!({"predicted_n": 12, "prompt_n": 1, "cache_n": 20}))
                .unwrap();
        let counts = |u, t, e| Counts::of(u, t, e);
        let c = |p, k, t| Counts {
            prompt: p,
            cached: k,
            completion: t,
        };
        assert_eq!(
            counts(Some(usage), Some(timings), None),
            c(Some(21), Some(20), Some(34)),
            "the usage block first"
        );
        assert_eq!(
            counts(None, Some(timings), None),
            c(Some(21), Some(20), Some(12)),
            "a stream closed early: the running counts"
        );
        assert_eq!(
            counts(None, None, Some(3443)),
            c(Some(3443), None, None),
            "a refused prompt's size"
        );
        assert_eq!(counts(None, None, None), Counts::default(), "unknown");
        assert_eq!(
            body_prompt_tokens(
                r#"{"error":{"code":400,"type":"exceed_context_size_error","n_prompt_tokens":3443,"n_ctx":2048}}"#
            ),
            Some(3443)
        );
    }
}
