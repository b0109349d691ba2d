//! Messages rendered as plain text for a summarizer.
//!
//! Each message becomes a block under a header line `[m4 assistant]` or `[m5 tool bash]`; tool
//! calls follow the text as `→ name {arguments}`. The header grammar is stable because the
//! [`super::MechanicalSummarizer`] reads it back.

use troupe_protocol::{ChatMessage, MessageId, Role};

use crate::truncate::floor_boundary;

/// Tool-call arguments longer than this are cut in the rendering (the call's effect is in its
/// result and in the ledger; file contents in `write` arguments would dominate the input).
const MAX_ARGUMENT_BYTES: usize = 400;

/// Marks where call arguments were cut.
pub(crate) const CUT_MARK: &str = "…";

/// The block for one message; `tool_name` is the called tool's name for a tool result.
pub fn render_message(message: &ChatMessage, tool_name: Option<&str>) -> String {
    let mut out = match (message.role, tool_name) {
        (Role::Tool, Some(name)) => format!("[{} tool {name}]\n", message.id),
        (role, _) => format!("[{} {}]\n", message.id, role.as_str()),
    };
    let text = message.text();
    if !text.trim().is_empty() {
        out.push_str(text.trim_end());
        out.push('\n');
    }
    for call in message.calls() {
        let args = call.function.arguments.trim();
        let cut = floor_boundary(args, MAX_ARGUMENT_BYTES);
        let ellipsis = if cut < args.len() { CUT_MARK } else { "" };
        out.push_str(&format!(
            "→ {} {}{ellipsis}\n",
            call.function.name,
            &args[..cut]
        ));
    }
    out
}

/// A parsed block header: id, role, tool name.
pub(crate) fn parse_header(line: &str) -> Option<(MessageId, Role, Option<&str>)> {
    let inner = line.strip_prefix('[')?.strip_suffix(']')?;
    let mut parts = inner.splitn(3, ' ');
    let id: MessageId = parts
        .next()?
        .strip_prefix('m')
        .and_then(|n| n.parse().ok())
        .map(MessageId)?;
    let role = match parts.next()? {
        "system" => Role::System,
        "developer" => Role::Developer,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "tool" => Role::Tool,
        _ => return None,
    };
    Some((id, role, parts.next()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use troupe_protocol::{Conversation, ToolCall};

    #[test]
    fn headers_round_trip() {
        let c = Conversation::from_messages([
            ChatMessage::assistant_tool_calls(
                Some("looking".into()),
                vec![ToolCall::new(
                    "c",
                    "read",
                    format!("{{\"path\":\"{}\"}}", "x".repeat(600)),
                )],
            ),
            ChatMessage::tool_result("c", "content"),
        ]);
        let a = render_message(&c.messages()[0], None);
        assert!(a.starts_with("[m1 assistant]\nlooking\n→ read {\"path\":\"xxx"));
        assert!(a.trim_end().ends_with(CUT_MARK));
        let t = render_message(&c.messages()[1], Some("read"));
        assert_eq!(t, "[m2 tool read]\ncontent\n");
        assert_eq!(
            parse_header("[m2 tool read]"),
            Some((MessageId(2), Role::Tool, Some("read")))
        );
        assert_eq!(
            parse_header("[m1 assistant]"),
            Some((MessageId(1), Role::Assistant, None))
        );
        assert_eq!(parse_header("[x1 user]"), None);
    }
}
