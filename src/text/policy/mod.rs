//! The task's policy: what a candidate's source may contain, checked before
//! any build.
//!
//! By default a candidate may not contain `unsafe` code (nor the attributes
//! the `unsafe_code` lint covers: `no_mangle`, `export_name`,
//! `link_section`), `#[path]`, `include!`/`include_str!`/`include_bytes!`
//! (nor `#[debugger_visualizer]`, which reads a file too), `extern` blocks,
//! assembly, crate-level attributes, attributes and macro calls named by a
//! macro's variable (which the scan cannot see through), paths out of its
//! own module (`super` above its top level, `$crate`, `extern crate self`),
//! `#[macro_export]`, `#[macro_use]`, or an item a program has one of
//! (`#[global_allocator]`, `#[panic_handler]`). A spec may allow any of
//! these in its `[policy]` table (`include = "allow"`); a policy that
//! allows none lets programs share one image as modules of one crate
//! (`Policy::shares_an_image`), their `crate::` paths mapped onto their
//! own module by [`rebase_crate_paths`].
//!
//! The check is two token walks: [`scan`] for what a word or an attribute
//! is on its own, `reach` for paths, which need to know where they stand
//! (the `mod` nesting, a macro's tokens). The scan descends into every
//! group, so a word inside a nested module, a macro's body or a macro's
//! arguments counts as much as one at top level (`m!(include_str)` is
//! refused like `include_str!`), attributes inside `cfg_attr` count, and
//! raw identifiers are read without their `r#`. It is deliberately coarse: a word that
//! would become one of these after expansion is refused wherever it
//! appears. Behind the scan, rustc enforces what it can (the module file
//! starts with `#![forbid(unsafe_code)]`, which nothing inside can lower),
//! and the build's Landlock rulesets keep every file outside the
//! candidate's own unreadable (`sandbox::compile`), for a spelling the scan
//! might miss and for a spec that relaxes the policy.
//!
//! Pure: no I/O. The rules and the set a task relaxes are the spec's plain
//! data (`spec::Rule`, `spec::Policy`); this module holds a source to
//! them. A `Violation` is plain data too; its rule's string form is the
//! probe verdict's argument (`forbidden(unsafe_code)`).

mod reach;
mod rebase;
pub(crate) mod scan;

use proc_macro2::{TokenStream, TokenTree};

pub use rebase::{raw_2015_names, rebase_2015_root_paths, rebase_crate_paths};
use scan::Found;

use crate::spec::{Policy, Rule};

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

/// Items a program has one of. `panic_handler` and `alloc_error_handler`
/// are errors beside std's own, but `alloc_error_handler`'s clash has no
/// span to attribute it by, so all three are refused before any build.
const GLOBAL_ITEM_ATTRS: &[&str] = &["global_allocator", "panic_handler", "alloc_error_handler"];

/// The first thing in `source` that `policy` refuses. A source that does
/// not lex is left to the compiler (which refuses it too).
pub fn check(policy: &Policy, source: &str) -> Result<(), Violation> {
    let Ok(tokens) = source.parse::<TokenStream>() else {
        return Ok(());
    };
    let scanned = scan::first_finding(tokens.clone(), &|found| {
        let (rules, span, what) = judge(found)?;
        let rule = rules.into_iter().find(|rule| !policy.allows(*rule))?;
        Some(Violation::at(rule, span, what))
    });
    let reached = if policy.allows(Rule::OuterPath) {
        None
    } else {
        reach::first_outer_path(tokens)
            .map(|path| Violation::at(Rule::OuterPath, path.span, path.what))
    };
    // Two walks, one answer: whichever comes first in the source.
    let first = match (scanned, reached) {
        (Some(a), Some(b)) => Some(if (b.line, b.column) < (a.line, a.column) {
            b
        } else {
            a
        }),
        (a, b) => a.or(b),
    };
    first.map_or(Ok(()), Err)
}

/// Every rule a finding of the walk breaks, most specific first: an
/// attribute may name several things (`cfg_attr(x, no_mangle, path = ..)`),
/// and relaxing one of them must not let the others through.
fn judge(found: Found<'_>) -> Option<(Vec<Rule>, proc_macro2::Span, String)> {
    match found {
        Found::CrateAttr(attr, span) => {
            let mut rules = attribute_rules(&attr);
            rules.push(Rule::CrateAttribute);
            Some((rules, span, format!("#![{attr}]")))
        }
        Found::Attr(attr, span) => {
            let rules = attribute_rules(&attr);
            (!rules.is_empty()).then(|| (rules, span, format!("#[{attr}]")))
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
                "mod" if is_module_file(tokens, i) => Rule::PathAttribute,
                _ if i > 0 && tokens.punct(i - 1, '$') && tokens.punct(i + 1, '!') => {
                    Rule::MacroIndirection
                }
                _ => return None,
            };
            let what = match (rule, tokens.ident(i + 1)) {
                (Rule::MacroIndirection, _) => format!("${name}!"),
                (Rule::PathAttribute, Some(module)) => format!("mod {module};"),
                _ => name,
            };
            Some((vec![rule], span, what))
        }
    }
}

/// The rules an attribute (the tokens inside its brackets) breaks.
fn attribute_rules(attr: &TokenStream) -> Vec<Rule> {
    let named = |names: &[&str]| scan::names_any(attr.clone(), names);
    [
        (
            starts_with_dollar(attr) || has_dollar_path(attr.clone()),
            Rule::MacroIndirection,
        ),
        (named(UNSAFE_ATTRS), Rule::UnsafeCode),
        (named(&["path"]), Rule::PathAttribute),
        (named(FILE_ATTRS), Rule::Include),
        (named(EXTERN_ATTRS), Rule::ExternBlock),
        (named(&["macro_export"]), Rule::MacroExport),
        (named(&["macro_use"]), Rule::MacroUse),
        (named(GLOBAL_ITEM_ATTRS), Rule::GlobalAllocator),
    ]
    .into_iter()
    .filter_map(|(breaks, rule)| breaks.then_some(rule))
    .collect()
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

/// `mod` that does not open an inline module (`mod c4;`, `mod $name;`):
/// rustc reads the module from a file, and a candidate's file is read as
/// its target's `#[path]` module, so `mod c4;` is the sibling `cands/c4.rs`
/// beside it, compiled into the candidate (a copy of its answer). The
/// keyword only: `r#mod` is a name.
fn is_module_file(tokens: &scan::Tokens, i: usize) -> bool {
    let keyword = matches!(tokens.get(i), Some(TokenTree::Ident(id)) if id == "mod");
    let inline = tokens.ident(i + 1).is_some()
        && matches!(tokens.get(i + 2), Some(TokenTree::Group(g)) if g.delimiter() == proc_macro2::Delimiter::Brace);
    keyword && !inline
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
    fn at(rule: Rule, span: proc_macro2::Span, what: String) -> Violation {
        let at = span.start();
        Violation {
            rule,
            line: at.line,
            column: at.column,
            what,
        }
    }

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
