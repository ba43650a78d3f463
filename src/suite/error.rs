//! Why a problem or completion file was refused. Every variant names the
//! file; a line and a field where there is one.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error("{file}: cannot read: {source}", file = file.display())]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    /// A line (or a whole file, `line` = None, for one-object files) that
    /// is not what the schema asks for. `field` is the JSON key at fault.
    #[error("{file}{line}: {field}{message}",
        file = file.display(),
        line = line.map(|l| format!(":{l}")).unwrap_or_default(),
        field = field.map(|f| format!("`{f}`: ")).unwrap_or_default())]
    Invalid {
        file: PathBuf,
        line: Option<usize>,
        field: Option<&'static str>,
        message: String,
    },
}

impl SuiteError {
    pub(crate) fn invalid(
        file: &std::path::Path,
        line: Option<usize>,
        field: Option<&'static str>,
        message: impl Into<String>,
    ) -> SuiteError {
        SuiteError::Invalid {
            file: file.to_path_buf(),
            line,
            field,
            message: message.into(),
        }
    }
}
