//! Paths that leave the source's own module (`Rule::OuterPath`).
//!
//! In a shared image every program is a module of one crate, so whatever
//! names the crate root names every other program through it. A source may
//! climb with `super` only as far as its own top level (counted by the
//! `mod NAME { .. }` levels the walk descends through), and may say
//! `crate` only as a visibility (`pub(crate)`, `pub(in crate)`, harmless:
//! a build-mate would still have to name the item), in `extern crate NAME`,
//! or at the start of a path, which `rebase_crate_paths` maps onto the
//! program's own module. `$crate` and `extern crate self` are refused
//! outright.
//!
//! A macro's tokens are another matter: a `macro_rules!` of the source can
//! take `crate` or `super` as a token and put it anywhere (`m!(super)` into
//! `$k::$k::x`, or `crate::c0::x` back into `crate::x`), and can drop a
//! `mod` it was handed. So in a source that defines a macro, inside any
//! macro call's or definition's tokens every `crate` is refused and every
//! `super` is judged as if at the top level. In a source that defines none,
//! every macro it calls is the standard library's, whose macros take
//! expressions, patterns and items and never splice a path out of tokens,
//! or one the harness exports, which the task's author vouches for; so
//! their arguments count as plain code.

use proc_macro2::{Delimiter, Spacing, Span, TokenStream, TokenTree};

use super::scan::{ident_name, names_any};

/// A path out of the source's own module: where it starts, as written.
pub(super) struct OuterPath {
    pub(super) span: Span,
    pub(super) what: String,
}

/// Words that can stand before `!(..)` without naming a macro
/// (`if !(a && b)`).
const KEYWORDS: &[&str] = &[
    "if", "while", "match", "return", "in", "break", "yield", "let", "else",
];

/// Where one level of tokens sits.
#[derive(Clone, Copy, Default)]
struct Place {
    /// The `mod NAME { .. }` levels around it, within the source.
    depth: usize,
    /// Inside a macro's call or definition, in a source that defines a
    /// macro: its tokens may be rearranged.
    in_macro: bool,
    /// The `super`s of the `use` prefix a brace group continues
    /// (`use super::{super::x}`).
    carried: usize,
    /// A visibility's parentheses (`pub(crate)`, `pub(in crate)`).
    visibility: bool,
}

/// The first path in `tokens` that leaves the source's own module.
pub(super) fn first_outer_path(tokens: TokenStream) -> Option<OuterPath> {
    let macros = names_any(tokens.clone(), &["macro_rules", "macro"]);
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    level(&tokens, Place::default(), macros)
}

