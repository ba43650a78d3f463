//! The token renamer: the alpha renaming done on the lexed token stream,
//! without a syntax tree.
//!
//! The stream is first flattened into one array (groups become an open and a
//! close token that know each other's index), so the pass can look back and
//! ahead freely. A recursive walk over that array then follows just enough
//! of Rust's grammar to know, for every identifier, whether it binds a local,
//! uses one, or is something else: items and their function bodies,
//! statements (`let`, `let ... else`, nested items), the expressions that
//! open scopes (blocks, `if`/`while` with `let` chains, `for`, `match` arms,
//! closures), patterns, struct literals, types (skipped, never renamed),
//! paths, fields and methods after `.`, labels and lifetimes, macro calls.
//! Each identifier gets a [`Mark`]; the encoder then hashes the marked array.
//!
//! Soundness rests on three rules:
//! - Every binding site of a renamable name must be seen, with its exact
//!   scope. Where the walk meets a construct it does not model (a pattern
//!   macro, a bare closure in an `if` condition, an unbalanced generic list,
//!   a raw identifier, ...) it gives up with [`Unsupported`] and the caller
//!   falls back to the `syn` renamer for the whole file.
//! - A name that might denote an item in a pattern (it starts with an
//!   upper-case letter, or a const, static, struct, enum, union, variant or
//!   top-level item of the file has it) is never bound, in any pattern,
//!   `ref`/`mut` or not, so all its occurrences keep their spelling. The set
//!   is read from item declarations, which are never renamed, so two files
//!   with equal output have the same set.
//! - An identifier keeps its spelling only where it cannot refer to a
//!   local: a field or method after `.`, a path segment next to `::`, a
//!   macro name before `!`, a label or lifetime after `'`, a type, a struct
//!   name, an item. Struct literal shorthand `P { x }` is hashed as
//!   `P { x: _N }`, so the field name stays.
//!
//! Inside macro calls the tokens are renamed as the `syn` renamer does
//! (every identifier bound in scope, implicit format arguments in string
//! literals), except where the rule above says an identifier is not a local;
//! an identifier that looks like struct shorthand there is hashed with both
//! its spelling and its position.

use std::fmt::Write as _;

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};

use crate::text::dedup::Fingerprint;

/// The walk met a construct it does not model; the file needs the `syn`
/// renamer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Unsupported;

type R<T> = Result<T, Unsupported>;

/// The token renamer's fingerprint of a lexed file.
pub(super) fn fingerprint(tokens: TokenStream) -> Result<Fingerprint, Flat> {
    let mut flat = Flat::default();
    // Flattening always completes, so the fallback gets the whole file.
    let mut supported = true;
    flatten(tokens, &mut flat, &mut supported);
    if !supported {
        return Err(flat);
    }
    let marks = match Pass::run(&flat) {
        Ok(marks) => marks,
        Err(Unsupported) => return Err(flat),
    };
    let mut buf = Vec::with_capacity(flat.text.len() + 4 * flat.toks.len() + 32);
    buf.extend_from_slice(b"assay-alpha-tokens\0");
    Encoder {
        flat: &flat,
        marks: &marks,
    }
    .range(&mut buf, 0, flat.toks.len());
    let mut out = [0u8; 16];
    out.copy_from_slice(&blake3::hash(&buf).as_bytes()[..16]);
    Ok(Fingerprint(out))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ident,
    Punct,
    Literal,
    Open,
    Close,
}

/// One token of the flattened stream. Text (identifiers, literals) lives in
/// [`Flat::text`]; `mate` links a group's open and close tokens.
#[derive(Debug, Clone, Copy)]
struct Tok {
    kind: Kind,
    ch: char,
    joint: bool,
    start: u32,
    end: u32,
    mate: u32,
}

/// The flattened token stream; given back when the walk gives up, so the
/// caller can rebuild the source for the `syn` renamer.
#[derive(Debug, Default)]
pub(super) struct Flat {
    toks: Vec<Tok>,
    text: String,
}

impl Flat {
    /// Source text with the same tokens (spacing aside), for the fallback.
    pub(super) fn to_source(&self) -> String {
        let mut out = String::with_capacity(self.text.len() * 2);
        for t in &self.toks {
            match t.kind {
                Kind::Ident | Kind::Literal => {
                    out.push_str(&self.text[t.start as usize..t.end as usize]);
                    out.push(' ');
                }
                Kind::Punct => {
                    out.push(t.ch);
                    if !t.joint {
                        out.push(' ');
                    }
                }
                // An invisible group's delimiters have no spelling.
                Kind::Open | Kind::Close if t.ch == '\0' => {}
                Kind::Open | Kind::Close => {
                    out.push(t.ch);
                    out.push(' ');
                }
            }
        }
        out
    }
}

/// Flattens `stream` into `flat`; clears `supported` for what the pass
/// cannot take (raw identifiers, invisible groups) but goes on, so the
/// fallback can rebuild the whole source.
fn flatten(stream: TokenStream, flat: &mut Flat, supported: &mut bool) {
    for tree in stream {
        match tree {
            TokenTree::Group(g) => {
                let (open, close) = match g.delimiter() {
                    Delimiter::Parenthesis => ('(', ')'),
                    Delimiter::Brace => ('{', '}'),
                    Delimiter::Bracket => ('[', ']'),
                    Delimiter::None => {
                        *supported = false;
                        ('\0', '\0')
                    }
                };
                let at = flat.toks.len();
                flat.toks.push(Tok {
                    kind: Kind::Open,
                    ch: open,
                    joint: false,
                    start: 0,
                    end: 0,
                    mate: 0,
                });
                // Dropping the group first leaves its stream the only owner,
                // so iterating it moves the tokens instead of cloning them.
                let inner = g.stream();
                drop(g);
                flatten(inner, flat, supported);
                let close_at = flat.toks.len() as u32;
                flat.toks[at].mate = close_at;
                flat.toks.push(Tok {
                    kind: Kind::Close,
                    ch: close,
                    joint: false,
                    start: 0,
                    end: 0,
                    mate: at as u32,
                });
            }
            TokenTree::Ident(ident) => {
                let start = flat.text.len();
                let _ = write!(flat.text, "{ident}");
                // `r#x` and `x` are one name; the pass compares spellings.
                if flat.text[start..].starts_with("r#") {
                    *supported = false;
                }
                flat.toks.push(Tok {
                    kind: Kind::Ident,
                    ch: ' ',
                    joint: false,
                    start: start as u32,
                    end: flat.text.len() as u32,
                    mate: 0,
                });
            }
            TokenTree::Punct(p) => flat.toks.push(Tok {
                kind: Kind::Punct,
                ch: p.as_char(),
                joint: p.spacing() == Spacing::Joint,
                start: 0,
                end: 0,
                mate: 0,
            }),
            TokenTree::Literal(lit) => {
                let start = flat.text.len();
                let _ = write!(flat.text, "{lit}");
                flat.toks.push(Tok {
                    kind: Kind::Literal,
                    ch: ' ',
                    joint: false,
                    start: start as u32,
                    end: flat.text.len() as u32,
                    mate: 0,
                });
            }
        }
    }
}

/// What the pass decided for one token.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Mark {
    Keep,
    /// A binding or a use of the local bound N-th in its function.
    Local(u32),
    /// Struct shorthand `P { x }` of local N: hashed as `x: _N`.
    Shorthand(u32),
    /// Looks like struct shorthand inside a macro: spelling and position.
    MacroShorthand(u32),
    /// A string literal with implicit format arguments renamed.
    Literal(String),
}

