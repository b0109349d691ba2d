//! The `recall` tool: the agent reads back what compaction archived, so that nothing a stub or
//! summary stands for is lost to it, however low the target.
//!
//! Every stub and summary ends with the ids of the originals it stands for (`[replaces m3..m5,
//! m9]`), and the archive keeps each original verbatim under its id. `recall({"id": "m4"})`
//! answers the original — its role, the tool and call it answered, its text and calls — a page
//! at a time; `recall({"query": "cargo test"})` finds archived messages by their words, so a
//! command a summary only paraphrases can be found again.
//!
//! When it is offered: from the first compaction that archived something on (and while
//! [`crate::CompactionSettings::recall_tool`] is on, the default, and no registered tool has the
//! name). Before that there is nothing to recall, and a fresh agent's tool list — what its
//! requests cost, what a provider cached — stays as it was; the compaction that adds it rewrote
//! the conversation anyway, so the prompt cache it invalidates was already lost.
//!
//! The answer is an ordinary tool result with an id of its own: a later compaction may mask
//! it like any other (its stub names that id, which is then recallable in turn), and no
//! archived message is ever put back into the conversation under its old id.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use troupe_compaction::Archive;
use troupe_protocol::{MessageId, MessageKind, Role, StoredMessage, ToolCall, ToolDefinition};
use troupe_tokens::TokenCounter;
use troupe_tools::schema::parameters_schema;
use troupe_tools::{Tool, ToolContext, ToolError, ToolRegistry};

use super::LlmAgent;

mod read;
mod search;

/// The name of the agent-callable archive reader.
pub const RECALL_TOOL: &str = "recall";

/// What the model reads about the tool (kept short: tool definitions are sent, and count
/// against the window, with every request).
const DESCRIPTION: &str = "Read back an archived message by the id its stub or summary names \
                           (\"m12\"), a `page` at a time; or search the archive by `query`.";

/// Tokens a page's header and footer take beside the page's text.
const FRAME_TOKENS: usize = 48;
/// The smallest page body, whatever the window (a page must show something).
const MIN_PAGE_TOKENS: usize = 128;
/// The most hits a search lists.
const MAX_HITS: usize = 10;
/// The most query words a search weighs (a pasted paragraph is not a query).
const MAX_QUERY_WORDS: usize = 16;
/// Characters a search snippet shows on each side of the match.
const SNIPPET_CONTEXT_CHARS: usize = 80;
/// Characters of a first line in a list of originals.
const FIRST_LINE_CHARS: usize = 100;

/// The `recall` tool's arguments: `id` (and `page`) or `query`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RecallArgs {
    /// An id, e.g. "m12".
    id: Option<String>,
    /// From 1.
    page: Option<u32>,
    /// Words to find.
    query: Option<String>,
}

/// What a well-formed call asks for.
#[derive(Debug, PartialEq)]
enum Request {
    /// One original (or what a replacement stands for), page `page` (from 1).
    Read { id: MessageId, page: usize },
    /// The archived messages that contain these words (lowercase, deduplicated).
    Search { query: String, words: Vec<String> },
}

/// The message for arguments that parse but ask for nothing, or for two things.
fn invalid(detail: &str) -> String {
    format!(
        "invalid arguments for {RECALL_TOOL}: {detail}; send {{\"id\": \"m12\"}} (with \
         \"page\": 2 for a long message's next page) or {{\"query\": \"words to find\"}}"
    )
}

/// Check what the arguments ask for. Wrong types and unknown fields never get here: the
/// registry's argument parsing names them against the schema.
fn request(args: RecallArgs) -> Result<Request, String> {
    match (args.id, args.query) {
        (Some(_), Some(_)) => Err(invalid("give either `id` or `query`, not both")),
        (None, None) => Err(invalid("give `id` or `query`")),
        (None, Some(_)) if args.page.is_some() => Err(invalid(
            "`page` goes with `id`; a search answers in one page",
        )),
        (Some(id), None) => {
            let id = parse_id(&id)?;
            let page = match args.page {
                None => 1,
                Some(0) => return Err(invalid("pages count from 1")),
                Some(n) => n as usize,
            };
            Ok(Request::Read { id, page })
        }
        (None, Some(query)) => {
            let words = query_words(&query);
            if words.is_empty() {
                return Err(invalid("`query` has no words"));
            }
            Ok(Request::Search { query, words })
        }
    }
}

