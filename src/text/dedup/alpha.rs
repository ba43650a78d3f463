//! The alpha-renamed fingerprint: locals and parameters renamed by position.
//!
//! Inside every function body each local binding (parameters, `let`,
//! `let ... else`, closure parameters, `match`, `if let`, `while let` and
//! `for` patterns, `@` bindings, struct pattern shorthand) is replaced by the
//! order in which the function binds it, and every use by the position of
//! the binding it refers to, through a stack of scopes: shadowing
//! (`let x = x + 1`, whose initializer sees the outer `x`), closures and
//! nested functions (fresh numbering) are followed. Items, fields, methods,
//! paths, macro names, labels, types and literals keep their spelling. The
//! result is hashed like the exact fingerprint.
//!
//! The renaming works on the token stream the lexer produced (`tokens`): no
//! syntax tree is built, which keeps it within a small factor of lexing.
//! Where that pass meets a construct it does not model it gives up and the
//! file is renamed on a `syn` tree instead (`syn_renamer`, also the
//! reference in the tests). The two hash differently tagged streams, so a
//! file that fell back never shares a group with one that did not: that can
//! only keep equivalent candidates apart, never merge different ones.
//!
//! Deliberately conservative: identifier patterns that start with an
//! upper-case letter (`None`, `MAX`) or that a const, static, struct, enum,
//! union, variant or top-level item of the file is named after are taken as
//! paths and never bound; struct literal shorthand `P { x }` keeps its field
//! name. Inside macro calls the identifiers bound in scope are renamed as
//! tokens (not after `.` or `'`, next to `::` or before `!`), and so are
//! implicit format arguments (`"{x}"`, `"{x:>4}"`, `"{x:w$}"`) in string
//! literals. Where the token renamer deliberately differs from the `syn` one
//! (always to be sound where the latter is not, or to group what it misses)
//! is listed in the tests.
//! Known limits shared with the reference: a macro that prints its tokens
//! (`stringify!`, `assert!`'s message) or a string literal that only looks
//! like a format string inside a macro is renamed all the same, and a
//! user macro that expands to a `let` is not seen as a binding.

use proc_macro2::TokenStream;

use super::Fingerprint;

mod syn_renamer;
mod tokens;

/// The alpha-renamed fingerprint of a source file, or `None` if it does not
/// lex, or needs the `syn` renamer and `syn` does not parse it.
pub fn alpha_fingerprint(source: &str) -> Option<Fingerprint> {
    alpha_fingerprint_of(source.parse().ok()?)
}

