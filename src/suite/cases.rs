//! The case split: each top-level assert of a program's `main` is a case
//! that can run alone, where that is safe.
//!
//! MultiPL-E's Rust tests are `fn main() { let candidate = entry;
//! assert_eq!(candidate(...), ...); ... }`. Splitting is safe when `main`
//! is a preamble of plain bindings (`let NAME = PATH_OR_LITERAL;`, no
//! `mut`, nothing run) followed only by assert statements: then running
//! the preamble and assert i alone asks exactly what the whole `main` asks
//! at assert i, given that the asserts before it passed. Anything else (a
//! loop, a binding after an assert, a binding that runs code, an item in
//! `main`, attributes on it, a signature other than `fn main()`) and the
//! whole `main` is one case. The split is computed on syn's tree; the text
//! of each statement is cut from the program by its span, so literals and
//! macros come out byte for byte.
//!
//! A split program is handed on as one *dispatch program*: the program with
//! its `main` renamed, one function per case, and a `main` that reads a
//! nonce line from stdin, runs `whole` or case `i` (its first argument),
//! and only when that returns prints [`DONE_MARKER`] and the nonce on a
//! line of its own. A run that exits 0 without that line left early
//! (`std::process::exit(0)` in the candidate), which is not a pass.

use std::ops::Range;

use proc_macro2::LineColumn;
use syn::spanned::Spanned;
use syn::{Expr, Item, Pat, Stmt};

/// The function of the tests' module that runs `whole` or case `i`;
/// returns false for anything else.
pub const DISPATCH_FN: &str = "__assay_dispatch";

/// What the dispatch `main` prints after the case returns, then the nonce.
pub const DONE_MARKER: &str = "assay-case-done ";

/// A program and how its `main` splits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitProgram {
    pub program: String,
    pub split: Split,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Split {
    /// The whole `main` is one case.
    Whole { reason: WholeReason },
    /// `main` is `preamble` then `cases`, each a statement's source text.
    Cases {
        /// Byte range of `main`'s name in the program (renamed on dispatch).
        main_name: Range<usize>,
        preamble: Vec<String>,
        cases: Vec<Case>,
    },
}

/// One assert of `main`: its source text and its first line in the program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    pub line: usize,
    pub text: String,
}

/// Why `main` was not split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WholeReason {
    /// syn could not parse the program (rustc will most likely refuse it
    /// too). The dispatch program is the program unchanged, so a runner
    /// can only judge it by its exit status.
    Unparsed,
    NoMain,
    /// `main` has attributes, parameters, generics, a return type or
    /// qualifiers.
    MainSignature {
        main_name: Range<usize>,
    },
    /// A statement of `main` that is neither a plain binding before the
    /// asserts nor an assert (its line).
    Statement {
        main_name: Range<usize>,
        line: usize,
    },
    NoAssert {
        main_name: Range<usize>,
    },
}

impl WholeReason {
    fn main_name(&self) -> Option<&Range<usize>> {
        match self {
            WholeReason::Unparsed | WholeReason::NoMain => None,
            WholeReason::MainSignature { main_name }
            | WholeReason::Statement { main_name, .. }
            | WholeReason::NoAssert { main_name } => Some(main_name),
        }
    }
}

/// Splits `program`'s `main` into cases where that is safe.
pub fn split_cases(program: &str) -> SplitProgram {
    let split = match split(program) {
        Ok(cases) => cases,
        Err(reason) => Split::Whole { reason },
    };
    SplitProgram {
        program: program.to_owned(),
        split,
    }
}

impl SplitProgram {
    /// How many cases a runner runs: the asserts, or 1 for a whole `main`.
    pub fn case_count(&self) -> usize {
        match &self.split {
            Split::Cases { cases, .. } => cases.len(),
            Split::Whole { .. } => 1,
        }
    }

    /// Whether the dispatch program prints [`DONE_MARKER`] (everything but
    /// an unparsed program, which is run unchanged).
    pub fn marks_completion(&self) -> bool {
        !matches!(
            self.split,
            Split::Whole {
                reason: WholeReason::Unparsed | WholeReason::NoMain
            }
        )
    }