/// An id as the model may write it: `m12`, `12`, `[m12]`. A list or a range is refused with
/// what to do instead (one id per call: each answer is paged on its own).
fn parse_id(raw: &str) -> Result<MessageId, String> {
    let trimmed = raw
        .trim()
        .trim_start_matches("[replaces")
        .trim_matches(|c: char| c == '[' || c == ']' || c == '"' || c.is_whitespace());
    if trimmed.contains("..") || trimmed.contains(',') {
        return Err(format!(
            "{RECALL_TOOL} takes one id at a time, e.g. \"m12\": \"{raw}\" names several \
             (\"m3..m5\" is m3, m4 and m5)"
        ));
    }
    trimmed.parse().map_err(|_| {
        format!(
            "\"{raw}\" is not a message id: ids look like \"m12\", as a stub or summary names them"
        )
    })
}

/// The words of a query: whitespace-separated, quotes and separators trimmed, ASCII-lowercased
/// (so byte offsets of a match in the lowercased text are offsets in the original too).
fn query_words(query: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for word in query.split_whitespace() {
        let word = word
            .trim_matches(|c: char| "\"'`,;:()[]{}".contains(c))
            .to_ascii_lowercase();
        if !word.is_empty() && !words.contains(&word) && words.len() < MAX_QUERY_WORDS {
            words.push(word);
        }
    }
    words
}

/// Reads the archive for the model: one tool call's worth, over an O(1) copy of the archive.
struct Recall {
    archive: Archive,
    /// The tool each known call id called (from the archive and the live conversation), so a
    /// recalled tool result says what produced it.
    tool_names: HashMap<String, String>,
    /// The most tokens one page's text may take.
    page_tokens: usize,
    counter: Arc<dyn TokenCounter>,
}

#[async_trait]
impl Tool for Recall {
    type Args = RecallArgs;
    type Output = String;

    fn name(&self) -> &str {
        RECALL_TOOL
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    async fn call(&self, _ctx: &ToolContext, args: RecallArgs) -> Result<String, ToolError> {
        match request(args).map_err(ToolError::respond)? {
            Request::Read { id, page } => self.read(id, page).map_err(ToolError::respond),
            Request::Search { query, words } => Ok(self.search(&query, &words)),
        }
    }
}

impl Recall {
    /// What the archive holds, for a model that asked for something it does not.
    fn holdings(&self) -> String {
        let originals = self.originals();
        let ids = originals.iter().map(|m| m.id);
        match (ids.clone().min(), ids.max()) {
            (Some(first), Some(last)) => format!(
                "the archive holds {} messages, from {first} to {last}",
                originals.len()
            ),
            _ => "nothing is archived yet".to_string(),
        }
    }

    /// Every archived original once (an original archived twice — a request rolled back
    /// after its compaction — is the same message).
    fn originals(&self) -> Vec<&StoredMessage> {
        let mut seen = HashSet::new();
        self.archive
            .entries()
            .iter()
            .map(|e| &e.original)
            .filter(|m| seen.insert(m.id))
            .collect()
    }

    /// The tool a tool result answered, when its call is known.
    fn tool_of(&self, message: &StoredMessage) -> Option<&str> {
        let call_id = message.message.tool_call_id.as_deref()?;
        self.tool_names.get(call_id).map(String::as_str)
    }

