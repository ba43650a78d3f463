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

use proc_macro2::{TokenStream, TokenTree};

use super::reach::crate_starts_a_path;

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
