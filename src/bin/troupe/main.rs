//! `troupe`: the command line of the troupe runtime — chat with an agent, compact, expand and
//! replay transcripts, render trace files, fetch the local model.

// `print!` and `println!` for this binary: they write through `out::write_stdout`, which exits
// quietly when stdout is a closed pipe (`troupe trace run.jsonl | head -1`) where the std macros
// would panic. Defined before the modules so that they shadow the std macros in all of them.
macro_rules! print {
    ($($arg:tt)*) => {
        $crate::out::write_stdout(format_args!($($arg)*))
    };
}

macro_rules! println {
    () => {
        $crate::out::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

mod chat;
mod cli;
mod mcp_cmd;
mod model_cmd;
mod node_cmd;
mod out;
mod progress;
mod secrets;
mod summarizer;
mod trace_cmd;
mod transcript_cmds;

use clap::Parser;
use tracing::Instrument;
use troupe::telemetry::redact::redact_value;

use cli::{Cli, Command, McpCommand, ModelCommand};

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // First, while the process has one thread: keys move out of the environment, where the
    // processes troupe runs could read them (/proc/$PPID/environ), into troupe's memory.
    secrets::hide_credentials(&cli);
    // Every command writes a trace file when TROUPE_TRACE is set; `trace` only reads one.
    let telemetry = match troupe::telemetry::init() {
        Ok(guard) => Some(guard),
        Err(e) => {
            eprintln!(
                "warning: telemetry is off: {}",
                redact_value(&e.to_string())
            );
            None
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Trace(args) => trace_cmd::run(args).await,
            Command::Compact(args) => transcript_cmds::compact(args).await,
            Command::Expand(args) => transcript_cmds::expand(args),
            Command::Replay(args) => transcript_cmds::replay(args).await,
            Command::Model {
                command: ModelCommand::Pull(args),
            } => {
                model_cmd::pull(args)
                    .instrument(tracing::info_span!("model_pull"))
                    .await
            }
            Command::Chat(args) => chat::run(args).await,
            Command::Node(args) => node_cmd::run(args).await,
            Command::Mcp {
                command: McpCommand::Serve(args),
            } => mcp_cmd::serve(args).await,
        }
    });
    drop(telemetry);
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // A provider error can echo the request's key; it never reaches the terminal.
            eprintln!("error: {}", redact_value(&format!("{e:#}")));
            std::process::ExitCode::FAILURE
        }
    }
}
