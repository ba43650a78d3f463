//! Markdown as model replies write it: where the reasoning ends and where
//! the fenced code blocks are. Pure: no IO, no Rust parsing, nothing that
//! can fail.
//!
//! Two readers of a reply use it, so that they agree on where its code is:
//! extraction reads a whole reply (`extract::extract`), and the draw's early
//! stop reads a reply still streaming (`extract::Watch`, fed by `draw::http`
//! after every chunk). Each rule therefore has one incremental reader
//! ([`Reasoning`], [`FenceScan`]) that looks at each byte a bounded number of
//! times however the text is chunked, and the whole-text functions
//! ([`split_reasoning`], [`answer`], [`fences`]) are those readers fed the
//! whole text once and finished: one rule, not two that may drift.
//!
//! **Reasoning** (`<think>` tags, anywhere in the text):
//! - `<think>` opens a block that ends at the next `</think>`; a block never
//!   closed runs to the end of the text;
//! - when the first tag of the text is a `</think>`, everything before it is
//!   reasoning (a chat template that sent the opening tag in the prompt);
//! - any other `</think>` (outside a block) is dropped;
//! - the rest is the answer, its pieces joined in order.
//!
//! Every rule but the second is decided by the text so far. Text before
//! any tag stays undecided until a tag or the end arrives: [`Reasoning`]
//! hands it on as answer and, should a `</think>` come first, says
//! [`Event::Retract`].
//!
//! **Fences** (CommonMark's fenced code blocks, at the top level): an opening
//! line is at most three spaces of indentation, then three or more backticks
//! or tildes, then an info string (a backtick fence's may hold no backtick);
//! the block closes at a line of at most three spaces, the same character at
//! least as many times, and nothing after but spaces and tabs; a fence never
//! closed runs to the end of the text. A line is read once its newline has
//! arrived (or the text has ended): until then an opening line's info string
//! may grow, and `` ``` `` may become `` ```rust ``, which no longer closes.
//! The body is the lines between, as written: the opening line's
//! indentation is not removed, which Rust does not mind and which keeps a
//! multi-line string literal's bytes. Containers (block quotes, list items)
//! are not modelled: a fence inside a list item indented four spaces or more
//! is not one here.
//!
//! pulldown-cmark was considered and not used: it reads a whole document
//! with no way to resume, so the early stop would parse the reply again
//! after every chunk (quadratic in its length); a fence's text is Text
//! events with container prefixes removed rather than one slice of the
//! reply; and it reads a `<think>` line as the start of an HTML block.

use std::borrow::Cow;
use std::ops::Range;

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

/// What a stretch of a reply is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Reasoning,
    Answer,
}

/// A stretch of a reply, as a byte range of its text; tags are in none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub kind: Kind,
    pub range: Range<usize>,
}

/// What [`Reasoning`] learned from the text it was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// More answer. Before any tag, text the first tag may still turn into
    /// reasoning.
    Answer(Range<usize>),
    Reasoning(Range<usize>),
    /// The text's first tag is a `</think>`: every [`Event::Answer`] so far
    /// was reasoning.
    Retract,
}

/// Splits a reply into reasoning and answer as it streams in. Feed it the
/// whole text so far each time (the text only grows); it reads what it has
/// not read yet, except a possible tag cut in two at the end.
#[derive(Debug, Default)]
pub struct Reasoning {
    state: State,
    /// The first byte not handed on yet.
    pos: usize,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No tag yet.
    #[default]
    Undecided,
    Answer,
    Thinking,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    Open,
    Close,
}

impl Reasoning {
    /// Reads `text` past what was read before; more text may follow.
    pub fn advance(&mut self, text: &str, emit: impl FnMut(Event)) {
        self.read(text, false, emit)
    }

    /// Reads the rest of `text`, which is the whole reply.
    pub fn finish(&mut self, text: &str, emit: impl FnMut(Event)) {
        self.read(text, true, emit)
    }

