//! The plain settings a spec (or a flag) chooses and the stages read:
//! which fingerprint groups candidates, which pools a draw asks and how it
//! splits them, when a streaming wave starts, what one target's compile may
//! use, and which rules of the candidate policy are enforced.
//!
//! Plain data with stable string forms and defaults, no mechanism: the
//! stage each belongs to gives it meaning (`dedup`, `draw`,
//! `probe::stream`, `sandbox::compile`, `policy`), and imports it from
//! here, so that `spec` reads no stage.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use clap::ValueEnum;
use serde::Serialize;
use strum::{Display, EnumString, IntoStaticStr};

use super::bounds::{checked_secs, MAX_WAVE_SIZE, MAX_WAVE_WAIT};

/// Which fingerprint groups a batch's candidates (`[dedup] by` in the spec;
/// stored with the batch as its lowercase name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Display, EnumString, IntoStaticStr)]
#[strum(
    serialize_all = "lowercase",
    parse_err_ty = String,
    parse_err_fn = not_a_dedup_mode
)]
pub enum DedupBy {
    /// Equal up to whitespace, comments, doc comments and attribute order.
    #[default]
    Exact,
    /// Equal up to those and a renaming of locals and parameters.
    Alpha,
}

/// How a batch is split over its pools (`--split`, `[draw] split`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Display, EnumString, IntoStaticStr, ValueEnum)]
#[strum(
    serialize_all = "lowercase",
    parse_err_ty = String,
    parse_err_fn = not_a_split
)]
pub enum SplitMode {
    /// Each pool serves its share (given with NAME=SHARE, or an even
    /// split): the fairest comparison of pools.
    Fixed,
    /// Every pool keeps its slots full until N replies are in, so a slow
    /// pool no longer sets the batch's wall time.
    Race,
}

/// The Rust edition a suite's programs are read in (`suite run
/// --edition`, stored with the suite as its year). MultiPL-E's
/// `eval_rust.py` runs `rustc PATH -o EXE` with no `--edition`, so its
/// published Rust figures are edition 2015's; assay's default is 2021.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    Serialize,
    Display,
    EnumString,
    IntoStaticStr,
    ValueEnum,
)]
#[strum(parse_err_ty = String, parse_err_fn = not_an_edition)]
pub enum Edition {
    /// MultiPL-E's reading: what a plain `rustc` gives.
    #[strum(serialize = "2015")]
    #[value(name = "2015")]
    #[serde(rename = "2015")]
    E2015,
    #[strum(serialize = "2018")]
    #[value(name = "2018")]
    #[serde(rename = "2018")]
    E2018,
    /// The default.
    #[default]
    #[strum(serialize = "2021")]
    #[value(name = "2021")]
    #[serde(rename = "2021")]
    E2021,
    #[strum(serialize = "2024")]
    #[value(name = "2024")]
    #[serde(rename = "2024")]
    E2024,
}

impl Edition {
    /// The year, as rustc's `--edition` and a manifest's `edition` take it.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

fn not_an_edition(s: &str) -> String {
    format!("`{s}`: the edition is 2015, 2018, 2021 or 2024")
}

/// A pool named on the command line or in the spec: `NAME` or `NAME=SHARE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolChoice {
    pub name: String,
    pub share: Option<u64>,
}

/// When a streaming probe's wave starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WavePolicy {
    /// Start a wave once this many candidates wait.
    pub size: usize,
    /// Start a wave once the oldest waiting candidate has waited this long.
    pub wait: Duration,
}

/// Default CPU seconds one target's rustc may use. An honest candidate
/// compiles in well under a second; the largest task's scorer in a few.
pub const DEFAULT_COMPILE_CPU_SECS: u64 = 60;

/// Default address space of one target's rustc. rustc reserves far more
/// address space than it touches (its threads' stacks, the allocator's
/// arenas), so this is virtual memory, not resident.
pub const DEFAULT_COMPILE_MEMORY_BYTES: u64 = 4 << 30;

/// The limits of one target's compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompileLimits {
    pub cpu_secs: u64,
    pub memory_bytes: u64,
}

