//! A suite program as a module of an image that may hold many programs.
//!
//! MultiPL-E builds `prompt + completion + tests` as one file, so whatever
//! the completion defines shares the tests' scope: a completion that closes
//! the entry with an indented `}` (the `"\n}"` stop token does not cut it)
//! and then defines `macro_rules! assert_eq` or `vec` turns every assert
//! into nothing. Here a program is cut where the problem's tests begin
//! (the tests are the problem's own text, so the cut is known, not
//! guessed), and the two parts are laid out apart:
//!
//! - the *solution* (the prompt and the completion, or a chat reply's
//!   code) is the program's module, `cN`, its text unchanged but for glue
//!   on its first line (so every line number is the program's);
//! - the *tests* are a child module of it, `cN::__assay_tests`, in a file
//!   of their own (`cN.tests.rs`), declared before every item of the
//!   solution: a `macro_rules!` of the solution is never in their textual
//!   scope, and child modules see none of their parent's names unless they
//!   import them. They import, by name, the entry and the items of the
//!   prompt that they use, and nothing else: their `assert_eq!`, `vec!`,
//!   `String` are std's.
//!
//! One thing of the solution's still reaches the tests: the entry's return
//! value, whose type the solution could have made its own (a `struct Vec`
//! that the prompt's `-> Vec<i32>` then names, or a chat reply's
//! `-> impl PartialEq<Vec<i32>>`) with an `==` that always holds. So the
//! tests module also holds a *signature pin*: a function with the prompt's
//! signature, written in the tests' scope, that returns the entry's result.
//! It compiles only if the entry returns the type the prompt's signature
//! names in a scope the solution cannot touch.
//!
//! The solution's `crate::` paths are rebased onto its module
//! (`policy::rebase_crate_paths`): an honest program that names its own
//! items through the crate root still builds, as it does in one file.
//!
//! Glue on the solution's first line also declares an empty function for
//! every function the tests define at top level (`main`): a solution that
//! defines one too fails as it fails in MultiPL-E's one file, where the two
//! would clash.
//!
//! Pure: no IO.

use std::collections::BTreeSet;
use std::str::FromStr;

use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens;
use syn::{FnArg, Item, ReturnType, UseTree};

use super::cases::{split_cases, Split, SplitProgram, WholeReason};
use super::program::entry_name;
use super::Problem;

/// The tests' module inside a program's module.
pub const TESTS_MODULE: &str = "__assay_tests";

/// The function of the tests' module that runs `whole` or case `i`;
/// returns false for anything else.
pub const DISPATCH_FN: &str = "__assay_dispatch";

/// A program laid out as a module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramModule {
    /// The module file's text: the solution, glue on its first line.
    pub solution: String,
    /// The tests module's file text.
    pub tests: String,
    /// How the tests' `main` splits into cases.
    pub split: Split,
}

/// Why a program cannot be laid out as a module. A program that syn cannot
/// read is never run as it stands and judged by its exit status: the
/// early-exit marker needs the tests cut out of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unlaid {
    /// syn cannot parse the solution (nor, then, say where its items
    /// end), or the program does not end with the problem's tests.
    Unparsed,
    /// The problem's tests do not parse, or hold no `main`.
    BrokenTests,
}

impl Unlaid {
    pub const ALL: [Unlaid; 2] = [Unlaid::Unparsed, Unlaid::BrokenTests];

    /// The stable reason, as stored (`unparsed`, `broken_tests`).
    pub fn as_str(self) -> &'static str {
        match self {
            Unlaid::Unparsed => "unparsed",
            Unlaid::BrokenTests => "broken_tests",
        }
    }
}

impl std::fmt::Display for Unlaid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Unlaid {
    type Err = String;
    fn from_str(s: &str) -> Result<Unlaid, String> {
        Unlaid::ALL
            .into_iter()
            .find(|u| u.as_str() == s)
            .ok_or_else(|| format!("`{s}` is not a reason to refuse a program"))
    }
}

