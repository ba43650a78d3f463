//! Loading a task's spec: `Spec::load`'s own checks, then the one that
//! needs a stage, the committed candidate held to the task's policy.

use std::path::Path;

use crate::spec::{Spec, SpecError};

/// Reads and validates a spec (`path` is a `spec.toml` or a folder holding
/// one), then checks its committed candidate against its policy: a
/// committed file the task's own policy refuses is bad input naming its
/// line. Every command loads a spec through this, so a `Spec` a command
/// holds has passed both.
pub fn load(path: &Path) -> Result<Spec, SpecError> {
    let spec = Spec::load(path)?;
    if let Err(v) = crate::text::policy::check(&spec.policy, &spec.committed.source) {
        return Err(SpecError::Invalid {
            file: spec.committed.path,
            line: Some(v.line),
            key: "committed",
            message: format!(
                "the committed candidate breaks the task's policy: {}",
                v.summary()
            ),
        });
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::tests::{task_dir, GOOD};

    #[test]
    fn a_committed_file_that_breaks_the_policy_is_bad_input_naming_its_line() {
        let dir = task_dir();
        std::fs::write(dir.path().join("spec.toml"), GOOD).unwrap();
        std::fs::write(
            dir.path().join("committed.rs"),
            "pub fn f() {}\nconst S: &str = include_str!(\"x\");\n",
        )
        .unwrap();
        let err = load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("committed.rs:2: `committed`"), "{err}");
        assert!(
            err.contains("forbidden by the task's policy (include)"),
            "{err}"
        );
    }
}
