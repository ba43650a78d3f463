use super::*;

/// `source` against the default policy: the rule it breaks, if any.
fn check(source: &str) -> Option<Rule> {
    super::check(&Policy::default(), source)
        .err()
        .map(|v| v.rule)
}

#[test]
fn honest_code_passes() {
    for source in [
        "pub fn f(x: u64) -> u64 { x * 2 }",
        "#![allow(dead_code)]\n//! docs\nfn f() {}",
        "fn f() { let include = true; let asm = 3; let path = \"a\"; }",
        "fn path(p: &str) -> &str { p }",
        "#[derive(Debug, Clone)] struct S { path: String }",
        "#[inline] #[must_use] fn f() -> u8 { 0 }",
        "#[cfg(test)] mod tests { #[test] fn t() {} }",
        "pub mod r#type { pub(crate) mod inner {} }",
        "fn f() { let r#mod = 1; }",
        "extern crate alloc; use alloc::vec::Vec;",
        "pub extern \"C\" fn f() {}",
        "type F = extern \"C\" fn(i32) -> i32;",
        "macro_rules! twice { ($e:expr) => { $e + $e } } fn f() -> u8 { twice!(1) }",
        "#[allow(clippy::path_buf_push_overwrite)] fn f() {}",
        "fn f() -> &'static str { \"unsafe include_str! #[path]\" }",
        "// unsafe { include_str!(\"x\") }\nfn f() {}",
    ] {
        assert_eq!(check(source), None, "{source}");
    }
}

#[test]
fn each_forbidden_construct_is_refused_however_it_is_spelled() {
    let cases: &[(&str, Rule)] = &[
        (
            "fn f() { unsafe { std::hint::unreachable_unchecked() } }",
            Rule::UnsafeCode,
        ),
        ("unsafe fn f() {}", Rule::UnsafeCode),
        ("unsafe impl Send for S {}", Rule::UnsafeCode),
        ("#[no_mangle] pub fn write() {}", Rule::UnsafeCode),
        ("#[export_name = \"write\"] pub fn w() {}", Rule::UnsafeCode),
        (
            "#[used] #[link_section = \".init_array\"] static I: fn() = f;",
            Rule::UnsafeCode,
        ),
        (
            "#[cfg_attr(all(), no_mangle)] pub fn w() {}",
            Rule::UnsafeCode,
        ),
        ("#[r#no_mangle] pub fn w() {}", Rule::UnsafeCode),
        ("mod a { mod b { fn f() { unsafe {} } } }", Rule::UnsafeCode),
        (
            "macro_rules! u { ($k:tt) => { $k fn f() {} } } u!(unsafe);",
            Rule::UnsafeCode,
        ),
        ("#[path = \"c10.rs\"] mod x;", Rule::PathAttribute),
        ("mod c10;", Rule::PathAttribute),
        ("mod a { pub mod c10; }", Rule::PathAttribute),
        (
            "macro_rules! m { ($n:ident) => { mod $n; } } m!(c10);",
            Rule::PathAttribute,
        ),
        ("#[r#path = \"c10.rs\"] mod x;", Rule::PathAttribute),
        (
            "#[cfg_attr(all(), path = \"c10.rs\")] mod x;",
            Rule::PathAttribute,
        ),
        (
            "mod outer { #[path = \"../c10.rs\"] mod x; }",
            Rule::PathAttribute,
        ),
        (
            "const S: &str = include_str!(\"/root/.cargo/env\");",
            Rule::Include,
        ),
        (
            "const B: &[u8] = include_bytes!(\"c10.rs\");",
            Rule::Include,
        ),
        (
            "const B: &[u8] = core::include_bytes!(\"c10.rs\");",
            Rule::Include,
        ),
        ("const S: &str = r#include_str!(\"x\");", Rule::Include),
        ("include!(\"c10.rs\");", Rule::Include),
        ("use std::include as inc; inc!(\"c10.rs\");", Rule::Include),
        (
            "use std::include_str as s; const S: &str = s!(\"x\");",
            Rule::Include,
        ),
        (
            "macro_rules! m { ($($t:tt)*) => { $($t)* } } const S: &str = m!(include_str!(\"x\"));",
            Rule::Include,
        ),
        (
            "macro_rules! m { ($i:ident) => { $i!(\"x\") } } const S: &str = m!(include_str);",
            Rule::MacroIndirection,
        ),
        (
            "#[doc = include_str!(\"/etc/shadow\")] fn f() {}",
            Rule::Include,
        ),
        (
            "#[debugger_visualizer(gdb_script_file = \"x.py\")] mod m {}",
            Rule::Include,
        ),
        ("extern \"C\" { fn write(fd: i32); }", Rule::ExternBlock),
        ("extern { fn abs(x: i32) -> i32; }", Rule::ExternBlock),
        (
            "macro_rules! e { ($k:tt) => { $k \"C\" { fn abs(x: i32) -> i32; } } } e!(extern);",
            Rule::ExternBlock,
        ),
        ("#[link(name = \"m\")] mod m {}", Rule::ExternBlock),
        (
            "std::arch::global_asm!(\".section .init_array\");",
            Rule::Asm,
        ),
        ("use core::arch::global_asm as g;", Rule::Asm),
        ("fn f() { core::arch::asm!(\"nop\") }", Rule::Asm),
        (
            "macro_rules! m { ($($t:tt)*) => { $($t)* } } m!(std::arch::global_asm!(\"\"););",
            Rule::Asm,
        ),
        ("#![no_std]\nfn f() {}", Rule::CrateAttribute),
        (
            "#![feature(core_intrinsics)]\nfn f() {}",
            Rule::CrateAttribute,
        ),
        ("#![r#no_std]\nfn f() {}", Rule::CrateAttribute),
        (
            "macro_rules! a { ($a:ident) => { #[$a = \"c10.rs\"] mod x; } } a!(pth);",
            Rule::MacroIndirection,
        ),
        (
            "macro_rules! a { ($m:meta) => { #[$m] mod x; } } a!(doc = \"x\");",
            Rule::MacroIndirection,
        ),
        (
            "macro_rules! a { ($m:ident) => { $m!() } } a!(my_macro);",
            Rule::MacroIndirection,
        ),
        (
            "macro_rules! a { ($m:tt) => { #[cfg_attr(all(), $m = \"c10.rs\")] mod x; } }",
            Rule::MacroIndirection,
        ),
    ];
    for (source, want) in cases {
        assert_eq!(check(source), Some(*want), "{source}");
    }
}

