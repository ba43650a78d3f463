//! Reading what a cargo build said: its JSON messages, read with
//! `cargo_metadata`, folded into a [`BuildReport`] per target, each
//! compiler message kept as a [`CompilerDiag`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cargo_metadata::diagnostic::{Diagnostic, DiagnosticLevel, DiagnosticSpan};
use cargo_metadata::Message;

use crate::sandbox::compile::LimitHit;

/// What one cargo build said, per target.
#[derive(Debug, Default)]
pub struct BuildReport {
    /// Targets that produced an executable, with its path; for our
    /// unlinked targets (examples of crate type `rlib`), the rlib's path.
    pub built: BTreeMap<String, PathBuf>,
    /// Rendered diagnostics and error codes per target of our package.
    pub diagnostics: BTreeMap<String, TargetDiagnostics>,
    /// Errors from packages other than ours (the harness, a dependency).
    pub dependency_errors: Vec<CompilerDiag>,
    /// Units of other packages (the harness, its dependencies, build
    /// scripts) that cargo found fresh, and those it had to rebuild, as
    /// cargo's `fresh` flag on each artifact says.
    pub deps_fresh: usize,
    pub deps_rebuilt: Vec<String>,
    /// Whether cargo exited successfully.
    pub success: bool,
    /// The signal that ended cargo, if one did.
    pub signal: Option<i32>,
    /// Killed at the package's build time limit.
    pub timed_out: bool,
    /// Targets whose own compile was stopped at its limit
    /// (`sandbox::compile`), with the limit.
    pub limit_hits: BTreeMap<String, LimitHit>,
    /// The CPU seconds each target's rustc (and its linker) spent, as the
    /// compile wrapper measured them.
    pub cpu_secs: BTreeMap<String, f64>,
    /// cargo's own stderr, for infrastructure failures.
    pub stderr: String,
}

#[derive(Debug, Default, Clone)]
pub struct TargetDiagnostics {
    pub rendered: String,
    pub error_codes: Vec<String>,
    pub errors: usize,
    pub warnings: usize,
    /// Internal compiler errors: the compiler's fault, not the candidate's.
    pub ices: usize,
    /// Every message, in order, for callers that attribute them to modules
    /// (a shared build holds many units in one target), up to
    /// [`MAX_MESSAGES`].
    pub messages: Vec<CompilerDiag>,
    /// Messages past [`MAX_MESSAGES`], left unread: a flood of errors
    /// (`compile_error!` in a loop of macros) costs its JSON, not assay's
    /// memory and CPU. Past the cap, rendered text stops too.
    pub dropped: usize,
}

/// The most compiler messages kept per target. A unit with this many has
/// failed many times over; in a shared build, another unit's errors past
/// the cap are found by the next pass, once the flood's unit has left.
pub const MAX_MESSAGES: usize = 2000;

/// The most rendered text kept per target (and per unit of a shared
/// build): what an error file holds. Messages past it are still counted.
pub const MAX_RENDERED: usize = 1 << 20;

/// One compiler message of one of our targets.
#[derive(Debug, Clone)]
pub struct CompilerDiag {
    pub level: DiagLevel,
    pub code: Option<String>,
    pub rendered: String,
    /// rustc's own headline (`mismatched types`).
    pub message: String,
    /// Where its first primary span starts: the file as rustc names it
    /// (relative to the package for ours, absolute for a path dependency)
    /// and the 1-based line.
    pub at: Option<(String, usize)>,
    /// What says more than the headline, a line each: notes without a
    /// span (`expected fn pointer .., found fn item ..`), else the primary
    /// span's label where it names something (`expected `u32`, found
    /// `&str``), and suggestions of one name (`a function with a similar
    /// name exists: `doubled``).
    pub notes: Vec<String>,
    /// Files its spans point into: primary spans first, then the others,
    /// then macro call sites, then the children's (notes, help).
    pub files: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiagLevel {
    Error,
    Ice,
    Warning,
    /// Notes, help, failure notes: kept with the rendered text, not counted.
    Other,
}

impl CompilerDiag {
    fn from_rustc(d: &Diagnostic) -> CompilerDiag {
        let level = match d.level {
            DiagnosticLevel::Error => DiagLevel::Error,
            DiagnosticLevel::Ice => DiagLevel::Ice,
            DiagnosticLevel::Warning => DiagLevel::Warning,
            _ => DiagLevel::Other,
        };
        let mut files = Vec::new();
        let primary = d.spans.iter().filter(|s| s.is_primary);
        let secondary = d.spans.iter().filter(|s| !s.is_primary);
        for span in primary.chain(secondary) {
            push_span_files(span, &mut files);
        }
        for child in &d.children {
            for span in &child.spans {
                push_span_files(span, &mut files);
            }
        }
        let at = d
            .spans
            .iter()
            .find(|s| s.is_primary)
            .map(|s| (s.file_name.clone(), s.line_start));
        let mut notes: Vec<String> = d.children.iter().filter_map(child_note).collect();
        // Without a note, the primary span's label may be all the detail
        // there is (`expected `u32`, found `&str``); one that names nothing
        // (`not found in this scope`) only repeats the headline.
        let label = d
            .spans
            .iter()
            .find(|s| s.is_primary)
            .and_then(|s| s.label.clone())
            .filter(|l| l.contains('`'));
        let has_note = d
            .children
            .iter()
            .any(|c| matches!(c.level, DiagnosticLevel::Note) && c.spans.is_empty());
        if let (Some(label), false) = (label, has_note) {
            notes.insert(0, label);
        }
        CompilerDiag {
            level,
            code: d.code.as_ref().map(|c| c.code.clone()),
            rendered: d.rendered.clone().unwrap_or_default(),
            message: d.message.clone(),
            at,
            notes,
            files,
        }
    }