/// One thing the policy may forbid. The string form is stable: it is the
/// `[policy]` key and the argument of the `forbidden(..)` verdict.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Display, EnumString, IntoStaticStr,
)]
#[strum(
    serialize_all = "snake_case",
    parse_err_ty = String,
    parse_err_fn = not_a_rule
)]
pub enum Rule {
    /// `unsafe`, `#[no_mangle]`, `#[export_name]`, `#[link_section]`.
    UnsafeCode,
    /// `#[path = ".."]` and `mod NAME;`: compile another file as a module.
    /// A candidate's file is its target's `#[path]` module, which rustc
    /// reads like a `mod.rs`, so `mod c4;` is the sibling `cands/c4.rs`;
    /// an honest candidate is one file and has no module file of its own.
    PathAttribute,
    /// `include!`, `include_str!`, `include_bytes!`,
    /// `#[debugger_visualizer]`: read a file at compile time.
    Include,
    /// `extern { .. }`, `extern "C" { .. }` and the attributes only they
    /// take (`#[link]`, `#[link_name]`, `#[link_ordinal]`).
    ExternBlock,
    /// `asm!`, `global_asm!`, `naked_asm!`.
    Asm,
    /// An inner attribute at file level other than a lint level or doc
    /// (`#![no_std]`, `#![feature(..)]`).
    CrateAttribute,
    /// `#[$attr]` or `$mac!(..)` inside a macro: whatever it becomes is
    /// decided by the macro's caller, out of the scan's sight.
    MacroIndirection,
    /// A path that leaves the source's own module: a `super` that climbs
    /// above the source's top level (`super::x` there, `self::super`,
    /// `pub(super)`, `super::super` one `mod` down, `use super::{super::x}`),
    /// `$crate`, `extern crate self`, and a `crate` that is neither a
    /// visibility (`pub(crate)`, `pub(in crate)`), nor `extern crate NAME`,
    /// nor the start of a path (`crate::x`, `use crate as c`). In a shared
    /// image each program is a module of one crate, so these name the crate
    /// root and, through it, every other program. A path-leading `crate` is
    /// allowed because `policy::rebase_crate_paths` maps it onto the
    /// program's own module. Inside the tokens of a macro call or
    /// definition, in a source that defines a macro, every `crate` and
    /// `super` is refused: the macro may rearrange them (`$k::$k::x` from
    /// `m!(super)`, or drop the module a rebased `crate::` was given).
    OuterPath,
    /// `#[macro_export]`: puts a macro at the crate root, where it clashes
    /// with another program's macro of the same name and can shadow the
    /// macros the shared image's own root calls.
    MacroExport,
    /// `#[macro_use]`, outer or inner: `#![macro_use]` at the top of a
    /// program's source carries its macros out of its module into every
    /// program declared after it (an `assert_eq!` that asserts nothing).
    MacroUse,
    /// `#[global_allocator]`, `#[panic_handler]`, `#[alloc_error_handler]`:
    /// an item a program has one of, so one module's would replace (or
    /// clash with) every build-mate's.
    GlobalAllocator,
}

/// Which rules a task enforces. Every rule is enforced unless the spec
/// allows it. `policy::check` holds a source to it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    allowed: Vec<Rule>,
}

impl DedupBy {
    pub fn as_str(&self) -> &'static str {
        (*self).into()
    }
}

fn not_a_dedup_mode(s: &str) -> String {
    format!("unknown dedup mode `{s}` (expected `exact` or `alpha`)")
}

impl FromStr for PoolChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<PoolChoice, String> {
        let (name, share) = match s.split_once('=') {
            Some((name, share)) => {
                let share = share
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| format!("`{s}`: the share must be a whole number"))?;
                (name.trim(), Some(share))
            }
            None => (s.trim(), None),
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        {
            return Err(format!(
                "`{s}`: a pool name is ASCII letters, digits, `-`, `_` or `.`"
            ));
        }
        Ok(PoolChoice {
            name: name.to_owned(),
            share,
        })
    }
}

/// `NAME` or `NAME=SHARE`, as the flag takes it.
impl fmt::Display for PoolChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.share {
            Some(share) => write!(f, "{}={share}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

fn not_a_split(s: &str) -> String {
    format!("`{s}`: the split is `fixed` or `race`")
}

impl Default for WavePolicy {
    /// Big enough that a wave's cargo start-up is small beside its builds,
    /// short enough that a slow pool's replies are not left waiting.
    fn default() -> WavePolicy {
        WavePolicy {
            size: 32,
            wait: Duration::from_secs(3),
        }
    }
}

impl WavePolicy {
    /// Checks a wave size given by a person; the error says why, for the
    /// caller to put after the flag's or key's name.
    pub fn check_size(size: usize) -> Result<usize, String> {
        if (1..=MAX_WAVE_SIZE).contains(&size) {
            Ok(size)
        } else {
            Err(format!("must be between 1 and {MAX_WAVE_SIZE}"))
        }
    }

    /// Checks a wave wait given in (possibly fractional) seconds. Zero is
    /// refused: every candidate would be a wave of its own, each paying
    /// cargo's start-up.
    pub fn check_wait(secs: f64) -> Result<Duration, String> {
        checked_secs(secs, Duration::from_millis(1), MAX_WAVE_WAIT)
    }
}

impl Default for CompileLimits {
    fn default() -> Self {
        CompileLimits {
            cpu_secs: DEFAULT_COMPILE_CPU_SECS,
            memory_bytes: DEFAULT_COMPILE_MEMORY_BYTES,
        }
    }
}

impl Rule {
    pub const ALL: [Rule; 11] = [
        Rule::UnsafeCode,
        Rule::PathAttribute,
        Rule::Include,
        Rule::ExternBlock,
        Rule::Asm,
        Rule::CrateAttribute,
        Rule::MacroIndirection,
        Rule::OuterPath,
        Rule::MacroExport,
        Rule::MacroUse,
        Rule::GlobalAllocator,
    ];

    pub fn as_str(&self) -> &'static str {
        (*self).into()
    }

    /// Whether programs may share one image only while this rule holds.
    /// Every rule does today; the match makes a new rule say so.
    pub fn guards_a_shared_image(&self) -> bool {
        match self {
            // Code that runs outside a called function, or reaches memory
            // or symbols outside the language's rules: constructors,
            // interposed symbols, linked libraries, global assembly.
            Rule::UnsafeCode | Rule::ExternBlock | Rule::Asm => true,
            // One rustc reads every module of the image: a file read at
            // compile time could be a build-mate's source.
            Rule::PathAttribute | Rule::Include => true,
            // What acts on the crate, or names past the program's module.
            Rule::CrateAttribute
            | Rule::OuterPath
            | Rule::MacroExport
            | Rule::MacroUse
            | Rule::GlobalAllocator => true,
            // What the scan cannot see, it cannot vouch for.
            Rule::MacroIndirection => true,
        }
    }
}

fn not_a_rule(s: &str) -> String {
    format!("unknown policy rule `{s}`")
}

impl Policy {
    /// The default policy with `allowed` relaxed.
    pub fn allowing(allowed: impl IntoIterator<Item = Rule>) -> Policy {
        let mut allowed: Vec<Rule> = allowed.into_iter().collect();
        allowed.sort();
        allowed.dedup();
        Policy { allowed }
    }

