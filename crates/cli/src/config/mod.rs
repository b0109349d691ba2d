//! The troupe configuration file (TOML): models, agents, tools and compaction.
//!
//! ```toml
//! [models.small]
//! provider = "local"                 # embedded llama.cpp; `path` names a GGUF (default: SmolLM2)
//! context_window = 8192
//!
//! [models.gpt]
//! provider = "openai"                # any OpenAI-compatible server
//! base_url = "https://api.openai.com/v1"
//! api_key_env = "OPENAI_API_KEY"     # the variable holding the key (must be set); never the key
//! model = "gpt-4o-mini"
//! context_window = 128000
//! cost_rank = 2                      # cheaper ranks lower; without [compaction] model,
//!                                    # compaction uses the lowest-ranked model
//! price = { input = 0.15, output = 0.60 }  # per million tokens, for cost budgets
//! rate_limit = { requests_per_minute = 60, tokens_per_minute = 100000 }  # shared by every
//!                                    # agent and compaction on this model; either optional
//!
//! [models.claude]
//! provider = "anthropic"             # the Anthropic Messages API, with prompt caching
//! model = "claude-sonnet-4-5"        # required
//! api_key_env = "ANTHROPIC_API_KEY"  # default; base_url default https://api.anthropic.com
//!
//! [agents.assistant]
//! model = "gpt"
//! instructions = "You are a careful coding assistant."
//! tools = ["read_file", "grep"]
//! pinned = [{ file = "RULES.md" }]   # never compacted; also { text = "…", role = "system" }
//! budget = { request = { input_tokens = 200000 }, agent = { cost = 5.0 } }
//!                                    # on_exceeded = "pause": wait for a raised limit instead
//!
//! [team]
//! budget = { cost = 20.0 }           # every agent together, compaction calls included; also
//!                                    # input_tokens, output_tokens (cost needs prices)
//!
//! [tools]
//! workspace = "."
//!
//! [sandbox]                          # what the commands a model runs may touch
//! policy = "workspace-write"         # read-only | workspace-write | full (see SandboxSection)
//! network = false
//!
//! [mcp.servers.time]                # an MCP server; agents name its tools "mcp:time"
//! command = "uvx"
//! args = ["mcp-server-time"]
//!
//! [compaction]
//! model = "small"
//! auto = true
//! protected_messages = 5
//! warning = 0.70
//! trigger = 0.80
//! target = 0.40
//! output_reserve = 4096              # tokens kept free for the answer (default: the agent's
//!                                    # max_tokens, else 4096; at most a quarter of the window)
//! ```
//!
//! Unknown keys and bad values are errors that name the key (`agents.assistant.tools[1]`).

mod approve;
mod budget;
mod build;
mod compaction_section;
mod compression;
mod mcp;
mod pinned;
mod rate_limit;
mod sandbox_section;
mod serve_section;
mod validate;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use approve::ApproveRuleConfig;
pub use budget::{BudgetConfig, LimitConfig, OnExceededConfig, PriceConfig, TeamSection};
pub use build::{BuildError, build_model};
pub use compaction_section::CompactionSection;
pub(crate) use compaction_section::MAX_CONCURRENT_COMPACTIONS;
pub use mcp::{MCP_TOOL_PREFIX, McpConfig, McpServerEntry, McpToolRef};
pub use pinned::{PinnedConfig, PinnedRole};
pub use rate_limit::RateLimitConfig;
pub use sandbox_section::{ReadsConfig, SandboxSection};
pub use serve_section::ServeSection;

