//! Extract: reply text to candidate source.
//!
//! Pure: no IO. Reasoning is dropped first (`<think>` blocks, as
//! [`crate::text::markdown`] reads them; a server's `reasoning_content` never
//! reaches this stage), then the first Rust (or untagged) fence whose text
//! parses as a Rust file is taken, preferring one that defines the entry
//! function. When nothing can be taken, the reason is a [`NoCode`] with a
//! stable string form.
//!
//! [`Watch`] is the same rule read while a reply streams in: it says when
//! the text so far already holds what [`extract`] takes from it and from
//! anything that may follow, which is when the draw may close the stream.

use std::fmt;
use std::str::FromStr;

use crate::text::markdown::{self, Fence, FenceScan, Reasoning};

/// Why a reply yielded no candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoCode {
    /// The server sent `null` content.
    NullContent,
    /// Nothing but whitespace once reasoning is removed.
    EmptyReply,
    /// No Rust code fence, and the bare text is not Rust either.
    NoFence,
    /// The reply stopped at the token cap inside its code.
    HitTokenCap,
    /// The request failed (HTTP error, reset, timeout...): whatever text
    /// arrived is not a whole reply and is not extracted. The draw outcome
    /// says what happened.
    DrawFailed,
    /// Rust fences exist but none parses as a Rust file (prose in the fence,
    /// a syntax error). `detail` is the parser's first complaint.
    Unparsable { detail: String },
}

/// What extraction found, ready to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Extraction {
    Source(String),
    Failed(NoCode),
}

impl Extraction {
    /// The stable kind string: `extracted` or the [`NoCode`] kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Extraction::Source(_) => "extracted",
            Extraction::Failed(why) => why.kind(),
        }
    }
}

impl NoCode {
    pub fn kind(&self) -> &'static str {
        match self {
            NoCode::NullContent => "null_content",
            NoCode::EmptyReply => "empty_reply",
            NoCode::NoFence => "no_fence",
            NoCode::HitTokenCap => "hit_token_cap",
            NoCode::DrawFailed => "draw_failed",
            NoCode::Unparsable { .. } => "unparsable",
        }
    }

    /// Rebuilds a `NoCode` from its stored kind and detail.
    pub fn from_stored(kind: &str, detail: Option<&str>) -> Option<NoCode> {
        Some(match kind {
            "null_content" => NoCode::NullContent,
            "empty_reply" => NoCode::EmptyReply,
            "no_fence" => NoCode::NoFence,
            "hit_token_cap" => NoCode::HitTokenCap,
            "draw_failed" => NoCode::DrawFailed,
            "unparsable" => NoCode::Unparsable {
                detail: detail.unwrap_or_default().to_owned(),
            },
            _ => return None,
        })
    }

    pub fn detail(&self) -> Option<&str> {
        match self {
            NoCode::Unparsable { detail } => Some(detail),
            _ => None,
        }
    }
}

impl fmt::Display for NoCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind())
    }
}

impl FromStr for NoCode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        NoCode::from_stored(s, None).ok_or_else(|| format!("unknown extraction outcome `{s}`"))
    }
}

/// Extracts the candidate from one reply's content.
///
/// `finish_reason` is the server's (`length` means the token cap was hit);
/// `entry` is the function the task asks for.
pub fn extract(content: Option<&str>, finish_reason: Option<&str>, entry: &str) -> Extraction {
    match extract_source(content, finish_reason, entry) {
        Ok(source) => Extraction::Source(source),
        Err(why) => Extraction::Failed(why),
    }
}

