#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::read::pages;
use super::*;
use crate::compaction_settings::shared_counter;
use troupe_compaction::summary::MechanicalSummarizer;
use troupe_compaction::{CompactOptions, ContextPolicy, compact};
use troupe_protocol::FileLedger;
use troupe_protocol::{ChatMessage, Conversation};
use troupe_tools::{ToolFailure, ToolOutcome, ToolResult};

fn recall_over(archive: Archive, tool_names: &[(&str, &str)], page_tokens: usize) -> Recall {
    Recall {
        archive,
        tool_names: tool_names
            .iter()
            .map(|(id, name)| (id.to_string(), name.to_string()))
            .collect(),
        page_tokens,
        counter: shared_counter(),
    }
}

fn with_id(message: ChatMessage, id: u64) -> ChatMessage {
    ChatMessage {
        id: MessageId(id),
        ..message
    }
}

/// Dispatch `args` to a registry holding `recall` over `archive`, as the agent does.
async fn dispatch(recall: Recall, args: &str) -> ToolResult {
    let mut registry = ToolRegistry::new();
    registry.register(recall).unwrap();
    let call = ToolCall::new("c1", RECALL_TOOL, args);
    registry
        .dispatch(&call, &ToolContext::new("coder", "."))
        .await
}

#[test]
fn the_schema_is_derived_from_the_arguments_with_their_docs() {
    assert_eq!(
        parameters_schema::<RecallArgs>(),
        serde_json::json!({
            "type": "object",
            "properties": {
                "id": {"type": ["string", "null"], "description": "An id, e.g. \"m12\"."},
                "page": {"type": ["integer", "null"], "description": "From 1.", "minimum": 0},
                "query": {"type": ["string", "null"], "description": "Words to find."}
            },
            "additionalProperties": false
        })
    );
}

#[test]
fn the_definition_is_small() {
    // Sent with every request once something is archived: it must stay cheap (114 tokens of
    // o200k as the JSON a provider gets, most of it the schema's scaffolding).
    let definition = serde_json::to_string(&ToolDefinition {
        name: RECALL_TOOL.into(),
        description: DESCRIPTION.into(),
        parameters: recall_schema().clone(),
    })
    .unwrap();
    let tokens = shared_counter().count(&definition);
    assert!(tokens <= 120, "{tokens} tokens: {definition}");
}

#[test]
fn arguments_ask_for_an_id_or_a_query_never_both_nor_neither() {
    let args = |id: Option<&str>, page: Option<u32>, query: Option<&str>| RecallArgs {
        id: id.map(str::to_string),
        page,
        query: query.map(str::to_string),
    };
    assert_eq!(
        request(args(Some("m12"), None, None)),
        Ok(Request::Read {
            id: MessageId(12),
            page: 1
        })
    );
    assert_eq!(
        request(args(Some("[replaces m7]"), Some(3), None)),
        Ok(Request::Read {
            id: MessageId(7),
            page: 3
        })
    );
    assert_eq!(
        request(args(None, None, Some("Cargo TEST, -p"))),
        Ok(Request::Search {
            query: "Cargo TEST, -p".into(),
            words: vec!["cargo".into(), "test".into(), "-p".into()]
        })
    );
    for (bad, says) in [
        (args(None, None, None), "give `id` or `query`"),
        (args(Some("m1"), None, Some("x")), "not both"),
        (args(Some("m1"), Some(0), None), "pages count from 1"),
        (args(None, Some(2), Some("x")), "`page` goes with `id`"),
        (args(None, None, Some(" \"\" ")), "no words"),
        (args(Some("m3..m5"), None, None), "one id at a time"),
        (args(Some("m3, m4"), None, None), "one id at a time"),
        (args(Some("file.rs"), None, None), "ids look like \"m12\""),
    ] {
        let err = request(bad).unwrap_err();
        assert!(err.contains(says), "{err}");
    }
}

