//! The token walk behind the task's policy (`policy::check`): does a
//! candidate's source hold something whose effect reaches past its own
//! module (a crate-level attribute, a symbol attribute, an extern block,
//! assembly, a file read at compile time)? The walk lexes the source once, descends
//! into every group (macro bodies and arguments included, so a word passed
//! to a macro is seen like any other), and hands each attribute and each
//! identifier to the caller's rules, stopping at the first reason the
//! rules give. Raw identifiers are seen without their `r#`: rustc resolves
//! `r#include_str!` as `include_str!`.

use proc_macro2::{Delimiter, Ident, Span, TokenStream, TokenTree};

/// Inner attributes that act on the module alone, the same whether the
/// module is a crate root or not.
const MODULE_LEVEL_INNER_ATTRS: &[&str] = &[
    "allow", "warn", "deny", "forbid", "expect", "doc", "rustfmt", "clippy",
];

/// What the walk found, for the caller's rules to judge.
pub(crate) enum Found<'a> {
    /// `#[...]` or `#![...]`, with the tokens inside the brackets and
    /// where its `#` is.
    Attr(TokenStream, Span),
    /// An identifier and where it is, so the rules can look at its
    /// neighbours.
    Ident(&'a Tokens, usize, String),
    /// An inner attribute at file level that does not act on the module
    /// alone (`#![no_std]`, `#![feature(..)]`): as a module of a shared
    /// crate, or as an example, it would act on another crate root than it
    /// does alone.
    CrateAttr(TokenStream, Span),
}

/// One level of a token tree, indexable, for looking at neighbours.
pub(crate) struct Tokens(Vec<TokenTree>);

impl Tokens {
    pub(crate) fn get(&self, i: usize) -> Option<&TokenTree> {
        self.0.get(i)
    }

    pub(crate) fn punct(&self, i: usize, c: char) -> bool {
        matches!(self.get(i), Some(TokenTree::Punct(p)) if p.as_char() == c)
    }

    pub(crate) fn ident(&self, i: usize) -> Option<String> {
        match self.get(i) {
            Some(TokenTree::Ident(id)) => Some(ident_name(id)),
            _ => None,
        }
    }

    /// Where token `i` is.
    pub(crate) fn span(&self, i: usize) -> Span {
        self.get(i).map_or_else(Span::call_site, TokenTree::span)
    }
}

/// The first finding `rules` keep in a lexed source, crate-level
/// attributes included (as [`Found::CrateAttr`]).
pub(crate) fn first_finding<R>(
    tokens: TokenStream,
    rules: &dyn Fn(Found<'_>) -> Option<R>,
) -> Option<R> {
    walk(tokens, true, rules)
}

fn walk<R>(
    tokens: TokenStream,
    file_level: bool,
    rules: &dyn Fn(Found<'_>) -> Option<R>,
) -> Option<R> {
    let tokens = Tokens(tokens.into_iter().collect());
    for (i, token) in tokens.0.iter().enumerate() {
        let why = match token {
            TokenTree::Punct(p) if p.as_char() == '#' => {
                let inner = tokens.punct(i + 1, '!');
                match tokens.get(if inner { i + 2 } else { i + 1 }) {
                    Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Bracket => {
                        if inner && file_level && !is_module_level(g.stream()) {
                            rules(Found::CrateAttr(g.stream(), p.span()))
                        } else {
                            rules(Found::Attr(g.stream(), p.span()))
                        }
                    }
                    _ => None,
                }
            }
            TokenTree::Ident(id) => rules(Found::Ident(&tokens, i, ident_name(id))),
            TokenTree::Group(group) => walk(group.stream(), false, rules),
            _ => None,
        };
        if why.is_some() {
            return why;
        }
    }
    None
}

fn is_module_level(attr: TokenStream) -> bool {
    match attr.into_iter().next() {
        Some(TokenTree::Ident(ident)) => {
            MODULE_LEVEL_INNER_ATTRS.contains(&ident_name(&ident).as_str())
        }
        _ => false,
    }
}

/// An identifier as name resolution sees it: `r#path` is `path`.
pub(crate) fn ident_name(ident: &Ident) -> String {
    let name = ident.to_string();
    match name.strip_prefix("r#") {
        Some(bare) => bare.to_owned(),
        None => name,
    }
}

/// Whether an attribute names one of `names` anywhere inside it
/// (`no_mangle`, `unsafe(no_mangle)`, `cfg_attr(x, export_name = "f")`).
pub(crate) fn names_any(attr: TokenStream, names: &[&str]) -> bool {
    attr.into_iter().any(|t| match t {
        TokenTree::Ident(ident) => names.contains(&ident_name(&ident).as_str()),
        TokenTree::Group(group) => names_any(group.stream(), names),
        _ => false,
    })
}
