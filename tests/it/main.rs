//! The integration tests: one binary, one module per area (each was a
//! test binary of its own until the suite took 22 minutes, 7 of them
//! linking 33 executables against the whole library). Every module shares
//! `common` (declared once, so its statics are one per process: one shared
//! llama.cpp server, one PostgreSQL schema counter, one warm work
//! directory). Run one area with `cargo test --profile ci --test it MODULE::`.
//!
//! Tests share this process and run on parallel threads. A test that must
//! have the process to itself (it measures the process's own CPU time)
//! runs itself again in a process of its own (`common::alone`).

#[path = "../common/mod.rs"]
mod common;
#[path = "../../bench/multiple_ref.rs"]
mod multiple_ref;

mod accounting;
mod accounting_run;
mod admission;
mod architecture;
mod bad_input;
mod build_trust;
mod carry;
mod crash;
mod e2e;
mod etxtbsy;
mod first_use;
mod forgery;
mod gateway;
mod harness_fault;
mod harnesses;
mod hostile;
mod hosts;
mod lanes;
mod llama;
mod operator;
mod postgres;
mod probe;
mod probe_ops;
mod repair;
mod schema;
mod slots;
mod soak;
mod suite;
mod suite_edition;
mod suite_hostile;
mod suite_real;
mod suite_repair;
mod task_check;
mod views;