#[test]
fn a_relaxed_rule_is_allowed_and_the_others_still_hold() {
    let policy = Policy::allowing([Rule::Include]);
    assert_eq!(
        super::check(&policy, "const S: &str = include_str!(\"x\");"),
        Ok(())
    );
    let source = "const S: &str = include_str!(\"x\");\nfn f() { unsafe {} }";
    assert_eq!(
        super::check(&policy, source).unwrap_err().rule,
        Rule::UnsafeCode
    );
    let all = Policy::allowing(Rule::ALL);
    assert_eq!(super::check(&all, source), Ok(()));
}

#[test]
fn the_violation_names_the_line_and_shows_it() {
    let source = "pub fn f() -> u8 {\n    let x = 1;\n    unsafe { core::hint::unreachable_unchecked() }\n}\n";
    let v = super::check(&Policy::default(), source).unwrap_err();
    assert_eq!((v.rule, v.line, v.column), (Rule::UnsafeCode, 3, 4));
    let text = v.render("cands/c3.rs", source);
    assert!(
        text.contains("forbidden by the task's policy (unsafe_code): `unsafe`"),
        "{text}"
    );
    assert!(text.contains("--> cands/c3.rs:3:5"), "{text}");
    assert!(
        text.contains("3 |     unsafe { core::hint::unreachable_unchecked() }"),
        "{text}"
    );
}

#[test]
fn a_source_that_does_not_lex_is_left_to_the_compiler() {
    assert_eq!(check("fn f() { \"unterminated }"), None);
    // `crate`, `super` and `self` cannot be raw identifiers: neither the
    // lexer nor rustc takes `r#super` (rustc: "`super` cannot be a raw
    // identifier"), so these spellings reach no module.
    for source in [
        "use r#super::x;",
        "fn f() { r#crate::x() }",
        "use r#self::x;",
    ] {
        assert!(
            source.parse::<proc_macro2::TokenStream>().is_err(),
            "{source}"
        );
        assert_eq!(check(source), None, "{source}");
    }
}

