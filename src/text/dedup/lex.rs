//! The fast path of the exact fingerprint: a hand-written lexer that writes
//! the fingerprint's encoding straight from the source text, with no
//! `proc_macro2::TokenStream` in between and no allocation (one reused
//! buffer per thread).
//!
//! It must give exactly the bytes the token-stream path (`super::feed`)
//! writes for the stream `proc_macro2` lexes from the same text, so the two
//! paths give the same fingerprint. Every lexical rule below is taken from
//! proc-macro2's fallback lexer (`src/parse.rs` of proc-macro2 1.0.107, the
//! version Cargo.lock pins), which is what lexes outside a procedural macro:
//!
//! - a punct is `Joint` when the very next character is one of the punct
//!   characters ``~!@#$%^&*-=+|;:,<.>/?'`` and does not start a comment;
//! - literals are tried before puncts and identifiers, in proc-macro2's
//!   order (strings, byte strings, C strings, bytes, chars, floats, ints),
//!   with its acceptance rules, and print as their source text (suffix
//!   included);
//! - `'a` is a `'` punct (always `Joint`) followed by the identifier; `'a'`
//!   is a char literal;
//! - `r#foo` prints as `r#foo`;
//! - doc comments become `#[doc = ".."]` / `#![doc = ".."]` attributes,
//!   which the fingerprint drops, but which still belong to a run of
//!   attributes.
//!
//! Anything this lexer is not sure of gives [`Unknown`], and the caller
//! falls back to the token-stream path: every non-ASCII character outside
//! strings, chars and comments (Unicode identifiers and whitespace need the
//! XID tables), every input proc-macro2 rejects (unbalanced delimiters,
//! stray characters, unterminated literals or comments, bad escapes), a doc
//! comment containing a carriage return, a doc comment between `#` and the
//! `[` of an attribute, `(/*ERROR*/)`, and nesting deeper than
//! [`MAX_DEPTH`]. So the fast path never gives a fingerprint the
//! token-stream path would not give.

use std::cell::RefCell;

use super::{Fingerprint, ORDER_FREE_ATTRIBUTES};

/// "Don't know": the caller must take the token-stream path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Unknown;

type Lexed<T> = Result<T, Unknown>;

/// Deeper nesting falls back (the recursion here is one frame per group).
const MAX_DEPTH: u32 = 256;

thread_local! {
    /// The encoding buffer and the stack of attribute hashes, reused across
    /// calls so that a fingerprint allocates nothing once warm.
    static SCRATCH: RefCell<(Vec<u8>, Vec<[u8; 32]>)> =
        RefCell::new((Vec::with_capacity(8192), Vec::with_capacity(64)));
}

/// The exact fingerprint of `source`, or [`Unknown`].
pub(super) fn fingerprint(source: &str) -> Lexed<Fingerprint> {
    SCRATCH.with(|scratch| {
        let Ok(mut scratch) = scratch.try_borrow_mut() else {
            // Re-entered (cannot happen today): use fresh buffers.
            return fingerprint_with(source, &mut Vec::new(), &mut Vec::new());
        };
        let (buf, hashes) = &mut *scratch;
        fingerprint_with(source, buf, hashes)
    })
}

fn fingerprint_with(
    source: &str,
    buf: &mut Vec<u8>,
    hashes: &mut Vec<[u8; 32]>,
) -> Lexed<Fingerprint> {
    buf.clear();
    hashes.clear();
    // proc-macro2 strips one byte order mark at the start.
    let text = source.strip_prefix('\u{feff}').unwrap_or(source);
    let mut lexer = Lexer {
        src: text.as_bytes(),
        pos: 0,
        buf,
        hashes,
        depth: 0,
    };
    lexer.stream(None)?;
    let mut out = [0u8; 16];
    out.copy_from_slice(&blake3::hash(lexer.buf).as_bytes()[..16]);
    Ok(Fingerprint(out))
}

struct Lexer<'a> {
    src: &'a [u8],
    pos: usize,
    buf: &'a mut Vec<u8>,
    /// Hashes of the attributes of the runs being read, innermost last.
    hashes: &'a mut Vec<[u8; 32]>,
    depth: u32,
}

