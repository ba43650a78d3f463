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