    /// What a message is: `tool result of read_file (call c3)`, `assistant, calling shell`,
    /// `user, a summary`.
    fn describe(&self, message: &StoredMessage) -> String {
        let m = &message.message;
        let mut out = match (m.role, m.tool_call_id.as_deref()) {
            (Role::Tool, Some(call)) => match self.tool_of(message) {
                Some(tool) => format!("tool result of {tool} (call {call})"),
                None => format!("tool result (call {call})"),
            },
            (role, _) => role.to_string(),
        };
        let calls = m.calls();
        if !calls.is_empty() {
            let names: Vec<&str> = calls.iter().map(|c| c.function.name.as_str()).collect();
            let _ = write!(out, ", calling {}", names.join(", "));
        }
        match message.kind {
            MessageKind::Normal => {}
            MessageKind::Summary => out.push_str(", a summary"),
            MessageKind::CompressedStub => out.push_str(", a compressed stub"),
            MessageKind::DisplayOnly => out.push_str(", display-only"),
        }
        out
    }
}

/// A message's text and its calls (`→ shell {"command": …}`), as a recall shows it.
fn rendered(message: &StoredMessage) -> String {
    let mut text = message.message.text();
    for call in message.message.calls() {
        if !text.is_empty() {
            text.push('\n');
        }
        let _ = write!(text, "→ {} {}", call.function.name, call.function.arguments);
    }
    text
}

/// At most `chars` characters of `text`, `…` when cut.
fn clip(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// The recall tool's parameter schema, derived once (it is offered on every model call once
/// something is archived).
fn recall_schema() -> &'static serde_json::Value {
    static SCHEMA: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    SCHEMA.get_or_init(parameters_schema::<RecallArgs>)
}

impl LlmAgent {
    /// Whether the model is offered `recall` now: something is archived, the setting is on and
    /// no registered tool has the name (the registry's own tool wins).
    pub(super) fn recall_offered(&self) -> bool {
        self.spec.compaction.recall_tool
            && !self.context.archive.is_empty()
            && !self.tools.contains(RECALL_TOOL)
    }

    /// The `recall` definition, when offered.
    pub(super) fn recall_definition(&self) -> Option<ToolDefinition> {
        self.recall_offered().then(|| ToolDefinition {
            name: RECALL_TOOL.into(),
            description: DESCRIPTION.into(),
            parameters: recall_schema().clone(),
        })
    }

    /// A registry holding only `recall` over the archive as it is now, when `calls` call it
    /// and it is offered: the calls then run through the registry like any tool's (argument
    /// checks against the schema, tool-call events, the output cap).
    pub(super) fn recall_registry(&self, calls: &[ToolCall]) -> Option<ToolRegistry> {
        if !self.recall_offered() || !calls.iter().any(|c| c.function.name == RECALL_TOOL) {
            return None;
        }
        let mut registry = ToolRegistry::new();
        let recall = Recall {
            archive: self.context.archive.clone(),
            tool_names: self.tool_names(),
            page_tokens: page_tokens(&self.context.policy),
            counter: self.context.counter.clone(),
        };
        match registry.register(recall) {
            Ok(_) => Some(registry),
            Err(e) => {
                tracing::error!(agent = %self.spec.name, "cannot offer {RECALL_TOOL}: {e}");
                None
            }
        }
    }

    /// Call id → tool name, for every call in the archive and the live conversation.
    fn tool_names(&self) -> HashMap<String, String> {
        let archived = self
            .context
            .archive
            .entries()
            .iter()
            .map(|e| &e.original.message);
        let live = self
            .context
            .conversation
            .messages()
            .iter()
            .map(|m| m.as_ref());
        archived
            .chain(live)
            .flat_map(|m| m.calls())
            .map(|c| (c.id.clone(), c.function.name.clone()))
            .collect()
    }
}

/// The most tokens a page's text takes: the policy's tool-output limit, so the answer is
/// never itself a candidate for truncation at the next compaction (which would throw away
/// what was just recalled), and at most an eighth of the window, so a small window keeps
/// room for the work a recall serves; never under [`MIN_PAGE_TOKENS`]. The header and footer
/// ([`FRAME_TOKENS`]) come out of it.
fn page_tokens(policy: &troupe_compaction::ContextPolicy) -> usize {
    policy
        .tool_output_limit_tokens
        .min(policy.context_window / 8)
        .saturating_sub(FRAME_TOKENS)
        .max(MIN_PAGE_TOKENS)
}

#[cfg(test)]
mod tests;
