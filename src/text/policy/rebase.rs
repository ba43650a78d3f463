//! A program's `crate::` paths mapped onto its module of a shared image.
//!
//! A program written as a crate of its own names its items through
//! `crate::`; as a module `crate::c3` of a shared crate the same words
//! would name the shared root. Each `crate` that starts a path (`crate::x`,
//! `use crate::{..}`, `use crate as c`, `pub(in crate::a)`) gets the
//! module's path inserted right after it, and nothing else changes: not a
//! byte of whitespace, comments or string literals, and no line, so the
//! compiler's messages still point at the program's own lines (and, left
//! of the first rebased path on a line, at its own columns). Visibilities
//! (`pub(crate)`, `pub(in crate)`) stay: a module's `pub(crate)` item is
//! unreachable to a build-mate that cannot name it, and the policy's
//! `outer_path` rule is what keeps it from naming it. `$crate` and
//! `extern crate` stay too (the first is refused by that rule).
//!
//! Sound only for a source the default policy accepts: in a source that
//! defines a macro, a macro could split a rebased path apart again, which
//! is why the policy refuses `crate` in such a source's macro tokens.

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};

use super::reach::crate_starts_a_path;
use super::scan::ident_name;

/// `source` with every path-leading `crate` made `crate::<module>`
/// (`module` is the path of the program's module below the crate root,
/// outermost first: `["c3"]` gives `crate::c3::x`). A source that does not
/// lex, or an empty `module`, is returned unchanged.
pub fn rebase_crate_paths(source: &str, module: &[&str]) -> String {
    debug_assert!(
        module
            .iter()
            .all(|m| syn::parse_str::<syn::Ident>(m).is_ok()),
        "{module:?} is not a module path"
    );
    let Ok(tokens) = source.parse::<TokenStream>() else {
        return source.to_owned();
    };
    let mut ends = Vec::new();
    path_leading_crates(tokens, &mut ends);
    if module.is_empty() || ends.is_empty() {
        return source.to_owned();
    }
    let suffix: String = module.iter().map(|m| format!("::{m}")).collect();
    let mut out = String::with_capacity(source.len() + ends.len() * suffix.len());
    let mut from = 0;
    for end in ends {
        out.push_str(&source[from..end]);
        out.push_str(&suffix);
        from = end;
    }
    out.push_str(&source[from..]);
    out
}

/// The byte offset just after each path-leading `crate`, in source order.
fn path_leading_crates(tokens: TokenStream, ends: &mut Vec<usize>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, token) in tokens.iter().enumerate() {
        match token {
            // `r#crate` is not an identifier rustc accepts: only the plain
            // word is a path's start.
            TokenTree::Ident(id) if id == "crate" && crate_starts_a_path(&tokens, i) => {
                ends.push(id.span().byte_range().end);
            }
            TokenTree::Group(group) => path_leading_crates(group.stream(), ends),
            _ => {}
        }
    }
}

/// Words before a `::` that leave it leading a path (`as ::X`,
/// `&mut ::X`), where any other word continues one (`a::b`, `Self::b`).
const KEYWORDS_BEFORE_A_PATH: &[&str] = &[
    "as", "box", "break", "const", "continue", "dyn", "else", "for", "if", "impl", "in", "let",
    "loop", "match", "move", "mut", "ref", "return", "static", "type", "unsafe", "use", "where",
    "while", "yield",
];

/// `source`, a program of edition 2015 laid out as module `module` (as
/// for [`rebase_crate_paths`], which runs first), with its crate-root
/// paths made its module's. In 2015 a `use` path and a path that starts
/// with `::` start at the crate root, which, for the program built alone
/// as MultiPL-E builds it, is the program's own top level: `use Color::*`
/// and `::Color::Red` name its `enum Color`. So the first segment of each
/// gets `crate::<module>::` before it (a leading `::` becomes that), but
/// for what the shared root holds just as the program's own root did:
/// `std` (the one crate 2015 puts at a root), and `self`, `super`,
/// `crate`. Lines stay where they were, as with [`rebase_crate_paths`]. A
/// source that does not lex, or an empty `module`, is returned unchanged.
pub fn rebase_2015_root_paths(source: &str, module: &[&str]) -> String {
    let Ok(tokens) = source.parse::<TokenStream>() else {
        return source.to_owned();
    };
    if module.is_empty() {
        return source.to_owned();
    }
    let prefix: String = std::iter::once("crate")
        .chain(module.iter().copied())
        .map(|m| format!("{m}::"))
        .collect();
    let mut edits = Vec::new();
    root_paths(tokens, &mut edits);
    edits.sort_by_key(|e| e.0.start);
    let mut out = String::with_capacity(source.len() + edits.len() * prefix.len());
    let mut from = 0;
    for (range, replace) in edits {
        out.push_str(&source[from..range.start]);
        out.push_str(if replace { &prefix } else { "" });
        from = range.end;
    }
    out.push_str(&source[from..]);
    out
}

/// An edit of [`rebase_2015_root_paths`]: a byte range and whether the
/// module's prefix replaces it (a leading `::`, or an empty range before
/// a first segment) or nothing does (the `::` of `use ::{..}`).
type Edit = (std::ops::Range<usize>, bool);

