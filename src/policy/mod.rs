//! The task's policy: what a candidate's source may contain, checked before
//! any build.
//!
//! By default a candidate may not contain `unsafe` code (nor the attributes
//! the `unsafe_code` lint covers: `no_mangle`, `export_name`,
//! `link_section`), `#[path]`, `include!`/`include_str!`/`include_bytes!`
//! (nor `#[debugger_visualizer]`, which reads a file too), `extern` blocks,
//! assembly, crate-level attributes, or attributes and macro calls named by
//! a macro's variable (which the scan cannot see through). A spec may allow
//! any of these in its `[policy]` table (`include = "allow"`).
//!
//! The check is a token scan ([`scan`]): it descends into every group, so a
//! word inside a nested module, a macro's body or a macro's arguments counts
//! as much as one at top level (`m!(include_str)` is refused like
//! `include_str!`), attributes inside `cfg_attr` count, and raw identifiers
//! are read without their `r#`. It is deliberately coarse: a word that
//! would become one of these after expansion is refused wherever it
//! appears. Behind the scan, rustc enforces what it can (the module file
//! starts with `#![forbid(unsafe_code)]`, which nothing inside can lower),
//! and the build's Landlock rulesets keep every file outside the
//! candidate's own unreadable (`sandbox::compile`), for a spelling the scan
//! might miss and for a spec that relaxes the policy.
//!
//! Pure: no I/O. `Rule` and `Violation` are plain data; a violation's
//! string form is the probe verdict's argument (`forbidden(unsafe_code)`).

pub(crate) mod scan;

use std::fmt;
use std::str::FromStr;

use proc_macro2::TokenTree;

use scan::Found;

/// One thing the policy may forbid. The string form is stable: it is the
/// `[policy]` key and the argument of the `forbidden(..)` verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    /// `unsafe`, `#[no_mangle]`, `#[export_name]`, `#[link_section]`.
    UnsafeCode,
    /// `#[path = ".."]`: compiles another file as a module.
    PathAttribute,
    /// `include!`, `include_str!`, `include_bytes!`,
    /// `#[debugger_visualizer]`: read a file at compile time.
    Include,
    /// `extern { .. }`, `extern "C" { .. }` and the attributes only they
    /// take (`#[link]`, `#[link_name]`, `#[link_ordinal]`).
    ExternBlock,
    /// `asm!`, `global_asm!`, `naked_asm!`.
    Asm,
    /// An inner attribute at file level other than a lint level or doc
    /// (`#![no_std]`, `#![feature(..)]`).
    CrateAttribute,
    /// `#[$attr]` or `$mac!(..)` inside a macro: whatever it becomes is
    /// decided by the macro's caller, out of the scan's sight.
    MacroIndirection,
}

/// Which rules a task enforces. Every rule is enforced unless the spec
/// allows it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    allowed: Vec<Rule>,
}

/// The first thing in a source the policy refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub rule: Rule,
    /// 1-based line and 0-based column of the offending token.
    pub line: usize,
    pub column: usize,
    /// What was found, as written (`include_str`, `#[path]`, `unsafe`).
    pub what: String,
}

/// Attributes the `unsafe_code` lint covers.
const UNSAFE_ATTRS: &[&str] = &["no_mangle", "export_name", "link_section"];

/// Attributes that only an extern block or its items take.
const EXTERN_ATTRS: &[&str] = &["link", "link_name", "link_ordinal"];

/// Attributes that read a file at compile time.
const FILE_ATTRS: &[&str] = &["debugger_visualizer"];

/// Macros that read a file; refused wherever the word appears.
const INCLUDE_MACROS: &[&str] = &["include_str", "include_bytes"];

/// Assembly macros; refused wherever the word appears.
const ASM_MACROS: &[&str] = &["global_asm", "naked_asm", "llvm_asm"];

impl Rule {
    pub const ALL: [Rule; 7] = [
        Rule::UnsafeCode,
        Rule::PathAttribute,
        Rule::Include,
        Rule::ExternBlock,
        Rule::Asm,
        Rule::CrateAttribute,
        Rule::MacroIndirection,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            Rule::UnsafeCode => "unsafe_code",
            Rule::PathAttribute => "path_attribute",
            Rule::Include => "include",
            Rule::ExternBlock => "extern_block",
            Rule::Asm => "asm",
            Rule::CrateAttribute => "crate_attribute",
            Rule::MacroIndirection => "macro_indirection",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Rule {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Rule::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| format!("unknown policy rule `{s}`"))
    }
}

impl Policy {
    /// The default policy with `allowed` relaxed.
    pub fn allowing(allowed: impl IntoIterator<Item = Rule>) -> Policy {
        let mut allowed: Vec<Rule> = allowed.into_iter().collect();
        allowed.sort();
        allowed.dedup();
        Policy { allowed }
    }

    pub fn allows(&self, rule: Rule) -> bool {
        self.allowed.contains(&rule)
    }

    /// The rules this policy relaxes, in order.
    pub fn allowed(&self) -> &[Rule] {
        &self.allowed
    }

