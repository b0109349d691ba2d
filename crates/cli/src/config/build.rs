//! Turning configuration into running parts: models, tool registries, agent specs.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use troupe_agents::AgentSpec;
use troupe_models::{
    AnthropicConfig, AnthropicModel, OpenAiConfig, OpenAiModel, RateLimit, RateLimitedModel,
};
use troupe_protocol::ChatModel;
use troupe_tools::ToolRegistry;
use troupe_tools::builtin::{
    EditFile, Grep, HttpGetConfig, ListDir, ReadFile, ShellConfig, WriteFile, http_get_tool,
    shell_tool,
};

use super::pinned::pinned_message;
use super::{AgentConfig, Config, ModelConfig, Provider};

/// Why a configured part could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The model could not be loaded or reached.
    #[error("model `{name}`: {reason}")]
    Model {
        /// The `[models]` key.
        name: String,
        /// The provider's error, as text.
        reason: String,
    },
    /// `api_key_env` names a variable that is not set (or is empty): requests would go out
    /// without the key that was asked for.
    #[error(
        "model `{name}`: api_key_env names ${variable}, which is not set (or is empty); set it to \
         the API key, or remove api_key_env for a server that needs no key"
    )]
    MissingKey {
        /// The `[models]` key.
        name: String,
        /// The variable `api_key_env` names.
        variable: String,
    },
    /// No such model or agent in the configuration.
    #[error("no {what} `{name}` in the configuration")]
    Missing {
        /// `model` or `agent`.
        what: &'static str,
        /// The name asked for.
        name: String,
    },
    /// A `pinned` file could not be read.
    #[error("agent `{agent}`: pinned file {path}: {reason}")]
    PinnedFile {
        /// The `[agents]` key.
        agent: String,
        /// The file, as resolved.
        path: PathBuf,
        /// The reading error, as text.
        reason: String,
    },
    /// A tool could not be registered.
    #[error("agent `{agent}`: tool `{tool}`: {reason}")]
    Tool {
        /// The `[agents]` key of the agent whose tools were being built.
        agent: String,
        /// The tool's name as the configuration gives it.
        tool: String,
        /// The registry's error, as text.
        reason: String,
    },
}

/// Build (load or connect) the model `[models.NAME]` describes, under its `rate_limit` if it
/// has one. A server's model is limited even without one: a `Retry-After` it answers one
/// caller with then holds every caller. Build each model once and share it, so that one limit
/// covers every agent and the compression agent calling it.
///
/// # Errors
/// [`BuildError::Model`] when the local weights cannot be loaded or the client cannot be built;
/// [`BuildError::MissingKey`] when `api_key_env` names a variable that is not set.
pub async fn build_model(
    name: &str,
    config: &ModelConfig,
) -> Result<Arc<dyn ChatModel>, BuildError> {
    let model = build_provider(name, config).await?;
    let limit = match config.rate_limit {
        None if config.provider == Provider::Local => return Ok(model),
        None => RateLimit::default(),
        // Validation refused a limit that does not convert; a config built in code with one
        // gets the same refusal here rather than no limit.
        Some(rate_limit) => rate_limit.limit().ok_or_else(|| BuildError::Model {
            name: name.to_string(),
            reason: format!("rate_limit {rate_limit:?} is not a limit (each must be at least 1)"),
        })?,
    };
    Ok(Arc::new(RateLimitedModel::new(model, limit)))
}

/// The provider's model, unlimited.
async fn build_provider(
    name: &str,
    config: &ModelConfig,
) -> Result<Arc<dyn ChatModel>, BuildError> {
    let fail = |reason: String| BuildError::Model {
        name: name.to_string(),
        reason,
    };
    match config.provider {
        Provider::Openai => {
            let base = config
                .base_url
                .clone()
                .unwrap_or_else(|| troupe_models::OPENAI_BASE_URL.to_string());
            let model = config
                .model
                .clone()
                .unwrap_or_else(|| troupe_models::DEFAULT_OPENAI_MODEL.to_string());
            let mut openai = OpenAiConfig::new(base, model);
            if let Some(key) = api_key(name, config, "OPENAI_API_KEY")? {
                openai = openai.with_api_key(key);
            }
            if let Some(window) = config.context_window {
                openai = openai.with_context_window(window);
            }
            Ok(Arc::new(
                OpenAiModel::new(openai).map_err(|e| fail(e.to_string()))?,
            ))
        }
        Provider::Anthropic => {
            // Validation requires `model`; a config built in code without one is refused here.
            let Some(model) = config.model.clone() else {
                return Err(fail(
                    "provider = \"anthropic\" needs model = \"…\"".to_string(),
                ));
            };
            let base = config
                .base_url
                .clone()
                .unwrap_or_else(|| troupe_models::ANTHROPIC_BASE_URL.to_string());
            let mut anthropic = AnthropicConfig::new(base, model);
            if let Some(key) = api_key(name, config, "ANTHROPIC_API_KEY")? {
                anthropic = anthropic.with_api_key(key);
            }
            if let Some(window) = config.context_window {
                anthropic = anthropic.with_context_window(window);
            }
            Ok(Arc::new(
                AnthropicModel::new(anthropic).map_err(|e| fail(e.to_string()))?,
            ))
        }
        Provider::Local => local_model(config).await.map_err(fail),
    }
}