    /// The program to build once and run per case: argument `whole` runs
    /// the original `main`, argument `i` runs case i (for a whole `main`,
    /// `0` is the whole `main`).
    pub fn dispatch_program(&self) -> String {
        let Some(main_name) = self.main_name() else {
            return self.program.clone();
        };
        let mut out = self.renamed(main_name);
        let mut arms = String::from("        \"whole\" => __assay_main(),\n");
        match &self.split {
            Split::Cases {
                preamble, cases, ..
            } => {
                for (i, case) in cases.iter().enumerate() {
                    out.push_str(&case_function(i, preamble, case));
                    arms.push_str(&format!("        \"{i}\" => __assay_case_{i}(),\n"));
                }
            }
            Split::Whole { .. } => arms.push_str("        \"0\" => __assay_main(),\n"),
        }
        out.push_str(&dispatch_main(&arms));
        out
    }

    /// A program that runs case `i` alone and nothing else, by plain exit
    /// status (no marker); for a whole `main`, the program itself.
    pub fn case_program(&self, i: usize) -> Option<String> {
        match &self.split {
            Split::Cases {
                main_name,
                preamble,
                cases,
            } => {
                let case = cases.get(i)?;
                let mut out = self.renamed(main_name);
                out.push_str(&case_function(i, preamble, case));
                out.push_str(&format!("\nfn main() {{\n    __assay_case_{i}();\n}}\n"));
                Some(out)
            }
            Split::Whole { .. } => (i == 0).then(|| self.program.clone()),
        }
    }

    /// The body of a program's tests module (`suite::module`): the tests
    /// with `main` renamed, one function per case, and the dispatch
    /// function the image's `main` calls with `whole` or a case's number
    /// (for a whole `main`, `0` is the whole `main`). Returns false for any
    /// other argument. Only for tests that parsed and have a `main`.
    pub fn tests_module_body(&self) -> String {
        let Some(main_name) = self.main_name() else {
            return self.program.clone();
        };
        let mut out = self.renamed(main_name);
        let mut arms = String::from("        \"whole\" => __assay_main(),\n");
        match &self.split {
            Split::Cases {
                preamble, cases, ..
            } => {
                for (i, case) in cases.iter().enumerate() {
                    out.push_str(&case_function(i, preamble, case));
                    arms.push_str(&format!("        \"{i}\" => __assay_case_{i}(),\n"));
                }
            }
            Split::Whole { .. } => arms.push_str("        \"0\" => __assay_main(),\n"),
        }
        out.push_str(&format!(
            "\n#[allow(unreachable_code)]\npub(crate) fn {}(which: &str) -> bool {{\n\
             \x20   match which {{\n{arms}\
             \x20       _ => return false,\n\
             \x20   }}\n\
             \x20   true\n\
             }}\n",
            DISPATCH_FN
        ));
        out
    }

    fn main_name(&self) -> Option<&Range<usize>> {
        match &self.split {
            Split::Cases { main_name, .. } => Some(main_name),
            Split::Whole { reason } => reason.main_name(),
        }
    }

    /// The program with `main` renamed `__assay_main` (allowed to be unused).
    fn renamed(&self, main_name: &Range<usize>) -> String {
        let p = &self.program;
        format!(
            "{}__assay_main{}\n",
            &p[..main_name.start],
            &p[main_name.end..]
        )
    }
}

fn case_function(i: usize, preamble: &[String], case: &Case) -> String {
    let mut f = format!("\n#[allow(unused_variables, dead_code)]\nfn __assay_case_{i}() {{\n");
    for binding in preamble {
        f.push_str("    ");
        f.push_str(binding);
        f.push('\n');
    }
    f.push_str("    ");
    f.push_str(&case.text);
    f.push_str("\n}\n");
    f
}

