//! The command line, declared with clap.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use troupe::compaction::economics::{CostModel, Rates};

/// troupe: an actor-based multi-agent runtime with a context-compression agent.
#[derive(Debug, Parser)]
#[command(
    name = "troupe",
    version,
    about,
    after_help = "\
Environment:
  RUST_LOG=info             console logs (stderr)
  TROUPE_TRACE=run.jsonl    write a JSONL trace file (view it with `troupe trace run.jsonl`)
  TROUPE_TRACE_CONTENT=1    also record message content in traces
  OPENAI_API_KEY / OPENAI_BASE_URL   use an OpenAI-compatible server instead of the local model"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Chat with one agent in a REPL (status line, /compact, /context, /clear, /resume, /exit).
    Chat(ChatArgs),
    /// Compact an OpenAI-format transcript to a target share of a context window.
    Compact(CompactArgs),
    /// Restore the original of a compacted transcript from its archive.
    Expand(ExpandArgs),
    /// Feed a transcript message by message, compacting automatically at the trigger.
    Replay(ReplayArgs),
    /// Render a JSONL trace file as a tree: agent → turn → model call / tool call / compaction.
    Trace(TraceArgs),
    /// Open a finished run in the browser, read-only (a live team: `troupe chat --ui`).
    Ui(UiArgs),
    /// Manage the local model.
    Model {
        #[command(subcommand)]
        command: ModelCommand,
    },
    /// Run a cluster node hosting the agents of a config, reachable by name from other nodes.
    Node(NodeArgs),
    /// The Model Context Protocol: troupe's compressor as an MCP server.
    Mcp {
        #[command(subcommand)]
        command: McpCommand,
    },
    /// The Agent2Agent protocol (A2A 1.0): a config's agents served as A2A agents.
    A2a {
        #[command(subcommand)]
        command: A2aCommand,
    },
    /// A session log's steps, and forks of it at a step (time travel).
    Session {
        #[command(subcommand)]
        command: SessionCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// List a session log's steps (request, model call, tool call, compaction…) with their ids.
    Show(SessionShowArgs),
    /// Write a new log ending at a step; `troupe chat --session NEW` continues from there.
    Fork(SessionForkArgs),
}

#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  troupe session show chat.jsonl
  troupe session show helper --store postgres://troupe@127.0.0.1:5432/troupe")]
pub struct SessionShowArgs {
    /// The session log.
    pub log: PathBuf,
    /// Where the log lives: a directory of JSONL files (LOG is a path in it), a Postgres
    /// database (`postgres://user@host:port/db`, or `env:VAR` naming a variable holding that URL;
    /// LOG is the log's name there, e.g. an agent's name). Default: LOG is a file.
    #[arg(long, value_parser = crate::store_arg::parse_store)]
    pub store: Option<crate::store_arg::StoreArg>,
}

#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  troupe session fork chat.jsonl --at 12 --out retry.jsonl
  troupe chat --session retry.jsonl     # continues from step 12 (a request in flight resumes)")]
pub struct SessionForkArgs {
    /// The session log (left untouched).
    pub log: PathBuf,
    /// The step the new log ends at (an id `troupe session show` lists).
    #[arg(long)]
    pub at: String,
    /// The new log (must not exist), in the same store.
    #[arg(long)]
    pub out: PathBuf,
    /// Where the log lives: a directory of JSONL files (LOG is a path in it), a Postgres
    /// database (`postgres://user@host:port/db`, or `env:VAR` naming a variable holding that URL;
    /// LOG is the log's name there, e.g. an agent's name). Default: LOG is a file.
    #[arg(long, value_parser = crate::store_arg::parse_store)]
    pub store: Option<crate::store_arg::StoreArg>,
}

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Serve compact_transcript, expand_transcript and count_tokens to an MCP client over stdio.
    Serve(McpServeArgs),
}

#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  troupe mcp serve                  # mechanical summaries, no model
  troupe mcp serve --model openai   # summaries by OPENAI_BASE_URL / OPENAI_API_KEY's model
  troupe mcp serve --root ~/logs    # `path` may name transcripts beneath ~/logs only

In an MCP host's configuration: {\"command\": \"troupe\", \"args\": [\"mcp\", \"serve\"]}")]
pub struct McpServeArgs {
    /// Which model summarizes.
    #[arg(long, value_enum, default_value_t = SummaryModel::None)]
    pub model: SummaryModel,
    /// The directory compact_transcript's `path` may read from (regular files beneath it
    /// only); default: the working directory.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Download the default local model ahead of time (or check a GGUF file).
    Pull(PullArgs),
}

