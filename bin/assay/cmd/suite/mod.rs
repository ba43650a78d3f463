//! `assay suite ...`: problem sets in MultiPL-E's schema. Flags are checked
//! here, before anything is written; the work is `assay::engine::suite`'s and
//! the reports `assay::report::suite`'s.

use std::process::ExitCode;

use anyhow::Result;

use assay::engine::interrupt::{Interrupted, Stopped};
use assay::support::hint::Reach;

use crate::args::SuiteCommand;

mod compare;
mod export;
mod list;
mod run;
mod show;

pub async fn dispatch(command: SuiteCommand) -> Result<ExitCode> {
    match command {
        SuiteCommand::Run(args) => {
            let reach = Reach::new(&args.db.raw, args.output.out.as_deref());
            run::run(args)
                .await
                .map_err(|e| match e.downcast_ref::<Interrupted>() {
                    Some(i) => Stopped::of(i, &reach).into(),
                    None => e,
                })
        }
        SuiteCommand::Show {
            suite,
            db,
            json,
            errors,
        } => show::show(suite, db, json, errors).await,
        SuiteCommand::Compare {
            a,
            b,
            db,
            k,
            json,
            svg,
        } => compare::compare(a, b, db, k, json, svg).await,
        SuiteCommand::Export { suite, db, format } => export::export(suite, db, format).await,
        SuiteCommand::List { db, json } => list::list(db, json).await,
    }
}