fn dispatch_main(arms: &str) -> String {
    format!(
        "\n#[allow(unreachable_code)]\nfn main() {{\n\
         \x20   let mut __assay_nonce = ::std::string::String::new();\n\
         \x20   let _ = ::std::io::stdin().read_line(&mut __assay_nonce);\n\
         \x20   let __assay_which = ::std::env::args().nth(1).unwrap_or_default();\n\
         \x20   match __assay_which.as_str() {{\n{arms}\
         \x20       _ => ::std::process::exit(64),\n\
         \x20   }}\n\
         \x20   // Reached only when the case returned: an early exit never prints it.\n\
         \x20   use ::std::io::Write as _;\n\
         \x20   let mut __assay_out = ::std::io::stdout().lock();\n\
         \x20   let _ = ::std::write!(__assay_out, \"\\n{DONE_MARKER}{{}}\\n\", __assay_nonce.trim_end());\n\
         \x20   let _ = __assay_out.flush();\n\
         }}\n"
    )
}

/// Whether a dispatch run's stdout ends with the marker line for `nonce`.
pub fn case_finished(stdout: &[u8], nonce: &str) -> bool {
    let line = format!("\n{DONE_MARKER}{nonce}\n");
    stdout.ends_with(line.as_bytes())
}

fn split(program: &str) -> Result<Split, WholeReason> {
    if program.starts_with('\u{feff}') || program.starts_with("#!") {
        // syn strips these and its spans would not be the program's offsets.
        return Err(WholeReason::Unparsed);
    }
    let file = syn::parse_file(program).map_err(|_| WholeReason::Unparsed)?;
    let lines = LineStarts::new(program);
    let main = file
        .items
        .iter()
        .find_map(|item| match item {
            Item::Fn(f) if f.sig.ident == "main" => Some(f),
            _ => None,
        })
        .ok_or(WholeReason::NoMain)?;
    let ident = main.sig.ident.span();
    let main_name = lines.range(program, ident.start(), ident.end());
    let sig = &main.sig;
    let plain = main.attrs.is_empty()
        && sig.inputs.is_empty()
        && sig.generics.params.is_empty()
        && sig.generics.where_clause.is_none()
        && matches!(sig.output, syn::ReturnType::Default)
        && sig.constness.is_none()
        && sig.asyncness.is_none()
        && sig.unsafety.is_none()
        && sig.abi.is_none()
        && sig.variadic.is_none();
    if !plain {
        return Err(WholeReason::MainSignature { main_name });
    }
    let mut preamble = Vec::new();
    let mut cases = Vec::new();
    for stmt in &main.block.stmts {
        let text = || lines.text(program, stmt.span().start(), stmt.span().end());
        if cases.is_empty() && is_plain_binding(stmt) {
            preamble.push(text());
        } else if is_assert(stmt) {
            cases.push(Case {
                line: stmt.span().start().line,
                text: text(),
            });
        } else {
            let line = stmt.span().start().line;
            return Err(WholeReason::Statement { main_name, line });
        }
    }
    if cases.is_empty() {
        return Err(WholeReason::NoAssert { main_name });
    }
    Ok(Split::Cases {
        main_name,
        preamble,
        cases,
    })
}

/// `let NAME = PATH;` or `let NAME: TYPE = LITERAL;`: nothing runs, nothing
/// can change, so every case may repeat it.
fn is_plain_binding(stmt: &Stmt) -> bool {
    let Stmt::Local(local) = stmt else {
        return false;
    };
    let pat = match &local.pat {
        Pat::Type(t) => &*t.pat,
        p => p,
    };
    let Pat::Ident(ident) = pat else {
        return false;
    };
    let Some(init) = &local.init else {
        return false;
    };
    let inert = match &*init.expr {
        Expr::Path(p) => p.qself.is_none() && p.attrs.is_empty(),
        Expr::Lit(l) => l.attrs.is_empty(),
        _ => false,
    };
    local.attrs.is_empty()
        && ident.attrs.is_empty()
        && ident.by_ref.is_none()
        && ident.mutability.is_none()
        && ident.subpat.is_none()
        && init.diverge.is_none()
        && inert
}

