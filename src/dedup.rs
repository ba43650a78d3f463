//! Fingerprint and dedup: pure functions.
//!
//! The exact fingerprint is a hash of the candidate's token stream with doc
//! attributes dropped. Lexing already throws away whitespace, comments and
//! formatting, and doc comments arrive as `#[doc = "..."]` attributes that
//! are skipped here, so two sources that differ only in those hash alike.
//! Lexing is several times faster than a full `syn` parse, and extraction has
//! already proved the text parses.

use std::collections::HashMap;
use std::fmt;

use proc_macro2::{Delimiter, TokenStream, TokenTree};

/// A 128-bit fingerprint, shown and stored as 32 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint([u8; 16]);

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// The exact fingerprint of a source file, or `None` if it does not lex.
pub fn fingerprint(source: &str) -> Option<Fingerprint> {
    let tokens: TokenStream = source.parse().ok()?;
    let mut hasher = blake3::Hasher::new();
    feed(&mut hasher, tokens);
    let mut out = [0u8; 16];
    out.copy_from_slice(&hasher.finalize().as_bytes()[..16]);
    Some(Fingerprint(out))
}

/// For each candidate, the index of the first earlier candidate with the same
/// fingerprint (`None` for the first of its group and for candidates without
/// a fingerprint).
pub fn duplicates(fingerprints: &[Option<Fingerprint>]) -> Vec<Option<usize>> {
    let mut first: HashMap<Fingerprint, usize> = HashMap::new();
    fingerprints
        .iter()
        .enumerate()
        .map(|(i, fp)| {
            let fp = (*fp)?;
            match first.get(&fp) {
                Some(&rep) => Some(rep),
                None => {
                    first.insert(fp, i);
                    None
                }
            }
        })
        .collect()
}

/// Hashes a token stream. Every token is written with a one-byte tag and a
/// terminator, so the encoding is unambiguous (`a b` never hashes like `ab`).
fn feed(hasher: &mut blake3::Hasher, tokens: TokenStream) {
    let mut iter = tokens.into_iter().peekable();
    while let Some(tree) = iter.next() {
        if is_doc_attribute_start(&tree, &mut iter) {
            continue;
        }
        match tree {
            TokenTree::Group(group) => {
                let (open, close) = match group.delimiter() {
                    Delimiter::Parenthesis => (b'(', b')'),
                    Delimiter::Brace => (b'{', b'}'),
                    Delimiter::Bracket => (b'[', b']'),
                    Delimiter::None => (b'<', b'>'),
                };
                hasher.update(&[b'G', open]);
                feed(hasher, group.stream());
                hasher.update(&[b'g', close]);
            }
            TokenTree::Ident(ident) => {
                hasher.update(b"I");
                hasher.update(ident.to_string().as_bytes());
                hasher.update(&[0]);
            }
            TokenTree::Punct(punct) => {
                let joint = matches!(punct.spacing(), proc_macro2::Spacing::Joint);
                hasher.update(&[b'P', punct.as_char() as u8, joint as u8]);
            }
            TokenTree::Literal(lit) => {
                hasher.update(b"L");
                hasher.update(lit.to_string().as_bytes());
                hasher.update(&[0]);
            }
        }
    }
}

/// When `tree` is the `#` of `#[doc ...]` or `#![doc ...]`, consumes the rest
/// of the attribute and says so.
fn is_doc_attribute_start(
    tree: &TokenTree,
    iter: &mut std::iter::Peekable<proc_macro2::token_stream::IntoIter>,
) -> bool {
    let TokenTree::Punct(p) = tree else {
        return false;
    };
    if p.as_char() != '#' {
        return false;
    }
    // `#!` of an inner attribute: look past the `!` without consuming it
    // unless the attribute turns out to be a doc attribute.
    let mut lookahead = iter.clone();
    let mut bang = false;
    if let Some(TokenTree::Punct(q)) = lookahead.peek() {
        if q.as_char() == '!' {
            bang = true;
            lookahead.next();
        }
    }
    let Some(TokenTree::Group(g)) = lookahead.peek() else {
        return false;
    };
    if g.delimiter() != Delimiter::Bracket {
        return false;
    }
    let is_doc = matches!(g.stream().into_iter().next(), Some(TokenTree::Ident(i)) if i == "doc");
    if is_doc {
        if bang {
            iter.next();
        }
        iter.next();
    }
    is_doc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(a: &str, b: &str) -> bool {
        fingerprint(a).unwrap() == fingerprint(b).unwrap()
    }

    const BASE: &str = "pub fn solve(x: u32) -> u32 { let y = x + 1; y * 2 }";

    #[test]
    fn whitespace_and_formatting_are_ignored() {
        assert!(same(
            BASE,
            "pub fn solve(x:u32)->u32{\n    let y = x+1;\n    y*2\n}\n"
        ));
    }

    #[test]
    fn comments_are_ignored() {
        assert!(same(
            BASE,
            "// adds one\npub fn solve(x: u32) -> u32 { /* then */ let y = x + 1; y * 2 }"
        ));
    }

    #[test]
    fn doc_comments_and_doc_attributes_are_ignored() {
        assert!(same(BASE, &format!("/// Adds one, doubles.\n{BASE}")));
        assert!(same(BASE, &format!("/** block doc */\n{BASE}")));
        assert!(same(BASE, &format!("#[doc = \"x\"]\n{BASE}")));
        assert!(same(BASE, &format!("//! module doc\n{BASE}")));
        assert!(same(BASE, &format!("#![doc = \"inner\"]\n{BASE}")));
    }

    #[test]
    fn other_attributes_count() {
        assert!(!same(BASE, &format!("#[inline]\n{BASE}")));
        assert!(!same(BASE, &format!("#![allow(unused)]\n{BASE}")));
    }

    #[test]
    fn names_literals_and_operators_count() {
        assert!(!same(BASE, &BASE.replace("y", "z")));
        assert!(!same(BASE, &BASE.replace("1", "2")));
        assert!(!same(BASE, &BASE.replace("*", "+")));
        assert!(!same("fn a() { b c }", "fn a() { bc }"));
        assert!(!same("fn a() { (b) }", "fn a() { [b] }"));
    }

    #[test]
    fn unlexable_source_has_no_fingerprint() {
        assert!(fingerprint("fn a() { \"unterminated }").is_none());
    }

    #[test]
    fn duplicates_point_at_the_first_of_their_group() {
        let a = fingerprint("fn a() {}");
        let b = fingerprint("fn b() {}");
        assert_eq!(
            duplicates(&[a, b, None, a, b, a]),
            vec![None, None, None, Some(0), Some(1), Some(0)]
        );
    }

    #[test]
    fn display_is_32_hex_digits() {
        let s = fingerprint(BASE).unwrap().to_string();
        assert_eq!(s.len(), 32);
        assert!(s.chars().all(|c| c.is_ascii_hexdigit()));
    }
}