/// The API key of an `openai` or `anthropic` model: the variable `api_key_env` names, which
/// must then be set (a key was asked for), else the provider's `default_variable` if set
/// (local servers and proxies need none). Read through [`troupe_host::credentials`], since
/// the `troupe` binary moves keys out of its environment.
fn api_key(
    name: &str,
    config: &ModelConfig,
    default_variable: &str,
) -> Result<Option<String>, BuildError> {
    let set = |variable: &str| {
        troupe_host::credentials::var(variable).filter(|key| !key.trim().is_empty())
    };
    match &config.api_key_env {
        Some(variable) => match set(variable) {
            Some(key) => Ok(Some(key)),
            None => Err(BuildError::MissingKey {
                name: name.to_string(),
                variable: variable.clone(),
            }),
        },
        None => Ok(set(default_variable)),
    }
}

async fn local_model(config: &ModelConfig) -> Result<Arc<dyn ChatModel>, String> {
    use troupe_models::{LocalModel, LocalModelConfig};
    let mut local = LocalModelConfig {
        model_path: config.path.clone(),
        ..LocalModelConfig::default()
    };
    if let Some(window) = config.context_window {
        local.max_context = u32::try_from(window).unwrap_or(u32::MAX);
    }
    Ok(Arc::new(
        LocalModel::load(local).await.map_err(|e| e.to_string())?,
    ))
}

impl Config {
    /// The built-in tools `agent` names, configured by `[tools]`; its `mcp:` entries are left to
    /// [`Config::mcp_tools`].
    ///
    /// # Errors
    /// [`BuildError::Tool`] if a tool cannot be registered.
    pub fn tool_registry(
        &self,
        agent_name: &str,
        agent: &AgentConfig,
    ) -> Result<ToolRegistry, BuildError> {
        let mut tools = ToolRegistry::new();
        let timeout = self.tools.timeout_secs.map(Duration::from_secs);
        for name in &agent.tools {
            let registered = match name.as_str() {
                "read_file" => tools.register(ReadFile).map(drop),
                "write_file" => tools.register(WriteFile).map(drop),
                "edit_file" => tools.register(EditFile).map(drop),
                "list_dir" => tools.register(ListDir).map(drop),
                "grep" => tools.register(Grep).map(drop),
                "shell" => {
                    let mut shell = ShellConfig {
                        env_allowlist: self.tools.shell_env.clone(),
                        sandbox: self.sandbox_for(agent_name),
                        ..ShellConfig::default()
                    };
                    if let Some(t) = timeout {
                        shell.timeout = t;
                    }
                    tools.register(shell_tool(shell)).map(drop)
                }
                "http_get" => {
                    let mut http = HttpGetConfig {
                        allowed_hosts: self.tools.http_allowed_hosts.clone(),
                        allow_private: self.tools.http_allow_private,
                        ..HttpGetConfig::default()
                    };
                    if let Some(t) = timeout {
                        http.timeout = t;
                    }
                    let tool = http_get_tool(http).map_err(|e| BuildError::Tool {
                        agent: agent_name.to_string(),
                        tool: name.clone(),
                        reason: e.to_string(),
                    })?;
                    tools.register(tool).map(drop)
                }
                // Connected by `Config::mcp_tools`: starting a server is async.
                other if other.starts_with(super::MCP_TOOL_PREFIX) => Ok(()),
                other => {
                    return Err(BuildError::Tool {
                        agent: agent_name.to_string(),
                        tool: other.to_string(),
                        reason: "unknown tool".to_string(),
                    });
                }
            };
            registered.map_err(|e| BuildError::Tool {
                agent: agent_name.to_string(),
                tool: name.clone(),
                reason: e.to_string(),
            })?;
        }
        if let Some(t) = timeout {
            tools.set_default_timeout(t);
        }
        Ok(tools)
    }

