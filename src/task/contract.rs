//! The harness contract (docs/tasks.md) as a probe: a small generated
//! library that names each item the runner and the judge need, one item a
//! line, with the type they use it at. Compiled against the harness, each
//! error rustc gives points at one line, so the line says which item is
//! wrong and the error code says how (missing, not public, not a type or a
//! function, another signature). Nothing here matches rustc's wording: a
//! new rustc that words an error differently still lands on the same line
//! with the same code.
//!
//! Pure: no IO.

use std::fmt;

use crate::build::package::CompilerDiag;

/// An item of the harness contract, in the order the check reports them:
/// the types first, since a missing type breaks every function that uses
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContractItem {
    Entry,
    Case,
    LoadCases,
    InputLine,
    RunInput,
    Judge,
}

/// Whether an item is a type or a function, as a message names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemKind {
    Type,
    Function,
}

/// What is wrong with a contract item, from rustc's error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// No item of that name at the harness's root (E0412, E0425, E0433).
    Missing,
    /// An item of that name, but a type where a function belongs or the
    /// other way round (E0423, E0573, E0574).
    WrongKind,
    /// There, but not `pub` (E0603).
    Private,
    /// There, with another signature (E0308 and anything else).
    WrongSignature,
}

/// What the probe found wrong: the first broken item, or an error the
/// probe cannot attribute to one (a line of its own header).
#[derive(Debug, Clone, Copy)]
pub enum Finding<'a> {
    Broken {
        item: ContractItem,
        fault: Fault,
        diag: &'a CompilerDiag,
    },
    Unattributed(&'a CompilerDiag),
}

impl ContractItem {
    pub const ALL: [ContractItem; 6] = [
        ContractItem::Entry,
        ContractItem::Case,
        ContractItem::LoadCases,
        ContractItem::InputLine,
        ContractItem::RunInput,
        ContractItem::Judge,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ContractItem::Entry => "Entry",
            ContractItem::Case => "Case",
            ContractItem::LoadCases => "load_cases",
            ContractItem::InputLine => "input_line",
            ContractItem::RunInput => "run_input",
            ContractItem::Judge => "judge",
        }
    }

    pub fn kind(self) -> ItemKind {
        match self {
            ContractItem::Entry | ContractItem::Case => ItemKind::Type,
            _ => ItemKind::Function,
        }
    }

    /// The item as docs/tasks.md declares it.
    pub fn declaration(self) -> &'static str {
        match self {
            ContractItem::Entry => "pub type Entry = fn(&Input) -> Output;",
            ContractItem::Case => "pub struct Case { .. }",
            ContractItem::LoadCases => "pub fn load_cases(text: &str) -> Result<Vec<Case>, String>",
            ContractItem::InputLine => "pub fn input_line(case: &Case) -> String",
            ContractItem::RunInput => {
                "pub fn run_input(entry: Entry, line: &str) -> Result<String, String>"
            }
            ContractItem::Judge => "pub fn judge(case: &Case, output: &str) -> bool",
        }
    }

    /// The probe's line for this item: the types through aliases, so that
    /// a missing `Case` is reported once, on its own line, and the
    /// functions' lines that use it add no error of their own.
    fn probe_line(self, h: &str) -> String {
        match self {
            ContractItem::Entry => format!("type __Entry = ::{h}::Entry;"),
            ContractItem::Case => format!("type __Case = ::{h}::Case;"),
            ContractItem::LoadCases => {
                format!("const _: fn(&str) -> Result<Vec<__Case>, String> = ::{h}::load_cases;")
            }
            ContractItem::InputLine => {
                format!("const _: fn(&__Case) -> String = ::{h}::input_line;")
            }
            ContractItem::RunInput => {
                format!("const _: fn(__Entry, &str) -> Result<String, String> = ::{h}::run_input;")
            }
            ContractItem::Judge => format!("const _: fn(&__Case, &str) -> bool = ::{h}::judge;"),
        }
    }
}

impl fmt::Display for ItemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ItemKind::Type => "type",
            ItemKind::Function => "function",
        })
    }
}

impl Fault {
    /// The fault an error code means on an item's line. Codes of name
    /// resolution say the name is not there (or not usable as named);
    /// every other error on the line is about the item's type.
    pub fn from_code(code: Option<&str>) -> Fault {
        match code {
            Some("E0412" | "E0425" | "E0433" | "E0432" | "E0531") => Fault::Missing,
            Some("E0423" | "E0573" | "E0574" | "E0575" | "E0532") => Fault::WrongKind,
            Some("E0603" | "E0624") => Fault::Private,
            _ => Fault::WrongSignature,
        }
    }
}

/// Lines of the probe before the first item's.
const HEADER: &str = "// The harness contract (docs/tasks.md); generated by assay. One item\n\
                      // a line: an error's line says which item it is about.\n\
                      #![allow(warnings)]\n";

/// The probe's source for a harness whose crate is `harness_crate`.
pub fn probe_source(harness_crate: &str) -> String {
    let mut text = HEADER.to_owned();
    for item in ContractItem::ALL {
        text.push_str(&item.probe_line(harness_crate));
        text.push('\n');
    }
    text
}

