//! Fingerprint and dedup: pure functions, no IO.
//!
//! Two fingerprints are computed for every candidate:
//!
//! - The **exact** fingerprint is a hash of the candidate's token stream with
//!   doc attributes dropped and runs of order-free attributes (`#[inline]`,
//!   `#[allow(..)]`, `#[derive(..)]`, ...) sorted. Lexing already throws away
//!   whitespace, comments and formatting, and doc comments arrive as
//!   `#[doc = "..."]` attributes that are skipped here. Names and literal
//!   values count; so does the spacing of puncts (`a && b` is not
//!   `a & &b`). No syntax tree is built for it (extraction has already
//!   proved the text parses). It is computed by a hand-written lexer
//!   (module `lex`) that writes the encoding straight from the text, with
//!   no token stream and no allocation; where that lexer is unsure (any
//!   non-ASCII character outside strings and comments, any input
//!   `proc_macro2` might reject) it says so and the fingerprint is taken
//!   from a `proc_macro2` token stream instead (`feed`), which is also the
//!   reference the fast lexer is tested to match bit for bit.
//! - The **alpha** fingerprint (module `alpha`) renames every local binding
//!   and function parameter by its position of binding within its function,
//!   on the token stream (a `syn` tree only for files it cannot follow), then
//!   hashes the result like the exact one.
//!   `fn f(a: u32) -> u32 { a + 1 }` and `fn f(x: u32) -> u32 { x + 1 }`
//!   share it. Items, fields, methods, paths and literals keep their names.
//!
//! The spec chooses which one groups candidates (`spec::DedupBy`); both are stored.

use std::collections::HashMap;
use std::fmt;

use proc_macro2::{Delimiter, TokenStream, TokenTree};

use crate::spec::DedupBy;

mod alpha;
mod lex;

pub use alpha::alpha_fingerprint;

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

/// Both fingerprints of one candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprints {
    pub exact: Fingerprint,
    /// `None` only if the file needs the `syn` renamer and `syn` cannot
    /// parse what the lexer accepted.
    pub alpha: Option<Fingerprint>,
}

/// How one candidate is grouped, by each fingerprint: the first earlier
/// candidate with the same fingerprint, or `None` when it is the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Grouping {
    pub exact_dup_of: Option<usize>,
    pub alpha_dup_of: Option<usize>,
}

/// The exact fingerprint of a source file, or `None` if it does not lex.
pub fn fingerprint(source: &str) -> Option<Fingerprint> {
    match lex::fingerprint(source) {
        Ok(fp) => Some(fp),
        Err(lex::Unknown) => fingerprint_by_token_stream(source),
    }
}

/// The exact fingerprint computed through a `proc_macro2::TokenStream`: the
/// reference the fast lexer is tested against and the path it falls back
/// to. Public for the benchmark; [`fingerprint`] is the one to call.
pub fn fingerprint_by_token_stream(source: &str) -> Option<Fingerprint> {
    let tokens: TokenStream = source.parse().ok()?;
    Some(hash_tokens(tokens))
}

/// The exact fingerprint by the fast lexer alone: `None` where it does not
/// know (the input may or may not lex) and [`fingerprint`] falls back.
/// Public for the benchmark, which counts the fallbacks.
pub fn fingerprint_fast_only(source: &str) -> Option<Fingerprint> {
    lex::fingerprint(source).ok()
}

/// Both fingerprints, or `None` if the source does not lex. The source is
/// lexed into a token stream once, which the alpha fingerprint renames; the
/// exact one takes the fast lexer and reuses that stream only where it falls
/// back.
pub fn fingerprints(source: &str) -> Option<Fingerprints> {
    let tokens: TokenStream = source.parse().ok()?;
    let exact = match lex::fingerprint(source) {
        Ok(fp) => fp,
        Err(lex::Unknown) => hash_tokens(tokens.clone()),
    };
    Some(Fingerprints {
        alpha: alpha::alpha_fingerprint_of(tokens),
        exact,
    })
}