    /// The spec of agent `name`, with its model taken from `models` (built by [`build_model`]),
    /// falling back to `default_model` when the agent names none and none is configured.
    /// Built-in tools only: [`Config::agent_spec_connected`] adds the agent's MCP tools.
    ///
    /// # Errors
    /// [`BuildError::Missing`] for an unknown agent or a model not in `models`.
    pub fn agent_spec(
        &self,
        name: &str,
        models: &BTreeMap<String, Arc<dyn ChatModel>>,
        default_model: Option<Arc<dyn ChatModel>>,
    ) -> Result<AgentSpec, BuildError> {
        let agent = self.agents.get(name).ok_or_else(|| BuildError::Missing {
            what: "agent",
            name: name.to_string(),
        })?;
        let model = match self.agent_model_name(agent) {
            Some(model_name) => models
                .get(&model_name)
                .cloned()
                .ok_or(BuildError::Missing {
                    what: "model",
                    name: model_name,
                })?,
            None => default_model.ok_or_else(|| BuildError::Missing {
                what: "model",
                name: "(default)".into(),
            })?,
        };
        let mut spec = AgentSpec::new(name, model)
            .instructions(agent.instructions.clone())
            .tools(self.tool_registry(name, agent)?)
            .team_messaging(agent.team_messaging)
            .approval(super::approve::policy(agent));
        if let Some(n) = agent.max_turns {
            spec = spec.max_turns(n);
        }
        if agent.durable_steps == Some(false) {
            spec = spec.request_commits_only();
        }
        if let Some(t) = agent.temperature {
            spec = spec.temperature(t);
        }
        if let Some(n) = agent.max_tokens {
            spec = spec.max_tokens(n);
        }
        if let Some(root) = &self.tools.workspace {
            spec = spec.workspace_root(root.clone());
        }
        let price = self
            .agent_model_name(agent)
            .and_then(|m| self.models.get(&m))
            .and_then(|m| m.price);
        spec = spec.budget(super::budget::agent_budget(
            agent.budget,
            price,
            self.team.spend(),
        ));
        for pin in &agent.pinned {
            let message = pinned_message(name, pin, &spec.workspace_root)?;
            spec = spec.pin(message);
        }
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> ModelConfig {
        ModelConfig {
            provider: Provider::Openai,
            base_url: None,
            api_key_env: None,
            model: None,
            path: None,
            context_window: None,
            cost_rank: None,
            price: None,
            rate_limit: None,
        }
    }

    #[test]
    fn durable_steps_are_the_default_and_false_keeps_to_request_commits() {
        let config = Config::parse(
            "[models.m]\nprovider = \"openai\"\n[agents.coder]\n[agents.plain]\ndurable_steps = false\n",
        )
        .unwrap();
        let model: Arc<dyn ChatModel> = Arc::new(troupe_models::ScriptedModel::new("m", []));
        let models = BTreeMap::from([("m".to_string(), model)]);
        let spec = |name| config.agent_spec(name, &models, None).unwrap();
        assert!(spec("coder").durable_steps);
        assert!(!spec("plain").durable_steps);
    }

    #[test]
    fn a_key_asked_for_by_api_key_env_must_be_set() {
        let config = ModelConfig {
            api_key_env: Some("TROUPE_BUILD_TEST_NEVER_SET".to_string()),
            ..model()
        };
        let err = api_key("remote", &config, "OPENAI_API_KEY").unwrap_err();
        let message = err.to_string();
        assert!(message.contains("model `remote`"), "{message}");
        assert!(
            message.contains("$TROUPE_BUILD_TEST_NEVER_SET, which is not set"),
            "{message}"
        );
        troupe_host::credentials::keep("TROUPE_BUILD_TEST_KEPT", "sk-kept");
        let config = ModelConfig {
            api_key_env: Some("TROUPE_BUILD_TEST_KEPT".to_string()),
            ..model()
        };
        assert_eq!(
            api_key("remote", &config, "OPENAI_API_KEY")
                .unwrap()
                .as_deref(),
            Some("sk-kept")
        );
    }

    #[tokio::test]
    async fn an_anthropic_model_builds_with_its_model_and_window_and_needs_a_model() {
        let config = ModelConfig {
            provider: Provider::Anthropic,
            model: Some("claude-test".to_string()),
            base_url: Some("http://127.0.0.1:9".to_string()),
            context_window: Some(100_000),
            ..model()
        };
        let built = build_model("claude", &config).await.unwrap();
        assert_eq!(built.info().name, "claude-test");
        assert_eq!(built.info().context_window, 100_000);
        let nameless = ModelConfig {
            model: None,
            ..config
        };
        let err = build_model("claude", &nameless)
            .await
            .err()
            .map(|e| e.to_string());
        assert!(
            err.as_deref().is_some_and(|e| e.contains("needs model")),
            "{err:?}"
        );
    }
}