/// An attribute that breaks two rules is refused by whichever of them the
/// policy keeps: relaxing `unsafe_code` does not let a `#[path]` that
/// shares its `cfg_attr` with a `no_mangle` through.
#[test]
fn an_attribute_breaking_two_rules_is_held_to_both() {
    let source = "#[cfg_attr(all(), no_mangle, path = \"c10.rs\")] mod x;";
    let held = |allowed: &[Rule]| {
        super::check(&Policy::allowing(allowed.iter().copied()), source)
            .err()
            .map(|v| v.rule)
    };
    assert_eq!(held(&[]), Some(Rule::UnsafeCode));
    assert_eq!(held(&[Rule::UnsafeCode]), Some(Rule::PathAttribute));
    assert_eq!(held(&[Rule::PathAttribute]), Some(Rule::UnsafeCode));
    assert_eq!(held(&[Rule::UnsafeCode, Rule::PathAttribute]), None);
}

/// Where the default policy refuses `source`: the rule, the 1-based line
/// and the 0-based column.
fn refusal(source: &str) -> Option<(Rule, usize, usize)> {
    super::check(&Policy::default(), source)
        .err()
        .map(|v| (v.rule, v.line, v.column))
}

/// Each way out of a program's module, one row per spelling, refused at
/// the token where it starts.
#[test]
fn each_path_out_of_the_module_is_refused_where_it_starts() {
    use Rule::{GlobalAllocator, MacroExport, MacroUse, OuterPath};
    let cases: &[(&str, Rule, usize, usize)] = &[
        // `super` above the source's top level, however it is spelled.
        ("use super::x;", OuterPath, 1, 4),
        ("fn f() { super::g() }", OuterPath, 1, 9),
        ("use self::super::x;", OuterPath, 1, 4),
        ("impl super::T for X {}", OuterPath, 1, 5),
        ("type T = <super::X as Tr>::Y;", OuterPath, 1, 10),
        ("pub(super) fn f() {}", OuterPath, 1, 4),
        ("pub(in super) fn f() {}", OuterPath, 1, 7),
        ("mod a { use super::super::x; }", OuterPath, 1, 12),
        ("mod a { pub(in super::super) fn f() {} }", OuterPath, 1, 15),
        ("mod a { use super::{super::x}; }", OuterPath, 1, 20),
        ("mod a { use super::{x, super::y}; }", OuterPath, 1, 23),
        ("mod a { use self::{super::super::x}; }", OuterPath, 1, 19),
        ("mod a { mod b {} } use super::x;", OuterPath, 1, 23),
        (
            "fn f() { mod m { pub fn g() { super::super::h() } } }",
            OuterPath,
            1,
            30,
        ),
        (
            "pub fn f() -> u8 {\n    1\n}\n\nmod inner {\n    use super::super::f;\n}\n",
            OuterPath,
            6,
            8,
        ),
        // The crate root by other names.
        (
            "macro_rules! m { () => { $crate::c1::f() } }",
            OuterPath,
            1,
            25,
        ),
        ("extern crate self as me;", OuterPath, 1, 0),
        ("use crate;", OuterPath, 1, 4),
        ("fn f() { let s = stringify!(crate); }", OuterPath, 1, 28),
        // A macro of the source's own can rearrange `crate` and `super`:
        // taken as a token, out of a visibility, split from a rebased
        // module, repeated, or freed of the `mod` around it.
        (
            "macro_rules! m { ($k:ident) => { $k::c1::f() } }\nfn g() { m!(crate) }",
            OuterPath,
            2,
            12,
        ),
        (
            "macro_rules! s { (pub ($k:tt)) => { $k::c1::f() } }\nfn g() { s!(pub(crate)) }",
            OuterPath,
            2,
            16,
        ),
        (
            "macro_rules! d { ($k:tt :: $m:ident :: $($r:tt)*) => { $k :: $($r)* } }\nfn g() { d!(crate::c1::f()) }",
            OuterPath,
            2,
            12,
        ),
        (
            "macro_rules! t { ($k:tt) => { $k::$k::x } }\nmod a { fn g() { t!(super) } }",
            OuterPath,
            2,
            20,
        ),
        (
            "macro_rules! w { ($($t:tt)*) => { $($t)* } }\nw!(mod a { use super::x; });",
            OuterPath,
            2,
            15,
        ),
        (
            "macro_rules! m { () => { mod inner { use super::super::x; } } }",
            OuterPath,
            1,
            41,
        ),
        (
            "macro_rules! m { () => { crate::f() } }",
            OuterPath,
            1,
            25,
        ),
        // Macros out of the module.
        ("#[macro_export] macro_rules! m { () => {} }", MacroExport, 1, 0),
        (
            "#[cfg_attr(all(), macro_export)] macro_rules! m { () => {} }",
            MacroExport,
            1,
            0,
        ),
        ("#[r#macro_export] macro_rules! m { () => {} }", MacroExport, 1, 0),
        (
            "mod a { #[macro_export] macro_rules! m { () => {} } }",
            MacroExport,
            1,
            8,
        ),
        ("#[macro_use] mod a { macro_rules! m { () => {} } }", MacroUse, 1, 0),
        (
            "#![macro_use]\nmacro_rules! assert_eq { ($($t:tt)*) => {} }",
            MacroUse,
            1,
            0,
        ),
        ("#[macro_use] extern crate std;", MacroUse, 1, 0),
        // Items a program has one of.
        (
            "#[global_allocator] static A: std::alloc::System = std::alloc::System;",
            GlobalAllocator,
            1,
            0,
        ),
        (
            "#[panic_handler] fn p(_: &core::panic::PanicInfo) -> ! { loop {} }",
            GlobalAllocator,
            1,
            0,
        ),
        (
            "#[alloc_error_handler] fn h(_: std::alloc::Layout) -> ! { loop {} }",
            GlobalAllocator,
            1,
            0,
        ),
    ];
    for (source, rule, line, column) in cases {
        assert_eq!(refusal(source), Some((*rule, *line, *column)), "{source}");
    }
}