/// `assert!(...)`, `assert_eq!(...)` or `assert_ne!(...)` as a statement.
fn is_assert(stmt: &Stmt) -> bool {
    let mac = match stmt {
        Stmt::Macro(m) if m.attrs.is_empty() => &m.mac,
        Stmt::Expr(Expr::Macro(m), _) if m.attrs.is_empty() => &m.mac,
        _ => return false,
    };
    let segments = &mac.path.segments;
    let name = segments
        .last()
        .map(|s| s.ident.to_string())
        .unwrap_or_default();
    let std_path = match segments.len() {
        1 => true,
        2 => ["std", "core"].iter().any(|c| segments[0].ident == c),
        _ => false,
    };
    std_path && ["assert", "assert_eq", "assert_ne"].contains(&name.as_str())
}

/// Byte offset of each line's start, to turn proc-macro2's line and
/// character column into byte offsets.
struct LineStarts(Vec<usize>);

impl LineStarts {
    fn new(text: &str) -> LineStarts {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineStarts(starts)
    }

    fn offset(&self, text: &str, at: LineColumn) -> usize {
        let start = self.0[at.line - 1];
        text[start..]
            .char_indices()
            .nth(at.column)
            .map_or(text.len(), |(i, _)| start + i)
    }

    fn range(&self, text: &str, start: LineColumn, end: LineColumn) -> Range<usize> {
        self.offset(text, start)..self.offset(text, end)
    }