    fn read(&mut self, text: &str, end: bool, mut emit: impl FnMut(Event)) {
        loop {
            let rest = &text[self.pos..];
            let thinking = self.state == State::Thinking;
            let Some((at, tag)) = next_tag(rest, thinking) else {
                let upto = if end { rest.len() } else { readable(rest) };
                let kind = if thinking {
                    Kind::Reasoning
                } else {
                    Kind::Answer
                };
                piece(&mut emit, kind, self.pos..self.pos + upto);
                self.pos += upto;
                return;
            };
            let (kind, state) = match (self.state, tag) {
                (State::Thinking, _) => (Kind::Reasoning, State::Answer),
                (State::Undecided, Tag::Close) => {
                    emit(Event::Retract);
                    (Kind::Reasoning, State::Answer)
                }
                // A stray `</think>`: dropped.
                (State::Answer, Tag::Close) => (Kind::Answer, State::Answer),
                (_, Tag::Open) => (Kind::Answer, State::Thinking),
            };
            piece(&mut emit, kind, self.pos..self.pos + at);
            self.state = state;
            self.pos += at + tag_len(tag);
        }
    }
}

/// Hands on a non-empty stretch.
fn piece(emit: &mut impl FnMut(Event), kind: Kind, range: Range<usize>) {
    if range.is_empty() {
        return;
    }
    emit(match kind {
        Kind::Answer => Event::Answer(range),
        Kind::Reasoning => Event::Reasoning(range),
    });
}

/// The next tag that matters: only `</think>` inside a block.
fn next_tag(rest: &str, thinking: bool) -> Option<(usize, Tag)> {
    rest.match_indices('<').find_map(|(at, _)| {
        let s = &rest[at..];
        if s.starts_with(CLOSE) {
            Some((at, Tag::Close))
        } else if !thinking && s.starts_with(OPEN) {
            Some((at, Tag::Open))
        } else {
            None
        }
    })
}

fn tag_len(tag: Tag) -> usize {
    match tag {
        Tag::Open => OPEN.len(),
        Tag::Close => CLOSE.len(),
    }
}

/// How much of `rest` (which holds no whole tag) can be read now: all of
/// it but a last `<` that the next text may make a tag.
fn readable(rest: &str) -> usize {
    let bytes = rest.as_bytes();
    let window = bytes.len().saturating_sub(CLOSE.len() - 1);
    match bytes[window..].iter().rposition(|b| *b == b'<') {
        Some(i) => {
            let tail = &rest[window + i..];
            if OPEN.starts_with(tail) || CLOSE.starts_with(tail) {
                window + i
            } else {
                rest.len()
            }
        }
        None => rest.len(),
    }
}

/// A whole reply's reasoning and answer, in order.
pub fn split_reasoning(text: &str) -> Vec<Segment> {
    let mut segments: Vec<Segment> = Vec::new();
    Reasoning::default().finish(text, |event| match event {
        Event::Answer(range) => segments.push(Segment {
            kind: Kind::Answer,
            range,
        }),
        Event::Reasoning(range) => segments.push(Segment {
            kind: Kind::Reasoning,
            range,
        }),
        Event::Retract => {
            for s in &mut segments {
                s.kind = Kind::Reasoning;
            }
        }
    });
    segments
}

/// A whole reply's answer: its answer segments joined.
pub fn answer(text: &str) -> Cow<'_, str> {
    let segments = split_reasoning(text);
    let mut answers = segments.iter().filter(|s| s.kind == Kind::Answer);
    match (answers.next(), answers.next()) {
        (None, _) => Cow::Borrowed(""),
        (Some(only), None) => Cow::Borrowed(&text[only.range.clone()]),
        _ => Cow::Owned(joined(text, &segments, Kind::Answer)),
    }
}

/// The text of every segment of `kind`, joined in order.
pub fn joined(text: &str, segments: &[Segment], kind: Kind) -> String {
    segments
        .iter()
        .filter(|s| s.kind == kind)
        .map(|s| &text[s.range.clone()])
        .collect()
}

/// A fenced code block of a whole text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence<'a> {
    /// The info string, trimmed.
    pub info: &'a str,
    pub body: &'a str,
    /// False when the text ended inside the block.
    pub closed: bool,
}

impl Fence<'_> {
    /// The info string's first word (`rust` in `rust,ignore` or
    /// `rust {.x}`), empty for a fence without one.
    pub fn language(&self) -> &str {
        language(self.info)
    }
}