/// Which model writes summaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SummaryModel {
    /// The embedded local model.
    Local,
    /// The OpenAI-compatible server named by OPENAI_BASE_URL / OPENAI_API_KEY.
    Openai,
    /// No model: a mechanical summary (the user's requests, tools used, file lists).
    None,
}

#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  troupe compact session.json --window 32000 --out small.json --archive small.archive.jsonl
  troupe compact session.json --window 32000 --model none --target 0.3 --out small.json --json
  troupe compact session.json --window 8000 --focus 'the parser bug' --out s.json")]
pub struct CompactArgs {
    /// The transcript: {\"messages\": [...]} or a bare message array.
    pub input: PathBuf,
    /// The context window in tokens (at least 1024).
    #[arg(long)]
    pub window: usize,
    /// Target share of the window, strictly between 0 and 1.
    #[arg(long, default_value_t = 0.4)]
    pub target: f64,
    /// Recent user/assistant messages never touched.
    #[arg(long, default_value_t = 5)]
    pub protected: usize,
    /// Which model summarizes.
    #[arg(long, value_enum, default_value_t = SummaryModel::Local)]
    pub model: SummaryModel,
    /// What the summaries should keep in view (`--instructions` is its old name).
    #[arg(long, alias = "instructions")]
    pub focus: Option<String>,
    /// Where to write the compacted transcript (same format as the input; never the input).
    #[arg(long)]
    pub out: PathBuf,
    /// Where to write the archive of replaced originals (default: OUT with .archive.jsonl);
    /// written first, so OUT never exists without it.
    #[arg(long)]
    pub archive: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  troupe expand small.json --archive small.archive.jsonl --out restored.json
  cmp session.json restored.json   # identical")]
pub struct ExpandArgs {
    /// The compacted transcript.
    pub input: PathBuf,
    /// Its archive, written by `troupe compact`.
    #[arg(long)]
    pub archive: PathBuf,
    /// Where to write the restored transcript; written only when every message is restored
    /// exactly (checked against the sha256 sums the archive recorded).
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  troupe replay session.json --window 16000 --model none
  troupe replay session.json --window 32000 --json > replay.json
  troupe replay session.json --window 32000 --cost anthropic
  troupe replay session.json --window 32000 --cost openai --rates cached=0.5")]
pub struct ReplayArgs {
    /// The transcript.
    pub input: PathBuf,
    /// The context window in tokens (at least 1024).
    #[arg(long)]
    pub window: usize,
    /// Which model summarizes.
    #[arg(long, value_enum, default_value_t = SummaryModel::None)]
    pub model: SummaryModel,
    /// Bill the session's input tokens as a provider that caches prompt prefixes would:
    /// `openai` (automatic prefix caching from 1024 tokens, 128-token steps) or `anthropic`
    /// (explicit breakpoints, 5-minute TTL, writes 1.25x, reads 0.1x); calls are assumed 10 s
    /// apart.
    #[arg(long, value_parser = parse_cost_model)]
    pub cost: Option<CostModel>,
    /// Replace some of the cost model's rates, in units of an uncached input token, e.g.
    /// `input=1,cached=0.1,write=1.25`.
    #[arg(long, requires = "cost", value_parser = parse_rates)]
    pub rates: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  TROUPE_TRACE=run.jsonl cargo run --example team -- --scripted
  troupe trace run.jsonl
  troupe trace run.jsonl --follow      # while the run is going on")]
pub struct TraceArgs {
    /// The trace file (written when TROUPE_TRACE=FILE is set); several files (one per cluster
    /// node) are merged into one tree per trace.
    #[arg(required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Keep reading as the file grows (one file only).
    #[arg(long, short)]
    pub follow: bool,
}

#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  troupe model pull                      # the default model (SmolLM2-135M, ~90 MB, once)
  troupe model pull ./my-model.gguf      # check that a GGUF file loads")]
pub struct PullArgs {
    /// `default` (or nothing) for the default model, or the path of a GGUF file to check.
    pub name: Option<String>,
}

#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  troupe chat
  troupe chat --config troupe.toml --agent assistant
  troupe chat --session ~/.cache/troupe/sessions/work.jsonl   # resume that conversation

In the REPL: /compact [focus], /context, /clear, /resume [SESSION], /exit.
Ctrl-C cancels the running request; Ctrl-D or /exit quits.")]
pub struct ChatArgs {
    /// A troupe config file (TOML).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Which agent of the config to chat with (default: the only one; required when it has several).
    #[arg(long)]
    pub agent: Option<String>,
    /// The session log to append to (default: a new file under the user's cache directory).
    #[arg(long)]
    pub session: Option<PathBuf>,
    /// Also serve a live view of the team in the browser (its URL, with a one-time token, is
    /// printed): agents' states, context meters, compactions, approvals.
    #[arg(long)]
    pub ui: bool,
}

#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  TROUPE_TRACE=run.jsonl cargo run --example team -- --scripted
  troupe ui --trace run.jsonl          # prints the page's URL; Ctrl-C stops it
  troupe ui --session chat.jsonl       # a session log: its conversation and last compaction")]
#[command(group(clap::ArgGroup::new("run").required(true).args(["trace", "session"])))]
pub struct UiArgs {
    /// The trace file of the run (written when TROUPE_TRACE=FILE is set).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// A session log (troupe chat's, or an agent's session file).
    #[arg(long)]
    pub session: Option<PathBuf>,
    /// Where --session's log lives: a directory, a Postgres database (`postgres://…` or
    /// `env:VAR`; the log's name there, e.g. an agent's name). Default: --session is a file.
    #[arg(long, value_parser = crate::store_arg::parse_store, requires = "session")]
    pub store: Option<crate::store_arg::StoreArg>,
    /// Where to listen (port 0: any free port). Loopback unless told otherwise.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: std::net::SocketAddr,
}

#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  TROUPE_COOKIE=s3cret troupe node --name gpu-box --config troupe.toml
  TROUPE_COOKIE=s3cret troupe node --name laptop --config mine.toml --connect 127.0.0.1:7400
  TROUPE_COOKIE=s3cret PG=postgres://troupe@db:5432/troupe troupe node --config t.toml --store env:PG

Every node of a cluster needs the same cookie; agents are then asked by name on any node.
The node prints `READY ADDRESS` once it listens, and runs until Ctrl-C or SIGTERM.")]
pub struct NodeArgs {
    /// This node's name, unique in the cluster.
    #[arg(long, default_value = "node")]
    pub name: String,
    /// Where to listen for other nodes (port 0: any free port). Loopback unless told otherwise.
    #[arg(long, default_value = "127.0.0.1:7400")]
    pub listen: std::net::SocketAddr,
    /// The environment variable holding the cluster's cookie (the secret is never an argument).
    #[arg(long, default_value = "TROUPE_COOKIE")]
    pub cookie_env: String,
    /// The config whose agents this node hosts (with a compression agent for them).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Keep each agent's session log (durable steps) in a store: a directory (`DIR/AGENT.jsonl`)
    /// or a Postgres database every node reaches (`postgres://user@host:port/db`, or `env:VAR`
    /// naming a variable holding that URL; the log is named AGENT there, and this node holds
    /// its lease while it hosts the agent). Default: no log.
    #[arg(long, value_parser = crate::store_arg::parse_store)]
    pub store: Option<crate::store_arg::StoreArg>,
    /// Nodes to connect to once listening (repeatable).
    #[arg(long = "connect")]
    pub connect: Vec<std::net::SocketAddr>,
    /// TLS: this node's certificate chain (PEM); with --tls-key, --tls-ca and --tls-name.
    #[arg(long, requires_all = ["tls_key", "tls_ca", "tls_name"])]
    pub tls_cert: Option<PathBuf>,
    /// TLS: this node's private key (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// TLS: the authority (PEM) that signed the other nodes' certificates.
    #[arg(long, requires = "tls_cert")]
    pub tls_ca: Option<PathBuf>,
    /// TLS: the name the other nodes' certificates are issued for.
    #[arg(long, requires = "tls_cert")]
    pub tls_name: Option<String>,
    /// Also serve a live view of the agents this node hosts in the browser (its URL, with a
    /// one-time token, is printed before READY): states, context meters, compactions,
    /// approvals, conversations, requests.
    #[arg(long)]
    pub ui: bool,
    /// A config agent this node does not start but takes over when the node hosting it is lost
    /// (no connected node publishes it and its log's lease in --store ran out): started here
    /// from its log, resuming its request in flight (repeatable; needs a Postgres --store).
    #[arg(long = "standby")]
    pub standby: Vec<String>,
    /// How long a log's lease in a Postgres --store runs unrenewed (ms): how soon a lost node's
    /// agents can be taken over. Renewed every third of it.
    #[arg(long = "lease-ms")]
    pub lease_ms: Option<u64>,
    /// How long an ask whose agent's node went away waits for the agent's new home (ms),
    /// within the ask's timeout, retried there under the same request id. Default 0: the ask
    /// fails with NodeDown at once.
    #[arg(long = "failover-ms", default_value_t = 0)]
    pub failover_ms: u64,
    /// How long a peer has to answer a heartbeat before it is taken for down (ms): how soon a
    /// frozen or partitioned node's asks fail over. Default 5000 (`HEARTBEAT_DEADLINE`).
    #[arg(long = "heartbeat-ms", value_parser = clap::value_parser!(u64).range(1..))]
    pub heartbeat_ms: Option<u64>,
}

/// `--cost`: a cost model's name.
fn parse_cost_model(name: &str) -> Result<CostModel, String> {
    name.parse()
        .map_err(|e: troupe::compaction::economics::UnknownCostModel| e.to_string())
}

/// `--rates`: checked here so a mistake is reported before the replay starts; applied to the
/// chosen model's rates by the command.
fn parse_rates(spec: &str) -> Result<String, String> {
    Rates::OPENAI
        .with_overrides(spec)
        .map(|_| spec.to_string())
        .map_err(|e| e.to_string())
}

#[derive(Debug, Subcommand)]
pub enum A2aCommand {
    /// Serve a config's agents over A2A 1.0 (JSON-RPC): one agent card and endpoint each.
    Serve(A2aServeArgs),
}

#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  troupe a2a serve --config troupe.toml                       # every agent, loopback, a key made and printed
  TROUPE_A2A_KEY=s3cret troupe a2a serve --config troupe.toml --agent coder --key-env TROUPE_A2A_KEY
  troupe a2a serve --config troupe.toml --key-env ALICE_KEY --key-env BOB_KEY   # two callers
  troupe a2a serve --config troupe.toml --allow-origin https://app.example      # a web app calls it

Each agent is at http://ADDRESS/agents/NAME (its card: .../.well-known/agent-card.json).
Every request needs a key; without --key-env one is made for the run and printed (`key: …`).
A caller reaches only the tasks and conversations it started with its key. Refused before any
JSON-RPC is read: a Host that is not the listen address's or --public-url's, a browser page of
another origin (unless --allow-origin), a body that is not application/json or has no
A2A-Version. Prints `READY ADDRESS` and each agent's URL once it listens; runs until Ctrl-C or
SIGTERM.")]
pub struct A2aServeArgs {
    /// The config whose agents are served (with a compression agent for them).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// An agent to serve (repeatable); default: every agent of the config.
    #[arg(long = "agent")]
    pub agents: Vec<String>,
    /// Where to listen. Loopback unless told otherwise.
    #[arg(long, default_value = "127.0.0.1:8470")]
    pub listen: std::net::SocketAddr,
    /// An environment variable holding a caller's key (HTTP Bearer, or in the header
    /// --api-key-header names); repeat it for callers of their own, each reaching only its own
    /// tasks. Without it a key is made for the run and printed once.
    #[arg(long = "key-env", value_name = "VAR")]
    pub key_env: Vec<String>,
    /// Take the keys in this header (an A2A API-key scheme) instead of `Authorization: Bearer`.
    #[arg(long)]
    pub api_key_header: Option<String>,
    /// The base URL the cards give, when callers reach the server through another address
    /// (its host is then one the server answers to).
    #[arg(long)]
    pub public_url: Option<String>,
    /// An origin whose web pages may call the agents (`https://app.example`, named whole: no
    /// wildcard), answered with CORS; repeatable. Every other origin's request is refused.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,
    /// A file keeping finished tasks across restarts (JSON lines); without it they live as long
    /// as the server. Conversations resume through the agents' session logs.
    #[arg(long, value_name = "FILE")]
    pub tasks: Option<PathBuf>,
    /// The most A2A conversations (contexts) held at once, each an agent of its own; past it
    /// the least recently used idle one is let go, and with every one working a new context is
    /// refused.
    #[arg(long, value_name = "N", default_value_t = troupe::a2a::DEFAULT_MAX_CONTEXTS as u64,
        value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub max_contexts: u64,
    /// Seconds a conversation's agent may sit idle before it is let go.
    #[arg(long, value_name = "SECS", default_value_t = troupe::a2a::DEFAULT_CONTEXT_IDLE.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..=7 * 24 * 3600))]
    pub context_idle: u64,
    /// The most conversations' session logs each served agent keeps on disk, for agents that
    /// keep a session log; past it the least recently used one not live is removed.
    #[arg(long, value_name = "N", default_value_t = troupe::a2a::DEFAULT_MAX_CONTEXT_LOGS as u64,
        value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_context_logs: u64,
    /// The size at which a conversation's session log takes no more tasks (the caller is told
    /// to start another context).
    #[arg(long, value_name = "BYTES", default_value_t = troupe::a2a::DEFAULT_MAX_CONTEXT_LOG_BYTES,
        value_parser = clap::value_parser!(u64).range(4096..=1 << 30))]
    pub max_context_log_bytes: u64,
}