/// A whole configuration file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Models by name.
    #[serde(default)]
    pub models: BTreeMap<String, ModelConfig>,
    /// Agents by name.
    #[serde(default)]
    pub agents: BTreeMap<String, AgentConfig>,
    /// Tool settings.
    #[serde(default)]
    pub tools: ToolsConfig,
    /// Every agent's compaction and the compression agent's (see [`CompactionSection`]).
    #[serde(default)]
    pub compaction: CompactionSection,
    /// MCP servers whose tools agents name as `mcp:NAME` (see [`McpConfig`]).
    #[serde(default)]
    pub mcp: McpConfig,
    /// What the agents built from this configuration share (`[team] budget = { … }`).
    #[serde(default)]
    pub team: TeamSection,
    /// What the commands a model runs may touch (see [`SandboxSection`]).
    #[serde(default)]
    pub sandbox: SandboxSection,
    /// What one client may hold of troupe's HTTP servers (see [`ServeSection`]).
    #[serde(default)]
    pub serve: ServeSection,
}

/// Which kind of model server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// The embedded llama.cpp model.
    Local,
    /// An OpenAI-compatible HTTP server (OpenAI, Azure, Ollama, vLLM, llama.cpp server, …).
    Openai,
    /// The Anthropic Messages API (Claude), with prompt caching placed by troupe.
    Anthropic,
}

/// `[models.NAME]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// `local`, `openai` or `anthropic`.
    pub provider: Provider,
    /// The server's base URL (`openai`, `anthropic`); default `https://api.openai.com/v1`,
    /// `https://api.anthropic.com`.
    pub base_url: Option<String>,
    /// The environment variable holding the API key (`openai`, `anthropic`); default
    /// `OPENAI_API_KEY`, `ANTHROPIC_API_KEY`. A variable named here must be set: building the
    /// model fails otherwise.
    pub api_key_env: Option<String>,
    /// The model's name on the server (`openai`; required for `anthropic`), or a label
    /// (`local`).
    pub model: Option<String>,
    /// A GGUF file (`local` only); default: the cached SmolLM2-135M.
    pub path: Option<PathBuf>,
    /// The context window in tokens.
    pub context_window: Option<usize>,
    /// Relative cost: compaction uses the lowest-ranked model unless `[compaction] model` names one.
    pub cost_rank: Option<u32>,
    /// What a million tokens cost (`price = { input = 0.15, output = 0.60 }`): agents on this
    /// model count cost against their budgets.
    pub price: Option<PriceConfig>,
    /// Requests and tokens per minute for every agent and the compression agent calling this
    /// model together (`rate_limit = { requests_per_minute = 60, tokens_per_minute = 100000 }`,
    /// either optional); a server's `Retry-After` holds them all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimitConfig>,
}

/// `[agents.NAME]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// A key of `[models]`; default: the only model, or the default model when none is configured.
    pub model: Option<String>,
    /// The system prompt.
    #[serde(default)]
    pub instructions: String,
    /// Tool names (see [`BUILTIN_TOOLS`]), and `mcp:SERVER` or `mcp:SERVER/TOOL` for tools of
    /// an MCP server in `[mcp.servers]`.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Model calls allowed per request.
    pub max_turns: Option<u32>,
    /// `false`: commit to the session log only at a request's end, not at every step (see
    /// `AgentSpec::request_commits_only`); default `true`.
    pub durable_steps: Option<bool>,
    /// Sampling temperature, 0 to 2.
    pub temperature: Option<f32>,
    /// Cap on tokens generated per model call.
    pub max_tokens: Option<u32>,
    /// Whether it may ask other agents (the `ask_agent` tool).
    #[serde(default)]
    pub team_messaging: bool,
    /// Messages every conversation starts with after the system prompt, pinned: compaction
    /// never touches them (`pinned = [{ file = "RULES.md" }, { text = "…", role = "system" }]`).
    #[serde(default)]
    pub pinned: Vec<PinnedConfig>,
    /// What a request and the agent may spend (`budget = { request = { input_tokens = …,
    /// output_tokens = …, cost = … }, agent = { … } }`); compaction calls count.
    pub budget: Option<BudgetConfig>,
    /// Which tool calls run on their own, wait for a person, or never run (`approve = [{ tool =
    /// "shell", argument = "command", prefix = "rm ", policy = "ask" }]`); first match decides,
    /// no match runs.
    #[serde(default)]
    pub approve: Vec<ApproveRuleConfig>,
    /// How long an asked call waits for an answer before it counts as denied (default 240;
    /// keep it under the team's ask timeout, 300).
    pub approve_timeout_secs: Option<u64>,
    /// This agent's sandbox keys over `[sandbox]`'s (`sandbox = { policy = "read-only" }`).
    pub sandbox: Option<SandboxSection>,
}

