//! The spec file's raw shape (serde, every table `deny_unknown_fields`)
//! and the validator that turns it into a [`Spec`], or the first error
//! naming file, key and line.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::bounds::{
    check_build_timeout, check_candidates, in_range, DEFAULT_PROCESSES, MAX_COMPILE_CPU_S,
    MAX_COMPILE_MEMORY_MB, MAX_MEMORY_MB, MAX_PROCESSES, MAX_WALL_MS, MAX_WAVE_WAIT,
    MIN_COMPILE_MEMORY_MB,
};
use super::repair::{CaseFacts, RawRepair};
use super::validator::{line_of, read, Validator};
use super::{
    AdmitRule, Cases, Committed, CompileLimits, DedupBy, Draw, Harness, Isolation, Limits, Policy,
    PoolChoice, ProbeSpec, Rule, Spec, SpecError, WavePolicy,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSpec {
    name: String,
    prompt: PathBuf,
    harness: PathBuf,
    entry: String,
    /// Spanned, so that a cases file in the wrong place names its line.
    cases: toml::Spanned<PathBuf>,
    committed: PathBuf,
    draw: RawDraw,
    admit: RawAdmit,
    limits: RawLimits,
    #[serde(default)]
    dedup: RawDedup,
    #[serde(default)]
    probe: RawProbe,
    #[serde(default)]
    policy: RawPolicy,
    #[serde(default)]
    repair: RawRepair,
}

/// `[policy]`: one key per rule, `"allow"` or `"forbid"` (the default).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    unsafe_code: Option<toml::Spanned<String>>,
    path_attribute: Option<toml::Spanned<String>>,
    include: Option<toml::Spanned<String>>,
    extern_block: Option<toml::Spanned<String>>,
    asm: Option<toml::Spanned<String>>,
    crate_attribute: Option<toml::Spanned<String>>,
    macro_indirection: Option<toml::Spanned<String>>,
    outer_path: Option<toml::Spanned<String>>,
    macro_export: Option<toml::Spanned<String>>,
    macro_use: Option<toml::Spanned<String>>,
    global_allocator: Option<toml::Spanned<String>>,
}