/// [`extract`]'s rule read while a reply streams in, for the draw's early
/// stop: [`Watch::read`] says when the content so far already holds the
/// candidate `extract` takes from it and from any text that may follow it.
///
/// That is the first closed fence of the answer that is Rust (or
/// untagged), parses and defines the entry: `extract` takes the first fence
/// that does, every fence before it is closed and does not, and a closed
/// fence's lines and everything before them are final (a later `<think>`
/// hides only what follows it, a stray `</think>` is dropped). A fence that
/// parses without the entry settles nothing, since a later one may define
/// the entry, and neither does a fence still open: the stop may come later
/// than it could, never before extraction's answer is complete.
///
/// The one exception, which no reader of a stream can avoid: text before
/// any think tag is read as answer, though a later `</think>` would make it
/// reasoning (a chat template that sent the opening tag in the prompt, on a
/// server that does not split reasoning off). Such a reply whose reasoning
/// holds a fence defining the entry is closed there, and extraction agrees
/// with the stop on that fence.
///
/// A call's work is bounded by the text added since the one before (and
/// one `syn` parse per closed Rust or untagged fence), so
/// watching a stream is linear in its length.
#[derive(Debug)]
pub struct Watch {
    entry: String,
    reasoning: Reasoning,
    /// The answer so far, reasoning removed: the text `extract` reads.
    answer: String,
    fences: FenceScan,
    settled: bool,
}

impl Watch {
    pub fn new(entry: &str) -> Watch {
        Watch {
            entry: entry.to_owned(),
            reasoning: Reasoning::default(),
            answer: String::new(),
            fences: FenceScan::default(),
            settled: false,
        }
    }

    /// Reads `content`, the reply's content so far (it only grows from one
    /// call to the next); true once extraction's answer is settled.
    pub fn read(&mut self, content: &str) -> bool {
        if self.settled {
            return true;
        }
        let answer = &mut self.answer;
        let mut retracted = false;
        self.reasoning.advance(content, |event| match event {
            markdown::Event::Answer(range) => answer.push_str(&content[range]),
            markdown::Event::Reasoning(_) => {}
            markdown::Event::Retract => {
                answer.clear();
                retracted = true;
            }
        });
        if retracted {
            self.fences = FenceScan::default();
        }
        let (answer, entry) = (&self.answer, &self.entry);
        let mut settled = false;
        self.fences.advance(answer, |span| {
            settled = settled
                || (span.closed && takes_at_once(&answer[span.info], &answer[span.body], entry));
        });
        self.settled = settled;
        settled
    }
}

fn extract_source(
    content: Option<&str>,
    finish_reason: Option<&str>,
    entry: &str,
) -> Result<String, NoCode> {
    let content = content.ok_or(NoCode::NullContent)?;
    let answer = markdown::answer(content);
    if answer.trim().is_empty() {
        return Err(NoCode::EmptyReply);
    }
    let hit_cap = finish_reason == Some("length");
    let fences = markdown::fences(&answer);
    let rust: Vec<&Fence> = fences.iter().filter(|f| is_rust(f.info)).collect();

    let mut first_parsed = None;
    let mut first_error = None;
    // A fence cut off by the cap holds truncated code: never take it.
    for fence in rust.iter().filter(|f| f.closed || !hit_cap) {
        match syn::parse_file(fence.body) {
            Ok(file) if defines_fn(&file, entry) => return Ok(fence.body.to_owned()),
            Ok(_) => {
                first_parsed.get_or_insert(fence.body);
            }
            Err(e) => {
                first_error.get_or_insert_with(|| describe(&e));
            }
        }
    }
    if let Some(body) = first_parsed {
        return Ok(body.to_owned());
    }
    if hit_cap && rust.iter().any(|f| !f.closed) {
        return Err(NoCode::HitTokenCap);
    }
    if let Some(detail) = first_error {
        return Err(NoCode::Unparsable { detail });
    }
    // Some models answer with bare code. Take it only when it is plainly the
    // answer: the whole reply parses and defines the entry function.
    if fences.is_empty() {
        if let Ok(file) = syn::parse_file(answer.trim()) {
            if defines_fn(&file, entry) {
                return Ok(answer.trim().to_owned());
            }
        }
    }
    Err(if hit_cap {
        NoCode::HitTokenCap
    } else {
        NoCode::NoFence
    })
}

/// Rust, or no language at all (many models leave it off).
fn is_rust(info: &str) -> bool {
    matches!(
        markdown::language(info).to_ascii_lowercase().as_str(),
        "" | "rust" | "rs"
    )
}

/// The fence [`extract`] takes before looking further: Rust (or untagged),
/// parses, defines the entry.
fn takes_at_once(info: &str, body: &str, entry: &str) -> bool {
    is_rust(info) && syn::parse_file(body).is_ok_and(|file| defines_fn(&file, entry))
}