/// Strict and reserved keywords: never bound, never renamed.
fn is_keyword(s: &str) -> bool {
    matches!(
        s,
        "as" | "break"
            | "const"
            | "continue"
            | "crate"
            | "else"
            | "enum"
            | "extern"
            | "false"
            | "fn"
            | "for"
            | "if"
            | "impl"
            | "in"
            | "let"
            | "loop"
            | "match"
            | "mod"
            | "move"
            | "mut"
            | "pub"
            | "ref"
            | "return"
            | "self"
            | "Self"
            | "static"
            | "struct"
            | "super"
            | "trait"
            | "true"
            | "type"
            | "unsafe"
            | "use"
            | "where"
            | "while"
            | "async"
            | "await"
            | "dyn"
            | "abstract"
            | "become"
            | "box"
            | "do"
            | "final"
            | "macro"
            | "override"
            | "priv"
            | "typeof"
            | "unsized"
            | "virtual"
            | "yield"
            | "try"
            | "gen"
            | "_"
    )
}

/// How an expression walk behaves and where it stops.
#[derive(Debug, Clone, Copy, Default)]
struct Ctx {
    /// Statements of a block: `let` and items allowed.
    block: bool,
    /// An `if`/`while`/`match`/`for` head: no struct literals, stops at the
    /// first brace group it does not consume, `let` allowed (let chains).
    cond: bool,
    /// The scrutinee of a `let` in a condition: also stops at `&&`, `||`.
    stop_and_or: bool,
    stop_comma: bool,
    stop_semi: bool,
}

impl Ctx {
    const PLAIN: Ctx = Ctx {
        block: false,
        cond: false,
        stop_and_or: false,
        stop_comma: false,
        stop_semi: false,
    };
    const BLOCK: Ctx = Ctx {
        block: true,
        ..Ctx::PLAIN
    };
    const COND: Ctx = Ctx {
        cond: true,
        ..Ctx::PLAIN
    };
    const ITEM: Ctx = Ctx {
        stop_comma: true,
        ..Ctx::PLAIN
    };
}

struct Pass<'a> {
    toks: &'a [Tok],
    text: &'a str,
    marks: Vec<Mark>,
    /// Names that may denote items in patterns: never bound.
    items: Vec<&'a str>,
    /// Bindings in scope, innermost last.
    scopes: Vec<(&'a str, u32)>,
    /// Where each open scope starts in `scopes`.
    scope_starts: Vec<usize>,
    /// The current function's first entry in `scopes`: lookups stop there.
    base: usize,
    /// The next position in the current function.
    next: u32,
}

impl<'a> Pass<'a> {
    fn run(flat: &'a Flat) -> R<Vec<Mark>> {
        let mut pass = Pass {
            toks: &flat.toks,
            text: &flat.text,
            marks: vec![Mark::Keep; flat.toks.len()],
            items: Vec::new(),
            scopes: Vec::new(),
            scope_starts: Vec::new(),
            base: 0,
            next: 0,
        };
        pass.collect_items();
        pass.items(0, flat.toks.len())?;
        Ok(pass.marks)
    }

    // ---- token helpers ----