/// Tools an agent can name in `tools`.
pub const BUILTIN_TOOLS: &[&str] = &[
    "read_file",
    "write_file",
    "edit_file",
    "list_dir",
    "grep",
    "shell",
    "http_get",
];

/// `[tools]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsConfig {
    /// The root file tools are confined to; default: the current directory.
    pub workspace: Option<PathBuf>,
    /// Per-call timeout in seconds.
    pub timeout_secs: Option<u64>,
    /// Hosts `http_get` may fetch from, each with an optional port (`docs.rs`,
    /// `*.example.com`, `localhost:8080`, `127.0.0.1:3000`); without one, only the scheme's
    /// default port.
    #[serde(default)]
    pub http_allowed_hosts: Vec<String>,
    /// Whether `http_get` may reach names that resolve to loopback, private or link-local
    /// addresses (an IP-literal entry always reaches its address).
    #[serde(default)]
    pub http_allow_private: bool,
    /// Environment variables `shell` commands get besides PATH, HOME and LANG.
    #[serde(default)]
    pub shell_env: Vec<String>,
}

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read the config file {path}: {cause}")]
    Io {
        /// The config file's path.
        path: PathBuf,
        /// The read error.
        cause: std::io::Error,
    },
    /// Not valid TOML, an unknown key, or a value of the wrong type.
    #[error("{file}: `{key}`: {message}")]
    Parse {
        /// The file (or `<string>`).
        file: String,
        /// The TOML path of the offending key (`.` for the document).
        key: String,
        /// What is wrong, with line and column where known.
        message: String,
    },
    /// A well-typed value that makes no sense.
    #[error("{file}: `{key}`: {message}")]
    Invalid {
        /// The file (or `<string>`).
        file: String,
        /// The TOML path of the offending key.
        key: String,
        /// What is wrong.
        message: String,
    },
}

impl ConfigError {
    /// The TOML path of the key at fault, if the error is about one.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Io { .. } => None,
            ConfigError::Parse { key, .. } | ConfigError::Invalid { key, .. } => Some(key),
        }
    }
}

