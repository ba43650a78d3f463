//! The task spec: `specs/<task>/spec.toml`, parsed and validated before any
//! work starts.
//!
//! Every error names the file and the key (and the line, where the TOML
//! parser knows it). A `Spec` that exists is valid: its files were read, its
//! harness crate has a name, its entry is an identifier and its numbers are in
//! range, so later stages never re-check them.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// A validated task.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The file the spec was read from.
    pub path: PathBuf,
    /// The task's folder; every relative path in the spec is relative to it.
    pub dir: PathBuf,
    pub name: String,
    pub prompt: String,
    /// The file the prompt was read from.
    pub prompt_path: PathBuf,
    pub harness: Harness,
    /// The function every candidate must define.
    pub entry: String,
    pub cases: Cases,
    pub committed: Committed,
    pub draw: Draw,
    pub admit: AdmitRule,
    pub limits: Limits,
    /// Which fingerprint groups candidates (`[dedup] by`, default exact).
    pub dedup_by: crate::dedup::DedupBy,
    /// The task's own probe settings (`[probe]`); flags override them.
    pub probe: ProbeSpec,
    /// What candidates' sources may contain (`[policy]`; every rule
    /// enforced unless relaxed there).
    pub policy: crate::policy::Policy,
}

/// What a task may set about its probe (`[probe]`, every key optional):
/// a task with a heavy harness may need longer builds, one whose pools
/// answer slowly smaller or shorter waves. `None`: the default.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProbeSpec {
    /// `compile_cpu_s` and `compile_memory_mb`: what one target's rustc
    /// may use (`sandbox::compile`).
    pub compile_limits: crate::sandbox::compile::CompileLimits,
    /// `build_timeout_s`: how long one nested cargo build may run.
    pub build_timeout: Option<Duration>,
    /// `wave_size`: a streaming wave starts once this many candidates wait.
    pub wave_size: Option<usize>,
    /// `wave_wait_ms`: or once the oldest has waited this long.
    pub wave_wait: Option<Duration>,
}

/// The harness crate a task's candidates are compiled against.
#[derive(Debug, Clone)]
pub struct Harness {
    /// Absolute path of the crate's directory.
    pub dir: PathBuf,
    /// The package name, as a dependency key (`absolute-harness`).
    pub package: String,
    /// The library's crate name, as code names it (`absolute_harness`).
    pub crate_name: String,
    /// The library's root file (`[lib] path`, else `src/lib.rs`), where
    /// the contract's items are looked for when a check names their line.
    pub root: PathBuf,
}

#[derive(Debug, Clone)]
pub struct Cases {
    pub path: PathBuf,
    pub text: String,
    /// Number of cases (non-blank lines) in the file.
    pub count: usize,
    /// Each case's `name` field, where it has one, in file order.
    pub names: Vec<Option<String>>,
}

#[derive(Debug, Clone)]
pub struct Committed {
    pub path: PathBuf,
    pub source: String,
}

#[derive(Debug, Clone)]
pub struct Draw {
    /// Default number of candidates in a batch.
    pub n: usize,
    /// The recorded replay corpus.
    pub replay: PathBuf,
    /// The pools to draw from (`["fast=16", "flash=16"]`); empty: replay.
    pub pools: Vec<crate::draw::PoolChoice>,
    /// Fixed shares or a race; `None`: fixed.
    pub split: Option<crate::draw::SplitMode>,
    /// The prompt asks for exactly one code block: a stream may be closed
    /// as soon as its Rust fence closes.
    pub single_fence: bool,
}

/// What admits a candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct AdmitRule {
    /// Minimum passed/total, in `0.0..=1.0`.
    pub min_score: f64,
    /// Case positions (0-based, file order) a candidate must pass wherever
    /// the committed candidate passes them (`[admit] guard`, by case name).
    pub guard: Vec<usize>,
}

/// Limits on one candidate's scoring run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Wall time for all of one candidate's cases together.
    pub wall: Duration,
    /// Whether a case that loops or crashes costs the rest of the run
    /// (`none`) or only itself (`per_case`).
    pub isolation: Isolation,
    /// With per-case isolation, the wall time of one case.
    pub case_wall: Duration,
    /// Processes (and threads) one run may hold at once.
    pub processes: u64,
    /// Address-space limit of one run.
    pub memory_bytes: u64,
}

