//! assay: the candidate loop of LLM code synthesis.
//!
//! A batch goes through one module per stage: [`draw`] asks a pool for
//! replies, [`extract`] turns replies into candidate sources, [`dedup`]
//! groups identical programs, [`probe`] learns in one wide cargo build which
//! candidates compile, [`score`] runs the survivors over the task's oracle
//! cases in sandboxed child processes, and [`store`] keeps every result in
//! SQLite as it arrives. [`account`] measures each phase, [`report`] renders
//! what a batch came to, and [`pipeline`] wires the stages together. See
//! docs/architecture.md for the map and its invariants.

pub mod account;
pub mod admit;
pub mod backoff;
pub mod clock;
pub mod command_store;
pub mod compare;
pub mod dedup;
pub mod draw;
pub mod exec;
pub mod exit;
pub mod export;
pub mod extract;
pub mod hint;
pub mod input;
pub mod interrupt;
pub mod ladder;
pub mod lane;
pub mod markdown;
pub mod outputs;
pub mod owner;
pub mod package;
pub mod pipeline;
pub mod plot;
pub mod policy;
pub mod probe;
pub mod progress;
pub mod promote;
pub mod repair;
pub mod repair_round;
pub mod repair_setup;
pub mod replay;
pub mod report;
pub mod resume;
pub mod sandbox;
pub mod score;
pub mod spec;
pub mod store;
pub mod suite;
pub mod suite_report;
pub mod suite_run;
pub mod suite_setup;
pub mod sweep;
pub mod table;
pub mod task;
pub mod testpoint;
pub mod views;
pub mod work;
pub mod work_dir;