fn defines_fn(file: &syn::File, entry: &str) -> bool {
    file.items
        .iter()
        .any(|item| matches!(item, syn::Item::Fn(f) if f.sig.ident == entry))
}

fn describe(e: &syn::Error) -> String {
    let at = e.span().start();
    format!("line {}: {e}", at.line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(content: Option<&str>, finish: Option<&str>, want: Result<&str, &str>) {
        let got = extract(content, finish, "solve");
        match (&got, want) {
            (Extraction::Source(src), Ok(expected)) => {
                assert_eq!(src.trim(), expected.trim(), "for {content:?}")
            }
            (Extraction::Failed(why), Err(kind)) => assert_eq!(why.kind(), kind, "for {content:?}"),
            _ => panic!("for {content:?}: got {got:?}, wanted {want:?}"),
        }
    }

    const SOLVE: &str = "pub fn solve(x: u32) -> u32 { x + 1 }";

    #[test]
    fn plain_fence() {
        check(
            Some(&format!("```rust\n{SOLVE}\n```")),
            Some("stop"),
            Ok(SOLVE),
        );
    }

    #[test]
    fn prose_around_the_fence() {
        let reply = format!("Here you go:\n\n```rust\n{SOLVE}\n```\n\nThis adds one.");
        check(Some(&reply), None, Ok(SOLVE));
    }

    #[test]
    fn fence_without_language_and_rs_tag() {
        check(Some(&format!("```\n{SOLVE}\n```")), None, Ok(SOLVE));
        check(Some(&format!("```rs\n{SOLVE}\n```")), None, Ok(SOLVE));
        check(Some(&format!("~~~rust\n{SOLVE}\n~~~")), None, Ok(SOLVE));
    }

    #[test]
    fn think_block_is_dropped() {
        let reply =
            format!("<think>maybe ```rust\nfn solve() {{}}\n``` no</think>\n```rust\n{SOLVE}\n```");
        check(Some(&reply), None, Ok(SOLVE));
        let reply = format!("reasoning here</think>\n```rust\n{SOLVE}\n```");
        check(Some(&reply), None, Ok(SOLVE));
        check(
            Some("<think>I will write ```rust\nfn solve(){}\n```"),
            None,
            Err("empty_reply"),
        );
        // Every block, not only a leading one.
        let reply = format!(
            "<think>a</think>\nCheck:\n<think>\n```rust\nfn solve() {{}}\n```\n</think>\n~~~\n{SOLVE}\n~~~"
        );
        check(Some(&reply), None, Ok(SOLVE));
        // A stray closing tag after the first one hides nothing.
        let reply = format!("<think>a</think>\n```rust\n{SOLVE}\n```\n</think>\nDone.");
        check(Some(&reply), None, Ok(SOLVE));
    }

    /// The draw stores a reply's answer, reasoning removed; extracting it
    /// gives what extracting the raw content gives.
    #[test]
    fn the_stored_answer_extracts_as_the_raw_content() {
        for raw in [
            format!("<think>a</think>\n```rust\n{SOLVE}\n```"),
            format!("a</think>```rust\nfn x() {{}}\n```\n```rust\n{SOLVE}\n```"),
            format!("x<think>y</think>z</think>\n```\n{SOLVE}\n```"),
            "<think>never closed ```rust\nfn solve() {}\n```".to_owned(),
        ] {
            let stored = markdown::answer(&raw);
            assert_eq!(
                extract(Some(&stored), None, "solve"),
                extract(Some(&raw), None, "solve"),
                "{raw:?}"
            );
        }
    }

    /// Fed any way, the watch settles at the first closed fence that
    /// defines the entry, and never on one that does not.
    #[test]
    fn the_watch_settles_on_the_fence_extraction_takes() {
        let reply = format!("```rust\nfn helper() {{}}\n```\n```\n{SOLVE}\n```\nDone.");
        let settled_at = reply.find("```\nDone").unwrap() + 4;
        for size in [1, 3, 10] {
            let mut watch = Watch::new("solve");
            let mut at = 0;
            let first = loop {
                at = (at + size).min(reply.len());
                if watch.read(&reply[..at]) || at == reply.len() {
                    break at;
                }
            };
            assert!(
                (settled_at..settled_at + size).contains(&first),
                "{size}: {first} for {settled_at}"
            );
            assert!(watch.read(&reply), "settled stays settled");
        }
        let mut other = Watch::new("other");
        assert!(!other.read(&reply), "no fence defines `other`");
    }

    #[test]
    fn second_fence_is_the_rust_one() {
        let reply = format!("```text\ninput -> output\n```\n\n```rust\n{SOLVE}\n```");
        check(Some(&reply), None, Ok(SOLVE));
        let reply = format!("```toml\n[deps]\n```\n```\n{SOLVE}\n```");
        check(Some(&reply), None, Ok(SOLVE));
    }

    #[test]
    fn fence_defining_the_entry_wins_over_an_earlier_one() {
        let reply = format!("```rust\nfn helper() {{}}\n```\n```rust\n{SOLVE}\n```");
        check(Some(&reply), None, Ok(SOLVE));
        // Without one that defines it, the first that parses is taken.
        check(
            Some("```rust\nfn other() {}\n```"),
            None,
            Ok("fn other() {}"),
        );
    }

    #[test]
    fn prose_inside_the_fence_is_unparsable() {
        let reply = format!("```rust\nHere is the function:\n{SOLVE}\n```");
        check(Some(&reply), None, Err("unparsable"));
        let Extraction::Failed(NoCode::Unparsable { detail }) =
            extract(Some(&reply), None, "solve")
        else {
            panic!()
        };
        assert!(detail.starts_with("line 1:"), "{detail}");
    }

    #[test]
    fn truncated_at_the_cap() {
        let reply = "Sure:\n```rust\npub fn solve(x: u32) -> u32 {\n    let y =";
        check(Some(reply), Some("length"), Err("hit_token_cap"));
        // A complete first fence survives a cap hit in a later one.
        let reply = format!("```rust\n{SOLVE}\n```\nAnd a test:\n```rust\n#[test]\nfn t() {{");
        check(Some(&reply), Some("length"), Ok(SOLVE));
        // Cut in the prose before any fence.
        check(
            Some("Let me think about the equation first, so"),
            Some("length"),
            Err("hit_token_cap"),
        );
    }

    #[test]
    fn unclosed_fence_without_cap_is_still_read() {
        check(
            Some(&format!("```rust\n{SOLVE}\n")),
            Some("stop"),
            Ok(SOLVE),
        );
    }

    #[test]
    fn empty_null_and_no_fence() {
        check(None, None, Err("null_content"));
        check(Some(""), None, Err("empty_reply"));
        check(Some("  \n\t"), None, Err("empty_reply"));
        check(Some("I cannot help with that."), None, Err("no_fence"));
        check(
            Some("```python\ndef solve(x): return x + 1\n```"),
            None,
            Err("no_fence"),
        );
    }

    #[test]
    fn bare_code_that_defines_the_entry() {
        check(Some(SOLVE), None, Ok(SOLVE));
        check(Some("fn other() {}"), None, Err("no_fence"));
    }

    /// The one case a stream cannot tell: reasoning whose opening tag the
    /// chat template sent looks like an answer until its `</think>`
    /// arrives. A draft fence there that defines the entry settles the
    /// watch, and the reply stored at that cut extracts the draft.
    #[test]
    fn reasoning_opened_by_the_template_is_answer_until_its_tag() {
        let draft = "pub fn solve(x: u32) -> u32 { x }";
        let reply = format!("Plan:\n```rust\n{draft}\n```\n</think>\n```rust\n{SOLVE}\n```\n");
        let cut = reply.find("</think>").unwrap();
        let mut watch = Watch::new("solve");
        assert!(watch.read(&reply[..cut]));
        check(Some(&reply[..cut]), None, Ok(draft));
        check(Some(&reply), None, Ok(SOLVE));
    }

    #[test]
    fn kinds_round_trip() {
        for kind in [
            "null_content",
            "empty_reply",
            "no_fence",
            "hit_token_cap",
            "unparsable",
        ] {
            assert_eq!(kind.parse::<NoCode>().unwrap().kind(), kind);
        }
        assert!("extracted".parse::<NoCode>().is_err());
    }
}
