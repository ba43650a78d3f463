//! The committed candidate's build errors, told apart by where they point.
//!
//! The committed candidate is compiled exactly as every candidate is: its
//! source as a module, then the glue (`package::Package::write_module`)
//! that names the entry at the harness's `Entry` type, on the lines after
//! the source's last. So an error on a glue line is about the entry (a
//! name that resolves to nothing: no such function; anything else: not of
//! type `Entry`), and an error on a source line is the candidate's own.
//!
//! Pure: no IO.

use crate::build::package::CompilerDiag;

/// What is wrong with the committed candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommittedFault {
    /// It defines no function of the entry's name.
    NoEntry,
    /// The entry is not of the harness's `Entry` type.
    EntryType,
    /// An error in its own source, on this line.
    DoesNotCompile { line: usize },
    /// An error elsewhere (the scoring image's generated root).
    Elsewhere,
}

/// The first error of the committed candidate's target, whose module rustc
/// names `module_file` and whose source has `source_lines` lines.
pub fn fault<'a>(
    diags: &'a [CompilerDiag],
    module_file: &str,
    source_lines: usize,
) -> Option<(CommittedFault, &'a CompilerDiag)> {
    let diag = diags.iter().find(|d| d.is_error())?;
    let fault = match &diag.at {
        Some((file, line)) if file.ends_with(module_file) => {
            if *line > source_lines {
                match super::contract::Fault::from_code(diag.code.as_deref()) {
                    super::contract::Fault::Missing => CommittedFault::NoEntry,
                    _ => CommittedFault::EntryType,
                }
            } else {
                CommittedFault::DoesNotCompile { line: *line }
            }
        }
        _ => CommittedFault::Elsewhere,
    };
    Some((fault, diag))
}

/// The 1-based line where `source` defines the top-level function `name`,
/// if it parses and does.
pub fn fn_line(source: &str, name: &str) -> Option<usize> {
    let file = syn::parse_file(source).ok()?;
    file.items.iter().find_map(|item| match item {
        syn::Item::Fn(f) if f.sig.ident == name => Some(f.sig.ident.span().start().line),
        _ => None,
    })
}

/// The function pointer type of the top-level function `name` in
/// `source`, in the source's own words (`fn(&str) -> usize`), for
/// suggesting an `Entry`; `None` for a generic function or none.
pub fn fn_pointer_type(source: &str, name: &str) -> Option<String> {
    let file = syn::parse_file(source).ok()?;
    let sig = file.items.iter().find_map(|item| match item {
        syn::Item::Fn(f) if f.sig.ident == name => Some(&f.sig),
        _ => None,
    })?;
    if !sig.generics.params.is_empty() || sig.variadic.is_some() {
        return None;
    }
    let mut args = Vec::new();
    for input in &sig.inputs {
        match input {
            syn::FnArg::Typed(t) => args.push(span_text(source, &*t.ty)?),
            syn::FnArg::Receiver(_) => return None,
        }
    }
    let output = match &sig.output {
        syn::ReturnType::Default => String::new(),
        syn::ReturnType::Type(_, ty) => format!(" -> {}", span_text(source, &**ty)?),
    };
    Some(format!("fn({}){output}", args.join(", ")))
}

/// The source text a syntax node spans, whitespace runs made one.
fn span_text(source: &str, node: &impl syn::spanned::Spanned) -> Option<String> {
    let text = source.get(span_range(source, node)?)?;
    Some(text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// The byte range of `source` a syntax node spans.
fn span_range(source: &str, node: &impl syn::spanned::Spanned) -> Option<std::ops::Range<usize>> {
    let span = node.span();
    let (start, end) = (span.start(), span.end());
    let offset = |line: usize, column: usize| -> Option<usize> {
        let line_start: usize = source
            .split_inclusive('\n')
            .take(line.checked_sub(1)?)
            .map(str::len)
            .sum();
        let rest = source.get(line_start..)?;
        let within = rest
            .char_indices()
            .nth(column)
            .map_or(rest.len(), |(i, _)| i);
        Some(line_start + within)
    };
    Some(offset(start.line, start.column)?..offset(end.line, end.column)?)
}

/// `source` with the body of its top-level function `name` replaced by
/// `body` (a block), every other line as it was; `None` when `source` does
/// not parse or has no such function.
pub fn with_entry_body(source: &str, name: &str, body: &str) -> Option<String> {
    let file = syn::parse_file(source).ok()?;
    let block = file.items.iter().find_map(|item| match item {
        syn::Item::Fn(f) if f.sig.ident == name => Some(&f.block),
        _ => None,
    })?;
    let range = span_range(source, &**block)?;
    let mut text = String::with_capacity(source.len() + body.len());
    text.push_str(source.get(..range.start)?);
    text.push_str(body);
    text.push_str(source.get(range.end..)?);
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::package::DiagLevel;

    fn error(code: &str, file: &str, line: usize) -> CompilerDiag {
        CompilerDiag {
            level: DiagLevel::Error,
            code: Some(code.to_owned()),
            rendered: String::new(),
            message: String::new(),
            at: Some((file.to_owned(), line)),
            notes: Vec::new(),
            files: Vec::new(),
        }
    }

    #[test]
    fn where_the_first_error_points_says_what_is_wrong() {
        let m = "cands/committed.rs";
        for (diags, want) in [
            (vec![error("E0425", m, 6)], CommittedFault::NoEntry),
            (vec![error("E0308", m, 6)], CommittedFault::EntryType),
            (
                vec![error("E0308", m, 2), error("E0425", m, 6)],
                CommittedFault::DoesNotCompile { line: 2 },
            ),
            (
                vec![error("E0308", "cands/run.main.rs", 3)],
                CommittedFault::Elsewhere,
            ),
        ] {
            assert_eq!(fault(&diags, m, 3).map(|(f, _)| f), Some(want), "{diags:?}");
        }
        assert!(fault(&[], m, 3).is_none());
    }

    #[test]
    fn an_entry_type_is_read_from_the_source() {
        let source = "// x\npub fn double(x: u64) -> u64 { x * 2 }\n\
                      pub fn split(line: &str,\n    n: Option< usize >) -> Vec<String> { todo!() }\n\
                      pub fn g<T>(t: T) {}\npub fn unit(a: &mut [u8]) {}\n";
        assert_eq!(
            fn_pointer_type(source, "double").as_deref(),
            Some("fn(u64) -> u64")
        );
        assert_eq!(
            fn_pointer_type(source, "split").as_deref(),
            Some("fn(&str, Option< usize >) -> Vec<String>")
        );
        assert_eq!(fn_pointer_type(source, "g"), None);
        assert_eq!(
            fn_pointer_type(source, "unit").as_deref(),
            Some("fn(&mut [u8])")
        );
        assert_eq!(fn_pointer_type(source, "missing"), None);
        assert_eq!(fn_line(source, "split"), Some(3));
    }

    #[test]
    fn an_entry_body_is_replaced_and_nothing_else() {
        let source = "pub fn double(x: u64) -> u64 {\n    if x > 7 { x } else { x * 2 }\n}\n\
                      fn helper() -> u8 { 1 }\n";
        assert_eq!(
            with_entry_body(source, "double", "{ stub() }").as_deref(),
            Some("pub fn double(x: u64) -> u64 { stub() }\nfn helper() -> u8 { 1 }\n")
        );
        assert_eq!(with_entry_body(source, "missing", "{}"), None);
        assert_eq!(with_entry_body("fn (", "double", "{}"), None);
    }
}
