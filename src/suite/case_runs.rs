//! Which cases of a built program run alone, beside its whole `main`.

use clap::ValueEnum;
use strum::{Display, EnumString, IntoStaticStr};

/// Which cases of a built program run alone (`suite run --cases`, stored
/// in a queued part as its lowercase name).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Display, EnumString, IntoStaticStr, ValueEnum,
)]
#[strum(
    serialize_all = "lowercase",
    parse_err_ty = String,
    parse_err_fn = not_case_runs
)]
pub enum CaseRuns {
    /// The whole `main` first; its cases alone only when it failed, for
    /// partial credit. MultiPL-E's status is the whole `main`'s either way.
    #[default]
    Failed,
    /// Every case alone too, so a case that fails alone while the whole
    /// `main` passes (state carried across calls) is caught.
    All,
}

impl CaseRuns {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

fn not_case_runs(s: &str) -> String {
    format!("`{s}`: the cases run alone are `failed` or `all`")
}
