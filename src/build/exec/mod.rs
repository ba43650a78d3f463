//! The one executor of units of code: a task's candidates and a suite's
//! programs. Units arrive in waves; each wave is built into shared images
//! ([`shared`]: one rustc for the wave, narrowed by halves when a unit
//! spoils it) or, where sharing is not allowed, into one image per unit;
//! every unit then runs from its image in a sandboxed process of its own,
//! chosen by a selector argument.
//!
//! Sharing an image is safe only for units that pass the default policy:
//! no code of theirs can run outside a called function (no `unsafe`, so no
//! `no_mangle`, `export_name` or `link_section`; no extern blocks, global
//! assembly, `#[path]` or `include*!`) and none can reach another unit's
//! module or anything crate-wide (`policy`). A relaxed policy builds each
//! unit alone.

pub mod budget;
mod groups;
pub mod isolated;
pub mod oversize;
pub mod shared;
pub mod wave;

use clap::ValueEnum;
use strum::{Display, EnumString, IntoStaticStr};

pub use shared::{owner_of_file, scaled, Image, Layout, Settled, SharedBuild};
pub use wave::Units;

/// How a run's units are built (`suite run --build`, stored in a queued
/// part as its snake_case name).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Display, EnumString, IntoStaticStr, ValueEnum,
)]
#[strum(
    serialize_all = "snake_case",
    parse_err_ty = String,
    parse_err_fn = not_a_build_mode
)]
pub enum BuildMode {
    /// Policy-clean units share one image per wave, each a module run in a
    /// process of its own (a unit that spoils the image is narrowed out);
    /// the default.
    #[default]
    Shared,
    /// One image per unit: the reference the shared build must agree with.
    Isolated,
}

impl BuildMode {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

fn not_a_build_mode(s: &str) -> String {
    format!("`{s}`: the build is `shared` or `isolated`")
}
