//! `assay task check` and `assay task new`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use assay::engine::batch;
use assay::support::hint::CommandLine;

use crate::args::TaskCommand;

pub async fn task(command: TaskCommand) -> Result<ExitCode> {
    match command {
        TaskCommand::Check {
            spec,
            work,
            build_timeout,
        } => {
            let spec = assay::task::load(&spec)?;
            let work = work.resolve()?;
            work.check()?;
            let _work = work.prepare()?;
            let settings = batch::ProbeSettings::for_spec(&spec);
            let outcome = assay::task::check(
                &spec,
                &work.path,
                &work.target_dir(),
                build_timeout.unwrap_or(settings.build_timeout),
                assay::task::CacheUse::Refresh,
            )
            .await?;
            let assay::task::Outcome::Checked(report) = outcome else {
                unreachable!("a refreshed check is never a stamp")
            };
            for warning in &report.warnings {
                eprintln!("warning: {warning}");
            }
            print!("{}", report.render(&spec));
            Ok(ExitCode::SUCCESS)
        }
        TaskCommand::New { name, dir } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            assay::task::write_skeleton(&name, &dir)?;
            println!(
                "wrote task `{name}` in {}: spec.toml, prompt.md, harness/, cases.jsonl, \
                 committed.rs, replies.jsonl, ORACLE.md\n\
                 next: make the example yours (docs/tasks.md), then `{}` and `{}`",
                dir.display(),
                CommandLine::assay(["task", "check"]).arg(&dir),
                CommandLine::assay(["run"]).arg(&dir),
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}