/// How far one case's failure reaches (`[limits] isolation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Isolation {
    /// All cases run in one child; a loop or crash ends the run there.
    #[default]
    None,
    /// A case that loops, crashes or exits fails alone: the run goes on in
    /// a fresh child from the next case.
    PerCase,
}

impl Isolation {
    pub fn as_str(&self) -> &'static str {
        match self {
            Isolation::None => "none",
            Isolation::PerCase => "per_case",
        }
    }
}

/// Why a spec was refused. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("{file}: cannot read")]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}{}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Syntax {
        file: PathBuf,
        line: Option<usize>,
        message: String,
    },
    #[error("{file}: `{key}` names {path}, which {problem}")]
    MissingFile {
        file: PathBuf,
        key: &'static str,
        path: PathBuf,
        problem: &'static str,
    },
    #[error("{file}{}: `{key}`: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Invalid {
        file: PathBuf,
        line: Option<usize>,
        key: &'static str,
        message: String,
    },
}

impl Spec {
    /// Reads and validates a spec. `path` is a `spec.toml` or a folder holding one.
    pub fn load(path: &Path) -> Result<Spec, SpecError> {
        let names_a_file = path.extension().is_some_and(|e| e == "toml") && !path.is_dir();
        let file = if names_a_file {
            path.to_path_buf()
        } else {
            path.join("spec.toml")
        };
        let text = read(&file)?;
        let raw: RawSpec = toml::from_str(&text).map_err(|e| SpecError::Syntax {
            file: file.clone(),
            line: e.span().map(|s| line_of(&text, s.start)),
            message: crate::input::one_line(e.message()),
        })?;
        let dir = file
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let dir = std::path::absolute(&dir).map_err(|source| SpecError::Read {
            file: file.clone(),
            source,
        })?;
        Validator { file, dir, text }.validate(raw)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    name: String,
    prompt: PathBuf,
    harness: PathBuf,
    entry: String,
    cases: PathBuf,
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

struct Validator {
    file: PathBuf,
    dir: PathBuf,
    /// The spec's text, for the lines of values found out of range.
    text: String,
}

impl Validator {
    fn validate(self, raw: RawSpec) -> Result<Spec, SpecError> {
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
            None => crate::dedup::DedupBy::default(),
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
        let cases_path = self.file_at("cases", &raw.cases)?;
        let committed_path = self.file_at("committed", &raw.committed)?;
        let replay = self.file_at("draw.replay", &raw.draw.replay)?;
        let pools = raw
            .draw
            .pools
            .iter()
            .map(|p| p.parse())
            .collect::<Result<Vec<crate::draw::PoolChoice>, String>>()
            .map_err(|m| self.invalid("draw.pools", m))?;
        let split = match &raw.draw.split {
            Some(s) => Some(
                s.parse()
                    .map_err(|m: String| self.invalid("draw.split", m))?,
            ),
            None => None,
        };
        let cases_text = read(&cases_path)?;
        let count = count_cases(&cases_path, &cases_text)?;
        let names = case_names(&cases_text);
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
        let committed_source = read(&committed_path)?;
        if let Err(v) = policy.check(&committed_source) {
            return Err(SpecError::Invalid {
                file: committed_path,
                line: Some(v.line),
                key: "committed",
                message: format!(
                    "the committed candidate breaks the task's policy: {}",
                    v.summary()
                ),
            });
        }
        Ok(Spec {
            prompt: read(&prompt_path)?,
            prompt_path,
            harness: self.harness(&raw.harness)?,
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
            message: crate::input::one_line(e.message()),
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

    fn file_at(&self, key: &'static str, rel: &Path) -> Result<PathBuf, SpecError> {
        let path = self.dir.join(rel);
        if path.is_file() {
            Ok(path)
        } else {
            Err(SpecError::MissingFile {
                file: self.file.clone(),
                key,
                path,
                problem: if rel.as_os_str().is_empty() {
                    "is empty"
                } else {
                    "does not exist"
                },
            })
        }
    }

    /// The `[probe]` table, held to the same bounds as the flags.
    fn probe(&self, raw: &RawProbe) -> Result<ProbeSpec, SpecError> {
        use crate::probe::{check_build_timeout, stream::WavePolicy};
        let at = |key, value: &toml::Spanned<u64>, check: fn(f64) -> Result<Duration, String>| {
            check(*value.get_ref() as f64).map_err(|m| self.invalid_at(key, value.span().start, m))
        };
        let build_timeout = match &raw.build_timeout_s {
            Some(v) => Some(at("probe.build_timeout_s", v, check_build_timeout)?),
            None => None,
        };
        let wave_wait = match &raw.wave_wait_ms {
            Some(v) => Some(at("probe.wave_wait_ms", v, |ms| {
                WavePolicy::check_wait(ms / 1000.0).map_err(|_| {
                    format!(
                        "must be between 1 and {}",
                        crate::probe::stream::MAX_WAVE_WAIT.as_millis()
                    )
                })
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
        let mut compile_limits = crate::sandbox::compile::CompileLimits::default();
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
            if *v.get_ref() < 256 || *v.get_ref() > 1 << 20 {
                return Err(self.invalid_at(
                    "probe.compile_memory_mb",
                    v.span().start,
                    "must be between 256 and 1048576".to_owned(),
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
    fn policy(&self, raw: &RawPolicy) -> Result<crate::policy::Policy, SpecError> {
        use crate::policy::Rule;
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
        Ok(crate::policy::Policy::allowing(allowed))
    }

    /// An invalid value whose place in the file is known.
    fn invalid_at(&self, key: &'static str, offset: usize, message: String) -> SpecError {
        SpecError::Invalid {
            file: self.file.clone(),
            line: Some(line_of(&self.text, offset)),
            key,
            message,
        }
    }

    fn invalid(&self, key: &'static str, message: impl Into<String>) -> SpecError {
        SpecError::Invalid {
            file: self.file.clone(),
            line: None,
            key,
            message: message.into(),
        }
    }
}

/// The most CPU seconds a spec may give one target's compile.
pub const MAX_COMPILE_CPU_S: u64 = 3600;

/// Processes one scoring run may hold at once unless the spec says.
pub const DEFAULT_PROCESSES: u64 = 32;

/// The most candidates one batch may ask for (the spec's `draw.n`, `-n`).
pub const MAX_CANDIDATES: usize = 1_000_000;
/// The longest wall-time limit of a run or a case: one day.
pub const MAX_WALL_MS: u64 = 86_400_000;
/// The most processes a run may hold: the kernel's own ceiling for a pids
/// cgroup (`PID_MAX_LIMIT` on 64-bit), which refuses more.
pub const MAX_PROCESSES: u64 = 4_194_304;
/// The largest memory limit of a run: 16 TiB, so that the limit in bytes
/// (and any sum of it) fits in a u64 with room to spare.
pub const MAX_MEMORY_MB: u64 = 16 << 20;

/// A batch's number of candidates is between 1 and [`MAX_CANDIDATES`].
pub fn check_candidates(n: usize) -> Result<usize, String> {
    in_range(n as u64, 1, MAX_CANDIDATES as u64).map(|_| n)
}

fn in_range(value: u64, min: u64, max: u64) -> Result<u64, String> {
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(format!("must be between {min} and {max}"))
    }
}

/// The `name` field of each case (non-blank line), where it is a string.
/// Lines are known to be JSON objects by the time this is used.
fn case_names(text: &str) -> Vec<Option<String>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .ok()
                .and_then(|v| v.get("name")?.as_str().map(str::to_owned))
        })
        .collect()
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

fn read(path: &Path) -> Result<String, SpecError> {
    crate::input::read_to_string(path).map_err(|source| SpecError::Read {
        file: path.to_path_buf(),
        source,
    })
}

/// 1-based line of a byte offset.
pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

impl fmt::Display for AdmitRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "score >= {}", self.min_score)?;
        if !self.guard.is_empty() {
            write!(f, ", no regression on {} guard cases", self.guard.len())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::create_dir_all(p.join("harness/src")).unwrap();
        std::fs::write(
            p.join("harness/Cargo.toml"),
            "[package]\nname = \"demo-harness\"\nversion = \"0.1.0\"\n",
        )
        .unwrap();
        std::fs::write(p.join("prompt.md"), "write f").unwrap();
        std::fs::write(
            p.join("cases.jsonl"),
            "{\"name\":\"one\",\"a\":1}\n\n{\"name\":\"two\",\"a\":2}\n",
        )
        .unwrap();
        std::fs::write(p.join("committed.rs"), "pub fn f() {}").unwrap();
        std::fs::write(p.join("replies.jsonl"), "").unwrap();
        dir
    }

    const GOOD: &str = r#"name = "demo"
prompt = "prompt.md"
harness = "harness"
entry = "f"
cases = "cases.jsonl"
committed = "committed.rs"

[draw]
n = 3
replay = "replies.jsonl"

[admit]
min_score = 0.5

[limits]
wall_ms = 100
"#;

    fn load(text: &str) -> Result<Spec, SpecError> {
        let dir = task_dir();
        std::fs::write(dir.path().join("spec.toml"), text).unwrap();
        Spec::load(dir.path())
    }

    #[test]
    fn good_spec_loads() {
        let spec = load(GOOD).unwrap();
        assert_eq!(spec.name, "demo");
        assert_eq!(spec.cases.count, 2);
        assert_eq!(spec.harness.crate_name, "demo_harness");
        assert_eq!(spec.limits.wall, Duration::from_millis(100));
        assert!(spec.draw.pools.is_empty() && spec.draw.split.is_none());
        assert_eq!(spec.dedup_by, crate::dedup::DedupBy::Exact);
        assert_eq!(spec.limits.isolation, Isolation::None);
        assert_eq!(spec.limits.processes, DEFAULT_PROCESSES);
        assert!(spec.admit.guard.is_empty());
    }

    #[test]
    fn the_spec_may_choose_pools_and_split() {
        let spec = load(&GOOD.replace(
            "n = 3",
            "n = 3\npools = [\"fast=2\", \"flash=1\"]\nsplit = \"fixed\"\nsingle_fence = true",
        ))
        .unwrap();
        assert_eq!(spec.draw.pools.len(), 2);
        assert_eq!(spec.draw.pools[0].share, Some(2));
        assert_eq!(spec.draw.split, Some(crate::draw::SplitMode::Fixed));
        assert!(spec.draw.single_fence);
    }

    #[test]
    fn optional_keys_load() {
        let text = GOOD
            .replace("min_score = 0.5", "min_score = 0.5\nguard = [\"two\"]")
            .replace(
                "wall_ms = 100",
                "wall_ms = 100\nisolation = \"per_case\"\ncase_wall_ms = 7\nprocesses = 4\nmemory_mb = 64",
            )
            + "\n[dedup]\nby = \"alpha\"\n";
        let spec = load(&text).unwrap();
        assert_eq!(spec.admit.guard, vec![1]);
        assert_eq!(spec.dedup_by, crate::dedup::DedupBy::Alpha);
        assert_eq!(spec.limits.isolation, Isolation::PerCase);
        assert_eq!(spec.limits.case_wall, Duration::from_millis(7));
        assert_eq!(spec.limits.processes, 4);
        assert_eq!(spec.limits.memory_bytes, 64 << 20);
        assert_eq!(spec.probe, ProbeSpec::default());
    }

    #[test]
    fn the_probe_table_loads() {
        let spec = load(&format!(
            "{GOOD}
[probe]
build_timeout_s = 900
wave_size = 8
wave_wait_ms = 500
"
        ))
        .unwrap();
        assert_eq!(
            spec.probe,
            ProbeSpec {
                compile_limits: Default::default(),
                build_timeout: Some(Duration::from_secs(900)),
                wave_size: Some(8),
                wave_wait: Some(Duration::from_millis(500)),
            }
        );
    }

    #[test]
    fn the_policy_table_relaxes_rules_and_names_a_bad_key() {
        use crate::policy::Rule;
        let spec = load(&format!(
            "{GOOD}\n[policy]\ninclude = \"allow\"\nasm = \"forbid\"\n"
        ))
        .unwrap();
        assert!(spec.policy.allows(Rule::Include));
        assert!(!spec.policy.allows(Rule::Asm) && !spec.policy.allows(Rule::UnsafeCode));
        assert_eq!(load(GOOD).unwrap().policy, crate::policy::Policy::default());
        let err = load(&format!("{GOOD}\n[policy]\nunsafe_code = \"maybe\"\n"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("spec.toml:19: `policy.unsafe_code`: `maybe`"),
            "{err}"
        );
        let err = load(&format!("{GOOD}\n[policy]\ngoto = \"allow\"\n"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("spec.toml:19") && err.contains("unknown field `goto`"),
            "{err}"
        );
    }

    #[test]
    fn a_committed_file_that_breaks_the_policy_is_bad_input_naming_its_line() {
        let dir = task_dir();
        std::fs::write(dir.path().join("spec.toml"), GOOD).unwrap();
        std::fs::write(
            dir.path().join("committed.rs"),
            "pub fn f() {}\nconst S: &str = include_str!(\"x\");\n",
        )
        .unwrap();
        let err = Spec::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("committed.rs:2: `committed`"), "{err}");
        assert!(
            err.contains("forbidden by the task's policy (include)"),
            "{err}"
        );
    }

    /// Each bad spec and a fragment its one-line error must contain.
    #[test]
    fn bad_specs_name_file_and_key() {
        let cases: &[(&str, &str)] = &[
            (
                &GOOD.replace("[limits]", "colour = 3\n[limits]"),
                "spec.toml:15: unknown field `colour`",
            ),
            (&GOOD.replace("entry = \"f\"", "entry = \"2f\""), "`entry`"),
            (
                &GOOD.replace("n = 3", "n = 0"),
                "`draw.n`: must be between 1 and 1000000",
            ),
            (
                &GOOD.replace("wall_ms = 100", "wall_ms = 100\nmemory_mb = 17592186044416"),
                "`limits.memory_mb`: must be between 16 and 16777216",
            ),
            (
                &GOOD.replace("wall_ms = 100", "wall_ms = 100\nprocesses = 4194305"),
                "`limits.processes`: must be between 1 and 4194304",
            ),
            (
                &GOOD.replace("wall_ms = 100", "wall_ms = 86400001"),
                "`limits.wall_ms`: must be between 1 and 86400000",
            ),
            (
                &GOOD.replace("wall_ms = 100", "wall_ms = 100\ncase_wall_ms = 0"),
                "`limits.case_wall_ms`: must be between 1",
            ),
            (
                &GOOD.replace("min_score = 0.5", "min_score = 5"),
                "`admit.min_score`",
            ),
            (
                &GOOD.replace("\"prompt.md\"", "\"nope.md\""),
                "`prompt` names",
            ),
            (
                &GOOD.replace("harness = \"harness\"", "harness = \"none\""),
                "`harness`",
            ),
            (
                &GOOD.replace("name = \"demo\"\n", "name = \"demo\n"),
                "spec.toml:1",
            ),
            (
                &GOOD.replace("wall_ms = 100", ""),
                "missing field `wall_ms`",
            ),
            (
                &GOOD.replace("n = 3", "n = 3\npools = [\"a=x\"]"),
                "`draw.pools`: `a=x`: the share must be a whole number",
            ),
            (
                &GOOD.replace("n = 3", "n = 3\nsplit = \"fast\""),
                "`draw.split`",
            ),
            (
                &format!("{GOOD}\n[dedup]\nby = \"fuzzy\"\n"),
                "`dedup.by`: unknown dedup mode `fuzzy`",
            ),
            (
                &GOOD.replace("min_score = 0.5", "min_score = 0.5\nguard = [\"three\"]"),
                "`admit.guard`: no case named `three`",
            ),
            (
                &GOOD.replace("wall_ms = 100", "wall_ms = 100\nisolation = \"fork\""),
                "`limits.isolation`: unknown isolation `fork`",
            ),
            (
                &format!("{GOOD}\n[probe]\nbuild_timeout_s = 0\n"),
                "spec.toml:19: `probe.build_timeout_s`: must be between 1 and 86400 seconds",
            ),
            (
                &format!("{GOOD}\n[probe]\nwave_size = 0\n"),
                "spec.toml:19: `probe.wave_size`: must be between 1 and 100000",
            ),
            (
                &format!("{GOOD}\n[probe]\nwave_size = 4\nwave_wait_ms = 0\n"),
                "spec.toml:20: `probe.wave_wait_ms`: must be between 1 and 3600000",
            ),
            (
                &format!("{GOOD}\n[probe]\nwaves = 4\n"),
                "spec.toml:19: unknown field `waves`",
            ),
        ];
        for (text, want) in cases {
            let err = load(text).unwrap_err().to_string();
            assert!(err.contains(want), "{err:?} lacks {want:?}");
            assert!(err.contains("spec.toml"), "{err:?} names no file");
            assert!(!err.contains('\n'), "{err:?} is not one line");
        }
    }

    #[test]
    fn a_bad_case_line_is_named() {
        let dir = task_dir();
        std::fs::write(dir.path().join("spec.toml"), GOOD).unwrap();
        std::fs::write(dir.path().join("cases.jsonl"), "{\"a\":1}\n[1]\n").unwrap();
        let err = Spec::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("cases.jsonl:2"), "{err}");
    }
}