/// The root of an image holding the programs `modules` (`c3`, `c17`),
/// each declared from its file beside the root, and a `main` that reads the
/// nonce line from stdin, runs what argument 2 names (`whole`, or a case's
/// number) of the program argument 1 names, and prints
/// [`super::cases::DONE_MARKER`] and the nonce only when that returned: a
/// run that exits 0 without it left early. Anything else it is asked for
/// exits 64.
pub fn image_root(modules: &[String]) -> String {
    let mut text = String::from(
        "// An image of suite programs; generated by assay. Each program is a\n\
         // module, run in a process of its own: argument 1 names it.\n\
         #![allow(warnings)]\n",
    );
    let mut arms = String::new();
    for module in modules {
        text.push_str(&format!("#[path = \"{module}.rs\"]\nmod {module};\n"));
        arms.push_str(&format!(
            "        \"{module}\" => {module}::{TESTS_MODULE}::{DISPATCH_FN}(&__assay_which),\n"
        ));
    }
    text.push_str(&format!(
        "\nfn main() {{\n\
         \x20   let mut __assay_nonce = ::std::string::String::new();\n\
         \x20   let _ = ::std::io::stdin().read_line(&mut __assay_nonce);\n\
         \x20   let mut __assay_args = ::std::env::args().skip(1);\n\
         \x20   let __assay_program = __assay_args.next().unwrap_or_default();\n\
         \x20   let __assay_which = __assay_args.next().unwrap_or_default();\n\
         \x20   let __assay_ran = match __assay_program.as_str() {{\n{arms}\
         \x20       _ => false,\n\
         \x20   }};\n\
         \x20   if !__assay_ran {{\n\
         \x20       ::std::process::exit(64);\n\
         \x20   }}\n\
         \x20   // Reached only when the case returned: an early exit never prints it.\n\
         \x20   use ::std::io::Write as _;\n\
         \x20   let mut __assay_out = ::std::io::stdout().lock();\n\
         \x20   let _ = ::std::write!(__assay_out, \"\\n{marker}{{}}\\n\", __assay_nonce.trim_end());\n\
         \x20   let _ = __assay_out.flush();\n\
         }}\n",
        marker = super::cases::DONE_MARKER,
    ));
    text
}

/// The tests' part of a problem: its tests without the `}` they open with
/// (which closes the prompt's function, so it belongs to the solution).
pub fn tests_part(problem: &Problem) -> &str {
    let trimmed = problem.tests.trim_start();
    trimmed.strip_prefix('}').unwrap_or(&problem.tests)
}

/// Lays out `program` (a program of `problem`, by either mode's rule) as
/// module `module` (`c17`), whose tests file is `{module}.tests.rs`
/// beside it. `forbid_unsafe` puts `#![forbid(unsafe_code)]` first.
pub fn lay_out(
    problem: &Problem,
    program: &str,
    module: &str,
    forbid_unsafe: bool,
) -> Result<ProgramModule, Unlaid> {
    let tests = tests_part(problem);
    let solution = program.strip_suffix(tests).ok_or(Unlaid::Unparsed)?;
    // An honest solution's `crate::` paths name its own items: the module's
    // now (lines never move; columns after an inserted path do).
    let solution = &crate::policy::rebase_crate_paths(solution, &[module]);
    let shebang = solution
        .strip_prefix("#!")
        .is_some_and(|rest| !rest.trim_start().starts_with('['));
    if solution.starts_with('\u{feff}') || shebang {
        // syn strips these, and its offsets would not be the text's.
        return Err(Unlaid::Unparsed);
    }
    let file = syn::parse_file(solution).map_err(|_| Unlaid::Unparsed)?;
    let split = split_cases(tests);
    if let Split::Whole {
        reason: WholeReason::Unparsed | WholeReason::NoMain,
    } = split.split
    {
        return Err(Unlaid::BrokenTests);
    }
    let tests_file = syn::parse_file(tests).map_err(|_| Unlaid::BrokenTests)?;
    let prompt = PromptNames::of(problem);
    let used = idents(tests);
    let own: BTreeSet<String> = tests_file.items.iter().flat_map(declared).collect();
    let pin = prompt.signature_pin();
    let mut imports: BTreeSet<String> = used
        .iter()
        .chain(pin.as_ref().map_or(&BTreeSet::new(), |p| &p.names))
        .filter(|name| prompt.declared.contains(*name) && !own.contains(*name))
        .cloned()
        .collect();
    if let Some(entry) = &prompt.entry {
        if used.contains(entry) && !own.contains(entry) {
            imports.insert(entry.clone());
        }
    }
    let clashes: Vec<String> = tests_file
        .items
        .iter()
        .filter_map(|item| match item {
            Item::Fn(f) => Some(f.sig.ident.to_string()),
            _ => None,
        })
        .collect();
    Ok(ProgramModule {
        solution: solution_text(solution, &file, module, &clashes, forbid_unsafe),
        tests: tests_text(&split, &imports, pin.as_ref().map(|p| p.text.as_str())),
        split: split.split,
    })
}