/// Honest code names its own module's items: `super` within its own
/// nesting, `crate::` paths (rebased later), visibilities, and the words in
/// strings, comments and longer names.
#[test]
fn paths_within_the_module_pass() {
    for source in HONEST_PATHS {
        assert_eq!(refusal(source), None, "{source}");
    }
}

const HONEST_PATHS: &[&str] = &[
    "mod a { use super::x; }",
    "mod a { use self::super::x; }",
    "mod a { use super::{self as up, x}; }",
    "mod a { mod b { use super::super::x; use super::{super::y}; } }",
    "mod a { pub(super) fn f() {} }",
    "mod a { mod b { pub(in super::super) fn f() {} } }",
    "fn f() { mod m { pub fn g() { super::h() } } } fn h() {}",
    "#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn t() { assert_eq!(super::f(), 1); }\n}",
    "pub(crate) fn f() {}",
    "pub(in crate) fn f() {}",
    "mod a { pub(in crate::a) fn f() {} }",
    "pub struct S(pub(crate) u8);",
    "use crate::helper; fn helper() {}",
    "fn f() -> u8 { crate::g() } fn g() -> u8 { 1 }",
    "fn f<T: crate::Tr>() { <T as crate::Tr>::g() }",
    "use crate as root; use crate::{self as r2};",
    "fn f() { println!(\"{}\", crate::g()); } fn g() -> u8 { 1 }",
    "extern crate alloc; extern crate std as s;",
    "fn f() -> &'static str { \"super::super crate $crate #[macro_export]\" }",
    "// use super::x; #[macro_use] extern crate self as me;\nfn f() {}",
    "/// See [crate::f] and `super::g`.\nfn f() {}",
    "struct S { supervisor: u8, crate_name: u8, macro_use: u8 }",
    "#[allow(clippy::macro_use_imports)] fn f() {}",
    "macro_rules! twice { ($e:expr) => { $e + $e } } fn f() -> u8 { twice!(1) }",
    "macro_rules! m { () => { self::f() } } fn f() {}",
    "macro_rules! m { () => {} } mod a { use super::f; } fn f() { if !(1 > 2) {} }",
];