/// Groups candidates by both fingerprints at once. A candidate without an
/// alpha fingerprint is grouped by its exact one in both columns, so no
/// candidate is ever grouped more loosely than the exact fingerprint says.
pub fn group(fingerprints: &[Option<Fingerprints>]) -> Vec<Grouping> {
    let exact: Vec<Option<Fingerprint>> = fingerprints.iter().map(|f| f.map(|f| f.exact)).collect();
    // A missing alpha fingerprint falls back to the exact one, tagged so it
    // can never equal a real alpha fingerprint.
    let alpha: Vec<Option<Fingerprint>> = fingerprints
        .iter()
        .map(|f| f.map(|f| f.alpha.unwrap_or_else(|| f.exact.tagged(0xff))))
        .collect();
    duplicates(&exact)
        .into_iter()
        .zip(duplicates(&alpha))
        .map(|(exact_dup_of, alpha_dup_of)| Grouping {
            exact_dup_of,
            alpha_dup_of,
        })
        .collect()
}

impl Grouping {
    /// The representative this candidate points to under `by`.
    pub fn dup_of(&self, by: DedupBy) -> Option<usize> {
        match by {
            DedupBy::Exact => self.exact_dup_of,
            DedupBy::Alpha => self.alpha_dup_of,
        }
    }
}

/// The size of each group under the given representative map: for every
/// candidate that heads a group (`dup_of` is `None` and it has a
/// fingerprint), how many candidates the group holds, itself included.
pub fn group_sizes(dup_of: &[Option<usize>], has_fingerprint: &[bool]) -> Vec<(usize, usize)> {
    let mut sizes: Vec<usize> = vec![0; dup_of.len()];
    for (i, d) in dup_of.iter().enumerate() {
        if !has_fingerprint[i] {
            continue;
        }
        sizes[d.unwrap_or(i)] += 1;
    }
    sizes
        .into_iter()
        .enumerate()
        .filter(|(i, n)| *n > 0 && dup_of[*i].is_none())
        .collect()
}

impl Fingerprint {
    fn tagged(mut self, tag: u8) -> Fingerprint {
        self.0[0] ^= tag;
        self.0[15] ^= tag;
        self
    }
}