/// The edits of one level of tokens and of the groups inside it.
fn root_paths(tokens: TokenStream, edits: &mut Vec<Edit>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Ident(id) if id == "use" => use_tree(&tokens, i + 1, edits),
            TokenTree::Punct(_) if path_sep_at(&tokens, i) && leads(&tokens, i) => {
                if let Some(TokenTree::Ident(first)) = tokens.get(i + 2) {
                    if first != "std" {
                        let start = tokens[i].span().byte_range().start;
                        edits.push((start..tokens[i + 1].span().byte_range().end, true));
                    }
                }
                i += 1;
            }
            TokenTree::Group(group) => root_paths(group.stream(), edits),
            _ => {}
        }
        i += 1;
    }
}

/// The edits of a use tree that starts at `tokens[at]`, where a leading
/// `::` is [`root_paths`]'s to edit.
fn use_tree(tokens: &[TokenTree], at: usize, edits: &mut Vec<Edit>) {
    let insert = |t: &TokenTree| {
        let start = t.span().byte_range().start;
        (start..start, true)
    };
    match tokens.get(at) {
        Some(TokenTree::Ident(first))
            if !["std", "self", "super", "crate"].contains(&ident_name(first).as_str()) =>
        {
            edits.push(insert(&tokens[at]))
        }
        Some(TokenTree::Ident(_)) => {}
        Some(TokenTree::Punct(p)) if p.as_char() == '*' => edits.push(insert(&tokens[at])),
        Some(TokenTree::Punct(_)) if path_sep_at(tokens, at) => {
            // `use ::{a, std::b}` is `use {a, std::b}` in 2015.
            if let Some(TokenTree::Group(_)) = tokens.get(at + 2) {
                let start = tokens[at].span().byte_range().start;
                edits.push((start..tokens[at + 1].span().byte_range().end, false));
                use_tree(tokens, at + 2, edits);
            }
        }
        Some(TokenTree::Group(group)) if group.delimiter() == Delimiter::Brace => {
            let inner: Vec<TokenTree> = group.stream().into_iter().collect();
            let mut start = 0;
            for (j, t) in inner.iter().enumerate() {
                if matches!(t, TokenTree::Punct(p) if p.as_char() == ',') {
                    use_tree(&inner, start, edits);
                    start = j + 1;
                }
            }
            use_tree(&inner, start, edits);
        }
        _ => {}
    }
}

/// Whether `tokens[i]` and the next are a `::`.
fn path_sep_at(tokens: &[TokenTree], i: usize) -> bool {
    matches!(
        (&tokens[i], tokens.get(i + 1)),
        (TokenTree::Punct(a), Some(TokenTree::Punct(b)))
            if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':'
    )
}

/// Whether the `::` at `tokens[i]` starts a path rather than continuing
/// one (`a::b`, `Vec::<u8>::new`, `<T as Tr>::f`).
fn leads(tokens: &[TokenTree], i: usize) -> bool {
    let Some(before) = i.checked_sub(1).map(|b| &tokens[b]) else {
        return true;
    };
    let joint_before = |b: usize, c: &[char]| {
        b.checked_sub(1).is_some_and(|b| {
            matches!(&tokens[b], TokenTree::Punct(p)
                if c.contains(&p.as_char()) && p.spacing() == Spacing::Joint)
        })
    };
    match before {
        // A lifetime (`&'a ::X`) or a keyword ends no path.
        TokenTree::Ident(id) => {
            joint_before(i - 1, &['\''])
                || KEYWORDS_BEFORE_A_PATH.contains(&ident_name(id).as_str())
        }
        // `->` and `=>` end no path; a generic's `>` does.
        TokenTree::Punct(p) if p.as_char() == '>' => joint_before(i - 1, &['-', '=']),
        // `::` after `:` (`x: ::X`) leads; the second `:` of a `::` is
        // never looked at.
        _ => true,
    }
}

/// `source`, a program of edition 2015, with the words later editions
/// made keywords written as raw identifiers where it uses them as names
/// (`let dyn = 1` becomes `let r#dyn = 1`): the same program to a 2015
/// rustc, and one syn, which reads today's Rust, can lay out. `async`,
/// `await` and `try` are names wherever 2015 accepts them; `dyn` is a
/// keyword before what starts a trait bound (`dyn Tr`, `dyn ?Sized`,
/// `dyn 'a`, `dyn ::m::Tr`) and a name anywhere else. Lines stay where
/// they were. A source that does not lex is returned unchanged.
pub fn raw_2015_names(source: &str) -> String {
    let Ok(tokens) = source.parse::<TokenStream>() else {
        return source.to_owned();
    };
    let mut at = Vec::new();
    later_keywords(tokens, &mut at);
    at.sort_unstable();
    let mut out = String::with_capacity(source.len() + at.len() * 2);
    let mut from = 0;
    for start in at {
        out.push_str(&source[from..start]);
        out.push_str("r#");
        from = start;
    }
    out.push_str(&source[from..]);
    out
}

/// Where each later keyword used as a name starts, in `tokens` and the
/// groups inside it.
fn later_keywords(tokens: TokenStream, at: &mut Vec<usize>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, token) in tokens.iter().enumerate() {
        match token {
            TokenTree::Ident(id) if id == "async" || id == "await" || id == "try" => {
                at.push(id.span().byte_range().start);
            }
            TokenTree::Ident(id) if id == "dyn" => {
                let bound = match tokens.get(i + 1) {
                    Some(TokenTree::Ident(_)) => true,
                    Some(TokenTree::Punct(p)) => {
                        matches!(p.as_char(), '?' | '\'') || path_sep_at(&tokens, i + 1)
                    }
                    _ => false,
                };
                if !bound {
                    at.push(id.span().byte_range().start);
                }
            }
            TokenTree::Group(group) => later_keywords(group.stream(), at),
            _ => {}
        }
    }
}
