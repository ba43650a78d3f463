//! Readers over stored rows: a batch's summary ([`batch`]), the views the
//! commands print ([`views`]), exports, pool comparisons and ladders,
//! suite tables ([`suite`]), the compiler errors kept in the store
//! ([`errors`]) and the SVG charts ([`plot`]). Nothing here
//! writes to the store.

pub mod batch;
pub mod compare;
pub mod errors;
pub mod export;
pub mod ladder;
pub mod plot;
pub mod suite;
pub mod views;

/// Milliseconds to three decimals: the CPU time comes from `wait4` in
/// microseconds, and the stored milliseconds read back through a
/// `Duration` pick up float noise (`24.450785999999997`) that is no part of
/// the figure. Wall times and TTFT get the same precision.
pub(crate) fn to_the_microsecond<S: serde::Serializer>(
    ms: &Option<f64>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match ms {
        Some(ms) => s.serialize_some(&((ms * 1e3).round() / 1e3)),
        None => s.serialize_none(),
    }
}
