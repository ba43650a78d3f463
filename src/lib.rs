//! assay: the candidate loop of LLM code synthesis.
//!
//! The crate is one folder per subsystem, each importing only those below
//! it: [`support`] (leaves), [`spec`] (settings), [`text`] (pure text
//! analysis: extraction, dedup, policy), [`sandbox`], [`draw`] and
//! [`suite`] (mechanisms), [`build`] (packages, the executor, the probe),
//! [`score`] and [`task`] (running and judging), [`store`] (the only SQL),
//! [`repair`] and [`report`] (planners and readers over stored rows),
//! [`engine`] (the loop and its entry points) and [`queue`] (lanes). See
//! docs/architecture.md for the map and its invariants.

pub mod build;
pub mod draw;
pub mod engine;
pub mod queue;
pub mod repair;
pub mod report;
pub mod sandbox;
pub mod score;
pub mod spec;
pub mod store;
pub mod suite;
pub mod support;
pub mod task;
pub mod text;