    pub fn allows(&self, rule: Rule) -> bool {
        self.allowed.contains(&rule)
    }

    /// The rules this policy relaxes, in order.
    pub fn allowed(&self) -> &[Rule] {
        &self.allowed
    }

    /// Whether programs held to this policy may be modules of one shared
    /// image: it relaxes no rule a shared image relies on
    /// ([`Rule::guards_a_shared_image`]). Otherwise each program gets an
    /// image of its own.
    pub fn shares_an_image(&self) -> bool {
        !self.allowed.iter().any(Rule::guards_a_shared_image)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedup_mode_round_trips() {
        for by in [DedupBy::Exact, DedupBy::Alpha] {
            assert_eq!(by.to_string().parse::<DedupBy>().unwrap(), by);
        }
        assert!("fuzzy".parse::<DedupBy>().is_err());
    }

    #[test]
    fn pool_choices_parse() {
        let c: PoolChoice = "fast=16".parse().unwrap();
        assert_eq!((c.name.as_str(), c.share), ("fast", Some(16)));
        let c: PoolChoice = "flash".parse().unwrap();
        assert_eq!(c.share, None);
        assert!("fast=x".parse::<PoolChoice>().is_err());
        assert!("=3".parse::<PoolChoice>().is_err());
        assert!("race".parse::<SplitMode>().is_ok());
        for s in ["fixed", "race"] {
            assert_eq!(s.parse::<SplitMode>().unwrap().to_string(), s);
        }
        for s in ["fast", "fast=3"] {
            assert_eq!(s.parse::<PoolChoice>().unwrap().to_string(), s);
        }
        assert!("fastest".parse::<SplitMode>().is_err());
    }

    #[test]
    fn wave_sizes_and_waits_out_of_range_are_refused() {
        assert_eq!(WavePolicy::check_size(1), Ok(1));
        assert_eq!(WavePolicy::check_size(MAX_WAVE_SIZE), Ok(MAX_WAVE_SIZE));
        for bad in [0, MAX_WAVE_SIZE + 1] {
            assert_eq!(
                WavePolicy::check_size(bad),
                Err("must be between 1 and 100000".to_owned())
            );
        }
        assert_eq!(WavePolicy::check_wait(0.25), Ok(Duration::from_millis(250)));
        assert_eq!(WavePolicy::check_wait(3600.0), Ok(MAX_WAVE_WAIT));
        for bad in [0.0, -1.0, 3600.5, f64::NAN, f64::INFINITY] {
            let err = WavePolicy::check_wait(bad).unwrap_err();
            assert!(err.starts_with("must be between"), "{bad}: {err}");
        }
    }

    #[test]
    fn rules_round_trip_through_their_strings() {
        for rule in Rule::ALL {
            assert_eq!(rule.as_str().parse::<Rule>(), Ok(rule));
        }
        assert!("unsafe".parse::<Rule>().is_err());
        // Stored in verdicts (`forbidden(outer_path)`) and written in specs:
        // a string once given never changes.
        assert_eq!(
            Rule::ALL.map(|r| r.as_str()),
            [
                "unsafe_code",
                "path_attribute",
                "include",
                "extern_block",
                "asm",
                "crate_attribute",
                "macro_indirection",
                "outer_path",
                "macro_export",
                "macro_use",
                "global_allocator",
            ]
        );
    }
}
