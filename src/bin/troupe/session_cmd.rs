//! `troupe session show LOG` and `troupe session fork LOG --at STEP --out NEW`: a session log's
//! steps, and a new log ending at one of them (time travel; `troupe::session`), in the store
//! `--store` names (files by default).

use anyhow::Context as _;

use troupe::telemetry::redact::redact_value;
use troupe_cli::trace_tree::escape_control;

use crate::cli::{SessionForkArgs, SessionShowArgs};
use crate::store_arg::open_or_files;

/// Text from a log (a model's or a tool's words) redacted and escaped for the terminal.
fn safe_text(text: &str) -> String {
    escape_control(&redact_value(text)).to_string()
}

/// One line per step: its id, kind, line in the log and what it recorded.
pub fn show(args: &SessionShowArgs) -> anyhow::Result<()> {
    let (store, log) = open_or_files(args.store.as_ref(), &args.log)?;
    let steps = store.steps(&log)?;
    let session = store.load(&log)?;
    for warning in &session.warnings {
        println!("warning: {}", safe_text(warning));
    }
    println!("{:>5}  {:<13} {:>6}  detail", "step", "kind", "line");
    for step in &steps {
        println!(
            "{:>5}  {:<13} {:>6}  {}",
            step.id,
            step.kind.as_str(),
            step.line,
            safe_text(&step.detail)
        );
    }
    if session.in_flight {
        println!("(a request is in flight: `troupe chat --session` resumes it from its last step)");
    }
    Ok(())
}

/// The new log, ending at the step asked for; the original is left as it was.
pub fn fork(args: &SessionForkArgs) -> anyhow::Result<()> {
    let at: usize = args.at.trim().parse().with_context(|| {
        format!(
            "step id `{}` is not a step id: `troupe session show {}` lists them",
            safe_text(&args.at),
            args.log.display()
        )
    })?;
    let (store, log) = open_or_files(args.store.as_ref(), &args.log)?;
    let out = args
        .store
        .as_ref()
        .map_or_else(|| args.out.clone(), |s| s.log(&args.out));
    let forked = store.fork(&log, at, &out)?;
    // Step ids are places in a log: say which step this one is, so an id read off another
    // log's listing shows for what it is here.
    let step = store
        .steps(&out)?
        .pop()
        .map(|s| format!("{}: {}", s.kind.as_str(), safe_text(&s.detail)))
        .unwrap_or_default();
    println!(
        "wrote {} ({} messages, ending at step {at} ({step}){})",
        args.out.display(),
        forked.conversation.len(),
        if forked.in_flight {
            "; a request is in flight there, which `troupe chat --session` resumes"
        } else {
            ""
        }
    );
    Ok(())
}
