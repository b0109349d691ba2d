//! What a served agent's card says: its name, a description, skills from its instructions and
//! tools, streaming, the endpoint, the auth.

use troupe_agents::LlmAgent;
use troupe_runtime::Team;

use crate::server::auth::ServerAuth;
use crate::wire::{
    AgentCapabilities, AgentCard, AgentInterface, AgentSkill, JSONRPC_BINDING, PROTOCOL_VERSION,
};

/// The longest description a card takes from an agent's instructions.
const DESCRIPTION_CHARS: usize = 500;

/// An agent of the team served over A2A, and what its card says about it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServedAgent {
    /// Its name in the team (and in its URL).
    pub name: String,
    /// What it does.
    pub description: String,
    /// What it is good at.
    pub skills: Vec<AgentSkill>,
}

impl ServedAgent {
    /// An agent described by hand.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        ServedAgent {
            name: name.into(),
            description: description.into(),
            skills: Vec::new(),
        }
    }

    /// Add a skill.
    pub fn skill(mut self, id: impl Into<String>, description: impl Into<String>) -> Self {
        let id = id.into();
        self.skills.push(AgentSkill {
            name: id.clone(),
            id,
            description: description.into(),
            ..AgentSkill::default()
        });
        self
    }

    /// An agent of `team` described from what it is: an LLM agent by its instructions (the
    /// description) and its tools (one skill each, besides the conversation itself); any other
    /// behaviour by its name. `None` when the team has no such agent.
    pub async fn from_team(team: &Team, name: &str) -> Option<Self> {
        if !team.directory().is_live(name) {
            return None;
        }
        let described = team
            .with_agent::<LlmAgent, _, _>(name, |agent| {
                // A resumed session's system prompt is what the agent follows now.
                let instructions = agent
                    .conversation()
                    .system_prompt()
                    .map(|m| m.text())
                    .unwrap_or_else(|| agent.instructions().to_string());
                let tools: Vec<(String, String)> = agent
                    .tools()
                    .definitions()
                    .into_iter()
                    .map(|d| (d.name, d.description))
                    .collect();
                (instructions, tools)
            })
            .await
            .ok()
            .flatten();
        let (instructions, tools) = described.unwrap_or_default();
        let description = if instructions.trim().is_empty() {
            format!("The troupe agent `{name}`.")
        } else {
            shorten(instructions.trim(), DESCRIPTION_CHARS)
        };
        let mut agent = ServedAgent::new(name, description.clone()).skill("ask", description);
        for (tool, what) in tools {
            agent = agent.skill(tool, what);
        }
        Some(agent)
    }

    /// Its card, served at `url` (its JSON-RPC endpoint, whose base it shares).
    pub(crate) fn card(&self, url: &str, auth: &ServerAuth) -> AgentCard {
        let (security_schemes, security_requirements) = auth.card_security();
        let skills = self
            .skills
            .iter()
            .map(|s| AgentSkill {
                tags: if s.tags.is_empty() {
                    vec!["troupe".into()]
                } else {
                    s.tags.clone()
                },
                ..s.clone()
            })
            .collect();
        AgentCard {
            name: self.name.clone(),
            description: self.description.clone(),
            supported_interfaces: vec![AgentInterface {
                url: url.to_string(),
                protocol_binding: JSONRPC_BINDING.into(),
                protocol_version: PROTOCOL_VERSION.into(),
            }],
            version: env!("CARGO_PKG_VERSION").into(),
            capabilities: AgentCapabilities {
                streaming: Some(true),
                push_notifications: Some(false),
            },
            security_schemes,
            security_requirements,
            default_input_modes: vec!["text/plain".into(), "application/json".into()],
            default_output_modes: vec!["text/plain".into()],
            skills,
        }
    }
}

fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max).collect();
    format!("{cut}…")
}
