//! The token walk behind `fast::needs_own_crate` and `wide::needs_link`.
//! Both ask whether a candidate's source holds something whose effect
//! reaches past its own module (a crate-level attribute, a symbol
//! attribute, an extern block, assembly); they differ only in which
//! attributes and words count. The walk lexes the source once, descends
//! into every group, and hands each attribute and each identifier to the
//! caller's rules, stopping at the first reason the rules give.

use proc_macro2::{Delimiter, TokenStream, TokenTree};

/// Inner attributes that act on the module alone, the same whether the
/// module is a crate root or not.
const MODULE_LEVEL_INNER_ATTRS: &[&str] = &[
    "allow", "warn", "deny", "forbid", "expect", "doc", "rustfmt", "clippy",
];

/// What the walk found, for the caller's rules to judge.
pub(super) enum Found<'a> {
    /// `#[...]` or `#![...]`, with the tokens inside the brackets.
    Attr(TokenStream),
    /// An identifier and where it is, so the rules can look at its
    /// neighbours.
    Ident(&'a Tokens, usize, String),
}

/// One level of a token tree, indexable, for looking at neighbours.
pub(super) struct Tokens(Vec<TokenTree>);

impl Tokens {
    pub(super) fn get(&self, i: usize) -> Option<&TokenTree> {
        self.0.get(i)
    }

    pub(super) fn punct(&self, i: usize, c: char) -> bool {
        matches!(self.get(i), Some(TokenTree::Punct(p)) if p.as_char() == c)
    }

    pub(super) fn ident(&self, i: usize) -> Option<String> {
        match self.get(i) {
            Some(TokenTree::Ident(id)) => Some(id.to_string()),
            _ => None,
        }
    }
}

/// The first reason `rules` gives for anything in `source`, or `None`.
/// An inner attribute at file level that does not act on the module alone
/// is a reason of its own ("crate-level attribute"): as a module of a
/// shared crate, or as an example, it would act on another crate root than
/// it does alone. A source that does not lex is a reason too.
pub(super) fn first_reason(
    source: &str,
    rules: &dyn Fn(Found<'_>) -> Option<&'static str>,
) -> Option<&'static str> {
    match source.parse::<TokenStream>() {
        Ok(tokens) => walk(tokens, true, rules),
        Err(_) => Some("does not lex"),
    }
}

fn walk(
    tokens: TokenStream,
    file_level: bool,
    rules: &dyn Fn(Found<'_>) -> Option<&'static str>,
) -> Option<&'static str> {
    let tokens = Tokens(tokens.into_iter().collect());
    for (i, token) in tokens.0.iter().enumerate() {
        let why = match token {
            TokenTree::Punct(p) if p.as_char() == '#' => {
                let inner = tokens.punct(i + 1, '!');
                match tokens.get(if inner { i + 2 } else { i + 1 }) {
                    Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Bracket => {
                        if inner && file_level && !is_module_level(g.stream()) {
                            Some("crate-level attribute")
                        } else {
                            rules(Found::Attr(g.stream()))
                        }
                    }
                    _ => None,
                }
            }
            TokenTree::Ident(id) => rules(Found::Ident(&tokens, i, id.to_string())),
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
            MODULE_LEVEL_INNER_ATTRS.contains(&ident.to_string().as_str())
        }
        _ => false,
    }
}

/// Whether an attribute names one of `names` anywhere inside it
/// (`no_mangle`, `unsafe(no_mangle)`, `cfg_attr(x, export_name = "f")`).
pub(super) fn names_any(attr: TokenStream, names: &[&str]) -> bool {
    attr.into_iter().any(|t| match t {
        TokenTree::Ident(ident) => names.contains(&ident.to_string().as_str()),
        TokenTree::Group(group) => names_any(group.stream(), names),
        _ => false,
    })
}