    /// The first thing in `source` this policy refuses. A source that does
    /// not lex is left to the compiler (which refuses it too).
    pub fn check(&self, source: &str) -> Result<(), Violation> {
        let found = scan::first_finding(source, &|found| {
            let (rule, span, what) = judge(found)?;
            (!self.allows(rule)).then(|| {
                let at = span.start();
                Violation {
                    rule,
                    line: at.line,
                    column: at.column,
                    what,
                }
            })
        });
        match found {
            Ok(Some(violation)) => Err(violation),
            Ok(None) | Err(_) => Ok(()),
        }
    }
}

/// What a finding of the walk is, by the policy's rules.
fn judge(found: Found<'_>) -> Option<(Rule, proc_macro2::Span, String)> {
    match found {
        Found::CrateAttr(attr, span) => Some((Rule::CrateAttribute, span, format!("#![{attr}]"))),
        Found::Attr(attr, span) => {
            let rule = if starts_with_dollar(&attr) || has_dollar_path(attr.clone()) {
                Rule::MacroIndirection
            } else if scan::names_any(attr.clone(), UNSAFE_ATTRS) {
                Rule::UnsafeCode
            } else if scan::names_any(attr.clone(), &["path"]) {
                Rule::PathAttribute
            } else if scan::names_any(attr.clone(), FILE_ATTRS) {
                Rule::Include
            } else if scan::names_any(attr.clone(), EXTERN_ATTRS) {
                Rule::ExternBlock
            } else {
                return None;
            };
            Some((rule, span, format!("#[{attr}]")))
        }
        Found::Ident(tokens, i, name) => {
            let span = tokens.span(i);
            let rule = match name.as_str() {
                "unsafe" => Rule::UnsafeCode,
                n if INCLUDE_MACROS.contains(&n) => Rule::Include,
                // `include` and `asm` are also ordinary words; as macros
                // they are called (`!`), named by a path (`::include`) or
                // renamed (`include as inc`).
                "include" if names_a_macro(tokens, i) => Rule::Include,
                n if ASM_MACROS.contains(&n) => Rule::Asm,
                "asm" if names_a_macro(tokens, i) => Rule::Asm,
                "extern" if is_extern_block(tokens, i) => Rule::ExternBlock,
                _ if i > 0 && tokens.punct(i - 1, '$') && tokens.punct(i + 1, '!') => {
                    Rule::MacroIndirection
                }
                _ => return None,
            };
            let what = if rule == Rule::MacroIndirection {
                format!("${name}!")
            } else {
                name
            };
            Some((rule, span, what))
        }
    }
}

/// `#[$attr]`, `#[$name = ..]`.
fn starts_with_dollar(attr: &proc_macro2::TokenStream) -> bool {
    matches!(attr.clone().into_iter().next(), Some(TokenTree::Punct(p)) if p.as_char() == '$')
}

/// A `$` anywhere in an attribute (`#[cfg_attr(x, $a = "..")]`).
fn has_dollar_path(attr: proc_macro2::TokenStream) -> bool {
    attr.into_iter().any(|t| match t {
        TokenTree::Punct(p) => p.as_char() == '$',
        TokenTree::Group(g) => has_dollar_path(g.stream()),
        _ => false,
    })
}

fn names_a_macro(tokens: &scan::Tokens, i: usize) -> bool {
    tokens.punct(i + 1, '!')
        || (i > 0 && tokens.punct(i - 1, ':'))
        || tokens.ident(i + 1).as_deref() == Some("as")
}

/// `extern` that opens a block (`extern {`, `extern "C" {`), or stands
/// where the scan cannot tell (a macro's argument). `extern crate` and an
/// ABI on a function or a function pointer type (`extern "C" fn`) are not
/// blocks.
fn is_extern_block(tokens: &scan::Tokens, i: usize) -> bool {
    let abi = matches!(tokens.get(i + 1), Some(TokenTree::Literal(_)));
    let next = if abi { i + 2 } else { i + 1 };
    match tokens.get(next) {
        Some(TokenTree::Ident(id)) => {
            let id = scan::ident_name(id);
            !(id == "crate" || id == "fn")
        }
        _ => true,
    }
}

impl Violation {
    /// The error file's text: the rule, what was found, and the line of the
    /// source it was found on, as rustc would show it.
    pub fn render(&self, file: &str, source: &str) -> String {
        let text = source
            .lines()
            .nth(self.line.saturating_sub(1))
            .unwrap_or("");
        let width = self.line.to_string().len();
        let pad = " ".repeat(width);
        format!(
            "error: forbidden by the task's policy ({rule}): `{what}`\n\
             {pad}--> {file}:{line}:{col}\n\
             {pad} |\n\
             {line} | {text}\n\
             {pad} |\n\
             {pad} = note: the candidate was not compiled; a spec allows this with \
             `[policy] {rule} = \"allow\"`\n",
            rule = self.rule,
            what = self.what,
            line = self.line,
            col = self.column + 1,
        )
    }

    /// One line, for bad-input messages (`unsafe_code: \`unsafe\``).
    pub fn summary(&self) -> String {
        format!(
            "forbidden by the task's policy ({}): `{}`",
            self.rule, self.what
        )
    }
}

#[cfg(test)]
mod tests;