fn level(tokens: &[TokenTree], place: Place, macros: bool) -> Option<OuterPath> {
    for (i, token) in tokens.iter().enumerate() {
        let found = match token {
            TokenTree::Ident(id) => match ident_name(id).as_str() {
                "crate" => crate_word(tokens, i, place).map(|(at, what)| OuterPath {
                    span: tokens[at].span(),
                    what: what.to_owned(),
                }),
                "super" => climb(tokens, i, place),
                _ => None,
            },
            TokenTree::Group(group) => {
                let inner: Vec<TokenTree> = group.stream().into_iter().collect();
                level(&inner, place.inside(tokens, i, macros), macros)
            }
            _ => None,
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// Why a `crate` at `i` is refused, and where that starts (`$crate` at
/// its `$`), or `None` when it is harmless or rebased.
fn crate_word(tokens: &[TokenTree], i: usize, place: Place) -> Option<(usize, &'static str)> {
    if i > 0 && punct(tokens, i - 1, '$') {
        return Some((i - 1, "$crate"));
    }
    if place.in_macro {
        return Some((i, "crate"));
    }
    if i > 0 && ident(tokens, i - 1).as_deref() == Some("extern") {
        let self_ = ident(tokens, i + 1).as_deref() == Some("self");
        return self_.then_some((i - 1, "extern crate self"));
    }
    if crate_starts_a_path(tokens, i) {
        return None;
    }
    let alone = tokens.len() == 1;
    let after_in = tokens.len() == 2 && i == 1 && ident(tokens, 0).as_deref() == Some("in");
    if place.visibility && (alone || after_in) {
        return None;
    }
    Some((i, "crate"))
}

/// Whether the `crate` at `i` starts a path (`crate::x`, `use crate as
/// c`), as `rebase_crate_paths` rebases it: not `$crate`, not `extern
/// crate`. One definition for both, so the check and the rebase agree.
pub(super) fn crate_starts_a_path(tokens: &[TokenTree], i: usize) -> bool {
    let after = |word: &str| i > 0 && ident(tokens, i - 1).as_deref() == Some(word);
    let dollar = i > 0 && punct(tokens, i - 1, '$');
    let renamed = ident(tokens, i + 1).as_deref() == Some("as");
    !dollar && !after("extern") && (path_separator(tokens, i + 1) || renamed)
}

/// A `super` at `i` whose path climbs above the source's top level.
fn climb(tokens: &[TokenTree], i: usize, place: Place) -> Option<OuterPath> {
    let (supers, start) = chain(tokens, i, place)?;
    let depth = if place.in_macro { 0 } else { place.depth };
    (supers > depth).then(|| OuterPath {
        span: tokens[start].span(),
        what: (start..=i)
            .filter_map(|j| ident(tokens, j))
            .collect::<Vec<_>>()
            .join("::"),
    })
}

/// The `self`/`super` chain of a path that ends at `end`: how many
/// `super`s it climbs (with those of the `use` prefix its group continues)
/// and where it starts. `None` when `end` is neither word.
fn chain(tokens: &[TokenTree], end: usize, place: Place) -> Option<(usize, usize)> {
    let step = |j: usize| match ident(tokens, j).as_deref() {
        Some("super") => Some(1),
        Some("self") => Some(0),
        _ => None,
    };
    let mut supers = step(end)?;
    let mut start = end;
    while start >= 3 && path_separator(tokens, start - 2) {
        match step(start - 3) {
            Some(n) => {
                supers += n;
                start -= 3;
            }
            None => break,
        }
    }
    if start == 0 || punct(tokens, start - 1, ',') {
        supers += place.carried;
    }
    Some((supers, start))
}

impl Place {
    /// The place of the group at `tokens[i]`.
    fn inside(self, tokens: &[TokenTree], i: usize, macros: bool) -> Place {
        let TokenTree::Group(group) = &tokens[i] else {
            return self;
        };
        let mut inner = Place {
            carried: 0,
            visibility: false,
            ..self
        };
        let before = |k: usize| i.checked_sub(k).and_then(|j| ident(tokens, j));
        match group.delimiter() {
            Delimiter::Brace
                if !self.in_macro && before(1).is_some() && before(2).as_deref() == Some("mod") =>
            {
                inner.depth += 1;
            }
            Delimiter::Brace if i >= 3 && path_separator(tokens, i - 2) => {
                inner.carried = chain(tokens, i - 3, self).map_or(0, |(supers, _)| supers);
            }
            Delimiter::Parenthesis if before(1).as_deref() == Some("pub") => {
                inner.visibility = true;
            }
            _ => {}
        }
        if macros && is_macro_body(tokens, i) {
            inner.in_macro = true;
        }
        inner
    }
}

/// Whether the group at `i` is a macro call's arguments (`name!(..)`) or a
/// `macro_rules! name { .. }` definition.
fn is_macro_body(tokens: &[TokenTree], i: usize) -> bool {
    let ident_before = |k: usize| i.checked_sub(k).and_then(|j| ident(tokens, j));
    let call = i >= 1
        && punct(tokens, i - 1, '!')
        && ident_before(2).is_some_and(|name| !KEYWORDS.contains(&name.as_str()));
    let definition = i >= 3
        && ident_before(1).is_some()
        && punct(tokens, i - 2, '!')
        && ident_before(3).as_deref() == Some("macro_rules");
    call || definition
}

/// `::` starting at `i` (two `:` puncts, the first joined to the second).
fn path_separator(tokens: &[TokenTree], i: usize) -> bool {
    matches!(tokens.get(i), Some(TokenTree::Punct(p)) if p.as_char() == ':' && p.spacing() == Spacing::Joint)
        && punct(tokens, i + 1, ':')
}

fn punct(tokens: &[TokenTree], i: usize, c: char) -> bool {
    matches!(tokens.get(i), Some(TokenTree::Punct(p)) if p.as_char() == c)
}

fn ident(tokens: &[TokenTree], i: usize) -> Option<String> {
    match tokens.get(i) {
        Some(TokenTree::Ident(id)) => Some(ident_name(id)),
        _ => None,
    }
}