impl Config {
    /// Read and validate a configuration file.
    ///
    /// # Errors
    /// [`ConfigError`] naming the key at fault.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_path_buf(),
            cause: source,
        })?;
        Self::parse_named(&text, &path.display().to_string())
    }

    /// Parse and validate configuration text.
    ///
    /// # Errors
    /// [`ConfigError`] naming the key at fault.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        Self::parse_named(text, "<string>")
    }

    fn parse_named(text: &str, file: &str) -> Result<Self, ConfigError> {
        let parse_error = |key: String, e: toml::de::Error| ConfigError::Parse {
            file: file.to_string(),
            key,
            message: e.to_string().trim().replace('\n', "\n  "),
        };
        let deserializer =
            toml::Deserializer::parse(text).map_err(|e| parse_error(".".into(), e))?;
        let config: Config = serde_path_to_error::deserialize(deserializer).map_err(|e| {
            let key = e.path().to_string();
            parse_error(key, e.into_inner())
        })?;
        config
            .validate()
            .map_err(|(key, message)| ConfigError::Invalid {
                file: file.to_string(),
                key,
                message,
            })?;
        Ok(config)
    }

    /// The model an agent uses: its `model`, else the only configured model.
    pub fn agent_model_name(&self, agent: &AgentConfig) -> Option<String> {
        agent.model.clone().or_else(|| match self.models.len() {
            1 => self.models.keys().next().cloned(),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Config;

    #[test]
    fn the_output_reserve_reaches_the_agents_settings() {
        let config = Config::parse("[compaction]\noutput_reserve = 1000\n").unwrap();
        let settings = config.compaction.settings(128_000);
        assert_eq!(settings.output_reserve, Some(1_000));
        assert_eq!(settings.output_reserve_for(Some(8_000), 128_000), 1_000);
        // Never more than a quarter of the window.
        assert_eq!(settings.output_reserve_for(None, 2_000), 500);
        let default = Config::parse("").unwrap().compaction.settings(128_000);
        assert_eq!(default.output_reserve_for(None, 128_000), 4_096);
    }

    #[test]
    fn pricing_names_the_providers_cache_for_receipts_and_the_minimum_gain_rule() {
        use troupe_compaction::economics::{CostModel, Rates};
        assert_eq!(
            Config::parse("").unwrap().compaction.policy(32_000).pricing,
            None
        );
        let priced =
            Config::parse("[compaction]\npricing = \"anthropic\"\nrates = \"cached=0.05\"\n")
                .unwrap();
        assert_eq!(
            priced.compaction.policy(32_000).pricing,
            Some(CostModel::anthropic().with_rates(Rates {
                cached_read: 0.05,
                ..Rates::ANTHROPIC
            }))
        );
        for (toml, key, says) in [
            (
                "pricing = \"gemini\"",
                "compaction.pricing",
                "unknown cost model `gemini`",
            ),
            (
                "pricing = \"openai\"\nrates = \"cached=-1\"",
                "compaction.rates",
                "non-negative",
            ),
            (
                "pricing = \"openai\"\nrates = \"speed=2\"",
                "compaction.rates",
                "unknown rate `speed`",
            ),
            (
                "rates = \"cached=0.1\"",
                "compaction.rates",
                "needs compaction.pricing",
            ),
        ] {
            let e = Config::parse(&format!("[compaction]\n{toml}\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(key) && e.contains(says), "{toml}: {e}");
        }
    }

    /// The table is a view of the agent's and the compression agent's types: what a file
    /// leaves out is their default, not one of its own (#43).
    #[test]
    fn an_empty_table_is_the_agents_and_the_compressors_defaults() {
        use troupe_agents::CompactionSettings;
        use troupe_compaction::ContextPolicy;
        let section = Config::parse("[compaction]\n").unwrap().compaction;
        let settings = section.settings(32_000);
        let defaults = CompactionSettings::default();
        assert_eq!(settings.policy, Some(ContextPolicy::for_window(32_000)));
        assert_eq!(settings.auto, defaults.auto);
        assert_eq!(settings.recall_tool, defaults.recall_tool);
        assert_eq!(settings.output_reserve, defaults.output_reserve);
        assert_eq!(settings.work_ahead, defaults.work_ahead);
        assert_eq!(settings.at_limit, defaults.at_limit);
        assert_eq!(settings.agent_tool, defaults.agent_tool);
        assert_eq!(
            section.max_concurrent,
            troupe_agents::compression::DEFAULT_MAX_CONCURRENT
        );
    }

    #[test]
    fn the_recall_tool_is_on_unless_the_config_turns_it_off() {
        let default = Config::parse("").unwrap().compaction.settings(128_000);
        assert!(default.recall_tool);
        let off = Config::parse("[compaction]\nrecall_tool = false\n").unwrap();
        assert!(!off.compaction.settings(128_000).recall_tool);
    }

    #[test]
    fn a_small_window_gets_a_guard_it_can_pass() {
        // The anti-thrash guard skips a compaction that frees less than `min_freeable_tokens`:
        // on an 8k window a fixed 10,000 would skip every one.
        let config = Config::parse("").unwrap();
        let small = config.compaction.policy(8_000);
        assert_eq!(small.min_freeable_tokens, 800);
        small.validate().unwrap();
        assert_eq!(
            config.compaction.policy(128_000).min_freeable_tokens,
            10_000
        );
    }
}