/// A literal, punct or identifier: what one call of proc-macro2's
/// `leaf_token` returns.
enum Leaf {
    Ident,
    Other,
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_ident_continue(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn is_punct_char(b: u8) -> bool {
    matches!(
        b,
        b'~' | b'!'
            | b'@'
            | b'#'
            | b'$'
            | b'%'
            | b'^'
            | b'&'
            | b'*'
            | b'-'
            | b'='
            | b'+'
            | b'|'
            | b';'
            | b':'
            | b','
            | b'<'
            | b'.'
            | b'>'
            | b'/'
            | b'?'
            | b'\''
    )
}

impl Lexer<'_> {
    fn at(&self, i: usize) -> Option<u8> {
        self.src.get(i).copied()
    }

    fn starts_with(&self, i: usize, s: &[u8]) -> bool {
        self.src.get(i..).is_some_and(|rest| rest.starts_with(s))
    }

    /// Reads tokens up to the closing delimiter `close` (or the end of the
    /// input at the top level), writing their encoding. Returns whether the
    /// stream's first token is an identifier (an attribute's name).
    fn stream(&mut self, close: Option<u8>) -> Lexed<bool> {
        let mut first_is_ident: Option<bool> = None;
        loop {
            self.pos = self.skip_trivia(self.pos)?;
            let Some(b) = self.at(self.pos) else {
                return match close {
                    None => Ok(first_is_ident == Some(true)),
                    Some(_) => Err(Unknown),
                };
            };
            if self.doc_comment_at(self.pos)
                || (b == b'#' && self.attribute_at(self.pos)?.is_some())
            {
                first_is_ident.get_or_insert(false);
                self.attribute_run()?;
                continue;
            }
            match b {
                b'(' | b'[' | b'{' => {
                    if b == b'(' && self.starts_with(self.pos, b"(/*ERROR*/)") {
                        return Err(Unknown);
                    }
                    first_is_ident.get_or_insert(false);
                    self.group(b)?;
                }
                b')' | b']' | b'}' => {
                    return if close == Some(b) {
                        self.pos += 1;
                        Ok(first_is_ident == Some(true))
                    } else {
                        Err(Unknown)
                    };
                }
                _ => {
                    let leaf = self.leaf()?;
                    first_is_ident.get_or_insert(matches!(leaf, Leaf::Ident));
                }
            }
        }
    }

    /// A delimited group starting at `self.pos`; returns whether its first
    /// token is an identifier.
    fn group(&mut self, open: u8) -> Lexed<bool> {
        let close = match open {
            b'(' => b')',
            b'[' => b']',
            _ => b'}',
        };
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Unknown);
        }
        self.pos += 1;
        self.buf.extend_from_slice(&[b'G', open]);
        let first_is_ident = self.stream(Some(close))?;
        self.buf.extend_from_slice(&[b'g', close]);
        self.depth -= 1;
        Ok(first_is_ident)
    }

    /// Skips whitespace and comments that are not doc comments, as
    /// proc-macro2's `skip_whitespace` does; returns the new position. An
    /// unterminated block comment is left in place (proc-macro2 then fails
    /// on it).
    fn skip_trivia(&self, mut i: usize) -> Lexed<usize> {
        while let Some(b) = self.at(i) {
            match b {
                b' ' | 0x09..=0x0d => i += 1,
                b'/' => match self.at(i + 1) {
                    Some(b'/') => {
                        let doc = (self.starts_with(i, b"///") && !self.starts_with(i, b"////"))
                            || self.starts_with(i, b"//!");
                        if doc {
                            return Ok(i);
                        }
                        i = self.line_end(i);
                    }
                    Some(b'*') => {
                        if self.starts_with(i, b"/**/") {
                            i += 4;
                            continue;
                        }
                        let doc = (self.starts_with(i, b"/**") && !self.starts_with(i, b"/***"))
                            || self.starts_with(i, b"/*!");
                        if doc {
                            return Ok(i);
                        }
                        i = self.block_comment_end(i)?;
                    }
                    _ => return Ok(i),
                },
                // Unicode whitespace (and everything else non-ASCII).
                0x80.. => return Err(Unknown),
                _ => return Ok(i),
            }
        }
        Ok(i)
    }

    /// The position of the `\n` ending the line comment at `i`, or the end.
    fn line_end(&self, i: usize) -> usize {
        match self.src[i..].iter().position(|&b| b == b'\n') {
            Some(n) => i + n,
            None => self.src.len(),
        }
    }

    /// The position after the (nested) block comment at `i`, counted the
    /// way proc-macro2's `block_comment` counts.
    fn block_comment_end(&self, start: usize) -> Lexed<usize> {
        let bytes = &self.src[start..];
        let mut depth = 0usize;
        let mut i = 0usize;
        let upper = bytes.len() - 1;
        while i < upper {
            if bytes[i] == b'/' && bytes[i + 1] == b'*' {
                depth += 1;
                i += 1;
            } else if bytes[i] == b'*' && bytes[i + 1] == b'/' {
                depth -= 1;
                if depth == 0 {
                    return Ok(start + i + 2);
                }
                i += 1;
            }
            i += 1;
        }
        Err(Unknown)
    }

    /// Whether a doc comment starts at `i` (after `skip_trivia`, any `//`
    /// or `/*` left is one, or an unterminated block comment).
    fn doc_comment_at(&self, i: usize) -> bool {
        self.at(i) == Some(b'/') && matches!(self.at(i + 1), Some(b'/' | b'*'))
    }

    /// Skips the doc comment at `self.pos`. Its text is dropped with the
    /// doc attribute it stands for; proc-macro2 rejects a bare carriage
    /// return in it, and any carriage return falls back here.
    fn skip_doc_comment(&mut self) -> Lexed<()> {
        let i = self.pos;
        let end = if self.at(i + 1) == Some(b'/') {
            self.line_end(i)
        } else {
            self.block_comment_end(i)?
        };
        if self.src[i..end].contains(&b'\r') {
            return Err(Unknown);
        }
        self.pos = end;
        Ok(())
    }

    /// When an attribute starts at the `#` at `i`: whether it is an inner
    /// one (`#!`). The `#`, the optional `!` and the `[` may be separated
    /// by whitespace and comments, as tokens may.
    fn attribute_at(&self, i: usize) -> Lexed<Option<bool>> {
        let mut j = self.skip_trivia(i + 1)?;
        if self.doc_comment_at(j) {
            // Its `#` would come between: a different token sequence.
            return Err(Unknown);
        }
        let bang = self.at(j) == Some(b'!');
        if bang {
            j = self.skip_trivia(j + 1)?;
            if self.doc_comment_at(j) {
                return Err(Unknown);
            }
        }
        Ok((self.at(j) == Some(b'[')).then_some(bang))
    }

    /// A run of attributes (doc comments included), as `feed_attribute_run`
    /// hashes it: each attribute other than a doc one is encoded and hashed
    /// on its own, the hashes are sorted when every attribute of the run is
    /// order-free, and written as `A` + hash.
    fn attribute_run(&mut self) -> Lexed<()> {
        let base = self.hashes.len();
        let mut order_free = true;
        loop {
            self.pos = self.skip_trivia(self.pos)?;
            if self.doc_comment_at(self.pos) {
                self.skip_doc_comment()?;
                continue;
            }
            if self.at(self.pos) != Some(b'#') {
                break;
            }
            let Some(bang) = self.attribute_at(self.pos)? else {
                break;
            };
            let start = self.buf.len();
            self.punct();
            if bang {
                self.pos = self.skip_trivia(self.pos)?;
                self.punct();
            }
            self.pos = self.skip_trivia(self.pos)?;
            let first_is_ident = self.group(b'[')?;
            // The name is the identifier right after `G[`.
            let name: &[u8] = if first_is_ident {
                // `P#j`, maybe `P!j`, `G[`, `I`.
                let from = start + (if bang { 6 } else { 3 }) + 3;
                let len = self.buf[from..].iter().position(|&b| b == 0).unwrap_or(0);
                &self.buf[from..from + len]
            } else {
                b""
            };
            if name == b"doc" {
                self.buf.truncate(start);
                continue;
            }
            order_free &= ORDER_FREE_ATTRIBUTES
                .iter()
                .any(|free| free.as_bytes() == name);
            let hash = *blake3::hash(&self.buf[start..]).as_bytes();
            self.buf.truncate(start);
            self.hashes.push(hash);
        }
        if order_free {
            self.hashes[base..].sort_unstable();
        }
        for hash in &self.hashes[base..] {
            self.buf.push(b'A');
            self.buf.extend_from_slice(hash);
        }
        self.hashes.truncate(base);
        Ok(())
    }

    /// One literal, punct or identifier at `self.pos`, tried in the order
    /// of proc-macro2's `leaf_token`.
    fn leaf(&mut self) -> Lexed<Leaf> {
        let start = self.pos;
        if let Some(end) = self.literal(start)? {
            self.buf.push(b'L');
            self.buf.extend_from_slice(&self.src[start..end]);
            self.buf.push(0);
            self.pos = end;
            return Ok(Leaf::Other);
        }
        let b = self.src[start];
        if b == b'\'' {
            self.lifetime_quote()?;
            return Ok(Leaf::Other);
        }
        if is_punct_char(b) {
            // `/` starting a comment never gets here: skip_trivia or the
            // doc comment check took it, or it is unterminated.
            if b == b'/' && matches!(self.at(start + 1), Some(b'/' | b'*')) {
                return Err(Unknown);
            }
            self.punct();
            return Ok(Leaf::Other);
        }
        let end = self.ident(start)?;
        self.buf.push(b'I');
        self.buf.extend_from_slice(&self.src[start..end]);
        self.buf.push(0);
        self.pos = end;
        Ok(Leaf::Ident)
    }

    /// The punct character at `self.pos`, with its spacing: `Joint` when
    /// the next character is a punct character that does not start a
    /// comment.
    fn punct(&mut self) {
        let i = self.pos;
        let joint = match self.at(i + 1) {
            Some(b'/') => !matches!(self.at(i + 2), Some(b'/' | b'*')),
            Some(b) => is_punct_char(b),
            None => false,
        };
        self.buf
            .extend_from_slice(&[b'P', self.src[i], joint as u8]);
        self.pos = i + 1;
    }

    /// A `'` that is not a char literal: a lifetime's quote (always
    /// `Joint`), when an identifier follows that is not itself followed by
    /// `'` (nor by `#`, unless it is raw). The identifier is read next as
    /// an ordinary token.
    fn lifetime_quote(&mut self) -> Lexed<()> {
        let rest = self.pos + 1;
        let (after, _) = self.ident_any(rest)?.ok_or(Unknown)?;
        match self.at(after) {
            Some(b'\'') => return Err(Unknown),
            Some(b'#') if !self.starts_with(rest, b"r#") => return Err(Unknown),
            _ => {}
        }
        self.buf.extend_from_slice(&[b'P', b'\'', 1]);
        self.pos = rest;
        Ok(())
    }

    /// An identifier at `i` that proc-macro2 would read with `ident`: the
    /// literal prefixes it refuses have already been tried as literals.
    fn ident(&self, i: usize) -> Lexed<usize> {
        for prefix in [
            &b"r\""[..],
            b"r#\"",
            b"r##",
            b"b\"",
            b"b'",
            b"br\"",
            b"br#",
            b"c\"",
            b"cr\"",
            b"cr#",
        ] {
            if self.starts_with(i, prefix) {
                return Err(Unknown);
            }
        }
        Ok(self.ident_any(i)?.ok_or(Unknown)?.0)
    }

    /// proc-macro2's `ident_any`: an identifier, raw or not. Returns its
    /// end and whether it is raw, or `None` when there is none.
    fn ident_any(&self, i: usize) -> Lexed<Option<(usize, bool)>> {
        let raw = self.starts_with(i, b"r#");
        let from = if raw { i + 2 } else { i };
        let Some(end) = self.ident_not_raw(from)? else {
            return Ok(None);
        };
        if raw
            && matches!(
                &self.src[from..end],
                b"_" | b"super" | b"self" | b"Self" | b"crate"
            )
        {
            return Ok(None);
        }
        Ok(Some((end, raw)))
    }

    /// proc-macro2's `ident_not_raw`, ASCII only: the end of the
    /// identifier at `i`, or `None` when none starts there.
    fn ident_not_raw(&self, i: usize) -> Lexed<Option<usize>> {
        match self.at(i) {
            Some(b) if is_ident_start(b) => {}
            Some(0x80..) => return Err(Unknown),
            _ => return Ok(None),
        }
        let mut end = i + 1;
        while let Some(b) = self.at(end) {
            if is_ident_continue(b) {
                end += 1;
            } else if b >= 0x80 {
                return Err(Unknown);
            } else {
                break;
            }
        }
        Ok(Some(end))
    }

    /// An optional identifier suffix after a literal ending at `i`.
    fn literal_suffix(&self, i: usize) -> Lexed<usize> {
        Ok(self.ident_not_raw(i)?.unwrap_or(i))
    }

    /// proc-macro2's `literal`: the end of the literal at `i`, `None` when
    /// no literal starts there.
    fn literal(&self, i: usize) -> Lexed<Option<usize>> {
        let b = self.src[i];
        match b {
            b'"' => Some(self.cooked_string(i + 1, Cooked::Str).ok_or(Unknown)?),
            b'r' if matches!(self.at(i + 1), Some(b'"' | b'#')) => {
                self.raw_string(i + 1, Raw::Str)?
            }
            b'b' => match self.at(i + 1) {
                Some(b'"') => Some(self.cooked_string(i + 2, Cooked::Byte).ok_or(Unknown)?),
                Some(b'r') if matches!(self.at(i + 2), Some(b'"' | b'#')) => {
                    Some(self.raw_string(i + 2, Raw::Byte)?.ok_or(Unknown)?)
                }
                Some(b'\'') => Some(self.byte(i + 2).ok_or(Unknown)?),
                _ => None,
            },
            b'c' => match self.at(i + 1) {
                Some(b'"') => Some(self.cooked_string(i + 2, Cooked::C).ok_or(Unknown)?),
                Some(b'r') if matches!(self.at(i + 2), Some(b'"' | b'#')) => {
                    Some(self.raw_string(i + 2, Raw::C)?.ok_or(Unknown)?)
                }
                _ => None,
            },
            b'\'' => self.character(i + 1)?,
            b'0'..=b'9' => match self.float(i)? {
                Some(end) => Some(end),
                None => Some(self.int(i)?.ok_or(Unknown)?),
            },
            _ => None,
        }
        .map(|end| self.literal_suffix(end))
        .transpose()
    }

    /// A cooked string, byte string or C string whose body starts at `i`:
    /// the position after its closing quote (suffix not included), or
    /// `None` when proc-macro2 rejects it.
    fn cooked_string(&self, mut i: usize, kind: Cooked) -> Option<usize> {
        loop {
            let b = self.at(i)?;
            i += 1;
            match b {
                b'"' => return Some(i),
                b'\r' => {
                    if self.at(i)? != b'\n' {
                        return None;
                    }
                    i += 1;
                }
                b'\\' => {
                    let e = self.at(i)?;
                    i += 1;
                    match e {
                        b'x' => {
                            let (h, l) = (self.at(i)?, self.at(i + 1)?);
                            i += 2;
                            let ok = match kind {
                                Cooked::Str => matches!(h, b'0'..=b'7') && l.is_ascii_hexdigit(),
                                Cooked::Byte => h.is_ascii_hexdigit() && l.is_ascii_hexdigit(),
                                Cooked::C => {
                                    h.is_ascii_hexdigit()
                                        && l.is_ascii_hexdigit()
                                        && !(h == b'0' && l == b'0')
                                }
                            };
                            if !ok {
                                return None;
                            }
                        }
                        b'n' | b'r' | b't' | b'\\' | b'\'' | b'"' => {}
                        b'0' if kind != Cooked::C => {}
                        b'u' if kind != Cooked::Byte => {
                            let (end, value) = self.backslash_u(i)?;
                            if kind == Cooked::C && value == 0 {
                                return None;
                            }
                            i = end;
                        }
                        b'\n' | b'\r' => i = self.trailing_backslash(i, e)?,
                        _ => return None,
                    }
                }
                0 if kind == Cooked::C => return None,
                0x80.. if kind == Cooked::Byte => return None,
                _ => {}
            }
        }
    }

    /// proc-macro2's `backslash_u` after the `u`: the position after the
    /// `}` and the value, or `None`.
    fn backslash_u(&self, mut i: usize) -> Option<(usize, u32)> {
        if self.at(i)? != b'{' {
            return None;
        }
        i += 1;
        let mut value = 0u32;
        let mut len = 0;
        loop {
            let b = self.at(i)?;
            i += 1;
            let digit = match b {
                b'0'..=b'9' => b - b'0',
                b'a'..=b'f' => 10 + b - b'a',
                b'A'..=b'F' => 10 + b - b'A',
                b'_' if len > 0 => continue,
                b'}' if len > 0 => return char::from_u32(value).map(|c| (i, c as u32)),
                _ => return None,
            };
            if len == 6 {
                return None;
            }
            value = value * 0x10 + u32::from(digit);
            len += 1;
        }
    }

    /// proc-macro2's `trailing_backslash`: after `\` and a line break
    /// (`last`, at `i - 1`), the position of the first character that is
    /// not a space, tab or line break.
    fn trailing_backslash(&self, mut i: usize, mut last: u8) -> Option<usize> {
        loop {
            if last == b'\r' {
                let b = self.at(i);
                i += 1;
                if b != Some(b'\n') {
                    return None;
                }
            }
            let b = self.at(i)?;
            match b {
                b' ' | b'\t' | b'\n' | b'\r' => {
                    last = b;
                    i += 1;
                }
                _ => return Some(i),
            }
        }
    }

    /// A raw string, byte string or C string whose `#`s start at `i`: the
    /// position after its closing delimiter, `None` when no raw string
    /// starts there (only for `r`: the caller then reads an identifier or
    /// fails), [`Unknown`] when proc-macro2 rejects it.
    fn raw_string(&self, i: usize, kind: Raw) -> Lexed<Option<usize>> {
        let hashes = self.src[i..].iter().take_while(|&&b| b == b'#').count();
        if self.at(i + hashes) != Some(b'"') {
            return Ok(None);
        }
        if hashes > 255 {
            return Err(Unknown);
        }
        let mut j = i + hashes + 1;
        loop {
            let b = self.at(j).ok_or(Unknown)?;
            j += 1;
            match b {
                b'"' if self
                    .src
                    .get(j..j + hashes)
                    .is_some_and(|tail| tail.iter().all(|&b| b == b'#')) =>
                {
                    return Ok(Some(j + hashes));
                }
                b'\r' => {
                    if self.at(j) != Some(b'\n') {
                        return Err(Unknown);
                    }
                    j += 1;
                }
                0 if kind == Raw::C => return Err(Unknown),
                0x80.. if kind == Raw::Byte => return Err(Unknown),
                _ => {}
            }
        }
    }

    /// proc-macro2's `byte` after `b'`: the position after the closing
    /// quote, or `None`.
    fn byte(&self, mut i: usize) -> Option<usize> {
        let b = self.at(i)?;
        i += 1;
        if b == b'\\' {
            let e = self.at(i)?;
            i += 1;
            match e {
                b'x' => {
                    if !(self.at(i)?.is_ascii_hexdigit() && self.at(i + 1)?.is_ascii_hexdigit()) {
                        return None;
                    }
                    i += 2;
                }
                b'n' | b'r' | b't' | b'\\' | b'0' | b'\'' | b'"' => {}
                _ => return None,
            }
        } else if b >= 0x80 {
            // Not a char boundary after one byte.
            return None;
        }
        (self.at(i)? == b'\'').then_some(i + 1)
    }

    /// proc-macro2's `character` after `'`: the position after the closing
    /// quote, `None` when this is no char literal (a lifetime, say).
    fn character(&self, mut i: usize) -> Lexed<Option<usize>> {
        let Some(b) = self.at(i) else {
            return Ok(None);
        };
        if b == b'\\' {
            let Some(e) = self.at(i + 1) else {
                return Ok(None);
            };
            i += 2;
            match e {
                b'x' => {
                    let ok = matches!(self.at(i), Some(b'0'..=b'7'))
                        && self.at(i + 1).is_some_and(|b| b.is_ascii_hexdigit());
                    if !ok {
                        return Ok(None);
                    }
                    i += 2;
                }
                b'u' => match self.backslash_u(i) {
                    Some((end, _)) => i = end,
                    None => return Ok(None),
                },
                b'n' | b'r' | b't' | b'\\' | b'0' | b'\'' | b'"' => {}
                _ => return Ok(None),
            }
        } else {
            // One whole character, however many bytes.
            i += utf8_len(b);
        }
        Ok((self.at(i) == Some(b'\'')).then_some(i + 1))
    }

    /// proc-macro2's `float` (without the suffix): the end of a float at
    /// `i`, or `None`.
    fn float(&self, i: usize) -> Lexed<Option<usize>> {
        let Some(end) = self.float_digits(i)? else {
            return Ok(None);
        };
        self.number_end(end)
    }

    /// proc-macro2's `int` (without the suffix).
    fn int(&self, i: usize) -> Lexed<Option<usize>> {
        let Some(end) = self.digits(i) else {
            return Ok(None);
        };
        self.number_end(end)
    }

    /// After a number's digits: a suffix may follow, then no identifier
    /// character (`word_break`). Returns the digits' end (the suffix is
    /// added by `literal`).
    fn number_end(&self, end: usize) -> Lexed<Option<usize>> {
        let after = self.literal_suffix(end)?;
        match self.at(after) {
            Some(b) if is_ident_continue(b) => Ok(None),
            Some(0x80..) => Err(Unknown),
            _ => Ok(Some(end)),
        }
    }

    fn float_digits(&self, start: usize) -> Lexed<Option<usize>> {
        if !matches!(self.at(start), Some(b'0'..=b'9')) {
            return Ok(None);
        }
        let mut i = start + 1;
        let mut has_dot = false;
        let mut has_exp = false;
        while let Some(b) = self.at(i) {
            match b {
                b'0'..=b'9' | b'_' => i += 1,
                b'.' => {
                    if has_dot {
                        break;
                    }
                    i += 1;
                    match self.at(i) {
                        Some(b'.') => return Ok(None),
                        Some(b) if is_ident_start(b) => return Ok(None),
                        Some(0x80..) => return Err(Unknown),
                        _ => {}
                    }
                    has_dot = true;
                }
                b'e' | b'E' => {
                    i += 1;
                    has_exp = true;
                    break;
                }
                _ => break,
            }
        }
        if !(has_dot || has_exp) {
            return Ok(None);
        }
        if has_exp {
            let before_exp = has_dot.then_some(i - 1);
            let mut has_sign = false;
            let mut has_value = false;
            while let Some(b) = self.at(i) {
                match b {
                    b'+' | b'-' => {
                        if has_value {
                            break;
                        }
                        if has_sign {
                            return Ok(before_exp);
                        }
                        i += 1;
                        has_sign = true;
                    }
                    b'0'..=b'9' => {
                        i += 1;
                        has_value = true;
                    }
                    b'_' => i += 1,
                    _ => break,
                }
            }
            if !has_value {
                return Ok(before_exp);
            }
        }
        Ok(Some(i))
    }

    fn digits(&self, start: usize) -> Option<usize> {
        let (base, mut i) = match self.src.get(start..start + 2) {
            Some(b"0x") => (16, start + 2),
            Some(b"0o") => (8, start + 2),
            Some(b"0b") => (2, start + 2),
            _ => (10, start),
        };
        let mut empty = true;
        while let Some(b) = self.at(i) {
            let digit = match b {
                b'0'..=b'9' => {
                    if u32::from(b - b'0') >= base {
                        return None;
                    }
                    i += 1;
                    empty = false;
                    continue;
                }
                b'a'..=b'f' => 10 + b - b'a',
                b'A'..=b'F' => 10 + b - b'A',
                b'_' => {
                    if empty && base == 10 {
                        return None;
                    }
                    i += 1;
                    continue;
                }
                _ => break,
            };
            if u32::from(digit) >= base {
                break;
            }
            i += 1;
            empty = false;
        }
        (!empty).then_some(i)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Cooked {
    Str,
    Byte,
    C,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Raw {
    Str,
    Byte,
    C,
}

/// The length of the UTF-8 sequence that starts with `lead` (the source is
/// a `str`, so it is well formed).
fn utf8_len(lead: u8) -> usize {
    match lead {
        0x00..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{fingerprint as exact, fingerprint_by_token_stream};
    use super::*;
    use crate::text::extract::{extract, Extraction};
    use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};
    use std::ops::Range;

    /// What the fast path says about `source`, checked against the
    /// reference: `Some(true)` when both give the same fingerprint, `None`
    /// when the fast path falls back. Panics on any disagreement, and when
    /// the fast path fingerprints what the reference rejects.
    fn check(source: &str) -> Option<bool> {
        let reference = fingerprint_by_token_stream(source);
        match super::fingerprint(source) {
            Err(Unknown) => None,
            Ok(fast) => {
                assert_eq!(
                    Some(fast),
                    reference,
                    "fast path disagrees with the token stream on {source:?}"
                );
                Some(true)
            }
        }
    }

    /// Like `check`, and the fast path must not fall back.
    fn check_fast(source: &str) {
        assert_eq!(
            check(source),
            Some(true),
            "fast path fell back on {source:?}"
        );
    }

    /// The bundled replay corpora: every reply's raw text and every source
    /// the extractor takes from it.
    fn corpora() -> (Vec<String>, Vec<String>) {
        let mut replies = Vec::new();
        let mut sources = Vec::new();
        for (task, entry) in [("absolute", "absolute_width"), ("shellwords", "split")] {
            let path = format!("{}/specs/{task}/replies.jsonl", env!("CARGO_MANIFEST_DIR"));
            let text = std::fs::read_to_string(&path).expect("bundled corpus");
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                let content = v["content"].as_str();
                if let Some(c) = content {
                    replies.push(c.to_string());
                }
                if let Extraction::Source(s) = extract(content, v["finish_reason"].as_str(), entry)
                {
                    sources.push(s);
                }
            }
        }
        assert!(sources.len() > 50, "corpora found");
        (replies, sources)
    }

    #[test]
    fn fast_path_matches_the_token_stream_on_the_bundled_corpora() {
        let (replies, sources) = corpora();
        for s in &sources {
            check_fast(s);
        }
        for r in &replies {
            check(r);
        }
    }
    /// Both paths' fingerprints must agree and be equal (or not) to
    /// another text's.
    fn same(a: &str, b: &str) -> bool {
        check_fast(a);
        check_fast(b);
        exact(a).unwrap() == exact(b).unwrap()
    }

    #[test]
    fn tricky_lexical_cases_agree_without_falling_back() {
        for case in [
            // Strings, raw strings, byte and C strings, with suffixes.
            r###"fn f() { let _ = ("a\"b", r"raw", r#"a"b"#, r##"x"#y"##, "s"suffix); }"###,
            r##"fn f() { let _ = (b"\x00\xff", br"x", br#"y"#, c"hi", cr"c", cr#"z"#, b"a"_s); }"##,
            "fn f() { let _ = \"line \\\n    continued\"; let _ = b\"x\\\n y\"; }",
            "fn f() { let _ = \"crlf\r\nin string\"; let _ = r\"raw\r\ncrlf\"; }",
            r#"fn f() { let _ = ("\u{1F600}", "\u{10_FFFF}", c"\u{e9}", "é ü 日本", '\u{0}', "\x7f"); }"#,
            // Chars, bytes and lifetimes.
            r"fn f<'a, 'b: 'a>(x: &'a str) -> &'static str { let _ = ('a', '\'', '\\', b'a', b'\'', b'\x7f', 'é', '日'); x }",
            "fn f() { let _ = '''; let _ = b'''; let _ = 'a'suffix; }",
            "fn f<'_a>() { 'outer: loop { break 'outer; } let _: &'_ u8; }",
            "fn f<'r#a>() {} fn g<'r#fn>() { 'b\"x\"; }",
            "fn f() { m!('r\"x\"); }",
            // Numbers.
            "fn f() { let _ = (1., 1..2, 1.e3, 1.0e3, 1e3, 1e, 1.5e+, 1e+3, 1E-3_f32, 1e+-3); }",
            "fn f() { let _ = (0x1f, 0x1F_u8, 0o17, 0b1010, 0b1f, 1_000u32, 1.0f64, 1.0_f64, 1f32); }",
            "fn f() { let _ = (1.0.0, x.0.1, 1._x, 2.e, 1e_3, 1e_, 0x1.5, 0xe+1, 1.2.3, 3.max(4)); }",
            "fn f() { let _ = (1..=2, ..3, 1...2, 0.5, 10.0e10, 1_2.3_4e5_6); }",
            // Identifiers.
            "fn f() { let r#type = 1; r#match(r#type); let _ = _; let __x = r#fn; }",
            "fn f() { let br = 1; let cr = br + crate_x + b_ + r + c; }",
            // Comments.
            "fn f() { /* a /* nested */ b */ /**/ /***/ x /* * / */ }",
            "fn f() { //// not doc\n x //\n /*** not doc */ }",
            "fn f() { x // comment with \r bare cr\n }",
            "fn f() {} /* \u{e9} unicode in a comment */ // and \u{65e5}\n",
            // Doc comments and doc attributes.
            "/// outer\n/** block */\n//! inner\n/*! inner block */\nfn f() { /// in body\n x }",
            "#![doc = \"inner\"]\n#[doc(hidden)]\n#[r#doc = \"raw\"]\nfn f() {}",
            "#[#[doc = \"x\"] foo] fn f() {} #[/// d\n bar] fn g() {}",
            "fn f() {} ///",
            // Attributes and attribute-like token sequences.
            "#[inline] #[must_use] /// d\n #[allow(unused)] #[cfg(test)] fn f() {}",
            "# [inline] # ! [allow(x)] #!/bin/x\n fn f() { x#[y]; #y; ##[z] }",
            "#[derive(Debug, Clone)] struct S { #[serde(rename = \"a\")] a: u8 }",
            "fn f() { quote!(#x #(#y),* #[attr] #![inner]); }",
            // Punct spacing.
            "fn f() { a && b; a & &b; a&&b; a&& b; x->y; x- >y; a::b; a: :b; -1; !x; a+=1; a + = 1; }",
            "fn f() { a+// c\n b; a+/* c */b; a /=b; x<-y; x?; $x @ ~ ^ % |; }",
            "fn f() { x.. =y; &'a x; #'a: loop {} }",
            // Byte order mark and shebang-like start.
            "\u{feff}fn f() {}",
            "#!/usr/bin/env rustx\nfn main() {}",
            "",
            "   \n\t\x0b\x0c  ",
        ] {
            check_fast(case);
        }
    }

    #[test]
    fn tricky_cases_fall_back_or_are_rejected() {
        // The fast path does not know these; the result is the reference's.
        for case in [
            "fn caf\u{e9}() {}",
            "fn f() {\u{a0}}",
            "fn f() { x\u{200e} }",
            "fn f() -> u8 { (/*ERROR*/) }",
            "fn f() { 1\u{301} }",
            "fn f() { 'caf\u{e9} }",
            "# /// d\n[x] fn f() {}",
            "/// with bare \r cr\nfn f() {}",
        ] {
            assert_eq!(check(case), None, "{case:?}");
            assert_eq!(exact(case), fingerprint_by_token_stream(case));
        }
        assert!(exact("fn caf\u{e9}() {}").is_some());
        // Rejected by proc-macro2: never fingerprinted, by either path.
        for case in [
            "fn a() {",
            "fn a() { ( }",
            ")",
            "fn a() { \\ }",
            "fn a() { ` }",
            "fn a() { \"unterminated }",
            "fn a() { /* unterminated }",
            "fn a() { /** unterminated }",
            "fn a() { 'ab' }",
            "fn a() { 0b102 }",
            "fn a() { 0o8 }",
            "fn a() { 0x }",
            "fn a() { r##foo }",
            "fn a() { br#x }",
            "fn a() { b'\u{e9}' }",
            "fn a() { b\"\u{e9}\" }",
            "fn a() { \"\\q\" }",
            "fn a() { \"\\x80\" }",
            "fn a() { '\\u{d800}' }",
            "fn a() { \"\\u{1234567}\" }",
            "fn a() { c\"\\0\" }",
            "fn a() { c\"\\x00\" }",
            "fn a() { \"bare\rcr\" }",
            "fn a() { r#_ }",
            "fn a() { r#self }",
            "fn a() { 'a#b }",
            "fn a() { ' }",
            "fn a() { '1 }",
            "fn a() { \u{0}x }",
        ] {
            assert_eq!(fingerprint_by_token_stream(case), None, "{case:?}");
            assert_eq!(check(case), None, "{case:?}");
            assert_eq!(exact(case), None, "{case:?}");
        }
    }

    #[test]
    fn what_counts_and_what_does_not() {
        let base = "pub fn solve(x: u32) -> u32 { let y = x + 1; y * 2 }";
        assert!(same(
            base,
            "pub fn solve(x:u32)->u32{\n  let y=x+1;//c\n  y*2 /* c */}"
        ));
        assert!(same(base, &format!("/// doc\n/** doc */\n//! in\n{base}")));
        assert!(same(
            &format!("#[inline]\n#[must_use]\n#[allow(unused)]\n{base}"),
            &format!("#[allow(unused)]\n/// doc between\n#[must_use]\n#[inline]\n{base}"),
        ));
        assert!(!same(
            &format!("#[inline]\n#[my_macro]\n{base}"),
            &format!("#[my_macro]\n#[inline]\n{base}"),
        ));
        assert!(!same("fn f() { a && b }", "fn f() { a & &b }"));
        assert!(same("fn f() { a && b }", "fn f() { a&&b }"));
        assert!(!same("fn f() { a - -b }", "fn f() { a --b }"));
        assert!(!same("fn f() { 'a' }", "fn f() { 'a }"));
        assert!(!same("fn f() { r#x }", "fn f() { x }"));
        assert!(!same("fn f() { 1.0 }", "fn f() { 1.00 }"));
        assert!(!same("fn f() { (b) }", "fn f() { [b] }"));
        assert!(!same("fn f() { x }", "fn f() { y }"));
        assert!(!same("fn f() { 1u8 }", "fn f() { 1 }"));
    }

    /// A token of a lexed file with its byte range. Doc attributes (written
    /// or from comments) are left out: their contents count for nothing.
    #[derive(Debug, Clone)]
    enum Tok {
        Ident(Range<usize>),
        Literal(Range<usize>),
        /// A `Joint` punct followed by another punct.
        JointPair(Range<usize>),
        Group(Range<usize>, Delimiter),
    }

    fn tokens(source: &str) -> Vec<Tok> {
        fn walk(source: &str, stream: TokenStream, out: &mut Vec<Tok>) {
            let trees: Vec<TokenTree> = stream.into_iter().collect();
            for (i, tree) in trees.iter().enumerate() {
                let range = tree.span().byte_range();
                match tree {
                    TokenTree::Group(g) => {
                        let is_doc = matches!(
                            g.stream().into_iter().next(),
                            Some(TokenTree::Ident(id)) if id == "doc"
                        );
                        let open = match g.delimiter() {
                            Delimiter::Parenthesis => "(",
                            Delimiter::Bracket => "[",
                            Delimiter::Brace => "{",
                            Delimiter::None => continue,
                        };
                        if is_doc || !source[range.clone()].starts_with(open) {
                            continue;
                        }
                        out.push(Tok::Group(range, g.delimiter()));
                        walk(source, g.stream(), out);
                    }
                    TokenTree::Ident(id) => {
                        if *id == source[range.clone()] {
                            out.push(Tok::Ident(range));
                        }
                    }
                    TokenTree::Literal(l) => {
                        if source[range.clone()] == l.to_string() {
                            out.push(Tok::Literal(range));
                        }
                    }
                    TokenTree::Punct(p) => {
                        let next_is_punct = matches!(trees.get(i + 1), Some(TokenTree::Punct(_)));
                        if p.spacing() == Spacing::Joint
                            && p.as_char() != '\''
                            && next_is_punct
                            && range.len() == 1
                        {
                            out.push(Tok::JointPair(range));
                        }
                    }
                }
            }
        }
        let mut out = Vec::new();
        walk(source, source.parse().unwrap(), &mut out);
        out
    }

    /// The byte offsets between tokens where whitespace already is: there
    /// whitespace, comments and doc comments may be added without changing
    /// any token.
    fn gaps(source: &str) -> Vec<usize> {
        fn bounds(stream: TokenStream, out: &mut Vec<(usize, usize)>) {
            for tree in stream {
                let r = tree.span().byte_range();
                if let TokenTree::Group(g) = &tree {
                    if r.len() >= 2 {
                        out.push((r.start, r.start + 1));
                        out.push((r.end - 1, r.end));
                    }
                    bounds(g.stream(), out);
                } else {
                    out.push((r.start, r.end));
                }
            }
        }
        let mut b = Vec::new();
        bounds(source.parse().unwrap(), &mut b);
        b.sort();
        b.dedup();
        let mut at = Vec::new();
        for w in b.windows(2) {
            let (end, next) = (w[0].1, w[1].0);
            if next > end && source[end..next].starts_with(|c: char| c.is_ascii_whitespace()) {
                at.push(end);
            }
        }
        at
    }

    fn insert_at(source: &str, at: &[usize], what: &str) -> String {
        let mut out = String::with_capacity(source.len() + at.len() * what.len());
        let mut last = 0;
        for &i in at {
            out.push_str(&source[last..i]);
            out.push_str(what);
            last = i;
        }
        out.push_str(&source[last..]);
        out
    }

    fn replace(source: &str, range: Range<usize>, with: &str) -> String {
        format!("{}{}{}", &source[..range.start], with, &source[range.end..])
    }

    #[test]
    fn mutations_of_the_corpora_agree_and_count_as_they_should() {
        let (_, sources) = corpora();
        let (mut equal, mut differ) = (0, 0);
        for src in &sources {
            let original = fingerprint_by_token_stream(src).unwrap();
            // Variants that must keep the fingerprint.
            let at = gaps(src);
            for what in [
                " \n\t",
                "/* c /* nested */ */",
                "// line\n",
                "/// doc\n",
                "/** doc */",
                "\n//! inner\n",
                "#[doc = \"x\"]",
            ] {
                // After a space: `/` then `/* c */` would make `//`.
                let v = insert_at(src, &at, &format!(" {what}"));
                assert_eq!(check(&v), Some(true), "{what:?} inserted in {v:?}");
                assert_eq!(exact(&v).unwrap(), original, "{what:?} inserted in {src:?}");
                equal += 1;
            }
            // Order-free attributes in either order.
            let a = src.replace("fn ", "#[inline]\n#[must_use]\nfn ");
            let b = src.replace("fn ", "#[must_use] /// d\n#[inline]\nfn ");
            assert!(same(&a, &b));
            assert_ne!(exact(&a).unwrap(), original);
            equal += 1;
            // Variants that must change it: every fifth token, changed.
            for tok in tokens(src).into_iter().step_by(5) {
                let v = match tok.clone() {
                    Tok::Ident(r) => replace(src, r.end..r.end, "_x"),
                    Tok::Literal(r) => {
                        let lit = &src[r.clone()];
                        if lit.starts_with(|c: char| c.is_ascii_digit()) {
                            replace(src, r.start..r.start, "1")
                        } else if let Some(q) = lit.find('"').filter(|_| !lit.contains('\'')) {
                            replace(src, r.start + q + 1..r.start + q + 1, "x")
                        } else {
                            continue;
                        }
                    }
                    Tok::JointPair(r) => replace(src, r.end..r.end, " "),
                    Tok::Group(r, Delimiter::Parenthesis) => {
                        let inner = &src[r.start + 1..r.end - 1];
                        replace(src, r, &format!("[{inner}]"))
                    }
                    Tok::Group(r, _) => {
                        let inner = &src[r.start + 1..r.end - 1];
                        replace(src, r, &format!("({inner})"))
                    }
                };
                assert_eq!(check(&v), Some(true), "{tok:?} changed in {v:?}");
                assert_ne!(exact(&v).unwrap(), original, "{v:?}");
                differ += 1;
            }
        }
        assert!(
            equal > 500 && differ > 500,
            "{equal} equal, {differ} differing variants"
        );
    }

    /// A small seeded generator (xorshift64*), so failures reproduce.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// Fragments that stress the lexer where it is delicate.
    const FRAGMENTS: &[&str] = &[
        "\"",
        "'",
        "r#\"",
        "\"#",
        "#",
        "!",
        "[",
        "]",
        "(",
        ")",
        "{",
        "}",
        "/*",
        "*/",
        "//",
        "///",
        "//!",
        "/**",
        "/*!",
        "\n",
        "\r",
        "\r\n",
        "\\",
        "\\u{",
        "\\x",
        "'a",
        "'a'",
        "1.",
        "..",
        "e",
        "E+",
        "0x",
        "0b",
        "_",
        "r#",
        "b'",
        "b\"",
        "br",
        "c\"",
        "cr#",
        "#[inline]",
        "#[doc = \"d\"]",
        "#![allow(x)]",
        "\u{e9}",
        "\u{a0}",
        "\0",
        " ",
        "&&",
        "->",
        "1e3",
        "u8",
        "$",
        "@",
        "`",
    ];

    fn mutate(rng: &mut Rng, source: &str) -> String {
        let mut s = source.to_string();
        for _ in 0..1 + rng.below(3) {
            let mut at = rng.below(s.len() + 1);
            while !s.is_char_boundary(at) {
                at -= 1;
            }
            match rng.below(4) {
                0 => s.insert_str(at, FRAGMENTS[rng.below(FRAGMENTS.len())]),
                1 => {
                    let mut end = (at + 1 + rng.below(8)).min(s.len());
                    while !s.is_char_boundary(end) {
                        end += 1;
                    }
                    s.replace_range(at..end, "");
                }
                2 => {
                    let mut end = (at + 1 + rng.below(40)).min(s.len());
                    while !s.is_char_boundary(end) {
                        end += 1;
                    }
                    let piece = s[at..end].to_string();
                    s.insert_str(at, &piece);
                }
                _ => {
                    // A random printable ASCII character.
                    let c = (32 + rng.below(95)) as u8 as char;
                    s.insert(at, c);
                }
            }
        }
        s
    }

    #[test]
    fn randomly_mutated_sources_never_disagree() {
        let (replies, sources) = corpora();
        let pool: Vec<&String> = sources.iter().chain(replies.iter().take(20)).collect();
        // More inputs and another seed on demand, for a longer hunt.
        let var = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
        let inputs = var("ASSAY_FUZZ_INPUTS").unwrap_or(6000) as usize;
        let mut rng = Rng(var("ASSAY_FUZZ_SEED").unwrap_or(0x5eed_1234_abcd_ef01));
        let (mut fast, mut reference) = (0, 0);
        for _ in 0..inputs {
            let from = pool[rng.below(pool.len())];
            let input = mutate(&mut rng, from);
            if check(&input).is_some() {
                fast += 1;
            }
            if fingerprint_by_token_stream(&input).is_some() {
                reference += 1;
            }
        }
        eprintln!("{fast} by the fast path, {reference} lexed by the reference, of {inputs}");
        // Not vacuous: the fast path takes most of what lexes.
        assert!(
            reference > inputs / 5 && fast * 10 > reference * 8,
            "{fast} by the fast path, {reference} lexed by the reference, of {inputs}"
        );
    }

    /// Every `.rs` file in the cargo registry (a few hundred crates on the
    /// project's machine): a long differential run on real code, kept out
    /// of the default run. `cargo test --release --lib dedup::lex -- --ignored`
    #[test]
    #[ignore]
    fn every_registry_source_agrees() {
        fn walk(dir: &std::path::Path, files: &mut Vec<std::path::PathBuf>) {
            let Ok(entries) = std::fs::read_dir(dir) else {
                return;
            };
            for e in entries.flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, files);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    files.push(p);
                }
            }
        }
        let home = std::env::var_os("CARGO_HOME")
            .map(std::path::PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".cargo")))
            .unwrap();
        let mut files = Vec::new();
        walk(&home.join("registry/src"), &mut files);
        let (mut fast, mut fell_back) = (0, 0);
        for f in &files {
            let Ok(text) = std::fs::read_to_string(f) else {
                continue;
            };
            match check(&text) {
                Some(_) => fast += 1,
                None => fell_back += 1,
            }
        }
        eprintln!(
            "{} files: {fast} by the fast path, {fell_back} fell back",
            files.len()
        );
        assert!(fast > 0);
    }
}