/// Spanned, so that an out-of-range value's error names its line.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProbe {
    build_timeout_s: Option<toml::Spanned<u64>>,
    wave_size: Option<toml::Spanned<usize>>,
    wave_wait_ms: Option<toml::Spanned<u64>>,
    compile_cpu_s: Option<toml::Spanned<u64>>,
    compile_memory_mb: Option<toml::Spanned<u64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDedup {
    by: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDraw {
    n: usize,
    replay: PathBuf,
    #[serde(default)]
    pools: Vec<String>,
    #[serde(default)]
    split: Option<String>,
    #[serde(default)]
    single_fence: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAdmit {
    min_score: f64,
    #[serde(default)]
    guard: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    wall_ms: u64,
    isolation: Option<String>,
    case_wall_ms: Option<u64>,
    processes: Option<u64>,
    memory_mb: Option<u64>,
}

impl Validator {
    pub(super) fn validate(self, raw: RawSpec) -> Result<Spec, SpecError> {
        if raw.name.is_empty()
            || !raw
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(self.invalid("name", "must be non-empty ASCII letters, digits, - or _"));
        }
        if syn::parse_str::<syn::Ident>(&raw.entry).is_err() {
            return Err(self.invalid("entry", format!("`{}` is not a Rust identifier", raw.entry)));
        }
        check_candidates(raw.draw.n).map_err(|m| self.invalid("draw.n", m))?;
        if !(0.0..=1.0).contains(&raw.admit.min_score) {
            return Err(self.invalid("admit.min_score", "must be between 0 and 1"));
        }
        in_range(raw.limits.wall_ms, 1, MAX_WALL_MS)
            .map_err(|m| self.invalid("limits.wall_ms", m))?;
        let dedup_by = match &raw.dedup.by {
            None => DedupBy::default(),
            Some(by) => by
                .parse()
                .map_err(|e: String| self.invalid("dedup.by", e))?,
        };
        let isolation = match raw.limits.isolation.as_deref() {
            None | Some("none") => Isolation::None,
            Some("per_case") => Isolation::PerCase,
            Some(other) => {
                return Err(self.invalid(
                    "limits.isolation",
                    format!("unknown isolation `{other}` (expected `none` or `per_case`)"),
                ))
            }
        };
        if let Some(ms) = raw.limits.case_wall_ms {
            in_range(ms, 1, MAX_WALL_MS).map_err(|m| self.invalid("limits.case_wall_ms", m))?;
        }
        if let Some(p) = raw.limits.processes {
            in_range(p, 1, MAX_PROCESSES).map_err(|m| self.invalid("limits.processes", m))?;
        }
        let memory_mb = raw.limits.memory_mb.unwrap_or(1024);
        in_range(memory_mb, 16, MAX_MEMORY_MB).map_err(|m| self.invalid("limits.memory_mb", m))?;
        let memory_bytes = memory_mb
            .checked_mul(1 << 20)
            .ok_or_else(|| self.invalid("limits.memory_mb", "too large"))?;
        let probe = self.probe(&raw.probe)?;
        let policy = self.policy(&raw.policy)?;
        let prompt_path = self.file_at("prompt", &raw.prompt)?;
        let cases_path = self.file_at("cases", raw.cases.get_ref())?;
        let committed_path = self.file_at("committed", &raw.committed)?;
        let replay = self.file_at("draw.replay", &raw.draw.replay)?;
        let pools = raw
            .draw
            .pools
            .iter()
            .map(|p| p.parse())
            .collect::<Result<Vec<PoolChoice>, String>>()
            .map_err(|m| self.invalid("draw.pools", m))?;
        let split = match &raw.draw.split {
            Some(s) => Some(
                s.parse()
                    .map_err(|m: String| self.invalid("draw.split", m))?,
            ),
            None => None,
        };
        // Where the cases may live comes before what they hold: a file the
        // rule refuses is moved, not fixed.
        let harness = self.harness(&raw.harness)?;
        self.cases_outside(&cases_path, &harness, raw.cases.span().start)?;
        let cases_text = read(&cases_path)?;
        let count = count_cases(&cases_path, &cases_text)?;
        let names = case_names(&cases_path, &cases_text)?;
        let mut guard = Vec::with_capacity(raw.admit.guard.len());
        for name in &raw.admit.guard {
            let pos = names
                .iter()
                .position(|n| n.as_deref() == Some(name.as_str()))
                .ok_or_else(|| {
                    self.invalid(
                        "admit.guard",
                        format!("no case named `{name}` in {}", cases_path.display()),
                    )
                })?;
            guard.push(pos);
        }
        let repair = self.repair(
            &raw.repair,
            &CaseFacts {
                path: &cases_path,
                names: &names,
                guard: &guard,
            },
        )?;
        let committed_source = read(&committed_path)?;
        Ok(Spec {
            prompt: read(&prompt_path)?,
            prompt_path,
            harness,
            cases: Cases {
                path: cases_path,
                text: cases_text,
                count,
                names,
            },
            committed: Committed {
                source: committed_source,
                path: committed_path,
            },
            draw: Draw {
                n: raw.draw.n,
                replay,
                pools,
                split,
                single_fence: raw.draw.single_fence,
            },
            admit: AdmitRule {
                min_score: raw.admit.min_score,
                guard,
            },
            limits: Limits {
                wall: Duration::from_millis(raw.limits.wall_ms),
                isolation,
                case_wall: Duration::from_millis(
                    raw.limits.case_wall_ms.unwrap_or(raw.limits.wall_ms),
                ),
                processes: raw.limits.processes.unwrap_or(DEFAULT_PROCESSES),
                memory_bytes,
            },
            dedup_by,
            probe,
            policy,
            repair,
            name: raw.name,
            entry: raw.entry,
            path: self.file,
            dir: self.dir,
        })
    }

    fn harness(&self, rel: &Path) -> Result<Harness, SpecError> {
        let dir = self.dir.join(rel);
        let manifest = dir.join("Cargo.toml");
        if !manifest.is_file() {
            return Err(SpecError::MissingFile {
                file: self.file.clone(),
                key: "harness",
                path: dir,
                problem: "has no Cargo.toml",
            });
        }
        let text = read(&manifest)?;
        let value: toml::Table = toml::from_str(&text).map_err(|e| SpecError::Syntax {
            file: manifest.clone(),
            line: e.span().map(|s| line_of(&text, s.start)),
            message: crate::support::input::one_line(e.message()),
        })?;
        let package = value
            .get("package")
            .and_then(|p| p.get("name"))
            .and_then(toml::Value::as_str)
            .ok_or_else(|| SpecError::Invalid {
                file: manifest.clone(),
                line: None,
                key: "package.name",
                message: "missing".into(),
            })?
            .to_owned();
        let crate_name = value
            .get("lib")
            .and_then(|l| l.get("name"))
            .and_then(toml::Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| package.replace('-', "_"));
        let root = dir.join(
            value
                .get("lib")
                .and_then(|l| l.get("path"))
                .and_then(toml::Value::as_str)
                .unwrap_or("src/lib.rs"),
        );
        Ok(Harness {
            dir,
            package,
            crate_name,
            root,
        })
    }

    /// Refuses a cases file inside the harness's directory: every build
    /// reads that directory, so a candidate allowed `include_str!` (a
    /// relaxed `[policy]`) could compile the expected answers into itself.
    fn cases_outside(
        &self,
        cases: &Path,
        harness: &Harness,
        offset: usize,
    ) -> Result<(), SpecError> {
        let (Ok(cases), Ok(dir)) = (cases.canonicalize(), harness.dir.canonicalize()) else {
            return Ok(());
        };
        if !cases.starts_with(&dir) {
            return Ok(());
        }
        Err(self.invalid_at(
            "cases",
            offset,
            format!(
                "{} lies inside the harness directory {}, which every candidate's build \
                 can read: keep the cases outside it",
                cases.display(),
                dir.display()
            ),
        ))
    }

    /// The `[probe]` table, held to the same bounds as the flags.
    fn probe(&self, raw: &RawProbe) -> Result<ProbeSpec, SpecError> {
        let at = |key, value: &toml::Spanned<u64>, check: fn(f64) -> Result<Duration, String>| {
            check(*value.get_ref() as f64).map_err(|m| self.invalid_at(key, value.span().start, m))
        };
        let build_timeout = match &raw.build_timeout_s {
            Some(v) => Some(at("probe.build_timeout_s", v, check_build_timeout)?),
            None => None,
        };
        let wave_wait = match &raw.wave_wait_ms {
            Some(v) => Some(at("probe.wave_wait_ms", v, |ms| {
                WavePolicy::check_wait(ms / 1000.0)
                    .map_err(|_| format!("must be between 1 and {}", MAX_WAVE_WAIT.as_millis()))
            })?),
            None => None,
        };
        let wave_size = match &raw.wave_size {
            Some(v) => Some(
                WavePolicy::check_size(*v.get_ref())
                    .map_err(|m| self.invalid_at("probe.wave_size", v.span().start, m))?,
            ),
            None => None,
        };
        let mut compile_limits = CompileLimits::default();
        if let Some(v) = &raw.compile_cpu_s {
            if !(1..=MAX_COMPILE_CPU_S).contains(v.get_ref()) {
                return Err(self.invalid_at(
                    "probe.compile_cpu_s",
                    v.span().start,
                    format!("must be between 1 and {MAX_COMPILE_CPU_S}"),
                ));
            }
            compile_limits.cpu_secs = *v.get_ref();
        }
        if let Some(v) = &raw.compile_memory_mb {
            if !(MIN_COMPILE_MEMORY_MB..=MAX_COMPILE_MEMORY_MB).contains(v.get_ref()) {
                return Err(self.invalid_at(
                    "probe.compile_memory_mb",
                    v.span().start,
                    format!("must be between {MIN_COMPILE_MEMORY_MB} and {MAX_COMPILE_MEMORY_MB}"),
                ));
            }
            compile_limits.memory_bytes = *v.get_ref() << 20;
        }
        Ok(ProbeSpec {
            compile_limits,
            build_timeout,
            wave_size,
            wave_wait,
        })
    }

    /// The `[policy]` table: each key a rule, `"allow"` or `"forbid"`.
    fn policy(&self, raw: &RawPolicy) -> Result<Policy, SpecError> {
        let keys = [
            (Rule::UnsafeCode, "policy.unsafe_code", &raw.unsafe_code),
            (
                Rule::PathAttribute,
                "policy.path_attribute",
                &raw.path_attribute,
            ),
            (Rule::Include, "policy.include", &raw.include),
            (Rule::ExternBlock, "policy.extern_block", &raw.extern_block),
            (Rule::Asm, "policy.asm", &raw.asm),
            (
                Rule::CrateAttribute,
                "policy.crate_attribute",
                &raw.crate_attribute,
            ),
            (
                Rule::MacroIndirection,
                "policy.macro_indirection",
                &raw.macro_indirection,
            ),
            (Rule::OuterPath, "policy.outer_path", &raw.outer_path),
            (Rule::MacroExport, "policy.macro_export", &raw.macro_export),
            (Rule::MacroUse, "policy.macro_use", &raw.macro_use),
            (
                Rule::GlobalAllocator,
                "policy.global_allocator",
                &raw.global_allocator,
            ),
        ];
        let mut allowed = Vec::new();
        for (rule, key, value) in keys {
            let Some(value) = value else { continue };
            match value.get_ref().as_str() {
                "allow" => allowed.push(rule),
                "forbid" => {}
                other => {
                    return Err(self.invalid_at(
                        key,
                        value.span().start,
                        format!("`{other}`: expected \"allow\" or \"forbid\""),
                    ))
                }
            }
        }
        Ok(Policy::allowing(allowed))
    }
}

/// The `name` field of each case (non-blank line), where it is a string.
/// Lines are known to be JSON objects by the time this is used. A name is
/// a case's identity (a guard names it, reports show it), so two cases of
/// one name are refused, naming both lines.
fn case_names(path: &Path, text: &str) -> Result<Vec<Option<String>>, SpecError> {
    let mut names = Vec::new();
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let name = serde_json::from_str::<serde_json::Value>(line)
            .ok()
            .and_then(|v| v.get("name")?.as_str().map(str::to_owned));
        if let Some(name) = &name {
            if let Some(first) = seen.insert(name.clone(), i + 1) {
                return Err(SpecError::Syntax {
                    file: path.to_path_buf(),
                    line: Some(i + 1),
                    message: format!(
                        "a second case named `{name}` (the first is on line {first}): \
                         case names must differ"
                    ),
                });
            }
        }
        names.push(name);
    }
    Ok(names)
}

/// Counts the cases of a JSONL file; each non-blank line must be a JSON object.
/// Whether the objects fit the harness's types is the harness's to say.
fn count_cases(path: &Path, text: &str) -> Result<usize, SpecError> {
    let mut count = 0;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<serde_json::Value>(line) {
            Ok(serde_json::Value::Object(_)) => count += 1,
            Ok(_) => {
                return Err(SpecError::Syntax {
                    file: path.to_path_buf(),
                    line: Some(i + 1),
                    message: "a case must be a JSON object".into(),
                })
            }
            Err(e) => {
                return Err(SpecError::Syntax {
                    file: path.to_path_buf(),
                    line: Some(i + 1),
                    message: e.to_string(),
                })
            }
        }
    }
    if count == 0 {
        return Err(SpecError::Syntax {
            file: path.to_path_buf(),
            line: None,
            message: "holds no cases".into(),
        });
    }
    Ok(count)
}
