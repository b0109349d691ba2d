//! Work ahead's pure parts: when a tool call is open, and how many turns a job took to land.

#![allow(clippy::unwrap_used)]

use troupe_protocol::{Conversation, ToolCall};

use super::*;

fn shared(messages: Vec<ChatMessage>) -> Vec<Arc<ChatMessage>> {
    messages.into_iter().map(Arc::new).collect()
}

#[test]
fn a_call_is_open_until_every_result_is_in() {
    let calls = vec![
        ToolCall::new("a", "read", "{}"),
        ToolCall::new("b", "read", "{}"),
    ];
    let asked = ChatMessage::assistant_tool_calls(None, calls);
    let mut messages = vec![ChatMessage::user("go"), asked];
    assert!(has_open_tool_calls(&shared(messages.clone())));
    messages.push(ChatMessage::tool_result("a", "one"));
    assert!(has_open_tool_calls(&shared(messages.clone())));
    messages.push(ChatMessage::tool_result("b", "two"));
    assert!(!has_open_tool_calls(&shared(messages.clone())));
    messages.push(ChatMessage::assistant("done"));
    assert!(!has_open_tool_calls(&shared(messages)));
    assert!(!has_open_tool_calls(&[]));
}

#[tokio::test]
async fn a_job_measures_the_turns_it_took_to_land() {
    let snapshot = shared(vec![ChatMessage::user("go"), ChatMessage::assistant("ok")]);
    let mark = Conversation::new().mark();
    let pending = Pending {
        snapshot: snapshot.clone(),
        tokens: 0,
        request_tokens: 0,
        epoch: 0,
        answer: tokio::spawn(std::future::pending()),
        started: Instant::now().checked_sub(Duration::from_secs(10)).unwrap(),
        span: tracing::Span::none(),
        loan: (mark, mark),
    };
    let call = vec![ToolCall::new("a", "read", "{}")];
    let mut now = snapshot.clone();
    now.extend(shared(vec![
        ChatMessage::user("more"),
        ChatMessage::assistant_tool_calls(None, call),
        ChatMessage::tool_result("a", "text"),
        ChatMessage::assistant("read it"),
    ]));
    // Two model turns went by, and the answer goes in before the third.
    assert_eq!(lead_turns(&pending, &now, Duration::ZERO), Some(3));
    // Waited for half of its ten seconds: it needed twice the turns it had.
    assert_eq!(lead_turns(&pending, &now, Duration::from_secs(5)), Some(6));
    // Waited for before any turn went by: nothing says how long a turn takes.
    assert_eq!(
        lead_turns(&pending, &snapshot, Duration::from_secs(5)),
        None
    );
    // Landed before the next turn.
    assert_eq!(lead_turns(&pending, &snapshot, Duration::ZERO), Some(1));
}