    pub fn is_error(&self) -> bool {
        matches!(self.level, DiagLevel::Error | DiagLevel::Ice)
    }

    /// The message as one line, for a one-line report: `error[E0308]:
    /// mismatched types; expected fn pointer `..`, found fn item `..``.
    pub fn one_line(&self) -> String {
        let level = match self.level {
            DiagLevel::Error => "error",
            DiagLevel::Ice => "internal compiler error",
            DiagLevel::Warning => "warning",
            DiagLevel::Other => "note",
        };
        let mut line = match &self.code {
            Some(code) => format!("{level}[{code}]: {}", self.message),
            None => format!("{level}: {}", self.message),
        };
        for note in &self.notes {
            line.push_str("; ");
            line.push_str(note);
        }
        collapse_lines(&line)
    }
}

/// A child worth a line of its own (see [`CompilerDiag::notes`]). A
/// suggestion that would insert code (an import, a whole item) is left
/// out: it is rustc's guess at a fix for its own context, ours.
fn child_note(child: &Diagnostic) -> Option<String> {
    match child.level {
        DiagnosticLevel::Note if child.spans.is_empty() => Some(child.message.clone()),
        DiagnosticLevel::Help => {
            let names: Vec<&str> = child
                .spans
                .iter()
                .filter_map(|s| s.suggested_replacement.as_deref())
                .collect();
            let one_name = |n: &&str| syn::parse_str::<syn::Path>(n).is_ok();
            match names.first() {
                Some(name) if names.iter().all(one_name) => {
                    Some(format!("help: {}: `{name}`", child.message))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// Lines joined with `, ` and runs of spaces made one: rustc aligns the
/// `expected`/`found` lines of a note under each other.
fn collapse_lines(text: &str) -> String {
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(", ")
}

impl BuildReport {
    /// Folds one line of cargo's output into the report. Lines that are not
    /// JSON messages pass by, as cargo's own tools do. Our targets are
    /// those whose root is under `package_dir`.
    pub(super) fn take_message(
        &mut self,
        package_dir: &Path,
        line: &str,
        on_built: &mut impl FnMut(&str, &Path),
    ) {
        if line.starts_with("{\"reason\":\"compiler-message\"") {
            // Past the cap, a message is counted without being read. cargo
            // puts the target's name in the line; the cheap look for it
            // only decides whether to parse at all.
            let full = self.diagnostics.iter_mut().find(|(name, d)| {
                d.messages.len() >= MAX_MESSAGES && line.contains(&format!("\"name\":\"{name}\""))
            });
            if let Some((_, diag)) = full {
                diag.dropped += 1;
                return;
            }
        }
        let Ok(message) = serde_json::from_str::<Message>(line) else {
            return;
        };
        match message {
            Message::CompilerArtifact(artifact) => {
                let ours = artifact
                    .target
                    .src_path
                    .as_std_path()
                    .starts_with(package_dir);
                if !ours {
                    if artifact.fresh {
                        self.deps_fresh += 1;
                    } else {
                        self.deps_rebuilt.push(format!(
                            "{} ({})",
                            artifact.target.name, artifact.package_id
                        ));
                    }
                }
                // Ours and unlinked: the rlib is the artifact.
                let rlib = || {
                    artifact
                        .filenames
                        .iter()
                        .find(|f| f.extension() == Some("rlib"))
                        .cloned()
                };
                let output = match artifact.executable.clone() {
                    Some(exe) => Some(exe),
                    None if ours && artifact.target.is_example() => rlib(),
                    None => None,
                };
                if let Some(path) = output {
                    let path = path.into_std_path_buf();
                    on_built(&artifact.target.name, &path);
                    self.built.insert(artifact.target.name.clone(), path);
                }
            }
            Message::CompilerMessage(msg) => {
                let diag = CompilerDiag::from_rustc(&msg.message);
                // Our targets' roots are our files; anything else is a dependency.
                if msg.target.src_path.as_std_path().starts_with(package_dir) {
                    let entry = self.diagnostics.entry(msg.target.name.clone()).or_default();
                    if entry.rendered.len() < MAX_RENDERED {
                        entry.rendered.push_str(&diag.rendered);
                    }
                    match diag.level {
                        DiagLevel::Error | DiagLevel::Ice => {
                            entry.errors += 1;
                            if diag.level == DiagLevel::Ice {
                                entry.ices += 1;
                            }
                            if let Some(code) = &diag.code {
                                entry.error_codes.push(code.clone());
                            }
                        }
                        DiagLevel::Warning => entry.warnings += 1,
                        DiagLevel::Other => {}
                    }
                    entry.messages.push(diag);
                } else if matches!(diag.level, DiagLevel::Error | DiagLevel::Ice) {
                    self.dependency_errors.push(diag);
                }
            }
            _ => {}
        }
    }

    /// What the packages other than ours said, rendered.
    pub fn dependency_text(&self) -> String {
        self.dependency_errors
            .iter()
            .map(|d| d.rendered.as_str())
            .collect()
    }
}

fn push_span_files(span: &DiagnosticSpan, files: &mut Vec<String>) {
    if !files.contains(&span.file_name) {
        files.push(span.file_name.clone());
    }
    if let Some(expansion) = &span.expansion {
        push_span_files(&expansion.span, files);
    }
}
