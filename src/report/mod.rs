//! Readers over stored rows: a batch's summary ([`batch`]), the views the
//! commands print ([`views`]), exports, pool comparisons and ladders,
//! suite tables ([`suite`]) and the SVG charts ([`plot`]). Nothing here
//! writes to the store.

pub mod batch;
pub mod compare;
pub mod export;
pub mod ladder;
pub mod plot;
pub mod suite;
pub mod views;