/// The alpha-renamed fingerprint of an already lexed file.
pub(super) fn alpha_fingerprint_of(tokens: TokenStream) -> Option<Fingerprint> {
    match tokens::fingerprint(tokens) {
        Ok(fp) => Some(fp),
        Err(flat) => syn_renamer::fingerprint(flat.to_source().parse().ok()?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alpha_same(a: &str, b: &str) -> bool {
        alpha_fingerprint(a).unwrap() == alpha_fingerprint(b).unwrap()
    }

    /// The token renamer's fingerprint, `None` where it falls back.
    fn token_fp(s: &str) -> Option<Fingerprint> {
        tokens::fingerprint(s.parse().unwrap()).ok()
    }

    /// The reference renamer's fingerprint.
    fn syn_fp(s: &str) -> Fingerprint {
        syn_renamer::fingerprint(s.parse().unwrap()).unwrap()
    }

    fn syn_same(a: &str, b: &str) -> bool {
        syn_fp(a) == syn_fp(b)
    }

    /// Pairs that are the same program up to renaming of locals.
    #[test]
    fn renamings_of_locals_group_together() {
        let pairs: &[(&str, &str)] = &[
            (
                "fn f(a: u32) -> u32 { a + 1 }",
                "fn f(x: u32) -> u32 { x + 1 }",
            ),
            (
                "fn f(v: u32) -> u32 { let y = v * 2; let z = y + 1; z }",
                "fn f(n: u32) -> u32 { let a = n * 2; let b = a + 1; b }",
            ),
            (
                "fn f(o: Option<u32>) -> u32 { match o { Some(v) if v > 2 => v, _ => 0 } }",
                "fn f(p: Option<u32>) -> u32 { match p { Some(k) if k > 2 => k, _ => 0 } }",
            ),
            (
                "fn f(xs: &[u32]) -> u32 { xs.iter().map(|x| x * 2).sum() }",
                "fn f(ys: &[u32]) -> u32 { ys.iter().map(|y| y * 2).sum() }",
            ),
            (
                "fn f(o: Option<u32>) -> u32 { if let Some(v) = o { v } else { 0 } }",
                "fn f(q: Option<u32>) -> u32 { if let Some(w) = q { w } else { 0 } }",
            ),
            (
                "fn f(n: u32) -> u32 { let mut t = 0; for i in 0..n { t += i; } t }",
                "fn f(m: u32) -> u32 { let mut s = 0; for j in 0..m { s += j; } s }",
            ),
            (
                "struct P { x: u32 } fn f(x: u32) -> P { P { x } }",
                "struct P { x: u32 } fn f(y: u32) -> P { P { x: y } }",
            ),
            (
                "struct P { x: u32 } fn f(p: P) -> u32 { let P { x } = p; x }",
                "struct P { x: u32 } fn f(q: P) -> u32 { let P { x: z } = q; z }",
            ),
            (
                "fn f(a: u32) -> String { assert!(a > 0); format!(\"{a} {}\", a + 1) }",
                "fn f(b: u32) -> String { assert!(b > 0); format!(\"{b} {}\", b + 1) }",
            ),
            (
                "fn f(a: u32) -> String { format!(\"{a:>4}\") }",
                "fn f(b: u32) -> String { format!(\"{b:>4}\") }",
            ),
            (
                "fn g(a: u32) -> u32 { a } fn f(b: u32) -> u32 { g(b) }",
                "fn g(z: u32) -> u32 { z } fn f(z: u32) -> u32 { g(z) }",
            ),
            (
                "impl S { fn f(&self, a: u32) -> u32 { self.k + a } }",
                "impl S { fn f(&self, b: u32) -> u32 { self.k + b } }",
            ),
        ];
        for (a, b) in pairs {
            assert!(
                token_fp(a).is_some() && token_fp(b).is_some(),
                "falls back: {a}"
            );
            assert!(alpha_same(a, b), "should group:\n  {a}\n  {b}");
            assert!(syn_same(a, b), "the reference should group:\n  {a}\n  {b}");
            assert_ne!(
                super::super::fingerprint(a),
                super::super::fingerprint(b),
                "the exact fingerprint should still tell them apart: {a}"
            );
        }
    }

    /// Pairs that differ in meaning and must stay apart.
    #[test]
    fn different_programs_stay_apart() {
        let pairs: &[(&str, &str)] = &[
            // Function, field, method and item names count.
            ("fn f(a: u32) -> u32 { a }", "fn g(a: u32) -> u32 { a }"),
            ("fn f(p: P) -> u32 { p.x }", "fn f(p: P) -> u32 { p.y }"),
            ("fn f(p: P) -> u32 { p.x() }", "fn f(p: P) -> u32 { p.y() }"),
            ("fn f() -> u32 { K }", "fn f() -> u32 { L }"),
            // Literals count.
            (
                "fn f(a: u32) -> u32 { a + 1 }",
                "fn f(a: u32) -> u32 { a + 2 }",
            ),
            // Which binding a use refers to counts.
            (
                "fn f(a: u32, b: u32) -> u32 { a - b }",
                "fn f(a: u32, b: u32) -> u32 { b - a }",
            ),
            // A use of an outer name before a local of that name is bound.
            (
                "fn f() -> u32 { x + { let x = 1; x } }",
                "fn f() -> u32 { y + { let x = 1; x } }",
            ),
            // A constant or variant in a pattern is not a binding.
            (
                "fn f(o: Option<u32>) -> u32 { match o { None => 0, Some(v) => v } }",
                "fn f(o: Option<u32>) -> u32 { match o { NONE => 0, Some(v) => v } }",
            ),
            // A binding that shadows a file-level const vs one that does not.
            (
                "const c: u32 = 1; fn f(o: u32) -> u32 { match o { c => 0, _ => 1 } }",
                "const c: u32 = 1; fn f(o: u32) -> u32 { match o { d => 0, _ => 1 } }",
            ),
            // Field shorthand names the field, which counts.
            (
                "fn f(x: u32) -> P { P { x } }",
                "fn f(y: u32) -> P { P { y } }",
            ),
            // Implicit format arguments that are not locals keep their names.
            (
                "fn f(a: u32) -> String { format!(\"{K}\") }",
                "fn f(a: u32) -> String { format!(\"{L}\") }",
            ),
        ];
        for (a, b) in pairs {
            assert!(
                token_fp(a).is_some() && token_fp(b).is_some(),
                "falls back: {a}"
            );
            assert!(!alpha_same(a, b), "should stay apart:\n  {a}\n  {b}");
        }
    }

    #[test]
    fn the_alpha_fingerprint_never_equals_the_exact_one() {
        let s = "fn f() {}";
        assert_ne!(alpha_fingerprint(s), super::super::fingerprint(s));
    }

    #[test]
    fn unparsable_source_has_no_alpha_fingerprint() {
        assert!(alpha_fingerprint("fn f( {").is_none());
    }

    /// Every source the extractor takes from a bundled replay corpus.
    fn bundled_corpus(task: &str, entry: &str) -> Vec<String> {
        use crate::text::extract::{extract, Extraction};
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("specs/{task}/replies.jsonl"));
        let text = std::fs::read_to_string(&path).expect("bundled corpus");
        let mut sources = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(line).expect("corpus line is JSON");
            if let Extraction::Source(s) =
                extract(v["content"].as_str(), v["finish_reason"].as_str(), entry)
            {
                sources.push(s);
            }
        }
        sources
    }

    /// The partition of `sources` each renamer makes, and how many sources
    /// the token renamer handed to the `syn` one.
    fn partitions(sources: &[String]) -> (Vec<Option<usize>>, Vec<Option<usize>>, usize) {
        let fallbacks = sources.iter().filter(|s| token_fp(s).is_none()).count();
        let ours: Vec<_> = sources.iter().map(|s| alpha_fingerprint(s)).collect();
        let reference: Vec<_> = sources.iter().map(|s| Some(syn_fp(s))).collect();
        (
            crate::text::dedup::duplicates(&ours),
            crate::text::dedup::duplicates(&reference),
            fallbacks,
        )
    }

    #[test]
    fn the_bundled_corpora_group_as_the_syn_renamer_groups_them() {
        for (task, entry) in [("absolute", "absolute_width"), ("shellwords", "split")] {
            let sources = bundled_corpus(task, entry);
            assert!(sources.len() > 20, "{task}: corpus too small");
            let (ours, reference, fallbacks) = partitions(&sources);
            assert_eq!(ours, reference, "{task}: partitions differ");
            assert_eq!(
                fallbacks, 0,
                "{task}: sources the token renamer hands to syn"
            );
            // The corpus exercises the renaming: some groups are alpha-only.
            let exact: Vec<_> = sources
                .iter()
                .map(|s| crate::text::dedup::fingerprint(s))
                .collect();
            assert_ne!(
                crate::text::dedup::duplicates(&exact),
                ours,
                "{task}: no alpha-only group"
            );
        }
    }

    /// Programs with placeholders `$0`..`$3` for local names; each is
    /// instantiated with consistent renamings and with near misses (two
    /// locals sharing a name, so one captures or shadows the other; locals
    /// named like a field, a method, a function or a struct shorthand).
    const TEMPLATES: &[&str] = &[
        "fn f($0: u32, $1: u32) -> u32 { let $2 = $0 + $1; $2 * $0 }",
        "fn f($0: u32) -> u32 { let $1 = $0 + 1; let $2 = $1 * $0; $2 - $1 }",
        "fn f($0: u32) -> u32 { let $0 = $0 + 1; let $1 = { let $0 = 2; $0 }; $0 + $1 }",
        "fn f($0: &[u32]) -> u32 { $0.iter().map(|$1| $1 * 2).filter(|&$2| $2 > 3).sum() }",
        "fn f($0: Option<(u32, u32)>) -> u32 { match $0 { Some(($1, $2)) if $1 > $2 => $1 - $2, Some(($1, _)) => $1, None => 0 } }",
        "struct P { x: u32, y: u32 } fn f($0: u32, $1: u32) -> P { P { x: $0, y: $1 } }",
        "struct P { x: u32, y: u32 } fn f($0: P) -> u32 { let P { x: $1, y: $2 } = $0; $1 + $2 }",
        "struct S { len: usize } impl S { fn len(&self) -> usize { self.len } } fn f($0: &S, $1: usize) -> usize { $0.len() + $1 + $0.len }",
        "fn f(mut $0: Vec<u32>) -> u32 { let mut $1 = 0; while let Some($2) = $0.pop() { if let 1..=5 = $2 { $1 += $2; } } $1 }",
        "fn f($0: &[Vec<u32>]) -> u32 { let mut $1 = 0; 'outer: for $2 in $0 { for &$3 in $2 { if $3 == 0 { continue 'outer; } $1 += $3; } } $1 }",
        "fn f($0: u32) -> String { let $1 = $0 * 2; format!(\"{$1} {}\", $0) }",
        "fn f($0: Option<u32>) -> u32 { let Some($1) = $0 else { return 0 }; $1 + 1 }",
        "fn f($0: u32) -> u32 { fn g($1: u32) -> u32 { $1 * 2 } g($0) + g($0) }",
        "fn f($0: u32) -> impl Fn(u32) -> u32 { move |$1| $0 + $1 }",
        "fn g(v: u32) -> u32 { v } fn f($0: u32) -> u32 { let $1 = g($0); $1 + g($1) }",
        "fn f($0: &str) -> Vec<String> { let mut $1 = Vec::new(); for ($2, $3) in $0.char_indices() { if $3 == ' ' { $1.push($0[..$2].to_string()); } } $1 }",
        "fn f($0: u32) -> u32 { let $1 = |$2: u32| -> u32 { $2 + $0 }; $1($0) }",
        "fn f($0: u32, $1: u32) -> bool { $0 != $1 && $0 < $1 }",
        "struct P { x: u32 } fn f($0: P) -> u32 { match $0 { P { x: $1 } if $1 > 0 => $1, P { x } => x } }",
        "fn f($0: Vec<u32>) -> u32 { let mut $1 = 0; let mut $2 = $0.iter(); while let Some(&$3) = $2.next() { $1 += $3; } assert!($1 > 0, \"{}\", $1); $1 }",
    ];

    const NAME_SETS: &[[&str; 4]] = &[
        ["a", "b", "c", "d"],
        ["x", "y", "z", "w"],
        ["n", "acc", "i", "j"],
        // Near misses: shared names (capture, shadowing), field, method and
        // item names.
        ["a", "a", "c", "d"],
        ["a", "b", "a", "d"],
        ["a", "b", "c", "b"],
        ["x", "len", "y", "v"],
        ["len", "g", "x", "y"],
        ["v", "x", "y", "z"],
        ["g", "v", "outer", "P"],
    ];

    fn generated_corpus() -> Vec<String> {
        let mut out = Vec::new();
        for t in TEMPLATES {
            for names in NAME_SETS {
                let mut s = t.to_string();
                for (i, n) in names.iter().enumerate() {
                    s = s.replace(&format!("${i}"), n);
                }
                if syn::parse_file(&s).is_ok() && !out.contains(&s) {
                    out.push(s);
                }
            }
        }
        out
    }

    #[test]
    fn a_generated_corpus_groups_as_the_syn_renamer_groups_it() {
        let sources = generated_corpus();
        let mut coarser = Vec::new();
        let mut finer = Vec::new();
        for (i, a) in sources.iter().enumerate() {
            assert!(token_fp(a).is_some(), "falls back: {a}");
            for b in &sources[i + 1..] {
                match (alpha_same(a, b), syn_same(a, b)) {
                    (true, false) => coarser.push((a.clone(), b.clone())),
                    (false, true) => finer.push((a.clone(), b.clone())),
                    _ => {}
                }
            }
        }
        assert!(
            coarser.is_empty(),
            "grouped, the reference keeps apart: {coarser:#?}"
        );
        assert!(
            finer.is_empty(),
            "kept apart, the reference groups: {finer:#?}"
        );
        // The corpus holds both groups and near misses.
        let ours: Vec<_> = sources.iter().map(|s| alpha_fingerprint(s)).collect();
        let groups = crate::text::dedup::duplicates(&ours);
        assert!(groups.iter().filter(|g| g.is_some()).count() >= TEMPLATES.len());
        assert!(groups.iter().filter(|g| g.is_none()).count() >= 2 * TEMPLATES.len());
    }

    /// Where the token renamer deliberately differs from the reference.
    /// Coarser (groups what the reference keeps apart): equivalent pairs the
    /// reference misses.
    const COARSER_SAFE: &[(&str, &str)] = &[
        // The reference takes `..n` in a macro for a field after `.`.
        (
            "fn f(s: &str, n: usize) { println!(\"{}\", &s[..n]); }",
            "fn f(s: &str, m: usize) { println!(\"{}\", &s[..m]); }",
        ),
        // A named width argument is a use of the local.
        (
            "fn f(k: u8) -> String { let w = 3; format!(\"{k:>w$}\") }",
            "fn f(k: u8) -> String { let v = 3; format!(\"{k:>v$}\") }",
        ),
    ];

    /// Finer (keeps apart what the reference groups): all but the last are
    /// different programs the reference wrongly merges.
    const FINER: &[(&str, &str)] = &[
        // A `mut` binding of an upper-case name: the reference renames it,
        // then takes the plain `N` pattern for a path and resolves its use
        // to the outer `N`: different programs, one fingerprint.
        (
            "fn f(mut N: u32, o: u32) -> u32 { match o { N => N } }",
            "fn f(mut M: u32, o: u32) -> u32 { match o { N => M } }",
        ),
        // Struct shorthand inside a macro names a field.
        (
            "#[derive(Default)] struct P { x: u32, y: u32 } fn f(x: u32) -> Vec<P> { vec![P { x, ..P::default() }] }",
            "#[derive(Default)] struct P { x: u32, y: u32 } fn f(y: u32) -> Vec<P> { vec![P { y, ..P::default() }] }",
        ),
        // A path segment inside a macro is not a local.
        (
            "fn f(u32: u32) -> u32 { dbg!(u32::MAX - u32) }",
            "fn f(n: u32) -> u32 { dbg!(n::MAX - n) }",
        ),
        // The width argument refers to another `w` in the second.
        (
            "fn f(k: u8) -> String { let w = 3; format!(\"{k:>w$}\") }",
            "fn f(k: u8) -> String { let v = 3; format!(\"{k:>w$}\") }",
        ),
        // A const declared in the body is a path in a pattern.
        (
            "fn f(o: u32) -> u32 { const c: u32 = 1; match o { c => 0, _ => 1 } }",
            "fn f(o: u32) -> u32 { const c: u32 = 1; match o { d => 0, _ => 1 } }",
        ),
    ];

    #[test]
    fn the_listed_differences_from_the_reference_hold() {
        for (a, b) in COARSER_SAFE {
            assert!(alpha_same(a, b), "should group:\n  {a}\n  {b}");
            assert!(!syn_same(a, b), "the reference now groups:\n  {a}\n  {b}");
        }
        for (a, b) in FINER {
            assert!(!alpha_same(a, b), "should stay apart:\n  {a}\n  {b}");
            assert!(
                syn_same(a, b),
                "the reference now keeps apart:\n  {a}\n  {b}"
            );
        }
    }

    /// `s` with every whole-word `from` (outside labels) spelled `to`.
    fn rename_word(s: &str, from: &str, to: &str) -> String {
        let word = |c: char| c.is_alphanumeric() || c == '_';
        let mut out = String::new();
        let mut rest = s;
        while let Some(at) = rest.find(from) {
            let before = rest[..at].chars().next_back();
            let after = rest[at + from.len()..].chars().next();
            out.push_str(&rest[..at]);
            if before.is_some_and(|c| word(c) || c == '\'') || after.is_some_and(word) {
                out.push_str(from);
            } else {
                out.push_str(to);
            }
            rest = &rest[at + from.len()..];
        }
        out.push_str(rest);
        out
    }

    /// Constructs the token renamer follows itself: each source, and a
    /// renaming of its locals, stays on the token path and groups as the
    /// reference groups it.
    #[test]
    fn common_constructs_stay_on_the_token_path() {
        let sources: &[&str] = &[
            "fn f(a: bool, b: bool) -> bool { if a || b { a } else { b } }",
            "fn f(m: std::collections::HashMap<u8, u8>, k: u8) -> u8 { m[&k] }",
            "fn f(o: Option<u8>) -> u8 { match o { Some(k) => u8::from_str_radix(\"1\", 10).unwrap() + k, None => 0 } }",
            "fn f(v: Vec<u8>) -> Vec<u8> { v.into_iter().map(|k| k as u8).collect::<Vec<_>>() }",
            "fn f(o: Option<u8>) -> u8 { let Some(k) = o else { return 0 }; k }",
            "fn f(v: &[u8]) -> u8 { let mut t = 0; 'a: for &k in v { loop { if k > 3 { break 'a; } t += k; break; } } t }",
            "extern \"C\" { fn abs(v: i32) -> i32; } fn f(k: i32) -> i32 { unsafe { abs(k) } }",
            "trait T { fn g(&self, k: u8) -> u8 { k } } struct S; impl T for S {} fn f(s: S, k: u8) -> u8 { s.g(k) }",
            "fn f(k: u8) -> u8 { const C: u8 = 2; fn h(k: u8) -> u8 { k * C } h(k) }",
            "fn f(s: &str) -> usize { s.chars().filter(|c| !c.is_whitespace() && *c != 'x').count() }",
            "fn f(k: i64) -> i64 { let r = if k < 0 { -k } else { k }; r as i64 }",
            "fn f(v: &mut Vec<u8>, k: u8) { while let Some(&top) = v.last() { if top <= k { break; } v.pop(); } v.push(k); }",
            "fn f(k: u8) -> String { let w = 3; format!(\"{k:>w$} {:?}\", k) }",
            "fn f(p: (u8, u8)) -> u8 { let (a, b) = p; let c = |x: u8, y: u8| -> u8 { x.max(y) }; c(a, b) }",
            "fn f(k: u8) -> u8 { match k { 0 => { 1 } n if n > 9 => n, n @ 1..=9 => n * 2, _ => unreachable!() } }",
        ];
        for s in sources {
            assert!(token_fp(s).is_some(), "falls back: {s}");
            let renamed = rename_word(&rename_word(s, "k", "q"), "a", "z");
            assert!(token_fp(&renamed).is_some(), "falls back: {renamed}");
            assert_eq!(
                alpha_same(s, &renamed),
                syn_same(s, &renamed),
                "differs from the reference:\n  {s}\n  {renamed}"
            );
        }
    }

    #[test]
    fn a_file_that_falls_back_is_renamed_whole() {
        // A raw identifier sends the file to `syn`; what follows it counts.
        let a = "fn f(r#in: u32) -> u32 { r#in + 1 }";
        let b = "fn f(r#in: u32) -> u32 { r#in + 2 }";
        assert!(token_fp(a).is_none());
        assert_ne!(alpha_fingerprint(a), alpha_fingerprint(b));
        assert_eq!(alpha_fingerprint(a), Some(syn_fp(a)));
    }

    #[test]
    fn constructs_the_token_renamer_does_not_model_fall_back_to_syn() {
        let s = "fn f(o: Option<u32>) -> bool { let m = |x| x; if |y: u32| y > 0 { true } else { false } }";
        assert!(token_fp(s).is_none());
        let t = s.replace("y", "z");
        assert_eq!(alpha_fingerprint(s), Some(syn_fp(s)));
        assert_eq!(alpha_fingerprint(s), alpha_fingerprint(&t));
    }
}