    fn text(&self, i: usize) -> &'a str {
        let t = &self.toks[i];
        &self.text[t.start as usize..t.end as usize]
    }

    fn is_ident(&self, i: usize, s: &str) -> bool {
        i < self.toks.len() && self.toks[i].kind == Kind::Ident && self.text(i) == s
    }

    fn is_punct(&self, i: usize, c: char) -> bool {
        i < self.toks.len() && self.toks[i].kind == Kind::Punct && self.toks[i].ch == c
    }

    fn is_open(&self, i: usize, c: char) -> bool {
        i < self.toks.len() && self.toks[i].kind == Kind::Open && self.toks[i].ch == c
    }

    fn mate(&self, i: usize) -> usize {
        self.toks[i].mate as usize
    }

    /// `::` starts at `i`.
    fn is_path_sep(&self, i: usize) -> bool {
        self.is_punct(i, ':') && self.toks[i].joint && self.is_punct(i + 1, ':')
    }

    /// A lone `:` (not half of `::`).
    fn is_colon(&self, i: usize) -> bool {
        self.is_punct(i, ':') && !self.is_path_sep(i) && !(i > 0 && self.is_path_sep(i - 1))
    }

    /// Two puncts `a`, `b` glued at `i`.
    fn is_pair(&self, i: usize, a: char, b: char) -> bool {
        self.is_punct(i, a) && self.toks[i].joint && self.is_punct(i + 1, b)
    }

    /// A lone `=` (assignment or `let`), not part of `==`, `=>`, `<=`, `+=`...
    fn is_eq(&self, i: usize) -> bool {
        if !self.is_punct(i, '=') {
            return false;
        }
        if self.toks[i].joint && (self.is_punct(i + 1, '=') || self.is_punct(i + 1, '>')) {
            return false;
        }
        !(i > 0
            && self.toks[i - 1].kind == Kind::Punct
            && self.toks[i - 1].joint
            && "=!<>+-*/%^&|.".contains(self.toks[i - 1].ch))
    }

    /// `!` of a macro call after a path (not `!=`).
    fn is_macro_bang(&self, i: usize) -> bool {
        self.is_punct(i, '!') && !(self.toks[i].joint && self.is_punct(i + 1, '='))
    }

    /// A single `.` (field or method), not part of `..`.
    fn is_dot(&self, i: usize) -> bool {
        self.is_punct(i, '.')
            && !(self.toks[i].joint && self.is_punct(i + 1, '.'))
            && !(i > 0 && self.is_punct(i - 1, '.') && self.toks[i - 1].joint)
    }

    /// Skips `#[...]` / `#![...]` at `i`; returns `i` when none is there.
    fn skip_attrs(&self, mut i: usize, end: usize) -> usize {
        while i < end && self.is_punct(i, '#') {
            let at = if self.is_punct(i + 1, '!') {
                i + 2
            } else {
                i + 1
            };
            if at < end && self.is_open(at, '[') {
                i = self.mate(at) + 1;
            } else {
                break;
            }
        }
        i
    }

    /// Index of the first token in `[i, end)` at this level for which `f`
    /// holds, groups skipped whole; `end` if none.
    fn find(&self, mut i: usize, end: usize, f: impl Fn(&Self, usize) -> bool) -> usize {
        while i < end {
            if f(self, i) {
                return i;
            }
            i = if self.toks[i].kind == Kind::Open {
                self.mate(i) + 1
            } else {
                i + 1
            };
        }
        end
    }

    fn pinned(&self, name: &str) -> bool {
        name.starts_with(|c: char| c.is_uppercase())
            || is_keyword(name)
            || self.items.contains(&name)
    }

    // ---- scopes ----

    fn lookup(&self, name: &str) -> Option<u32> {
        self.scopes[self.base..]
            .iter()
            .rev()
            .find(|(n, _)| *n == name)
            .map(|&(_, p)| p)
    }

    fn push_scope(&mut self) {
        self.scope_starts.push(self.scopes.len());
    }

    fn pop_scope(&mut self) {
        let start = self.scope_starts.pop().expect("scopes are balanced");
        self.scopes.truncate(start);
    }

    fn bind_all(&mut self, pending: &[(&'a str, u32)]) {
        self.scopes.extend_from_slice(pending);
    }

    /// Names that may denote a constant, unit struct or variant in a
    /// pattern, plus top-level items (as the `syn` renamer has them).
    fn collect_items(&mut self) {
        let mut depth = 0usize;
        for i in 0..self.toks.len() {
            match self.toks[i].kind {
                Kind::Open => depth += 1,
                Kind::Close => depth -= 1,
                Kind::Ident => {
                    let kw = self.text(i);
                    let anywhere = matches!(kw, "const" | "static" | "struct" | "enum" | "union");
                    let top = depth == 0 && matches!(kw, "fn" | "type" | "mod");
                    if !(anywhere || top) || (i > 0 && self.is_punct(i - 1, '\'')) {
                        continue;
                    }
                    let mut n = i + 1;
                    if self.is_ident(n, "mut") {
                        n += 1;
                    }
                    if n < self.toks.len() && self.toks[n].kind == Kind::Ident {
                        let name = self.text(n);
                        if !is_keyword(name) {
                            self.items.push(name);
                        }
                    }
                    if kw == "enum" {
                        let open = self.find(n, self.toks.len(), |p, j| p.is_open(j, '{'));
                        if open < self.toks.len() {
                            self.collect_variants(open);
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn collect_variants(&mut self, open: usize) {
        let close = self.mate(open);
        let mut i = open + 1;
        while i < close {
            i = self.skip_attrs(i, close);
            if i < close && self.toks[i].kind == Kind::Ident {
                self.items.push(self.text(i));
            }
            i = self.find(i, close, |p, j| p.is_punct(j, ',')) + 1;
        }
    }

    // ---- items ----

    fn items(&mut self, mut i: usize, end: usize) -> R<()> {
        while i < end {
            i = self.skip_attrs(i, end);
            if i >= end {
                break;
            }
            if self.is_punct(i, ';') {
                i += 1;
                continue;
            }
            i = self.item(i, end)?;
        }
        Ok(())
    }

    /// One item starting at `i` (attributes already skipped); returns the
    /// index after it. Only functions (and the items holding them) are
    /// walked; the rest keep their spelling.
    fn item(&mut self, mut i: usize, end: usize) -> R<usize> {
        if self.is_ident(i, "pub") {
            i += 1;
            if self.is_open(i, '(') {
                i = self.mate(i) + 1;
            }
        }
        loop {
            let qualifier = match self.toks.get(i) {
                Some(t) if t.kind == Kind::Ident => match self.text(i) {
                    "async" | "unsafe" | "default" | "safe" => true,
                    "const" => {
                        self.is_ident(i + 1, "fn")
                            || self.is_ident(i + 1, "unsafe")
                            || self.is_ident(i + 1, "async")
                            || self.is_ident(i + 1, "extern")
                    }
                    "extern" => {
                        // `extern "C" fn`; `extern "C" { .. }` and
                        // `extern crate` are items of their own.
                        let abi = self
                            .toks
                            .get(i + 1)
                            .is_some_and(|t| t.kind == Kind::Literal);
                        let next = if abi { i + 2 } else { i + 1 };
                        let qualifies = self.is_ident(next, "fn")
                            || self.is_ident(next, "unsafe")
                            || self.is_ident(next, "safe");
                        if qualifies && abi {
                            i += 1;
                        }
                        qualifies
                    }
                    _ => false,
                },
                _ => false,
            };
            if !qualifier {
                break;
            }
            i += 1;
        }
        if i >= end || self.toks[i].kind != Kind::Ident {
            return Err(Unsupported);
        }
        match self.text(i) {
            "fn" => {
                let mut j = i + 2;
                if self.is_punct(j, '<') {
                    j = self.skip_angles(j, end)?;
                }
                if !self.is_open(j, '(') {
                    return Err(Unsupported);
                }
                let params = j;
                let after = self.signature_end(self.mate(j) + 1, end)?;
                if self.is_open(after, '{') {
                    self.function(params, Some(after))?;
                    Ok(self.mate(after) + 1)
                } else {
                    self.function(params, None)?;
                    Ok(after + 1)
                }
            }
            "impl" | "trait" | "mod" | "extern" => {
                let j = self.signature_end(i + 1, end)?;
                if self.is_open(j, '{') {
                    self.items(j + 1, self.mate(j))?;
                    Ok(self.mate(j) + 1)
                } else {
                    Ok(j + 1)
                }
            }
            "struct" | "enum" | "union" => {
                let j = self.signature_end(i + 1, end)?;
                if self.is_open(j, '{') {
                    Ok(self.mate(j) + 1)
                } else {
                    Ok(j + 1)
                }
            }
            "const" | "static" | "type" | "use" => {
                let j = self.find(i + 1, end, |p, j| p.is_punct(j, ';'));
                if j >= end {
                    return Err(Unsupported);
                }
                Ok(j + 1)
            }
            _ if self.is_macro_bang(i + 1) => {
                // `macro_rules! name {...}` or an item macro `m! {...}`.
                let mut j = i + 2;
                if self.text(i) == "macro_rules" && j < end && self.toks[j].kind == Kind::Ident {
                    j += 1;
                }
                if j >= end || self.toks[j].kind != Kind::Open {
                    return Err(Unsupported);
                }
                let mut after = self.mate(j) + 1;
                if self.is_punct(after, ';') {
                    after += 1;
                }
                Ok(after)
            }
            _ => Err(Unsupported),
        }
    }

    /// From `i`, the index of the first `{` group or `;` outside angle
    /// brackets: where an item's header ends.
    fn signature_end(&self, mut i: usize, end: usize) -> R<usize> {
        let mut depth = 0i32;
        while i < end {
            let t = self.toks[i];
            match t.kind {
                Kind::Open if t.ch == '{' && depth == 0 => return Ok(i),
                Kind::Open => {
                    i = self.mate(i) + 1;
                    continue;
                }
                Kind::Punct if t.ch == ';' && depth == 0 => return Ok(i),
                Kind::Punct if t.ch == '<' => depth += 1,
                Kind::Punct if t.ch == '>' && !self.closes_arrow(i) => depth -= 1,
                _ => {}
            }
            i += 1;
        }
        Err(Unsupported)
    }

    /// `>` at `i` is the end of `->` or `=>`.
    fn closes_arrow(&self, i: usize) -> bool {
        i > 0 && (self.is_punct(i - 1, '-') || self.is_punct(i - 1, '=')) && self.toks[i - 1].joint
    }

    /// A function: parameters bound in order, then the body, with fresh
    /// scopes and positions (a nested function cannot see its parent's
    /// locals).
    fn function(&mut self, params: usize, body: Option<usize>) -> R<()> {
        let saved = (self.base, self.next, self.scopes.len());
        self.base = self.scopes.len();
        self.next = 0;
        self.push_scope();
        let close = self.mate(params);
        let mut i = params + 1;
        while i < close {
            i = self.skip_attrs(i, close);
            if i >= close {
                break;
            }
            let stop = self.find(i, close, |p, j| p.is_colon(j) || p.is_punct(j, ','));
            let receiver = (i..stop).any(|j| self.is_ident(j, "self"));
            // A receiver (`self`, `&'a mut self`, `self: Box<Self>`) binds
            // nothing that is renamed.
            if !receiver {
                let mut pending = Vec::new();
                self.pattern(i, stop, &mut pending)?;
                self.bind_all(&pending);
            }
            i = stop;
            if self.is_colon(i) {
                i = self.skip_type(i + 1, close)?;
            }
            if i < close && !self.is_punct(i, ',') {
                return Err(Unsupported);
            }
            i += 1;
        }
        if let Some(body) = body {
            self.block(body)?;
        }
        self.pop_scope();
        self.scopes.truncate(saved.2);
        self.base = saved.0;
        self.next = saved.1;
        Ok(())
    }

    fn block(&mut self, open: usize) -> R<()> {
        self.push_scope();
        let close = self.mate(open);
        self.expr(open + 1, close, Ctx::BLOCK)?;
        self.pop_scope();
        Ok(())
    }

    // ---- expressions ----

    /// Walks an expression (or a block's statements) from `i`; returns
    /// where it stopped: `end`, or the token `ctx` stops at.
    fn expr(&mut self, mut i: usize, end: usize, ctx: Ctx) -> R<usize> {
        // Whether the previous token ends an operand: tells a closure's `|`
        // from a binary one and a qualified path's `<` from less-than.
        let mut operand = false;
        // A block statement just ended (only in blocks).
        let mut after_block = false;
        while i < end {
            let t = self.toks[i];
            match t.kind {
                Kind::Close => return Err(Unsupported),
                Kind::Literal => {
                    operand = true;
                    i += 1;
                }
                Kind::Open => match t.ch {
                    '{' if ctx.cond => return Ok(i),
                    '{' => {
                        self.block(i)?;
                        i = self.mate(i) + 1;
                        operand = !ctx.block;
                        after_block = ctx.block;
                        continue;
                    }
                    _ => {
                        self.expr(i + 1, self.mate(i), Ctx::PLAIN)?;
                        i = self.mate(i) + 1;
                        operand = true;
                    }
                },
                Kind::Punct => {
                    let c = t.ch;
                    if c == ',' && ctx.stop_comma || c == ';' && ctx.stop_semi {
                        return Ok(i);
                    }
                    if ctx.stop_and_or
                        && operand
                        && (self.is_pair(i, '&', '&') || self.is_pair(i, '|', '|'))
                    {
                        return Ok(i);
                    }
                    match c {
                        '\'' => {
                            // A label or lifetime: `'a: loop`, `break 'a`.
                            if i + 1 >= end || self.toks[i + 1].kind != Kind::Ident {
                                return Err(Unsupported);
                            }
                            i += 2;
                            if self.is_colon(i) {
                                i += 1;
                            }
                            operand = false;
                        }
                        '#' => {
                            let j = self.skip_attrs(i, end);
                            if j == i {
                                return Err(Unsupported);
                            }
                            i = j;
                        }
                        '|' if !operand => {
                            if ctx.cond || after_block {
                                return Err(Unsupported);
                            }
                            i = self.closure(i, end)?;
                            operand = true;
                        }
                        '<' if !operand => {
                            // A qualified path `<T as Trait>::f`.
                            i = self.skip_angles(i, end)?;
                            if !self.is_path_sep(i) {
                                return Err(Unsupported);
                            }
                            let (j, _) = self.expr_path(i, end)?;
                            i = self.after_path(j, end, ctx)?;
                            operand = true;
                        }
                        ':' if self.is_path_sep(i) => {
                            let (j, _) = self.expr_path(i, end)?;
                            i = self.after_path(j, end, ctx)?;
                            operand = true;
                        }
                        ':' => return Err(Unsupported),
                        '.' if self.is_dot(i) => {
                            i += 1;
                            match self.toks.get(i).map(|t| t.kind) {
                                Some(Kind::Ident) | Some(Kind::Literal) if i < end => i += 1,
                                _ => return Err(Unsupported),
                            }
                            if self.is_path_sep(i) && self.is_punct(i + 2, '<') {
                                i = self.skip_angles(i + 2, end)?;
                            }
                            operand = true;
                        }
                        '=' if self.is_pair(i, '=', '>') => return Err(Unsupported),
                        '-' if self.is_pair(i, '-', '>') => return Err(Unsupported),
                        '@' | '$' => return Err(Unsupported),
                        '?' => {
                            operand = true;
                            i += 1;
                        }
                        '|' => {
                            // A binary `|` or `||`, taken whole.
                            i += if self.is_pair(i, '|', '|') { 2 } else { 1 };
                            operand = false;
                        }
                        _ => {
                            operand = false;
                            i += 1;
                        }
                    }
                    after_block = false;
                    continue;
                }
                Kind::Ident => {
                    let word = self.text(i);
                    let before = i;
                    match word {
                        "let" if ctx.block => {
                            i = self.let_statement(i, end)?;
                            operand = false;
                        }
                        "let" if ctx.cond && !ctx.stop_and_or => {
                            i = self.let_condition(i, end)?;
                            operand = true;
                        }
                        "if" | "match" | "while" | "for" | "loop" => {
                            i = self.block_like(i, end)?.ok_or(Unsupported)?;
                            operand = !ctx.block;
                            after_block = ctx.block;
                            continue;
                        }
                        "unsafe" | "const" if self.is_open(i + 1, '{') => {
                            self.block(i + 1)?;
                            i = self.mate(i + 1) + 1;
                            operand = !ctx.block;
                            after_block = ctx.block;
                            continue;
                        }
                        "async" => {
                            let j = if self.is_ident(i + 1, "move") {
                                i + 2
                            } else {
                                i + 1
                            };
                            if self.is_open(j, '{') {
                                self.block(j)?;
                                i = self.mate(j) + 1;
                                operand = true;
                            } else if self.is_punct(j, '|') && !ctx.cond {
                                i = self.closure(j, end)?;
                                operand = true;
                            } else if ctx.block {
                                i = self.item(i, end)?;
                                operand = false;
                            } else {
                                return Err(Unsupported);
                            }
                        }
                        "move" => {
                            if !self.is_punct(i + 1, '|') || ctx.cond {
                                return Err(Unsupported);
                            }
                            i = self.closure(i + 1, end)?;
                            operand = true;
                        }
                        "fn" | "struct" | "enum" | "trait" | "impl" | "mod" | "use" | "type"
                        | "extern" | "pub" | "static" | "unsafe" | "const"
                            if ctx.block =>
                        {
                            i = self.item(i, end)?;
                            operand = false;
                        }
                        "union"
                            if ctx.block
                                && self.toks.get(i + 1).is_some_and(|t| t.kind == Kind::Ident) =>
                        {
                            i = self.item(i, end)?;
                            operand = false;
                        }
                        "macro_rules" if ctx.block && self.is_macro_bang(i + 1) => {
                            i = self.item(i, end)?;
                            operand = false;
                        }
                        "as" => {
                            i = self.skip_type(i + 1, end)?;
                            operand = true;
                        }
                        "return" | "break" | "continue" | "yield" | "mut" => {
                            i += 1;
                            operand = false;
                        }
                        "self" | "Self" | "super" | "crate" | "true" | "false" | "_" => {
                            let (j, _) = self.expr_path(i, end)?;
                            i = self.after_path(j, end, ctx)?;
                            operand = true;
                        }
                        _ if is_keyword(word) => return Err(Unsupported),
                        _ => {
                            let (j, single) = self.expr_path(i, end)?;
                            let after = self.after_path(j, end, ctx)?;
                            if after == j && single {
                                if let Some(pos) = self.lookup(word) {
                                    self.marks[i] = Mark::Local(pos);
                                }
                            }
                            i = after;
                            operand = true;
                        }
                    }
                    if i == before {
                        return Err(Unsupported);
                    }
                    after_block = false;
                }
            }
        }
        if ctx.cond {
            // A condition must end at its block.
            return Err(Unsupported);
        }
        Ok(end)
    }

    /// A path in an expression from `i` (an identifier or a leading `::`):
    /// the index after it, and whether it is one plain identifier.
    fn expr_path(&self, mut i: usize, end: usize) -> R<(usize, bool)> {
        let mut segments = 0;
        let mut single = true;
        if self.is_path_sep(i) {
            single = false;
            i += 2;
        }
        loop {
            if i >= end || self.toks[i].kind != Kind::Ident {
                return Err(Unsupported);
            }
            segments += 1;
            i += 1;
            if !self.is_path_sep(i) {
                break;
            }
            single = false;
            i += 2;
            if self.is_punct(i, '<') {
                i = self.skip_angles(i, end)?;
                if !self.is_path_sep(i) {
                    break;
                }
                i += 2;
            }
        }
        Ok((i, single && segments == 1))
    }

    /// What follows a path at `j`: a macro call's tokens or a struct
    /// literal's fields are walked here. Returns the index after them, or
    /// `j` when neither follows.
    fn after_path(&mut self, j: usize, end: usize, ctx: Ctx) -> R<usize> {
        if j < end && self.is_macro_bang(j) {
            if j + 1 >= end || self.toks[j + 1].kind != Kind::Open {
                return Err(Unsupported);
            }
            self.macro_tokens(j + 1);
            return Ok(self.mate(j + 1) + 1);
        }
        if j < end && self.is_open(j, '{') && !ctx.cond {
            self.struct_literal(j)?;
            return Ok(self.mate(j) + 1);
        }
        Ok(j)
    }

    /// `P { a: expr, b, ..base }`: field names keep their spelling;
    /// shorthand of a local is hashed as `b: _N`.
    fn struct_literal(&mut self, open: usize) -> R<()> {
        let close = self.mate(open);
        let mut i = open + 1;
        while i < close {
            i = self.skip_attrs(i, close);
            if i >= close {
                break;
            }
            // `..base` or `field: value`: two tokens, then an expression.
            if self.is_pair(i, '.', '.')
                || matches!(self.toks[i].kind, Kind::Ident | Kind::Literal) && self.is_colon(i + 1)
            {
                i = self.expr(i + 2, close, Ctx::ITEM)?;
            } else if self.toks[i].kind == Kind::Ident
                && (i + 1 == close || self.is_punct(i + 1, ','))
            {
                if let Some(pos) = self.lookup(self.text(i)) {
                    self.marks[i] = Mark::Shorthand(pos);
                }
                i += 1;
            } else {
                return Err(Unsupported);
            }
            if i < close {
                if !self.is_punct(i, ',') {
                    return Err(Unsupported);
                }
                i += 1;
            }
        }
        Ok(())
    }

    /// The expressions that end with a block and open scopes, at `i`: the
    /// index after the construct, or `None` if none starts there.
    fn block_like(&mut self, i: usize, end: usize) -> R<Option<usize>> {
        if i >= end {
            return Ok(None);
        }
        if self.is_open(i, '{') {
            self.block(i)?;
            return Ok(Some(self.mate(i) + 1));
        }
        if self.is_punct(i, '\'') && self.is_colon(i + 2) {
            return match self.block_like(i + 3, end)? {
                Some(j) => Ok(Some(j)),
                None => Err(Unsupported),
            };
        }
        if self.toks[i].kind != Kind::Ident {
            return Ok(None);
        }
        let j = match self.text(i) {
            "if" => self.if_expr(i, end)?,
            "while" => {
                self.push_scope();
                let b = self.expr(i + 1, end, Ctx::COND)?;
                self.block(b)?;
                self.pop_scope();
                self.mate(b) + 1
            }
            "for" => {
                let pat_end = self.find(i + 1, end, |p, j| p.is_ident(j, "in"));
                if pat_end >= end {
                    return Err(Unsupported);
                }
                let b = self.expr(pat_end + 1, end, Ctx::COND)?;
                self.push_scope();
                let mut pending = Vec::new();
                self.pattern(i + 1, pat_end, &mut pending)?;
                self.bind_all(&pending);
                self.block(b)?;
                self.pop_scope();
                self.mate(b) + 1
            }
            "match" => {
                let b = self.expr(i + 1, end, Ctx::COND)?;
                self.arms(b)?;
                self.mate(b) + 1
            }
            "loop" | "unsafe" | "const" if self.is_open(i + 1, '{') => {
                self.block(i + 1)?;
                self.mate(i + 1) + 1
            }
            _ => return Ok(None),
        };
        Ok(Some(j))
    }

    fn if_expr(&mut self, i: usize, end: usize) -> R<usize> {
        // `if let` bindings are visible in the rest of the condition and
        // the then-branch only.
        self.push_scope();
        let b = self.expr(i + 1, end, Ctx::COND)?;
        self.block(b)?;
        self.pop_scope();
        let j = self.mate(b) + 1;
        if self.is_ident(j, "else") {
            if self.is_ident(j + 1, "if") {
                return self.if_expr(j + 1, end);
            }
            if self.is_open(j + 1, '{') {
                self.block(j + 1)?;
                return Ok(self.mate(j + 1) + 1);
            }
            return Err(Unsupported);
        }
        Ok(j)
    }

    /// `let PAT = EXPR` inside a condition: the scrutinee first, then the
    /// pattern's names bound in the condition's scope.
    fn let_condition(&mut self, i: usize, end: usize) -> R<usize> {
        let eq = self.find(i + 1, end, |p, j| {
            p.is_eq(j) || p.is_open(j, '{') && !p.is_struct_pattern_brace(j)
        });
        if eq >= end || !self.is_eq(eq) {
            return Err(Unsupported);
        }
        // In a condition the scrutinee stops at `&&`, `||` or the block.
        let stop = self.expr(
            eq + 1,
            end,
            Ctx {
                stop_and_or: true,
                ..Ctx::COND
            },
        )?;
        let mut pending = Vec::new();
        self.pattern(i + 1, eq, &mut pending)?;
        self.bind_all(&pending);
        Ok(stop)
    }

    /// A `{` group in a pattern that belongs to a struct pattern (after a
    /// path), not a block.
    fn is_struct_pattern_brace(&self, j: usize) -> bool {
        j > 0 && self.toks[j - 1].kind == Kind::Ident && !is_keyword(self.text(j - 1))
            || j > 0 && self.is_ident(j - 1, "Self")
    }

    /// `let PAT (: TYPE)? (= EXPR (else BLOCK)?)? ;`: the initializer and
    /// the else block see the names bound before; the pattern's names are
    /// bound from the `;` on.
    fn let_statement(&mut self, i: usize, end: usize) -> R<usize> {
        let semi = self.find(i + 1, end, |p, j| p.is_punct(j, ';'));
        if semi >= end {
            return Err(Unsupported);
        }
        let pat_end = self.find(i + 1, semi, |p, j| p.is_colon(j) || p.is_eq(j));
        let mut j = pat_end;
        if self.is_colon(j) {
            j = self.skip_type(j + 1, semi)?;
        }
        if j < semi {
            if !self.is_eq(j) {
                return Err(Unsupported);
            }
            // `let ... else`: an `else` not closing an `if`'s block (the
            // initializer of a let-else cannot end with `}`).
            let els = self.find(j + 1, semi, |p, k| {
                p.is_ident(k, "else")
                    && !(k > 0 && p.toks[k - 1].kind == Kind::Close && p.toks[k - 1].ch == '}')
            });
            self.expr(j + 1, els, Ctx::PLAIN)?;
            if els < semi {
                if !self.is_open(els + 1, '{') || self.mate(els + 1) + 1 != semi {
                    return Err(Unsupported);
                }
                self.block(els + 1)?;
            }
        }
        let mut pending = Vec::new();
        self.pattern(i + 1, pat_end, &mut pending)?;
        self.bind_all(&pending);
        Ok(semi + 1)
    }

    /// `match` arms: `PAT (if GUARD)? => BODY`, each in its own scope.
    fn arms(&mut self, open: usize) -> R<()> {
        let close = self.mate(open);
        let mut i = open + 1;
        while i < close {
            i = self.skip_attrs(i, close);
            if i >= close {
                break;
            }
            let pat_end = self.find(i, close, |p, j| {
                p.is_pair(j, '=', '>') || p.is_ident(j, "if")
            });
            if pat_end >= close {
                return Err(Unsupported);
            }
            self.push_scope();
            let mut pending = Vec::new();
            self.pattern(i, pat_end, &mut pending)?;
            self.bind_all(&pending);
            let mut arrow = pat_end;
            if self.is_ident(pat_end, "if") {
                arrow = self.find(pat_end + 1, close, |p, j| p.is_pair(j, '=', '>'));
                if arrow >= close {
                    return Err(Unsupported);
                }
                self.expr(pat_end + 1, arrow, Ctx::PLAIN)?;
            }
            let body = arrow + 2;
            // A body that is a block-like expression needs no comma, unless
            // a method call or `?` continues it.
            i = match self.block_like(body, close)? {
                Some(j) if !(self.is_dot(j) || self.is_punct(j, '?')) => {
                    if self.is_punct(j, ',') {
                        j + 1
                    } else {
                        j
                    }
                }
                Some(j) => self.expr_continued(j, close)?,
                None => {
                    let j = self.expr(body, close, Ctx::ITEM)?;
                    if j < close {
                        j + 1
                    } else {
                        j
                    }
                }
            };
            self.pop_scope();
        }
        Ok(())
    }

    /// Continues an arm body after a block-like operand (`{ .. }.len()`).
    fn expr_continued(&mut self, j: usize, close: usize) -> R<usize> {
        // The walk starts at `.` or `?`, which need no operand flag.
        let j = self.expr(j, close, Ctx::ITEM)?;
        Ok(if j < close { j + 1 } else { j })
    }

    /// A closure at `i` (its first `|`): parameters bound in a new scope,
    /// the body walked up to the `,` or `;` that ends it (a closure is the
    /// loosest-binding expression). Returns where the body ends.
    fn closure(&mut self, i: usize, end: usize) -> R<usize> {
        let mut params: Vec<(&'a str, u32)> = Vec::new();
        let mut j;
        if self.is_pair(i, '|', '|') {
            j = i + 2;
        } else {
            j = i + 1;
            loop {
                j = self.skip_attrs(j, end);
                if j >= end {
                    return Err(Unsupported);
                }
                if self.is_punct(j, '|') {
                    j += 1;
                    break;
                }
                let stop = self.find(j, end, |p, k| {
                    p.is_colon(k) || p.is_punct(k, ',') || p.is_punct(k, '|')
                });
                if stop >= end {
                    return Err(Unsupported);
                }
                let mut pending = Vec::new();
                self.pattern(j, stop, &mut pending)?;
                params.extend(pending);
                j = stop;
                if self.is_colon(j) {
                    j = self.skip_type(j + 1, end)?;
                }
                if self.is_punct(j, ',') {
                    j += 1;
                } else if !self.is_punct(j, '|') {
                    return Err(Unsupported);
                }
            }
        }
        self.push_scope();
        self.bind_all(&params);
        let after = if self.is_pair(j, '-', '>') {
            let b = self.skip_type(j + 2, end)?;
            if !self.is_open(b, '{') {
                return Err(Unsupported);
            }
            self.block(b)?;
            self.mate(b) + 1
        } else {
            self.expr(
                j,
                end,
                Ctx {
                    stop_comma: true,
                    stop_semi: true,
                    ..Ctx::PLAIN
                },
            )?
        };
        self.pop_scope();
        Ok(after)
    }

    // ---- patterns ----

    /// The names a pattern in `[i, end)` binds go to `pending` (one position
    /// per name across or-alternatives); they are marked here and bound by
    /// the caller where their scope starts.
    fn pattern(&mut self, mut i: usize, end: usize, pending: &mut Vec<(&'a str, u32)>) -> R<()> {
        while i < end {
            let t = self.toks[i];
            match t.kind {
                Kind::Literal => i += 1,
                Kind::Close => return Err(Unsupported),
                Kind::Open if t.ch == '{' => return Err(Unsupported),
                Kind::Open => {
                    self.pattern(i + 1, self.mate(i), pending)?;
                    i = self.mate(i) + 1;
                }
                Kind::Punct => match t.ch {
                    ',' | '|' | '&' | '-' | '@' | '.' => i += 1,
                    '=' if i > 0 && self.is_punct(i - 1, '.') && self.toks[i - 1].joint => i += 1,
                    ':' if self.is_path_sep(i) => i = self.pattern_path(i, end, pending)?,
                    _ => return Err(Unsupported),
                },
                Kind::Ident => {
                    let word = self.text(i);
                    match word {
                        "ref" | "mut" | "_" | "true" | "false" | "self" => i += 1,
                        "Self" | "crate" | "super" => i = self.pattern_path(i, end, pending)?,
                        _ if is_keyword(word) => return Err(Unsupported),
                        _ if self.is_path_sep(i + 1)
                            || self.is_open(i + 1, '(')
                            || self.is_open(i + 1, '{')
                            || self.is_punct(i + 1, '!') =>
                        {
                            i = self.pattern_path(i, end, pending)?;
                        }
                        _ if self.is_pair(i + 1, '.', '.')
                            || (i >= 2 && self.is_pair(i - 2, '.', '.'))
                            || (i >= 3
                                && self.is_pair(i - 3, '.', '.')
                                && self.is_punct(i - 1, '=')) =>
                        {
                            // A range bound (a constant); renamed like the
                            // `syn` renamer renames expressions there.
                            if let Some(pos) = self.lookup(word) {
                                self.marks[i] = Mark::Local(pos);
                            }
                            i += 1;
                        }
                        _ => {
                            self.bind_name(i, pending, false);
                            i += 1;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Binds the identifier at `i` unless its name may be an item.
    fn bind_name(&mut self, i: usize, pending: &mut Vec<(&'a str, u32)>, shorthand: bool) {
        let name = self.text(i);
        if self.pinned(name) {
            return;
        }
        let pos = match pending.iter().find(|(n, _)| *n == name) {
            Some(&(_, pos)) => pos,
            None => {
                let pos = self.next;
                self.next += 1;
                pending.push((name, pos));
                pos
            }
        };
        self.marks[i] = if shorthand {
            Mark::Shorthand(pos)
        } else {
            Mark::Local(pos)
        };
    }

    /// A path in a pattern at `i`, with what follows it: a tuple struct's
    /// or a struct's subpatterns. Returns the index after.
    fn pattern_path(
        &mut self,
        mut i: usize,
        end: usize,
        pending: &mut Vec<(&'a str, u32)>,
    ) -> R<usize> {
        if self.is_path_sep(i) {
            i += 2;
        }
        loop {
            if i >= end || self.toks[i].kind != Kind::Ident {
                return Err(Unsupported);
            }
            i += 1;
            if !self.is_path_sep(i) {
                break;
            }
            i += 2;
        }
        if i < end && self.is_open(i, '(') {
            self.pattern(i + 1, self.mate(i), pending)?;
            return Ok(self.mate(i) + 1);
        }
        if i < end && self.is_open(i, '{') {
            self.struct_pattern(i, pending)?;
            return Ok(self.mate(i) + 1);
        }
        if i < end && self.is_punct(i, '!') {
            return Err(Unsupported);
        }
        Ok(i)
    }

    /// `P { a: pat, ref mut b, .. }`.
    fn struct_pattern(&mut self, open: usize, pending: &mut Vec<(&'a str, u32)>) -> R<()> {
        let close = self.mate(open);
        let mut i = open + 1;
        while i < close {
            i = self.skip_attrs(i, close);
            if i >= close {
                break;
            }
            let field_end = self.find(i, close, |p, j| p.is_punct(j, ','));
            if self.is_pair(i, '.', '.') && i + 2 == field_end {
                // rest
            } else if matches!(self.toks[i].kind, Kind::Ident | Kind::Literal)
                && self.is_colon(i + 1)
            {
                self.pattern(i + 2, field_end, pending)?;
            } else {
                let mut j = i;
                while self.is_ident(j, "ref") || self.is_ident(j, "mut") {
                    j += 1;
                }
                if j + 1 != field_end
                    || self.toks[j].kind != Kind::Ident
                    || is_keyword(self.text(j))
                {
                    return Err(Unsupported);
                }
                self.bind_name(j, pending, true);
            }
            i = field_end + 1;
        }
        Ok(())
    }

    // ---- types ----

    /// Skips a type at `i`; returns the index after it. Nothing in a type
    /// is renamed.
    fn skip_type(&self, i: usize, end: usize) -> R<usize> {
        if i >= end {
            return Err(Unsupported);
        }
        let t = self.toks[i];
        match t.kind {
            Kind::Open if t.ch != '{' => Ok(self.mate(i) + 1),
            Kind::Punct => match t.ch {
                '&' => {
                    let mut j = i + 1;
                    if self.is_punct(j, '&') {
                        j += 1;
                    }
                    if self.is_punct(j, '\'') {
                        j += 2;
                    }
                    if self.is_ident(j, "mut") {
                        j += 1;
                    }
                    self.skip_type(j, end)
                }
                '*' if self.is_ident(i + 1, "const") || self.is_ident(i + 1, "mut") => {
                    self.skip_type(i + 2, end)
                }
                '!' => Ok(i + 1),
                '<' => {
                    let j = self.skip_angles(i, end)?;
                    if !self.is_path_sep(j) {
                        return Err(Unsupported);
                    }
                    self.path_type(j, end)
                }
                ':' if self.is_path_sep(i) => self.path_type(i, end),
                _ => Err(Unsupported),
            },
            Kind::Ident => match self.text(i) {
                "_" => Ok(i + 1),
                "fn" | "unsafe" | "extern" => {
                    let mut j = i;
                    while self.is_ident(j, "unsafe") || self.is_ident(j, "extern") {
                        j += 1;
                        if self.toks.get(j).is_some_and(|t| t.kind == Kind::Literal) {
                            j += 1;
                        }
                    }
                    if !self.is_ident(j, "fn") || !self.is_open(j + 1, '(') {
                        return Err(Unsupported);
                    }
                    j = self.mate(j + 1) + 1;
                    if j < end && self.is_pair(j, '-', '>') {
                        j = self.skip_type(j + 2, end)?;
                    }
                    Ok(j)
                }
                "impl" | "dyn" => self.skip_bounds(i + 1, end),
                "for" if self.is_punct(i + 1, '<') => {
                    let j = self.skip_angles(i + 1, end)?;
                    self.skip_type(j, end)
                }
                "self" | "Self" | "crate" | "super" => self.path_type(i, end),
                w if is_keyword(w) => Err(Unsupported),
                _ => self.path_type(i, end),
            },
            _ => Err(Unsupported),
        }
    }

    /// A type path: segments with generic arguments, `Fn(A) -> B` sugar.
    fn path_type(&self, mut i: usize, end: usize) -> R<usize> {
        if self.is_path_sep(i) {
            i += 2;
        }
        loop {
            if i >= end || self.toks[i].kind != Kind::Ident {
                return Err(Unsupported);
            }
            i += 1;
            if i < end && self.is_punct(i, '<') {
                i = self.skip_angles(i, end)?;
            } else if i + 2 < end && self.is_path_sep(i) && self.is_punct(i + 2, '<') {
                i = self.skip_angles(i + 2, end)?;
            } else if i < end && self.is_open(i, '(') {
                i = self.mate(i) + 1;
                if i < end && self.is_pair(i, '-', '>') {
                    i = self.skip_type(i + 2, end)?;
                }
            }
            if i + 2 < end && self.is_path_sep(i) && self.toks[i + 2].kind == Kind::Ident {
                i += 2;
                continue;
            }
            return Ok(i);
        }
    }

    /// `impl`/`dyn` bounds: `Trait + 'a + ?Sized + for<'b> Fn(&'b u8)`.
    fn skip_bounds(&self, mut i: usize, end: usize) -> R<usize> {
        loop {
            if self.is_punct(i, '?') {
                i += 1;
            }
            if self.is_punct(i, '\'') {
                i += 2;
            } else if self.is_open(i, '(') {
                i = self.mate(i) + 1;
            } else {
                if self.is_ident(i, "for") && self.is_punct(i + 1, '<') {
                    i = self.skip_angles(i + 1, end)?;
                }
                i = self.path_type(i, end)?;
            }
            if i < end && self.is_punct(i, '+') {
                i += 1;
                continue;
            }
            return Ok(i);
        }
    }

    /// Skips balanced `<...>` starting at `i` (groups whole; `->` inside).
    fn skip_angles(&self, mut i: usize, end: usize) -> R<usize> {
        let mut depth = 0usize;
        while i < end {
            let t = self.toks[i];
            match t.kind {
                Kind::Open => {
                    i = self.mate(i) + 1;
                    continue;
                }
                Kind::Punct if t.ch == '<' => depth += 1,
                Kind::Punct if t.ch == '>' && !self.closes_arrow(i) => {
                    depth = depth.checked_sub(1).ok_or(Unsupported)?;
                    if depth == 0 {
                        return Ok(i + 1);
                    }
                }
                Kind::Punct if t.ch == ';' => return Err(Unsupported),
                _ => {}
            }
            i += 1;
        }
        Err(Unsupported)
    }

    // ---- macros ----

    /// The tokens of a macro call in a function: identifiers bound in scope
    /// are renamed, except where they cannot be a local (after `.` or `'`,
    /// next to `::`, before `!`); implicit format arguments in string
    /// literals are renamed.
    fn macro_tokens(&mut self, open: usize) {
        let close = self.mate(open);
        let shorthand_group =
            self.is_open(open, '{') && open > 0 && self.before_struct_brace(open - 1);
        let mut i = open + 1;
        while i < close {
            let t = self.toks[i];
            match t.kind {
                Kind::Open => {
                    self.macro_tokens(i);
                    i = self.mate(i) + 1;
                    continue;
                }
                Kind::Ident => {
                    let not_local = (self.is_punct(i - 1, '.')
                        && !(i >= 2 && self.is_pair(i - 2, '.', '.')))
                        || self.is_punct(i - 1, '\'')
                        || self.is_path_sep(i + 1)
                        || (i >= 2 && self.is_path_sep(i - 2))
                        || self.is_macro_bang(i + 1);
                    if !not_local {
                        if let Some(pos) = self.lookup(self.text(i)) {
                            let shorthand = shorthand_group
                                && (i == open + 1 || self.is_punct(i - 1, ','))
                                && (i + 1 == close || self.is_punct(i + 1, ','));
                            self.marks[i] = if shorthand {
                                Mark::MacroShorthand(pos)
                            } else {
                                Mark::Local(pos)
                            };
                        }
                    }
                }
                Kind::Literal => {
                    if let Some(renamed) = self.rename_format_literal(self.text(i)) {
                        self.marks[i] = Mark::Literal(renamed);
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }

    /// The token before a `{` in macro tokens makes it maybe a struct body.
    fn before_struct_brace(&self, i: usize) -> bool {
        let t = self.toks[i];
        match t.kind {
            Kind::Ident => !matches!(
                self.text(i),
                "else" | "loop" | "unsafe" | "move" | "async" | "const" | "try"
            ),
            Kind::Punct => t.ch == '>' && !self.closes_arrow(i),
            _ => false,
        }
    }

    /// Renames implicit format arguments (`{x}`, `{x:?}`) inside a plain
    /// string literal, as the `syn` renamer does; `None` when nothing is
    /// renamed.
    fn rename_format_literal(&self, text: &str) -> Option<String> {
        if !text.starts_with('"') || !text.contains('{') {
            return None;
        }
        let mut out = String::with_capacity(text.len() + 16);
        let mut changed = false;
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..=open]);
            rest = &rest[open + 1..];
            if rest.starts_with('{') {
                out.push('{');
                rest = &rest[1..];
                continue;
            }
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            let name = &rest[..end];
            let closes = rest[end..].starts_with('}') || rest[end..].starts_with(':');
            match self.lookup(name).filter(|_| closes && !name.is_empty()) {
                Some(pos) => {
                    let _ = write!(out, "__assay_local_{pos}");
                    changed = true;
                }
                None => out.push_str(name),
            }
            rest = &rest[end..];
            if closes && rest.starts_with(':') {
                // Named width and precision arguments (`{x:>w$.p$}`) are
                // uses of locals too.
                let spec_end = rest.find('}').unwrap_or(rest.len());
                let spec = &rest[..spec_end];
                let mut k = 0;
                while k < spec.len() {
                    let run = spec[k..]
                        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .map_or(spec.len(), |n| k + n);
                    let name = &spec[k..run];
                    let named = run > k
                        && spec[run..].starts_with('$')
                        && !name.starts_with(|c: char| c.is_ascii_digit());
                    match self.lookup(name).filter(|_| named) {
                        Some(pos) => {
                            let _ = write!(out, "__assay_local_{pos}");
                            changed = true;
                        }
                        None => out.push_str(name),
                    }
                    if run < spec.len() {
                        let c = spec[run..].chars().next().expect("not at the end");
                        out.push(c);
                        k = run + c.len_utf8();
                    } else {
                        k = run;
                    }
                }
                rest = &rest[spec_end..];
            }
        }
        out.push_str(rest);
        changed.then_some(out)
    }
}

/// Hashes the marked token array: the exact fingerprint's encoding (tagged
/// tokens, doc attributes dropped, order-free attribute runs sorted) with
/// renamed locals written as their positions.
struct Encoder<'a> {
    flat: &'a Flat,
    marks: &'a [Mark],
}

impl Encoder<'_> {
    fn text(&self, i: usize) -> &str {
        let t = &self.flat.toks[i];
        &self.flat.text[t.start as usize..t.end as usize]
    }

    fn range(&self, buf: &mut Vec<u8>, mut i: usize, end: usize) {
        while i < end {
            if self.attribute_len(i, end).is_some() {
                i = self.attribute_run(buf, i, end);
                continue;
            }
            i = self.token(buf, i);
        }
    }

    /// Encodes the token at `i` (a whole group for an open token); returns
    /// the index after it.
    fn token(&self, buf: &mut Vec<u8>, i: usize) -> usize {
        let t = self.flat.toks[i];
        match t.kind {
            Kind::Open => {
                let close = t.mate as usize;
                buf.extend_from_slice(&[b'G', t.ch as u8]);
                self.range(buf, i + 1, close);
                buf.extend_from_slice(&[b'g', self.flat.toks[close].ch as u8]);
                return close + 1;
            }
            Kind::Close => {}
            Kind::Ident => match &self.marks[i] {
                Mark::Local(pos) => {
                    buf.push(b'V');
                    buf.extend_from_slice(&pos.to_le_bytes());
                }
                Mark::Shorthand(pos) => {
                    buf.push(b'I');
                    buf.extend_from_slice(self.text(i).as_bytes());
                    buf.extend_from_slice(&[0, b'P', b':', 0, b'V']);
                    buf.extend_from_slice(&pos.to_le_bytes());
                }
                Mark::MacroShorthand(pos) => {
                    buf.push(b'S');
                    buf.extend_from_slice(self.text(i).as_bytes());
                    buf.push(0);
                    buf.extend_from_slice(&pos.to_le_bytes());
                }
                _ => {
                    buf.push(b'I');
                    buf.extend_from_slice(self.text(i).as_bytes());
                    buf.push(0);
                }
            },
            Kind::Punct => {
                let mut tmp = [0u8; 4];
                buf.push(b'P');
                buf.extend_from_slice(t.ch.encode_utf8(&mut tmp).as_bytes());
                buf.push(t.joint as u8);
            }
            Kind::Literal => {
                buf.push(b'L');
                match &self.marks[i] {
                    Mark::Literal(renamed) => buf.extend_from_slice(renamed.as_bytes()),
                    _ => buf.extend_from_slice(self.text(i).as_bytes()),
                }
                buf.push(0);
            }
        }
        i + 1
    }

    /// `#[...]` or `#![...]` at `i`: its length in tokens (through the
    /// bracket's close).
    fn attribute_len(&self, i: usize, end: usize) -> Option<usize> {
        let toks = &self.flat.toks;
        if toks[i].kind != Kind::Punct || toks[i].ch != '#' {
            return None;
        }
        let mut at = i + 1;
        if at < end && toks[at].kind == Kind::Punct && toks[at].ch == '!' {
            at += 1;
        }
        (at < end && toks[at].kind == Kind::Open && toks[at].ch == '[')
            .then(|| toks[at].mate as usize + 1 - i)
    }

    /// A run of attributes: doc attributes dropped, each other one hashed,
    /// the hashes sorted when every attribute of the run is order-free.
    fn attribute_run(&self, buf: &mut Vec<u8>, mut i: usize, end: usize) -> usize {
        let mut hashes: Vec<[u8; 32]> = Vec::new();
        let mut order_free = true;
        while i < end {
            let Some(len) = self.attribute_len(i, end) else {
                break;
            };
            let open = self.flat.toks[i + len - 1].mate as usize;
            let name = if self.flat.toks[open + 1].kind == Kind::Ident {
                self.text(open + 1)
            } else {
                ""
            };
            if name != "doc" {
                order_free &= super::super::ORDER_FREE_ATTRIBUTES.contains(&name);
                let mut sub = Vec::new();
                let mut k = i;
                while k < i + len {
                    k = self.token(&mut sub, k);
                }
                hashes.push(*blake3::hash(&sub).as_bytes());
            }
            i += len;
        }
        if order_free {
            hashes.sort_unstable();
        }
        for h in &hashes {
            buf.push(b'A');
            buf.extend_from_slice(h);
        }
        i
    }
}