/// The first refusal in the source wins, whichever walk finds it, and
/// relaxing `outer_path` leaves the other rules in force.
#[test]
fn the_first_refusal_in_the_source_is_reported() {
    assert_eq!(
        refusal("unsafe fn f() {}\nuse super::x;"),
        Some((Rule::UnsafeCode, 1, 0))
    );
    assert_eq!(
        refusal("use super::x;\nunsafe fn f() {}"),
        Some((Rule::OuterPath, 1, 4))
    );
    let relaxed = Policy::allowing([Rule::OuterPath]);
    assert_eq!(super::check(&relaxed, "use super::x;"), Ok(()));
    assert_eq!(
        super::check(
            &relaxed,
            "use super::x; #[macro_export] macro_rules! m { () => {} }"
        )
        .unwrap_err()
        .rule,
        Rule::MacroExport
    );
    let v = super::check(&Policy::default(), "fn f() {}\nmod c4;").unwrap_err();
    assert_eq!((v.rule, v.line, v.column), (Rule::PathAttribute, 2, 0));
    assert_eq!(v.what, "mod c4;");
    let v = super::check(&Policy::default(), "mod a {\n    use super::super::x;\n}").unwrap_err();
    assert_eq!(v.what, "super::super");
    assert!(
        v.render("cands/c3.rs", "mod a {\n    use super::super::x;\n}")
            .contains("forbidden by the task's policy (outer_path): `super::super`"),
        "{v:?}"
    );
}

/// Each path-leading `crate` gets the module's path right after it; every
/// other byte stays where it was.
#[test]
fn crate_paths_are_rebased_onto_the_module_byte_for_byte() {
    let c0: &[&str] = &["c0"];
    let cases: &[(&str, &[&str], &str)] = &[
        ("use crate::a;", c0, "use crate::c0::a;"),
        ("use crate::{a, b::c};", c0, "use crate::c0::{a, b::c};"),
        ("use crate as root;", c0, "use crate::c0 as root;"),
        ("use crate::{self as r};", c0, "use crate::c0::{self as r};"),
        (
            "fn f() -> u8 { crate::g() }",
            c0,
            "fn f() -> u8 { crate::c0::g() }",
        ),
        (
            "fn f<T: crate::Tr>() { <T as crate::Tr>::g() }",
            c0,
            "fn f<T: crate::c0::Tr>() { <T as crate::c0::Tr>::g() }",
        ),
        (
            "mod a { pub(in crate::a) fn f() {} }",
            c0,
            "mod a { pub(in crate::c0::a) fn f() {} }",
        ),
        (
            "fn f() { println!(\"{}\", crate::X); }",
            c0,
            "fn f() { println!(\"{}\", crate::c0::X); }",
        ),
        (
            "fn f() { crate /* c */ :: g() }",
            c0,
            "fn f() { crate::c0 /* c */ :: g() }",
        ),
        (
            "fn f() -> &'static str { \"é → crate::x\" }\n// crate::y\nfn g() { /* crate::z */ crate::f(); }",
            c0,
            "fn f() -> &'static str { \"é → crate::x\" }\n// crate::y\nfn g() { /* crate::z */ crate::c0::f(); }",
        ),
        ("use crate::a;", &["wave", "c7"], "use crate::wave::c7::a;"),
        // Visibilities, `extern crate`, `$crate` stay as they are.
        ("pub(crate) fn f() {}", c0, "pub(crate) fn f() {}"),
        ("pub(in crate) fn f() {}", c0, "pub(in crate) fn f() {}"),
        ("extern crate alloc;", c0, "extern crate alloc;"),
        (
            "macro_rules! m { () => { $crate::f() } }",
            c0,
            "macro_rules! m { () => { $crate::f() } }",
        ),
        // Nothing to rebase onto, or nothing the lexer understands.
        ("use crate::a;", &[], "use crate::a;"),
        (
            "fn f() { \"unterminated crate::x }",
            c0,
            "fn f() { \"unterminated crate::x }",
        ),
    ];
    for (source, module, want) in cases {
        assert_eq!(
            super::rebase_crate_paths(source, module),
            *want,
            "{source} onto {module:?}"
        );
    }
}

/// Rebasing keeps an accepted source accepted, and its lines where they
/// were.
#[test]
fn a_rebased_source_passes_the_policy_it_passed() {
    for source in HONEST_PATHS {
        let rebased = super::rebase_crate_paths(source, &["wave", "c0"]);
        assert_eq!(refusal(&rebased), None, "{rebased}");
        assert_eq!(rebased.lines().count(), source.lines().count());
    }
}