/// The 1-based line of `item` in [`probe_source`].
fn probe_line_of(item: ContractItem) -> usize {
    let position = ContractItem::ALL
        .iter()
        .position(|i| *i == item)
        .expect("every item is in ALL");
    HEADER.lines().count() + position + 1
}

/// The first broken item (in the contract's order) among the errors of
/// the probe, whose root rustc names `probe_file`; `None` when it built.
pub fn finding<'a>(diags: &'a [CompilerDiag], probe_file: &str) -> Option<Finding<'a>> {
    let errors: Vec<&CompilerDiag> = diags.iter().filter(|d| d.is_error()).collect();
    let on_line = |line: usize| {
        errors.iter().copied().find(|d| {
            d.at.as_ref()
                .is_some_and(|(file, l)| file.ends_with(probe_file) && *l == line)
        })
    };
    for item in ContractItem::ALL {
        if let Some(diag) = on_line(probe_line_of(item)) {
            return Some(Finding::Broken {
                item,
                fault: Fault::from_code(diag.code.as_deref()),
                diag,
            });
        }
    }
    errors.first().map(|d| Finding::Unattributed(d))
}

/// The 1-based line where `source` (a crate root) defines the top-level
/// item `name`, if it parses and does; `None` for an item that comes in
/// through a `use` or a macro.
pub fn item_line(source: &str, name: &str) -> Option<usize> {
    let file = syn::parse_file(source).ok()?;
    file.items.iter().find_map(|item| {
        let ident = match item {
            syn::Item::Fn(i) => &i.sig.ident,
            syn::Item::Type(i) => &i.ident,
            syn::Item::Struct(i) => &i.ident,
            syn::Item::Enum(i) => &i.ident,
            syn::Item::Union(i) => &i.ident,
            syn::Item::Const(i) => &i.ident,
            syn::Item::Static(i) => &i.ident,
            _ => return None,
        };
        (ident == name).then(|| ident.span().start().line)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::package::DiagLevel;

    fn error(code: &str, line: usize) -> CompilerDiag {
        CompilerDiag {
            level: DiagLevel::Error,
            code: Some(code.to_owned()),
            rendered: String::new(),
            message: format!("{code} here"),
            at: Some(("cands/probe.lib.rs".to_owned(), line)),
            notes: Vec::new(),
            files: Vec::new(),
        }
    }

    #[test]
    fn each_item_has_its_own_line_in_the_probe() {
        let source = probe_source("h");
        let lines: Vec<&str> = source.lines().collect();
        for item in ContractItem::ALL {
            let line = lines[probe_line_of(item) - 1];
            assert!(line.contains(&format!("::h::{}", item.name())), "{line}");
        }
    }

    #[test]
    fn an_error_is_the_item_of_its_line_and_its_code_the_fault() {
        let line = |item| probe_line_of(item);
        let check = |diags: Vec<CompilerDiag>, item: ContractItem, fault: Fault| match finding(
            &diags,
            "cands/probe.lib.rs",
        ) {
            Some(Finding::Broken {
                item: i, fault: f, ..
            }) => {
                assert_eq!((i, f), (item, fault), "{diags:?}")
            }
            other => panic!("{other:?}"),
        };
        check(
            vec![error("E0412", line(ContractItem::Entry))],
            ContractItem::Entry,
            Fault::Missing,
        );
        check(
            vec![error("E0425", line(ContractItem::Entry))],
            ContractItem::Entry,
            Fault::Missing,
        );
        check(
            vec![error("E0308", line(ContractItem::RunInput))],
            ContractItem::RunInput,
            Fault::WrongSignature,
        );
        check(
            vec![error("E0603", line(ContractItem::Judge))],
            ContractItem::Judge,
            Fault::Private,
        );
        check(
            vec![error("E0573", line(ContractItem::Case))],
            ContractItem::Case,
            Fault::WrongKind,
        );
        // The contract's order, not rustc's: the type before the function.
        check(
            vec![
                error("E0308", line(ContractItem::Judge)),
                error("E0412", line(ContractItem::Case)),
            ],
            ContractItem::Case,
            Fault::Missing,
        );
    }

    #[test]
    fn an_item_is_found_at_its_line() {
        let source = "//! h\n\npub type Entry = fn(u64) -> u64;\n\
                      pub struct Case;\nfn run_input(line: &str, e: Entry) {}\n";
        assert_eq!(item_line(source, "Entry"), Some(3));
        assert_eq!(item_line(source, "Case"), Some(4));
        assert_eq!(item_line(source, "run_input"), Some(5));
        assert_eq!(item_line(source, "judge"), None);
    }

    #[test]
    fn an_error_off_the_items_lines_is_unattributed() {
        let diags = vec![error("E0000", 1)];
        assert!(matches!(
            finding(&diags, "cands/probe.lib.rs"),
            Some(Finding::Unattributed(_))
        ));
        assert!(finding(&[], "cands/probe.lib.rs").is_none());
    }
}