/// The solution with its first-line glue: `#![forbid(unsafe_code)]` at the
/// start, then, after the solution's own inner attributes (which must come
/// first), the tests' module and the functions the tests' file defines.
fn solution_text(
    solution: &str,
    file: &syn::File,
    module: &str,
    clashes: &[String],
    forbid_unsafe: bool,
) -> String {
    let after_attrs = file
        .attrs
        .last()
        .map_or(0, |attr| byte_offset(solution, attr_end(attr)));
    let mut glue = format!(
        " #[allow(unused_imports, dead_code, unused_macros)] pub(crate) mod {TESTS_MODULE} \
         {{ include!(\"{module}.tests.rs\"); }}"
    );
    for name in clashes {
        glue.push_str(&format!(" #[allow(dead_code)] fn {name}() {{}}"));
    }
    glue.push(' ');
    let mut text = String::with_capacity(solution.len() + glue.len() + 32);
    if forbid_unsafe {
        text.push_str("#![forbid(unsafe_code)] ");
    }
    text.push_str(&solution[..after_attrs]);
    text.push_str(&glue);
    text.push_str(&solution[after_attrs..]);
    text
}

fn attr_end(attr: &syn::Attribute) -> proc_macro2::LineColumn {
    use syn::spanned::Spanned;
    attr.span().end()
}

/// The byte offset of a proc-macro2 line and character column in `text`.
fn byte_offset(text: &str, at: proc_macro2::LineColumn) -> usize {
    let start: usize = text
        .split_inclusive('\n')
        .take(at.line.saturating_sub(1))
        .map(str::len)
        .sum();
    text[start..]
        .char_indices()
        .nth(at.column)
        .map_or(text.len(), |(i, _)| start + i)
}

/// The tests' module file: the imports, the tests with `main` renamed, one
/// function per case, the signature pin and the dispatch function.
fn tests_text(split: &SplitProgram, imports: &BTreeSet<String>, pin: Option<&str>) -> String {
    let mut text = String::from("// The problem's tests; laid out by assay.\n");
    if !imports.is_empty() {
        let names: Vec<&str> = imports.iter().map(String::as_str).collect();
        text.push_str(&format!("use super::{{{}}};\n", names.join(", ")));
    }
    text.push_str(&split.tests_module_body());
    if let Some(pin) = pin {
        text.push_str(pin);
    }
    text
}

/// What the prompt declares: its top-level names and the entry's signature.
struct PromptNames {
    declared: BTreeSet<String>,
    entry: Option<String>,
    signature: Option<syn::Signature>,
}

/// The signature pin's text and the names its types use.
struct Pin {
    text: String,
    names: BTreeSet<String>,
}

impl PromptNames {
    fn of(problem: &Problem) -> PromptNames {
        let entry = entry_name(problem);
        // The prompt ends inside the entry's body; closed, it parses.
        let file = syn::parse_file(&format!("{}\n}}", problem.prompt)).ok();
        let items = file.as_ref().map_or(&[][..], |f| &f.items[..]);
        let declared = items.iter().flat_map(declared).collect();
        let signature = items.iter().rev().find_map(|item| match item {
            Item::Fn(f) if Some(f.sig.ident.to_string()) == entry => Some(f.sig.clone()),
            _ => None,
        });
        PromptNames {
            declared,
            entry,
            signature,
        }
    }

