//! [`AgentSpec`]: everything needed to build an LLM agent.

use std::path::PathBuf;
use std::sync::Arc;
use troupe_session::SessionStore;

use troupe_protocol::{ChatMessage, ChatModel};
use troupe_tools::approval::ApprovalPolicy;
use troupe_tools::{RegistryError, Tool, ToolRegistry};

use crate::compaction_settings::CompactionSettings;
use crate::spend::AgentBudget;

/// The default bound on model calls per request.
pub const DEFAULT_MAX_TURNS: u32 = 16;

/// What an LLM agent is: name, instructions, model, tools and limits.
///
/// ```
/// use std::sync::Arc;
/// use troupe_agents::AgentSpec;
/// use troupe_models::{ScriptedModel, ScriptedReply};
///
/// let model = Arc::new(ScriptedModel::new("demo", [ScriptedReply::text("hi")]));
/// let spec = AgentSpec::new("greeter", model).instructions("Greet people warmly.").max_turns(4);
/// assert_eq!(spec.name, "greeter");
/// ```
#[derive(Clone)]
pub struct AgentSpec {
    /// The agent's name in its team.
    pub name: String,
    /// The system prompt: the first message of every conversation the agent starts.
    pub instructions: String,
    /// The model it talks to.
    pub model: Arc<dyn ChatModel>,
    /// The tools the model may call; their definitions go with every model request.
    pub tools: ToolRegistry,
    /// Model calls allowed per request before giving up.
    pub max_turns: u32,
    /// The workspace root its file tools are confined to.
    pub workspace_root: PathBuf,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Cap on tokens generated per model call.
    pub max_tokens: Option<u32>,
    /// Whether the agent may message other agents through the `ask_agent` tool.
    pub team_messaging: bool,
    /// The context window's thresholds and compaction behaviour.
    pub compaction: CompactionSettings,
    /// The session log the agent keeps its conversation in (see [`AgentSpec::session`]).
    pub session: Option<PathBuf>,
    /// Where that log lives (default: [`SessionStore::files`], a JSONL file at that path).
    pub session_store: SessionStore,
    /// Which tool calls run on their own, wait for a person, or never run (default: all run;
    /// see [`AgentSpec::approval`]).
    pub approval: ApprovalPolicy,
    /// Messages every conversation of the agent starts with, after the system prompt, pinned:
    /// compaction never touches them (see [`AgentSpec::pin`]).
    pub pinned: Vec<ChatMessage>,
    /// What a request, the agent and its team may spend (see [`AgentSpec::budget`]).
    pub budget: AgentBudget,
    /// Whether the session log commits every step of a request (a model answer, a tool result)
    /// as it completes, so a restart resumes the request from its last step (default), or only
    /// the request's end (see [`AgentSpec::request_commits_only`]).
    pub durable_steps: bool,
}

impl std::fmt::Debug for AgentSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentSpec")
            .field("name", &self.name)
            .field("model", &self.model.info().name)
            .field("tools", &self.tools.names())
            .field("max_turns", &self.max_turns)
            .field("session", &self.session)
            .finish()
    }
}

impl AgentSpec {
    /// An agent with no instructions and no tools.
    pub fn new(name: impl Into<String>, model: Arc<dyn ChatModel>) -> Self {
        AgentSpec {
            name: name.into(),
            instructions: String::new(),
            model,
            tools: ToolRegistry::new(),
            max_turns: DEFAULT_MAX_TURNS,
            workspace_root: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            temperature: None,
            max_tokens: None,
            team_messaging: false,
            compaction: CompactionSettings::default(),
            session: None,
            session_store: SessionStore::default(),
            approval: ApprovalPolicy::default(),
            pinned: Vec::new(),
            budget: AgentBudget::default(),
            durable_steps: true,
        }
    }