/// In 2015 a `use` path and a `::` path start at the crate root: the
/// program's own top level when it is built alone. Each gets the module's
/// path, but for what the shared root holds as the program's root did;
/// every other byte, and every line, stays.
#[test]
fn crate_root_paths_of_2015_are_rebased_onto_the_module() {
    let cases: &[(&str, &str)] = &[
        ("use Color::*;", "use crate::c0::Color::*;"),
        ("use ::Color::Red;", "use crate::c0::Color::Red;"),
        ("pub use a::{b, c};", "pub use crate::c0::a::{b, c};"),
        (
            "use {a, std::fmt, b::c};",
            "use {crate::c0::a, std::fmt, crate::c0::b::c};",
        ),
        ("use ::{a, std::fmt};", "use {crate::c0::a, std::fmt};"),
        ("use *;", "use crate::c0::*;"),
        (
            "fn f() { use m::g; g() }",
            "fn f() { use crate::c0::m::g; g() }",
        ),
        ("mod m { use X; }", "mod m { use crate::c0::X; }"),
        ("use core::mem;", "use crate::c0::core::mem;"),
        (
            "fn f() -> ::Color { ::Color::Red }",
            "fn f() -> crate::c0::Color { crate::c0::Color::Red }",
        ),
        (
            "fn f(x: ::A) -> Vec<::B> { match x { _ => ::g() } }",
            "fn f(x: crate::c0::A) -> Vec<crate::c0::B> { match x { _ => crate::c0::g() } }",
        ),
        ("fn f(x: &'a ::A) {}", "fn f(x: &'a crate::c0::A) {}"),
        (
            "fn f() { vec![::A::new()]; }",
            "fn f() { vec![crate::c0::A::new()]; }",
        ),
        // What the shared root holds as the program's did, or a path's
        // middle, stays.
        (
            "use std::collections::HashMap; use self::a::b; use super::c; use crate::c0::d;",
            "use std::collections::HashMap; use self::a::b; use super::c; use crate::c0::d;",
        ),
        (
            "fn f() { ::std::process::exit(0); a::b(); Vec::<u8>::new(); <T as Tr>::f(); }",
            "fn f() { ::std::process::exit(0); a::b(); Vec::<u8>::new(); <T as Tr>::f(); }",
        ),
        (
            "fn r#use() {} fn g() { r#use() }",
            "fn r#use() {} fn g() { r#use() }",
        ),
        (
            "// use a::b;\nfn f() -> &'static str { \"use x; ::y\" }",
            "// use a::b;\nfn f() -> &'static str { \"use x; ::y\" }",
        ),
    ];
    for (source, want) in cases {
        assert_eq!(
            super::rebase_2015_root_paths(source, &["c0"]),
            *want,
            "{source}"
        );
    }
    assert_eq!(super::rebase_2015_root_paths("use a;", &[]), "use a;");
}

/// A 2015 program's names that later editions made keywords become raw
/// identifiers, which a 2015 rustc reads as the same names; `dyn` before
/// a bound stays a keyword.
#[test]
fn names_that_are_keywords_today_are_made_raw_in_2015() {
    let cases: &[(&str, &str)] = &[
        ("let dyn = x + 1; dyn", "let r#dyn = x + 1; r#dyn"),
        (
            "fn async() {} fn f() { async(); try!(g()); }",
            "fn r#async() {} fn f() { r#async(); r#try!(g()); }",
        ),
        (
            "fn f(await: u8) -> u8 { await }",
            "fn f(r#await: u8) -> u8 { r#await }",
        ),
        (
            "fn f(dyn: i64) -> i64 { dyn * 2 }",
            "fn f(r#dyn: i64) -> i64 { r#dyn * 2 }",
        ),
        (
            "fn f(a: &dyn Tr, b: Box<dyn ?Sized>, c: &(dyn 'a + Tr), d: Box<dyn ::m::Tr>) {}",
            "fn f(a: &dyn Tr, b: Box<dyn ?Sized>, c: &(dyn 'a + Tr), d: Box<dyn ::m::Tr>) {}",
        ),
        (
            "// dyn\nfn f() -> &'static str { \"async\" }",
            "// dyn\nfn f() -> &'static str { \"async\" }",
        ),
        ("let r#dyn = 1;", "let r#dyn = 1;"),
    ];
    for (source, want) in cases {
        assert_eq!(super::raw_2015_names(source), *want, "{source}");
    }
}
