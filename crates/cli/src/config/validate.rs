//! Checks that a well-typed configuration makes sense; each failure names its key.

use troupe_compaction::{ContextPolicy, PolicyError};
use troupe_tools::builtin::AllowedHost;

use super::{
    BUILTIN_TOOLS, Config, MAX_CONCURRENT_COMPACTIONS, MCP_TOOL_PREFIX, ModelConfig, Provider,
    ToolsConfig,
};

/// `(key, message)` of the first problem found.
pub(super) type Problem = (String, String);

fn problem(key: impl Into<String>, message: impl Into<String>) -> Problem {
    (key.into(), message.into())
}

fn check_name(table: &str, name: &str) -> Result<(), Problem> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(problem(
            format!("{table}.{name}"),
            "names may use letters, digits, `-`, `_` and `.` only",
        ))
    }
}

fn check_model(name: &str, m: &ModelConfig) -> Result<(), Problem> {
    super::budget::check_price(name, m.price.as_ref())?;
    super::rate_limit::check(name, m.rate_limit.as_ref())?;
    let key = |field: &str| format!("models.{name}.{field}");
    if m.context_window == Some(0) {
        return Err(problem(
            key("context_window"),
            "must be a positive number of tokens",
        ));
    }
    match m.provider {
        Provider::Local => {
            for (field, set) in [
                ("base_url", m.base_url.is_some()),
                ("api_key_env", m.api_key_env.is_some()),
            ] {
                if set {
                    return Err(problem(
                        key(field),
                        "only for provider = \"openai\" or \"anthropic\"",
                    ));
                }
            }
        }
        Provider::Openai | Provider::Anthropic => {
            if m.provider == Provider::Anthropic && m.model.is_none() {
                // Anthropic has no default model worth guessing: a retired name would fail
                // every call, a current one would silently change the bill.
                return Err(problem(
                    key("model"),
                    "provider = \"anthropic\" needs model = \"…\" (e.g. \"claude-sonnet-4-5\")",
                ));
            }
            if m.path.is_some() {
                return Err(problem(key("path"), "only for provider = \"local\""));
            }
            if let Some(url) = &m.base_url
                && !(url.starts_with("http://") || url.starts_with("https://"))
            {
                return Err(problem(
                    key("base_url"),
                    format!("must start with http:// or https://, got `{url}`"),
                ));
            }
            if let Some(var) = &m.api_key_env
                && (var.is_empty() || var.contains(['=', ' ']) || var.starts_with("sk-"))
            {
                // A key pasted where the variable's name belongs must not sit in a config file.
                return Err(problem(
                    key("api_key_env"),
                    "must name an environment variable (e.g. OPENAI_API_KEY), not hold the key",
                ));
            }
            if m.model.as_deref().is_some_and(|s| s.trim().is_empty()) {
                return Err(problem(key("model"), "must not be empty"));
            }
        }
    }
    Ok(())
}

/// A problem of the policy the `[compaction]` thresholds make, named by the table's key: the
/// thresholds are checked by [`ContextPolicy::validate`], the one check every policy passes.
fn policy_problem(e: PolicyError) -> Problem {
    match e {
        PolicyError::NotAFraction { field, value } => problem(
            format!("compaction.{field}"),
            format!("must be a fraction between 0 and 1 (exclusive), got {value}"),
        ),
        PolicyError::Misordered {
            field,
            value,
            relation,
            other,
            other_value,
        } => problem(
            format!("compaction.{field}"),
            format!("must be {relation} compaction.{other} ({other_value}), got {value}"),
        ),
        // The table sets no window, reserve or tier limit, and an unreadable `pricing` or
        // `rates` is named below; kept for a policy check added later.
        other => problem("compaction", other.to_string()),
    }
}

/// `http_get`'s host entries and `shell`'s variable names, each named by its index.
fn check_tool_allow_lists(tools: &ToolsConfig) -> Result<(), Problem> {
    for (i, entry) in tools.http_allowed_hosts.iter().enumerate() {
        if let Err(e) = AllowedHost::parse(entry) {
            return Err(problem(
                format!("tools.http_allowed_hosts[{i}]"),
                format!("`{entry}`: {}", e.reason),
            ));
        }
    }
    for (i, name) in tools.shell_env.iter().enumerate() {
        let valid = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(problem(
                format!("tools.shell_env[{i}]"),
                format!(
                    "`{name}` is not an environment variable name (letters, digits and `_`, \
                     e.g. CARGO_HOME); list names only, never values"
                ),
            ));
        }
    }
    Ok(())
}