/// The language an info string names: its first word.
pub fn language(info: &str) -> &str {
    info.split(|c: char| c.is_whitespace() || c == ',' || c == '{')
        .next()
        .unwrap_or("")
}

/// The fenced code blocks of a whole text, in order.
pub fn fences(text: &str) -> Vec<Fence<'_>> {
    let mut out = Vec::new();
    FenceScan::default().finish(text, |span| {
        out.push(Fence {
            info: &text[span.info],
            body: &text[span.body],
            closed: span.closed,
        })
    });
    out
}

/// A fenced code block found by [`FenceScan`], as byte ranges of its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FenceSpan {
    pub info: Range<usize>,
    pub body: Range<usize>,
    pub closed: bool,
}

/// Finds fenced code blocks as a text streams in. Feed it the whole text
/// so far each time (the text only grows); it reads each complete line
/// once.
#[derive(Debug, Default)]
pub struct FenceScan {
    /// Where the first line not read yet starts.
    line_start: usize,
    /// Where to look for the next newline (the line so far has none).
    searched: usize,
    open: Option<Opening>,
}

#[derive(Debug, Clone)]
struct Opening {
    marker: u8,
    len: usize,
    info: Range<usize>,
    body_start: usize,
}

impl FenceScan {
    /// Reads the complete lines `text` has gained and hands on each fence
    /// they close.
    pub fn advance(&mut self, text: &str, mut found: impl FnMut(FenceSpan)) {
        while let Some(nl) = text[self.searched..].find('\n') {
            let end = self.searched + nl + 1;
            self.line(text, self.line_start..end, &mut found);
            self.line_start = end;
            self.searched = end;
        }
        self.searched = text.len();
    }

    /// Reads the rest of `text`, which is the whole of it: its last line
    /// even without a newline, then a fence still open, unclosed.
    pub fn finish(&mut self, text: &str, mut found: impl FnMut(FenceSpan)) {
        self.advance(text, &mut found);
        if self.line_start < text.len() {
            self.line(text, self.line_start..text.len(), &mut found);
            self.line_start = text.len();
            self.searched = text.len();
        }
        if let Some(open) = self.open.take() {
            found(FenceSpan {
                info: open.info,
                body: open.body_start.min(text.len())..text.len(),
                closed: false,
            });
        }
    }

    fn line(&mut self, text: &str, range: Range<usize>, found: &mut impl FnMut(FenceSpan)) {
        let line = text[range.clone()].trim_end_matches(['\n', '\r']);
        match &self.open {
            None => {
                if let Some((marker, len, info)) = opening(line) {
                    self.open = Some(Opening {
                        marker,
                        len,
                        info: range.start + info.start..range.start + info.end,
                        body_start: range.end,
                    });
                }
            }
            Some(open) => {
                if closes(line, open.marker, open.len) {
                    found(FenceSpan {
                        info: open.info.clone(),
                        body: open.body_start..range.start,
                        closed: true,
                    });
                    self.open = None;
                }
            }
        }
    }
}

/// An opening fence line: its character, its length and its info string's
/// range in the line.
fn opening(line: &str) -> Option<(u8, usize, Range<usize>)> {
    let indent = indentation(line)?;
    let marker = *line.as_bytes().get(indent)?;
    if marker != b'`' && marker != b'~' {
        return None;
    }
    let len = run(&line[indent..], marker);
    if len < 3 {
        return None;
    }
    let after = indent + len;
    let rest = &line[after..];
    let info = rest.trim_start_matches([' ', '\t']);
    let start = after + (rest.len() - info.len());
    let info = info.trim_end_matches([' ', '\t']);
    if marker == b'`' && info.contains('`') {
        return None;
    }
    Some((marker, len, start..start + info.len()))
}

/// A line that closes a fence of `len` times `marker`.
fn closes(line: &str, marker: u8, len: usize) -> bool {
    let Some(indent) = indentation(line) else {
        return false;
    };
    let n = run(&line[indent..], marker);
    n >= len
        && line[indent + n..]
            .trim_start_matches([' ', '\t'])
            .is_empty()
}