/// Hashes a token stream the way both fingerprints do. The encoding is
/// built in one buffer and hashed once: hashing token by token costs more
/// than the lexing.
fn hash_tokens(tokens: TokenStream) -> Fingerprint {
    let mut buf = Vec::with_capacity(4096);
    feed(&mut buf, tokens);
    let mut out = [0u8; 16];
    out.copy_from_slice(&blake3::hash(&buf).as_bytes()[..16]);
    Fingerprint(out)
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

/// Attributes whose relative order never changes a program's meaning. A
/// run of consecutive attributes is hashed as a sorted set when every one of
/// them is in this list; otherwise in source order (attribute macros may
/// depend on their order).
const ORDER_FREE_ATTRIBUTES: &[&str] = &[
    "allow",
    "warn",
    "deny",
    "forbid",
    "expect",
    "inline",
    "cold",
    "must_use",
    "derive",
    "cfg",
    "track_caller",
    "non_exhaustive",
    "repr",
    "rustfmt",
    "clippy",
    "no_mangle",
    "deprecated",
];

/// Hashes a token stream. Every token is written with a one-byte tag and a
/// terminator, so the encoding is unambiguous (`a b` never hashes like `ab`):
/// a group as `G` + open delimiter .. `g` + close delimiter, an identifier
/// as `I` + its text + 0, a punct as `P` + its char + 1 if `Joint`, a
/// literal as `L` + its text + 0, and an attribute run as `A` + the blake3
/// hash of each attribute. `lex` writes exactly these bytes.
fn feed(hasher: &mut Vec<u8>, tokens: TokenStream) {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < trees.len() {
        if attribute_len(&trees[i..]).is_some() {
            i = feed_attribute_run(hasher, &trees, i);
            continue;
        }
        feed_tree(hasher, &trees[i]);
        i += 1;
    }
}

fn feed_tree(hasher: &mut Vec<u8>, tree: &TokenTree) {
    use std::io::Write as _;
    match tree {
        TokenTree::Group(group) => {
            let (open, close) = match group.delimiter() {
                Delimiter::Parenthesis => (b'(', b')'),
                Delimiter::Brace => (b'{', b'}'),
                Delimiter::Bracket => (b'[', b']'),
                Delimiter::None => (b'<', b'>'),
            };
            hasher.extend_from_slice(&[b'G', open]);
            feed(hasher, group.stream());
            hasher.extend_from_slice(&[b'g', close]);
        }
        TokenTree::Ident(ident) => {
            hasher.push(b'I');
            let _ = write!(hasher, "{ident}");
            hasher.push(0);
        }
        TokenTree::Punct(punct) => {
            let joint = matches!(punct.spacing(), proc_macro2::Spacing::Joint);
            let mut buf = [0u8; 4];
            hasher.push(b'P');
            hasher.extend_from_slice(punct.as_char().encode_utf8(&mut buf).as_bytes());
            hasher.push(joint as u8);
        }
        TokenTree::Literal(lit) => {
            hasher.push(b'L');
            let _ = write!(hasher, "{lit}");
            hasher.push(0);
        }
    }
}

/// Hashes the run of attributes starting at `trees[start]` and returns the
/// index after it. Doc attributes are dropped; the others are hashed one by
/// one and fed sorted when the whole run is order-free.
fn feed_attribute_run(hasher: &mut Vec<u8>, trees: &[TokenTree], start: usize) -> usize {
    let mut i = start;
    let mut hashes: Vec<[u8; 32]> = Vec::new();
    let mut order_free = true;
    while let Some(len) = attribute_len(&trees[i..]) {
        let attr = &trees[i..i + len];
        i += len;
        let TokenTree::Group(body) = &attr[len - 1] else {
            unreachable!("attribute_len ends at the bracket group")
        };
        let name = match body.stream().into_iter().next() {
            Some(TokenTree::Ident(ident)) => ident.to_string(),
            _ => String::new(),
        };
        if name == "doc" {
            continue;
        }
        order_free &= ORDER_FREE_ATTRIBUTES.contains(&name.as_str());
        let mut sub = Vec::new();
        for tree in attr {
            feed_tree(&mut sub, tree);
        }
        hashes.push(*blake3::hash(&sub).as_bytes());
    }
    if order_free {
        hashes.sort_unstable();
    }
    for h in &hashes {
        hasher.push(b'A');
        hasher.extend_from_slice(h);
    }
    i
}

/// When `trees` starts with an attribute (`#[...]` or `#![...]`), its
/// length in token trees.
fn attribute_len(trees: &[TokenTree]) -> Option<usize> {
    let TokenTree::Punct(hash) = trees.first()? else {
        return None;
    };
    if hash.as_char() != '#' {
        return None;
    }
    let bracket_at = match trees.get(1)? {
        TokenTree::Punct(bang) if bang.as_char() == '!' => 2,
        _ => 1,
    };
    match trees.get(bracket_at)? {
        TokenTree::Group(g) if g.delimiter() == Delimiter::Bracket => Some(bracket_at + 1),
        _ => None,
    }
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
    fn order_free_attributes_may_come_in_any_order() {
        let a = format!("#[inline]\n#[must_use]\n#[allow(unused)]\n{BASE}");
        let b = format!("#[allow(unused)]\n#[must_use]\n/// doc between\n#[inline]\n{BASE}");
        assert!(same(&a, &b));
        // Other attributes (macros, say) keep their order.
        let c = format!("#[inline]\n#[my_macro]\n{BASE}");
        let d = format!("#[my_macro]\n#[inline]\n{BASE}");
        assert!(!same(&c, &d));
        // A different set is a different program.
        assert!(!same(&a, &format!("#[inline]\n#[must_use]\n{BASE}")));
    }

    #[test]
    fn group_sizes_count_each_group() {
        let dups = [None, None, Some(0), None, Some(0), Some(1)];
        let has = [true, true, true, false, true, true];
        assert_eq!(group_sizes(&dups, &has), vec![(0, 3), (1, 2)]);
    }

    #[test]
    fn grouping_keeps_both_views() {
        let fp = |s: &str| fingerprints(s);
        let a = fp("fn f(a: u32) -> u32 { a + 1 }");
        let b = fp("fn f(x: u32) -> u32 { x + 1 }");
        let c = fp("fn f(a: u32) -> u32 {\n a + 1 }");
        let g = group(&[a, b, c, None]);
        assert_eq!(g[1].exact_dup_of, None);
        assert_eq!(g[1].alpha_dup_of, Some(0));
        assert_eq!(g[2].exact_dup_of, Some(0));
        assert_eq!(g[2].alpha_dup_of, Some(0));
        assert_eq!(g[3], Grouping::default());
        assert_eq!(g[1].dup_of(DedupBy::Exact), None);
        assert_eq!(g[1].dup_of(DedupBy::Alpha), Some(0));
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
