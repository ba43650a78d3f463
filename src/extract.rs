//! Extract: reply text to candidate source.
//!
//! Pure: no IO, no allocation beyond the result. Reasoning is dropped first
//! (`<think>` blocks; a server's `reasoning_content` never reaches this
//! stage), then the first Rust fence whose text parses as a Rust file is
//! taken, preferring one that defines the entry function. When nothing can be
//! taken, the reason is a [`NoCode`] with a stable string form.

use std::fmt;
use std::str::FromStr;

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

fn extract_source(
    content: Option<&str>,
    finish_reason: Option<&str>,
    entry: &str,
) -> Result<String, NoCode> {
    let content = content.ok_or(NoCode::NullContent)?;
    let answer = strip_reasoning(content);
    if answer.trim().is_empty() {
        return Err(NoCode::EmptyReply);
    }
    let hit_cap = finish_reason == Some("length");
    let fences = fences(&answer);
    let rust: Vec<&Fence> = fences.iter().filter(|f| is_rust_info(f.info)).collect();

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

/// Removes `<think>…</think>` blocks. An unclosed `<think>` hides the rest of
/// the reply; a `</think>` with no opening (templates that open the block in
/// the prompt) hides everything before it.
fn strip_reasoning(content: &str) -> String {
    let mut rest = content;
    if let Some(close) = rest.find("</think>") {
        if !rest[..close].contains("<think>") {
            rest = &rest[close + "</think>".len()..];
        }
    }
    let mut out = String::with_capacity(rest.len());
    while let Some(open) = rest.find("<think>") {
        out.push_str(&rest[..open]);
        match rest[open..].find("</think>") {
            Some(close) => rest = &rest[open + close + "</think>".len()..],
            None => return out,
        }
    }
    out.push_str(rest);
    out
}

/// One fenced code block of a markdown reply.
#[derive(Debug, PartialEq)]
struct Fence<'a> {
    info: &'a str,
    body: &'a str,
    /// False when the reply ended inside the fence.
    closed: bool,
}

/// Finds the fenced blocks (``` or ~~~, three or more, indented at most
/// three spaces, as CommonMark has them).
fn fences(text: &str) -> Vec<Fence<'_>> {
    let mut out = Vec::new();
    let mut lines = LineOffsets::new(text);
    while let Some((_, line_end, line)) = lines.next() {
        let Some((marker, len, info)) = fence_open(line) else {
            continue;
        };
        let body_start = line_end;
        let mut closed = None;
        for (start, _, inner) in lines.by_ref() {
            if fence_close(inner, marker, len) {
                closed = Some(start);
                break;
            }
        }
        let body_end = closed.unwrap_or(text.len());
        out.push(Fence {
            info,
            body: &text[body_start.min(body_end)..body_end],
            closed: closed.is_some(),
        });
    }
    out
}

fn fence_open(line: &str) -> Option<(char, usize, &str)> {
    let trimmed = line.trim_start_matches(' ');
    if line.len() - trimmed.len() > 3 {
        return None;
    }
    let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = trimmed.chars().take_while(|c| *c == marker).count();
    if len < 3 {
        return None;
    }
    let info = trimmed[len..].trim();
    if marker == '`' && info.contains('`') {
        return None;
    }
    Some((marker, len, info))
}

fn fence_close(line: &str, marker: char, len: usize) -> bool {
    let trimmed = line.trim_start_matches(' ');
    line.len() - trimmed.len() <= 3
        && trimmed.chars().take_while(|c| *c == marker).count() >= len
        && trimmed.trim_start_matches(marker).trim().is_empty()
}

/// Rust, or no language at all (many models leave it off).
fn is_rust_info(info: &str) -> bool {
    let lang = info
        .split(|c: char| c.is_whitespace() || c == ',' || c == '{')
        .next()
        .unwrap_or("");
    matches!(lang.to_ascii_lowercase().as_str(), "" | "rust" | "rs")
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

/// Iterates lines with their byte offsets: (start, end including newline, text).
struct LineOffsets<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> LineOffsets<'a> {
    fn new(text: &'a str) -> Self {
        LineOffsets { text, pos: 0 }
    }
}

impl<'a> Iterator for LineOffsets<'a> {
    type Item = (usize, usize, &'a str);
    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.text.len() {
            return None;
        }
        let start = self.pos;
        let end = self.text[start..]
            .find('\n')
            .map_or(self.text.len(), |i| start + i + 1);
        self.pos = end;
        let line = self.text[start..end].trim_end_matches(['\n', '\r']);
        Some((start, end, line))
    }
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