impl Config {
    /// The first problem, as `(key, message)`.
    pub(super) fn validate(&self) -> Result<(), Problem> {
        for (name, model) in &self.models {
            check_name("models", name)?;
            check_model(name, model)?;
        }
        let known_models = || self.models.keys().cloned().collect::<Vec<_>>().join(", ");
        for (name, agent) in &self.agents {
            check_name("agents", name)?;
            let key = |field: &str| format!("agents.{name}.{field}");
            if let Some(model) = &agent.model
                && !self.models.contains_key(model)
            {
                return Err(problem(
                    key("model"),
                    format!(
                        "no model `{model}` in [models] (configured: {})",
                        known_models()
                    ),
                ));
            }
            if agent.model.is_none() && self.models.len() > 1 {
                return Err(problem(
                    key("model"),
                    format!(
                        "required when several models are configured ({})",
                        known_models()
                    ),
                ));
            }
            for (i, tool) in agent.tools.iter().enumerate() {
                if tool.starts_with(MCP_TOOL_PREFIX) {
                    self.mcp
                        .check_tool_ref(format!("agents.{name}.tools[{i}]"), tool)?;
                } else if !BUILTIN_TOOLS.contains(&tool.as_str()) {
                    return Err(problem(
                        format!("agents.{name}.tools[{i}]"),
                        format!(
                            "unknown tool `{tool}` (known: {}, or mcp:SERVER for a server in \
                             [mcp.servers])",
                            BUILTIN_TOOLS.join(", ")
                        ),
                    ));
                }
            }
            let price = self
                .agent_model_name(agent)
                .and_then(|m| self.models.get(&m))
                .and_then(|m| m.price.as_ref());
            super::budget::check(name, agent.budget.as_ref(), price)?;
            for (i, pin) in agent.pinned.iter().enumerate() {
                if pin.file.is_some() == pin.text.is_some() {
                    return Err(problem(
                        format!("agents.{name}.pinned[{i}]"),
                        "needs exactly one of `file` and `text`",
                    ));
                }
            }
            super::approve::check(name, agent)?;
            if let Some(sandbox) = &agent.sandbox {
                sandbox.validate(&format!("agents.{name}.sandbox"), &self.sandbox)?;
            }
            if agent.max_turns == Some(0) {
                return Err(problem(key("max_turns"), "must be at least 1"));
            }
            if agent.max_tokens == Some(0) {
                return Err(problem(key("max_tokens"), "must be at least 1"));
            }
            if let Some(t) = agent.temperature
                && !(t.is_finite() && (0.0..=2.0).contains(&t))
            {
                return Err(problem(
                    key("temperature"),
                    format!("must be between 0 and 2, got {t}"),
                ));
            }
        }
        let prices: Vec<(&str, Option<&super::PriceConfig>)> = self
            .agents
            .iter()
            .map(|(name, agent)| {
                let model = self.agent_model_name(agent);
                let price = model.and_then(|m| self.models.get(&m)?.price.as_ref());
                (name.as_str(), price)
            })
            .collect();
        super::budget::check_team(&self.team, &prices)?;
        if self.tools.timeout_secs == Some(0) {
            return Err(problem("tools.timeout_secs", "must be at least 1"));
        }
        check_tool_allow_lists(&self.tools)?;
        self.sandbox
            .validate("sandbox", &super::SandboxSection::default())?;
        self.mcp.validate()?;
        self.serve.validate()?;
        let c = &self.compaction;
        if let Some(model) = &c.model
            && !self.models.contains_key(model)
        {
            return Err(problem(
                "compaction.model",
                format!(
                    "no model `{model}` in [models] (configured: {})",
                    known_models()
                ),
            ));
        }
        c.policy(ContextPolicy::default().context_window)
            .validate()
            .map_err(policy_problem)?;
        if let Some(name) = &c.pricing {
            let model: troupe_compaction::economics::CostModel =
                name.parse()
                    .map_err(|e: troupe_compaction::economics::UnknownCostModel| {
                        problem("compaction.pricing", e.to_string())
                    })?;
            if let Some(spec) = &c.rates {
                model
                    .rates()
                    .with_overrides(spec)
                    .map_err(|e| problem("compaction.rates", e.to_string()))?;
            }
        } else if c.rates.is_some() {
            return Err(problem(
                "compaction.rates",
                "needs compaction.pricing (\"openai\" or \"anthropic\"): rates price one provider's cache",
            ));
        }
        if !(1..=MAX_CONCURRENT_COMPACTIONS).contains(&c.max_concurrent) {
            return Err(problem(
                "compaction.max_concurrent",
                format!(
                    "must be from 1 to {MAX_CONCURRENT_COMPACTIONS} (compactions run at once), got {}",
                    c.max_concurrent
                ),
            ));
        }
        Ok(())
    }
}
