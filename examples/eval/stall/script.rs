//! A transcript cut into requests, and the tools that answer with its recorded results.

#[allow(clippy::wildcard_imports)]
use super::*;

/// One request of the transcript: the user's text and the assistant messages that answer it.
pub(super) struct Segment {
    pub(super) user: String,
    pub(super) answers: Vec<ChatMessage>,
}

/// The transcript as requests, the system prompt, and every recorded tool result by call id.
/// An assistant text that is followed by another assistant message ends a request: the next
/// one is asked with "Continue.".
pub(super) struct Script {
    pub(super) system: String,
    pub(super) segments: Vec<Segment>,
    pub(super) results: HashMap<String, String>,
    pub(super) tools: Vec<String>,
}

pub(super) fn script(input: &TranscriptFile) -> Script {
    let mut s = Script {
        system: String::new(),
        segments: Vec::new(),
        results: HashMap::new(),
        tools: Vec::new(),
    };
    let mut closed = true;
    for m in &input.messages {
        match m.role {
            r if r.is_instructions() && s.segments.is_empty() => {
                s.system.push_str(&m.text());
            }
            Role::Tool => {
                if let Some(id) = &m.tool_call_id {
                    s.results.insert(id.clone(), m.text());
                }
            }
            Role::Assistant => {
                if closed {
                    s.segments.push(Segment {
                        user: "Continue.".into(),
                        answers: Vec::new(),
                    });
                }
                for call in m.calls() {
                    if !s.tools.contains(&call.function.name) {
                        s.tools.push(call.function.name.clone());
                    }
                }
                if let Some(last) = s.segments.last_mut() {
                    last.answers.push(m.clone());
                }
                closed = !m.has_tool_calls();
            }
            _ => match s.segments.last_mut() {
                // Consecutive user messages are one request.
                Some(last) if last.answers.is_empty() => {
                    last.user.push_str("\n\n");
                    last.user.push_str(&m.text());
                }
                _ => {
                    s.segments.push(Segment {
                        user: m.text(),
                        answers: Vec::new(),
                    });
                    closed = false;
                }
            },
        }
    }
    s
}

/// A tool of the transcript: answers the result the transcript recorded for the call's id.
pub(super) struct ReplayTool {
    name: String,
    parameters: Value,
    results: Arc<HashMap<String, String>>,
}

#[async_trait]
impl JsonTool for ReplayTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        "Replays the transcript's recorded result of this call."
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    async fn call(
        &self,
        ctx: &ToolContext,
        _args: serde_json::Map<String, Value>,
    ) -> Result<String, ToolError> {
        Ok(self
            .results
            .get(&ctx.tool_call_id)
            .cloned()
            .unwrap_or_else(|| "(the transcript recorded no result)".into()))
    }
}

/// A tool per name the transcript calls.
pub(super) fn replay_tools(script: &Script) -> anyhow::Result<ToolRegistry> {
    let results = Arc::new(script.results.clone());
    let mut tools = ToolRegistry::new();
    for name in &script.tools {
        tools.register_json(ReplayTool {
            name: name.clone(),
            parameters: json!({"type": "object"}),
            results: results.clone(),
        })?;
    }
    Ok(tools)
}