/// Leading spaces, when there are at most three (a tab is four columns).
fn indentation(line: &str) -> Option<usize> {
    let n = line.len() - line.trim_start_matches(' ').len();
    (n <= 3).then_some(n)
}

fn run(s: &str, marker: u8) -> usize {
    s.bytes().take_while(|b| *b == marker).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reasoning and the answer of `text`, each piece ended with `|`.
    fn parts(text: &str, segments: &[Segment]) -> (String, String) {
        let of = |kind| {
            segments
                .iter()
                .filter(|s| s.kind == kind)
                .map(|s| format!("{}|", &text[s.range.clone()]))
                .collect::<String>()
        };
        (of(Kind::Reasoning), of(Kind::Answer))
    }

    /// Cuts `text` into pieces of `size` bytes (whole characters).
    fn chunks(text: &str, size: usize) -> Vec<usize> {
        let mut ends = Vec::new();
        let mut at = 0;
        while at < text.len() {
            at = at.saturating_add(size).min(text.len());
            while !text.is_char_boundary(at) {
                at += 1;
            }
            ends.push(at);
        }
        ends
    }

    /// `text` fed to a [`Reasoning`] as it would stream in, `size` bytes at
    /// a time, then finished; neighbouring segments of one kind merged (a
    /// stream hands text on in more pieces than the whole does).
    fn split_streamed(text: &str, size: usize) -> Vec<Segment> {
        let mut segments: Vec<Segment> = Vec::new();
        let mut reader = Reasoning::default();
        let mut take = |event: Event| {
            let (kind, range) = match event {
                Event::Answer(range) => (Kind::Answer, range),
                Event::Reasoning(range) => (Kind::Reasoning, range),
                Event::Retract => {
                    segments.iter_mut().for_each(|s| s.kind = Kind::Reasoning);
                    return;
                }
            };
            match segments.last_mut() {
                Some(last) if last.kind == kind && last.range.end == range.start => {
                    last.range.end = range.end
                }
                _ => segments.push(Segment { kind, range }),
            }
        };
        for end in chunks(text, size) {
            reader.advance(&text[..end], &mut take);
        }
        reader.finish(text, &mut take);
        segments
    }

    #[test]
    fn reasoning_and_answer() {
        // (text, reasoning pieces, answer pieces)
        let cases: &[(&str, &str, &str)] = &[
            ("plain", "", "plain|"),
            ("<think>hm</think>\n\nans", "hm|", "\n\nans|"),
            ("  <think>still", "still|", "  |"),
            ("implicit</think>ans", "implicit|", "ans|"),
            ("x <think>y</think> z", "y|", "x | z|"),
            ("<think>a</think>b<think>c</think>d", "a|c|", "b|d|"),
            // Only the first tag can be the template's; later strays go.
            ("<think>a</think>b</think>c", "a|", "b|c|"),
            ("a</think>b</think>c", "a|", "b|c|"),
            // Inside a block, an opening tag is text.
            ("<think>a<think>b</think>c", "a<think>b|", "c|"),
            ("<thinking>x</thinking>", "", "<thinking>x</thinking>|"),
            ("a <thi", "", "a <thi|"),
            ("", "", ""),
        ];
        for (text, reasoning, answer) in cases {
            let whole = split_reasoning(text);
            assert_eq!(
                parts(text, &whole),
                (reasoning.to_string(), answer.to_string()),
                "{text:?}"
            );
            for size in [1, 2, 3, 5] {
                let streamed = split_streamed(text, size);
                assert_eq!(
                    parts(text, &streamed),
                    parts(text, &whole),
                    "{text:?} in {size}-byte chunks"
                );
            }
        }
    }

    /// A tag cut by a chunk's end is not handed on as answer; text that
    /// cannot become a tag is.
    #[test]
    fn a_tag_cut_in_two_is_held_back() {
        let mut reader = Reasoning::default();
        let mut events = Vec::new();
        reader.advance("ab</thi", |e| events.push(e));
        assert_eq!(events, [Event::Answer(0..2)]);
        events.clear();
        reader.advance("ab</think>c<b", |e| events.push(e));
        // "ab" was answer until the tag came; it is all reasoning now.
        assert_eq!(events, [Event::Retract, Event::Answer(10..13)]);
    }

    #[test]
    fn answer_joins_its_pieces() {
        assert!(matches!(answer("<think>a</think>b"), Cow::Borrowed("b")));
        assert_eq!(answer("a<think>b</think>c"), "ac");
        assert_eq!(answer("<think>never closed"), "");
    }

    /// (info, body, closed) of every fence of `text`.
    fn spans(text: &str, size: usize) -> Vec<(String, String, bool)> {
        let mut scan = FenceScan::default();
        let mut out = Vec::new();
        let mut take = |span: FenceSpan| {
            out.push((
                text[span.info].to_owned(),
                text[span.body].to_owned(),
                span.closed,
            ))
        };
        for end in chunks(text, size) {
            scan.advance(&text[..end], &mut take);
        }
        scan.finish(text, &mut take);
        out
    }

    #[test]
    fn commonmark_fences() {
        let f = |info: &str, body: &str, closed| (info.to_owned(), body.to_owned(), closed);
        type Fence = (String, String, bool);
        let cases: Vec<(&str, Vec<Fence>)> = vec![
            ("```rust\nx\n```\n", vec![f("rust", "x\n", true)]),
            ("```rust\nx\n```", vec![f("rust", "x\n", true)]),
            ("```\nx\n```\n", vec![f("", "x\n", true)]),
            ("~~~ rust  \nx\n~~~\n", vec![f("rust", "x\n", true)]),
            ("   ```rust\nx\n   ```\n", vec![f("rust", "x\n", true)]),
            ("    ```rust\nx\n```\n", vec![f("", "", false)]),
            ("\t```rust\nx\n", vec![]),
            ("``rust\nx\n``\n", vec![]),
            ("``` rust`x\nx\n```\n", vec![f("", "", false)]),
            ("~~~ rust`x\nx\n~~~\n", vec![f("rust`x", "x\n", true)]),
            // Closing: the same character, at least as many, nothing after.
            (
                "````rust\nx\n```\n````\n",
                vec![f("rust", "x\n```\n", true)],
            ),
            ("```rust\nx\n`````\n", vec![f("rust", "x\n", true)]),
            ("```rust\nx\n~~~\n```\n", vec![f("rust", "x\n~~~\n", true)]),
            (
                "```rust\nx\n```rust\n```\n",
                vec![f("rust", "x\n```rust\n", true)],
            ),
            ("```rust\nx\n``` \t\n", vec![f("rust", "x\n", true)]),
            (
                "```rust\nx\n    ```\n",
                vec![f("rust", "x\n    ```\n", false)],
            ),
            ("```rust\r\nx\r\n```\r\n", vec![f("rust", "x\r\n", true)]),
            ("```rust\nx\n", vec![f("rust", "x\n", false)]),
            ("```rust", vec![f("rust", "", false)]),
            (
                "a\n```text\nq\n```\nb\n```\ny\n```\n",
                vec![f("text", "q\n", true), f("", "y\n", true)],
            ),
        ];
        for (text, want) in &cases {
            let whole: Vec<_> = fences(text)
                .into_iter()
                .map(|x| (x.info.to_owned(), x.body.to_owned(), x.closed))
                .collect();
            assert_eq!(&whole, want, "{text:?}");
            for size in [1, 2, 3, 7] {
                assert_eq!(&spans(text, size), want, "{text:?} in {size}-byte chunks");
            }
        }
    }

    /// A closing line is not taken before its newline: it may still grow
    /// an info string and stop being one.
    #[test]
    fn a_line_is_read_when_its_newline_arrives() {
        let mut scan = FenceScan::default();
        let mut closed = 0;
        scan.advance("```rust\nx\n```", |_| closed += 1);
        assert_eq!(closed, 0);
        scan.advance("```rust\nx\n```\n", |_| closed += 1);
        assert_eq!(closed, 1);
    }

    #[test]
    fn languages() {
        for (info, lang) in [
            ("rust", "rust"),
            ("rust,ignore", "rust"),
            ("rust {.x}", "rust"),
            ("", ""),
            ("{.rust}", ""),
        ] {
            assert_eq!(language(info), lang, "{info:?}");
        }
    }
}
