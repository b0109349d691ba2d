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

mod a2a_cmd;
mod chat;
mod cli;
mod mcp_cmd;
mod model_cmd;
mod node_cmd;
mod out;
mod progress;
mod secrets;
mod session_cmd;
mod standby;
mod store_arg;
mod summarizer;
mod trace_cmd;
mod transcript_cmds;
mod ui_cmd;

use clap::Parser;
use tracing::Instrument;
use troupe::telemetry::redact::redact_value;

use cli::{Cli, Command, McpCommand, ModelCommand, SessionCommand};

/// How long the runtime's blocking threads get to finish once the command is over.
const RUNTIME_SHUTDOWN: std::time::Duration = std::time::Duration::from_secs(1);

/// `work`, or an error naming the signal if SIGTERM or SIGHUP comes first, so that troupe ends
/// as at `/exit` (the runtime's shutdown drops its team) rather than by the signal's default
/// action. The MCP servers it started run in process groups of their own (a hangup of the
/// terminal does not reach them) whose watchman ends them when troupe ends, whichever way. The
/// listeners are set up before `work` starts.
async fn until_signalled(
    work: impl std::future::Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let (Ok(mut term), Ok(mut hangup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) {
            return tokio::select! {
                result = work => result,
                _ = term.recv() => Err(anyhow::anyhow!(
                    "stopped by SIGTERM (a request in flight was not saved)"
                )),
                _ = hangup.recv() => Err(anyhow::anyhow!(
                    "stopped by SIGHUP (a request in flight was not saved)"
                )),
            };
        }
    }
    work.await
}

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
            Command::Ui(args) => ui_cmd::run(args).await,
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
            Command::Chat(args) => until_signalled(chat::run(args)).await,
            Command::Node(args) => node_cmd::run(args).await,
            Command::Mcp {
                command: McpCommand::Serve(args),
            } => mcp_cmd::serve(args).await,
            Command::A2a {
                command: cli::A2aCommand::Serve(args),
            } => a2a_cmd::serve(args).await,
            Command::Session {
                command: SessionCommand::Show(args),
            } => session_cmd::show(&args),
            Command::Session {
                command: SessionCommand::Fork(args),
            } => session_cmd::fork(&args),
        }
    });
    // A read of stdin in flight (chat waiting for a line) cannot be cancelled and would hold a
    // plain drop of the runtime until Enter; what matters — every task dropped, so MCP servers'
    // process groups are killed — happens at once either way.
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN);
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