    /// `fn __assay_signature(__assay_a0: T0, ..) -> R { super::entry(__assay_a0, ..) }`
    /// with the prompt's generics, parameter types, return type and where
    /// clause; `None` when the entry has none to pin (no signature found,
    /// a receiver, `async`, C variadics).
    fn signature_pin(&self) -> Option<Pin> {
        let sig = self.signature.as_ref()?;
        if sig.receiver().is_some() || sig.asyncness.is_some() || sig.variadic.is_some() {
            return None;
        }
        let mut params = Vec::new();
        let mut args = Vec::new();
        let mut types = TokenStream::new();
        for (i, input) in sig.inputs.iter().enumerate() {
            let FnArg::Typed(typed) = input else {
                return None;
            };
            params.push(format!("__assay_a{i}: {}", typed.ty.to_token_stream()));
            args.push(format!("__assay_a{i}"));
            typed.ty.to_tokens(&mut types);
        }
        let ret = match &sig.output {
            ReturnType::Default => "()".to_owned(),
            ReturnType::Type(_, ty) => {
                ty.to_tokens(&mut types);
                ty.to_token_stream().to_string()
            }
        };
        sig.generics.to_tokens(&mut types);
        let where_clause = sig
            .generics
            .where_clause
            .as_ref()
            .map(|w| w.to_token_stream().to_string())
            .unwrap_or_default();
        let generics = &sig.generics;
        let text = format!(
            "\n// The prompt's signature, in the tests' scope: the entry must return\n\
             // what the prompt says, as std and the prompt name it.\n\
             #[allow(dead_code, unused_variables, unused_mut)]\n\
             fn __assay_signature{generics}({params}) -> {ret} {where_clause} {{\n\
             \x20   super::{entry}({args})\n}}\n",
            generics = generics.to_token_stream(),
            params = params.join(", "),
            entry = sig.ident,
            args = args.join(", "),
        );
        Some(Pin {
            text,
            names: idents_of(types),
        })
    }
}

/// The names a top-level item brings into its module's scope.
fn declared(item: &Item) -> Vec<String> {
    let one = |ident: &syn::Ident| vec![ident.to_string()];
    match item {
        Item::Fn(f) => one(&f.sig.ident),
        Item::Struct(s) => one(&s.ident),
        Item::Enum(e) => one(&e.ident),
        Item::Union(u) => one(&u.ident),
        Item::Type(t) => one(&t.ident),
        Item::Trait(t) => one(&t.ident),
        Item::TraitAlias(t) => one(&t.ident),
        Item::Const(c) => one(&c.ident),
        Item::Static(s) => one(&s.ident),
        Item::Mod(m) => one(&m.ident),
        Item::ExternCrate(e) => one(e.rename.as_ref().map_or(&e.ident, |(_, r)| r)),
        Item::Macro(m) => m.ident.iter().map(ToString::to_string).collect(),
        Item::Use(u) => {
            let mut names = Vec::new();
            use_names(&u.tree, &mut names);
            names
        }
        _ => Vec::new(),
    }
}

fn use_names(tree: &UseTree, names: &mut Vec<String>) {
    match tree {
        UseTree::Path(p) => use_names(&p.tree, names),
        UseTree::Name(n) if n.ident != "self" => names.push(n.ident.to_string()),
        UseTree::Name(_) | UseTree::Glob(_) => {}
        UseTree::Rename(r) => names.push(r.rename.to_string()),
        UseTree::Group(g) => g.items.iter().for_each(|t| use_names(t, names)),
    }
}

/// Every identifier in `text`'s tokens, macro arguments included.
fn idents(text: &str) -> BTreeSet<String> {
    TokenStream::from_str(text).map_or_else(|_| BTreeSet::new(), idents_of)
}

fn idents_of(tokens: TokenStream) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![tokens];
    while let Some(stream) = stack.pop() {
        for tree in stream {
            match tree {
                TokenTree::Ident(ident) => {
                    out.insert(ident.to_string());
                }
                TokenTree::Group(group) => stack.push(group.stream()),
                _ => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