    /// With this system prompt.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = instructions.into();
        self
    }

    /// With these tools (replacing any set before).
    pub fn tools(mut self, tools: ToolRegistry) -> Self {
        self.tools = tools;
        self
    }

    /// With one more tool; a duplicate name is an error that says which.
    pub fn tool<T: Tool>(mut self, tool: T) -> Result<Self, RegistryError> {
        self.tools.register(tool)?;
        Ok(self)
    }

    /// With this bound on model calls per request.
    pub fn max_turns(mut self, n: u32) -> Self {
        self.max_turns = n.max(1);
        self
    }

    /// With this workspace root for file tools.
    pub fn workspace_root(mut self, root: impl Into<PathBuf>) -> Self {
        self.workspace_root = root.into();
        self
    }

    /// With this sampling temperature.
    pub fn temperature(mut self, t: f32) -> Self {
        self.temperature = Some(t);
        self
    }

    /// With this cap on generated tokens per model call.
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = Some(n);
        self
    }

    /// With these compaction settings.
    pub fn compaction(mut self, settings: CompactionSettings) -> Self {
        self.compaction = settings;
        self
    }

    /// Keep the conversation in an append-only session log at `path`, resuming from it if it
    /// exists.
    ///
    /// At every commit point (a request answered or failed, a compaction, a closed scope) the
    /// agent writes what changed — new messages, a compaction (the new history, its summary, file
    /// lists, archived originals and report), the file ledger — as one commit (records, a
    /// `commit` line, an fsync) — and, with durable steps (the default), every model answer and
    /// tool result as it completes, so a killed process loses at most the step in flight and the
    /// agent resumes the request from there (see [`AgentSpec::request_commits_only`]). When the
    /// agent is built with no checkpoint it restores conversation, ledger, archive and last
    /// compaction from the log. One log belongs to one agent at a time.
    pub fn session(mut self, path: impl Into<PathBuf>) -> Self {
        self.session = Some(path.into());
        self
    }

    /// Keep the session log in `store` (the log's path is its name there); the default is
    /// [`SessionStore::files`].
    pub fn session_store(mut self, store: SessionStore) -> Self {
        self.session_store = store;
        self
    }

    /// Commit to the session log only at a request's end, not at every step: one fsync per
    /// request instead of four per model call and its tool call, and a process killed
    /// mid-request loses the whole request (its model calls are made, its tools run, again when
    /// it is sent again). By default every model answer and tool result is committed as it
    /// completes and a restarted agent resumes the request in flight from its last step.
    pub fn request_commits_only(mut self) -> Self {
        self.durable_steps = false;
        self
    }

    /// With one more pinned message (a project's rules file as a system or user message):
    /// every conversation the agent starts holds it after the system prompt, and compaction
    /// keeps it byte-identical, as it keeps the protected messages — a target it puts out of
    /// reach is reported as the pins'. A conversation resumed from a session log keeps the
    /// pins it was written with.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use troupe_agents::AgentSpec;
    /// use troupe_models::{ScriptedModel, ScriptedReply};
    /// use troupe_protocol::ChatMessage;
    ///
    /// let model = Arc::new(ScriptedModel::new("demo", [ScriptedReply::text("ok")]));
    /// let spec = AgentSpec::new("coder", model)
    ///     .pin(ChatMessage::user("Project rules: never force-push."));
    /// assert_eq!(spec.pinned.len(), 1);
    /// ```
    pub fn pin(mut self, message: ChatMessage) -> Self {
        self.pinned.push(message);
        self
    }

    /// With this tool approval policy: a call it says to ask about pauses the turn, publishes
    /// [`Event::ApprovalRequested`](troupe_protocol::Event::ApprovalRequested) and waits for
    /// [`Team::approve`](troupe_runtime::Team::approve) or [`Team::deny`](troupe_runtime::Team::deny)
    /// (or the policy's timeout, a denial); with a session log the pause survives a restart.
    pub fn approval(mut self, policy: ApprovalPolicy) -> Self {
        self.approval = policy;
        self
    }

    /// With these budgets: before every model call the agent checks what the request, the
    /// agent and its team spent (compaction calls included); once one has reached its limit the
    /// request ends with [`AgentError::BudgetExceeded`](troupe_runtime::AgentError::BudgetExceeded),
    /// keeping what it added so far — or, with [`OnExceeded::Pause`](crate::spend::OnExceeded),
    /// waits until a limit is raised ([`AgentBudget::raise`]).
    pub fn budget(mut self, budget: AgentBudget) -> Self {
        self.budget = budget;
        self
    }

    /// Give the agent the `ask_agent` tool to message teammates by name.
    pub fn team_messaging(mut self, on: bool) -> Self {
        self.team_messaging = on;
        self
    }
}