    fn text(&self, text: &str, start: LineColumn, end: LineColumn) -> String {
        text[self.range(text, start, end)].to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "fn double(x: i32) -> i32 {\n    x * 2\n}\n\n";

    fn cases_of(main: &str) -> Result<(Vec<String>, Vec<String>), WholeReason> {
        match split_cases(&format!("{HEAD}{main}")).split {
            Split::Cases {
                preamble, cases, ..
            } => Ok((preamble, cases.into_iter().map(|c| c.text).collect())),
            Split::Whole { reason } => Err(reason),
        }
    }

    #[test]
    fn splits_multiple_style_mains_byte_for_byte() {
        let main = "fn main() {\n    let candidate = double;\n    assert_eq!(candidate(1), 2);\n    assert_eq!(candidate(\n        -3,\n    ), -6 /* why */);\n    assert!(candidate(0) == 0, \"zero: {}\", \"\\n}\");\n    std::assert_ne!(candidate(2), 5)\n}\n";
        let (preamble, cases) = cases_of(main).unwrap();
        assert_eq!(preamble, vec!["let candidate = double;"]);
        assert_eq!(
            cases,
            vec![
                "assert_eq!(candidate(1), 2);",
                "assert_eq!(candidate(\n        -3,\n    ), -6 /* why */);",
                "assert!(candidate(0) == 0, \"zero: {}\", \"\\n}\");",
                "std::assert_ne!(candidate(2), 5)",
            ]
        );
    }

    #[test]
    fn anything_unsure_keeps_main_whole() {
        let whole_at = |main: &str| match cases_of(main) {
            Err(WholeReason::Statement { line, .. }) => line,
            other => panic!("{main}: {other:?}"),
        };
        // HEAD is 4 lines; main's first statement is on line 6.
        assert_eq!(
            whole_at("fn main() {\n    for i in 0..3 { assert_eq!(double(i), 2 * i); }\n}"),
            6
        );
        assert_eq!(whole_at("fn main() {\n    assert_eq!(double(1), 2);\n    let c = double;\n    assert_eq!(c(1), 2);\n}"), 7);
        assert_eq!(
            whole_at("fn main() {\n    let v = double(2);\n    assert_eq!(v, 4);\n}"),
            6
        );
        assert_eq!(
            whole_at("fn main() {\n    let mut c = double;\n    assert_eq!(c(1), 2);\n}"),
            6
        );
        assert_eq!(
            whole_at("fn main() {\n    println!(\"hi\");\n    assert!(true);\n}"),
            6
        );
        assert_eq!(
            whole_at("fn main() {\n    fn inner() {}\n    assert!(true);\n}"),
            6
        );
        assert_eq!(whole_at("fn main() {\n    debug_assert!(true);\n}"), 6);
        assert!(matches!(
            cases_of("fn main() {}"),
            Err(WholeReason::NoAssert { .. })
        ));
        assert!(matches!(
            cases_of("#[allow(unused)]\nfn main() { assert!(true); }"),
            Err(WholeReason::MainSignature { .. })
        ));
        assert!(matches!(
            cases_of("fn main() -> Result<(), ()> { assert!(true); Ok(()) }"),
            Err(WholeReason::MainSignature { .. })
        ));
        assert!(matches!(cases_of("fn mian() {}"), Err(WholeReason::NoMain)));
        assert!(matches!(
            cases_of("fn main() { assert!(true) "),
            Err(WholeReason::Unparsed)
        ));
    }

    #[test]
    fn typed_and_literal_bindings_are_preamble() {
        let (preamble, cases) = cases_of(
            "fn main() {\n    let candidate: fn(i32) -> i32 = double;\n    let limit = 10;\n    assert!(candidate(limit) == 20);\n}",
        )
        .unwrap();
        assert_eq!(
            preamble,
            vec!["let candidate: fn(i32) -> i32 = double;", "let limit = 10;"]
        );
        assert_eq!(cases.len(), 1);
    }

    #[test]
    fn offsets_survive_multibyte_text() {
        let program = "/// Dépasse « ceci ».\nfn f() -> &'static str { \"é\" }\nfn main() {\n    let c = f;\n    assert_eq!(c(), \"é\"); assert_eq!(\"ü\", \"ü\");\n}\n";
        let split = split_cases(program);
        let Split::Cases {
            cases, main_name, ..
        } = &split.split
        else {
            panic!("{split:?}");
        };
        assert_eq!(&program[main_name.clone()], "main");
        assert_eq!(cases[0].text, "assert_eq!(c(), \"é\");");
        assert_eq!(cases[1].text, "assert_eq!(\"ü\", \"ü\");");
        assert_eq!((cases[0].line, cases[1].line), (5, 5));
    }

    #[test]
    fn dispatch_program_parses_and_has_a_function_per_case() {
        let program = format!(
            "{HEAD}fn main() {{\n    let candidate = double;\n    assert_eq!(candidate(1), 2);\n    assert_eq!(candidate(2), 4);\n}}\n"
        );
        let split = split_cases(&program);
        assert_eq!(split.case_count(), 2);
        assert!(split.marks_completion());
        let dispatch = split.dispatch_program();
        let file = syn::parse_file(&dispatch).expect(&dispatch);
        let fns: Vec<String> = file
            .items
            .iter()
            .filter_map(|i| match i {
                Item::Fn(f) => Some(f.sig.ident.to_string()),
                _ => None,
            })
            .collect();
        assert_eq!(
            fns,
            [
                "double",
                "__assay_main",
                "__assay_case_0",
                "__assay_case_1",
                "main"
            ]
        );
        assert!(dispatch.contains("\"1\" => __assay_case_1(),"));
        let alone = split.case_program(1).unwrap();
        assert!(alone.contains("fn __assay_case_1() {\n    let candidate = double;\n    assert_eq!(candidate(2), 4);\n}"));
        assert!(!alone.contains("__assay_case_0"));
        assert_eq!(split.case_program(2), None);
    }

    #[test]
    fn whole_mains_dispatch_to_themselves() {
        let program = format!(
            "{HEAD}fn main() {{\n    for i in 0..3 {{ assert_eq!(double(i), 2 * i); }}\n}}\n"
        );
        let split = split_cases(&program);
        assert_eq!(split.case_count(), 1);
        let dispatch = split.dispatch_program();
        assert!(dispatch.contains("\"0\" => __assay_main(),"));
        syn::parse_file(&dispatch).expect(&dispatch);
        assert_eq!(split.case_program(0).as_deref(), Some(program.as_str()));
        let broken = split_cases("fn main() {");
        assert!(!broken.marks_completion());
        assert_eq!(broken.dispatch_program(), "fn main() {");
    }

    #[test]
    fn the_marker_must_end_the_output() {
        assert!(case_finished(b"noise\nassay-case-done 42\n", "42"));
        assert!(case_finished(b"\nassay-case-done 42\n", "42"));
        assert!(!case_finished(b"\nassay-case-done 41\n", "42"));
        assert!(!case_finished(b"\nassay-case-done 42\nmore\n", "42"));
        assert!(!case_finished(b"", "42"));
    }
}