#[tokio::test]
async fn wrong_types_and_unknown_fields_are_invalid_arguments_naming_the_field() {
    let recall = || recall_over(Archive::new(), &[], 500);
    let result = dispatch(recall(), r#"{"id": 12}"#).await;
    assert_eq!(
        result.outcome,
        ToolOutcome::Error(ToolFailure::InvalidArguments {
            field: Some("id".into())
        })
    );
    assert!(
        result.content.contains("field \"id\""),
        "{}",
        result.content
    );
    let result = dispatch(recall(), r#"{"message_id": "m2"}"#).await;
    assert!(
        result.content.contains("unknown field"),
        "{}",
        result.content
    );
    let result = dispatch(recall(), "{}").await;
    assert_eq!(result.outcome, ToolOutcome::Error(ToolFailure::Refused));
    assert!(result.content.contains("give `id` or `query`"));
}

/// An archive of a read (call + result, replaced by a stub m20) and a summary m21 that replaced
/// a user request and an assistant answer.
fn small_archive() -> Archive {
    let call = ToolCall::new("c3", "read_file", r#"{"path": "src/app.rs"}"#);
    let assistant = with_id(ChatMessage::assistant_tool_calls(None, vec![call]), 3);
    let result = with_id(
        ChatMessage::tool_result("c3", "fn main() {\n    println!(\"hi\");\n}\n"),
        4,
    );
    let mut archive = Archive::new();
    archive.record_replacement(MessageId(20), std::slice::from_ref(&result));
    archive.record_replacement(
        MessageId(21),
        &[
            with_id(ChatMessage::user("Run cargo test -p parser please"), 5),
            with_id(ChatMessage::assistant("The parser tests pass."), 6),
            assistant,
        ],
    );
    archive
}

#[test]
fn an_archived_tool_result_comes_back_with_its_tool_and_call() {
    let recall = recall_over(small_archive(), &[("c3", "read_file")], 500);
    let answer = recall.read(MessageId(4), 1).unwrap();
    assert_eq!(
        answer,
        "m4, tool result of read_file (call c3):\nfn main() {\n    println!(\"hi\");\n}\n[end of m4]"
    );
    let answer = recall.read(MessageId(3), 1).unwrap();
    assert!(
        answer.starts_with("m3, assistant, calling read_file:\n"),
        "{answer}"
    );
    assert!(
        answer.contains(r#"→ read_file {"path": "src/app.rs"}"#),
        "{answer}"
    );
}

#[test]
fn a_replacement_id_lists_the_originals_it_stands_for() {
    let recall = recall_over(small_archive(), &[("c3", "read_file")], 500);
    let answer = recall.read(MessageId(21), 1).unwrap();
    assert!(
        answer.starts_with("m21 is in your conversation; it stands for 3 archived messages:"),
        "{answer}"
    );
    assert!(
        answer.contains("- m5, user: Run cargo test -p parser please"),
        "{answer}"
    );
    assert!(
        answer
            .contains(r#"- m3, assistant, calling read_file: → read_file {"path": "src/app.rs"}"#),
        "{answer}"
    );

    // A summary a later compaction replaced in turn: its text, then what it replaced.
    let mut archive = small_archive();
    let summary = with_id(
        ChatMessage::user("<summary>\nran the tests\n</summary>\n[replaces m3, m5..m6]")
            .with_kind(MessageKind::Summary),
        21,
    );
    archive.record_replacement(MessageId(30), &[summary]);
    let recall = recall_over(archive, &[], 500);
    let answer = recall.read(MessageId(21), 1).unwrap();
    assert!(
        answer.starts_with("m21, user, a summary:\n<summary>"),
        "{answer}"
    );
    assert!(answer.contains("m21 replaced:\n- m5, user:"), "{answer}");
    // Never ends on the original's marker line: the answer is no replacement itself.
    assert!(answer.ends_with("[end of m21]"), "{answer}");
    for id in [3, 5, 6, 21] {
        assert!(recall.read(MessageId(id), 1).is_ok(), "m{id}");
    }
}

#[test]
fn an_unknown_id_says_what_ids_look_like_and_what_is_archived() {
    let recall = recall_over(small_archive(), &[], 500);
    let err = recall.read(MessageId(99), 1).unwrap_err();
    assert!(err.starts_with("m99 is not archived"), "{err}");
    assert!(err.contains("[replaces m3..m5, m9]"), "{err}");
    assert!(
        err.contains("the archive holds 4 messages, from m3 to m6"),
        "{err}"
    );
    let err = recall_over(Archive::new(), &[], 500)
        .read(MessageId(1), 1)
        .unwrap_err();
    assert!(err.contains("nothing is archived yet"), "{err}");
}

#[test]
fn a_large_original_comes_in_pages_that_add_up_to_it() {
    let text: String = (0..400)
        .map(|i| format!("line {i}: output of the test run, with some words\n"))
        .collect();
    let result = with_id(ChatMessage::tool_result("c9", text.clone()), 7);
    let mut archive = Archive::new();
    archive.record_replacement(MessageId(8), &[result]);
    let recall = recall_over(archive, &[("c9", "shell")], 300);
    let first = recall.read(MessageId(7), 1).unwrap();
    let count: usize = {
        let head = first.lines().next().unwrap();
        let of = head.rsplit(" of ").next().unwrap().trim_end_matches(':');
        of.parse().unwrap()
    };
    assert!(count >= 4, "{first}");
    assert!(
        first.starts_with(&format!(
            "m7, tool result of shell (call c9), page 1 of {count}:\nline 0:"
        )),
        "{first}"
    );
    assert!(
        first.ends_with(&format!(
            "[page 1 of {count}: recall {{\"id\": \"m7\", \"page\": 2}} for more]"
        )),
        "{first}"
    );
    let mut joined = String::new();
    for page in 1..=count {
        let answer = recall.read(MessageId(7), page).unwrap();
        // Body only: between the header line and the footer line.
        let body = answer
            .split_once('\n')
            .unwrap()
            .1
            .rsplit_once('\n')
            .unwrap()
            .0;
        joined.push_str(body);
        joined.push('\n');
        assert!(
            shared_counter().count(&answer) <= 300 + FRAME_TOKENS,
            "{answer}"
        );
    }
    assert_eq!(joined, text);
    let last = recall.read(MessageId(7), count).unwrap();
    assert!(last.ends_with(&format!("[page {count} of {count}: the end of m7]")));
    let err = recall.read(MessageId(7), count + 1).unwrap_err();
    assert_eq!(
        err,
        format!("m7 has {count} pages: ask for page 1 to {count}")
    );
}

#[test]
fn pages_cut_at_line_ends_and_inside_lines_too_long_for_one() {
    let counter = shared_counter();
    let one_line = "word ".repeat(5_000) + "é漢字🙂".repeat(300).as_str();
    let text = format!("short\n{one_line}\nlast line\n");
    let pages = pages(&text, 200, counter.as_ref());
    assert_eq!(pages.concat(), text);
    assert!(pages.len() > 25, "{}", pages.len());
    for page in &pages {
        assert!(counter.count(page) <= 200, "{}", counter.count(page));
        assert!(!page.is_empty());
    }
    assert_eq!(pages[0], "short\n");
    assert_eq!(pages.last().copied(), Some("last line\n"));
    assert_eq!(super::read::pages("", 200, counter.as_ref()), vec![""]);
}

#[test]
fn a_search_ranks_by_words_then_newest_and_shows_where_it_matched() {
    let recall = recall_over(small_archive(), &[("c3", "read_file")], 500);
    let answer = recall.search("cargo test parser", &query_words("cargo test parser"));
    let lines: Vec<&str> = answer.lines().collect();
    assert_eq!(
        lines[0],
        "\"cargo test parser\": 2 archived messages match, best first:"
    );
    // m5 has all three words (and the phrase); m6 only "parser" and "test".
    assert!(
        lines[1].starts_with("- m5, user: Run cargo test -p parser please"),
        "{answer}"
    );
    assert!(lines[2].starts_with("- m6, assistant: "), "{answer}");
    assert_eq!(lines[3], "Read one whole with recall {\"id\": \"m5\"}.");

    // Tool names and call arguments are searched too.
    let answer = recall.search("src/app.rs", &query_words("src/app.rs"));
    assert!(
        answer.contains("- m3, assistant, calling read_file:"),
        "{answer}"
    );
    let answer = recall.search("READ_FILE", &query_words("READ_FILE"));
    assert!(
        answer.contains("- m4, tool result of read_file"),
        "{answer}"
    );
    assert!(answer.contains("- m3, "), "{answer}");
    // m4 is newer than m3, both match one word.
    assert!(answer.find("- m4").unwrap() < answer.find("- m3").unwrap());

    let answer = recall.search("kubernetes", &query_words("kubernetes"));
    assert_eq!(
        answer,
        "nothing archived matches \"kubernetes\" (the archive holds 4 messages, from m3 to m6); \
         try other words"
    );
}

#[test]
fn a_search_lists_at_most_ten_hits_and_snippets_stay_short() {
    let filler = "x".repeat(2_000);
    let messages: Vec<ChatMessage> = (1..=25)
        .map(|i| {
            with_id(
                ChatMessage::user(format!("{filler} needle {i} {filler}")),
                i,
            )
        })
        .collect();
    let mut archive = Archive::new();
    archive.record_replacement(MessageId(100), &messages);
    let recall = recall_over(archive, &[], 500);
    let answer = recall.search("needle", &query_words("needle"));
    let hits: Vec<&str> = answer.lines().filter(|l| l.starts_with("- ")).collect();
    assert_eq!(hits.len(), MAX_HITS);
    assert!(answer.starts_with("\"needle\": 25 archived messages match; the best 10"));
    // Newest first among equals.
    assert!(hits[0].starts_with("- m25, user: …"), "{}", hits[0]);
    assert!(hits[0].contains("needle 25"));
    assert!(
        hits[0].chars().count() < 2 * SNIPPET_CONTEXT_CHARS + 40,
        "{}",
        hits[0]
    );
}

/// The ids the `[replaces …]` line ending `text` names (the marker every stub and summary
/// ends with), read as a model would read it.
fn named_ids(text: &str) -> Vec<MessageId> {
    let Some(inner) = text
        .trim_end()
        .lines()
        .next_back()
        .and_then(|l| l.trim().strip_prefix("[replaces "))
        .and_then(|l| l.strip_suffix(']'))
    else {
        return Vec::new();
    };
    let mut ids = Vec::new();
    for part in inner.split(',').map(str::trim) {
        match part.split_once("..") {
            Some((a, b)) => {
                let (a, b): (MessageId, MessageId) = (a.parse().unwrap(), b.parse().unwrap());
                ids.extend((a.0..=b.0).map(MessageId));
            }
            None => ids.push(part.parse().unwrap()),
        }
    }
    ids
}

/// A session of `turns` turns: a request, a tool call of `tool` with a result of `lines`
/// lines, an answer; sizes vary with the turn.
fn session(turns: usize, seed: usize) -> Conversation {
    let mut messages = vec![ChatMessage::system("You are a coder.")];
    for t in 0..turns {
        let n = (t * 7 + seed * 13) % 11;
        messages.push(ChatMessage::user(format!(
            "step {t}: {}",
            "please fix the failing parser test again. ".repeat(1 + n)
        )));
        let tool = if (t + seed).is_multiple_of(3) {
            "shell"
        } else {
            "read_file"
        };
        let call = ToolCall::new(
            format!("c{t}"),
            tool,
            format!(r#"{{"command": "cargo test -p parser{t}"}}"#),
        );
        messages.push(ChatMessage::assistant_tool_calls(None, vec![call]));
        let output: String = (0..(5 + n * 9))
            .map(|i| format!("{t}.{i}: test output line with error[E0308] maybe\n"))
            .collect();
        messages.push(ChatMessage::tool_result(format!("c{t}"), output));
        messages.push(ChatMessage::assistant(format!(
            "turn {t} done: {}",
            "I changed the tokenizer. ".repeat(n)
        )));
    }
    Conversation::from_messages(messages)
}

#[tokio::test]
async fn every_id_a_stub_or_summary_names_is_recallable_across_compactions() {
    let counter = shared_counter();
    let summarizer = MechanicalSummarizer::new();
    let mut checked = 0;
    for seed in 0..4 {
        for (window, target) in [(6_000, 0.4), (6_000, 0.15), (12_000, 0.1)] {
            let policy = ContextPolicy {
                target,
                tool_output_limit_tokens: 400,
                protected_recent: 2,
                ..ContextPolicy::for_window(window)
            };
            let mut conversation = session(14 + seed, seed);
            let mut archive = Archive::new();
            let mut originals: HashMap<MessageId, String> = conversation
                .messages()
                .iter()
                .map(|m| (m.id, m.text()))
                .collect();
            // Twice: the second compaction re-summarizes the first one's stubs and summaries.
            for round in 0..2 {
                let compaction = compact(
                    &conversation,
                    &FileLedger::new(),
                    &policy,
                    counter.as_ref(),
                    Some(&summarizer),
                    CompactOptions::default(),
                )
                .await
                .unwrap();
                archive.extend(&compaction.archive);
                compaction.apply_to(&mut conversation);
                let names: HashMap<String, String> = archive
                    .entries()
                    .iter()
                    .map(|e| &e.original.message)
                    .chain(conversation.messages().iter().map(|m| m.as_ref()))
                    .flat_map(|m| m.calls())
                    .map(|c| (c.id.clone(), c.function.name.clone()))
                    .collect();
                let recall = Recall {
                    archive: archive.clone(),
                    tool_names: names,
                    page_tokens: 300,
                    counter: counter.clone(),
                };
                for message in conversation.messages() {
                    for id in named_ids(&message.text()) {
                        let answer = recall.read(id, 1).unwrap_or_else(|e| {
                            panic!("seed {seed}, round {round}: {id} named but {e}")
                        });
                        // The first page starts with the original's first line.
                        let original = originals.get(&id).unwrap_or_else(|| {
                            panic!(
                                "seed {seed}, round {round}: {id} unknown, named by {}: {}",
                                message.id,
                                message.text()
                            )
                        });
                        let first = original.lines().next().unwrap_or_default();
                        assert!(answer.contains(first), "{id}: {answer}");
                        checked += 1;
                    }
                }
                // The next round appends to the conversation, as an agent would.
                for m in conversation.messages() {
                    originals.entry(m.id).or_insert_with(|| m.text());
                }
                let id = conversation.push(ChatMessage::user("go on with the next step"));
                originals.insert(id, "go on with the next step".into());
                let extra = session(6, seed + round + 1);
                for m in extra.messages().iter().skip(1) {
                    let mut m = m.as_ref().clone();
                    m.id = MessageId::UNASSIGNED;
                    if let Some(call) = m.tool_call_id.as_mut() {
                        *call = format!("r{round}{call}");
                    }
                    let calls: Vec<ToolCall> = m
                        .calls()
                        .iter()
                        .map(|c| {
                            ToolCall::new(
                                format!("r{round}{}", c.id),
                                &c.function.name,
                                &c.function.arguments,
                            )
                        })
                        .collect();
                    if !calls.is_empty() {
                        m = ChatMessage::assistant_tool_calls(None, calls);
                    }
                    let id = conversation.push(m);
                    originals.insert(id, conversation.get(id).unwrap().text());
                }
            }
        }
    }
    assert!(checked > 100, "only {checked} named ids checked");
}
