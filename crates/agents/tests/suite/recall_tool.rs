//! The `recall` tool in a live agent: once a compaction archived something, the model is
//! offered `recall`, reads a masked tool result back by the id its stub names (a page at a
//! time), finds a summarized command by its words, and gets tool errors — the turn going on —
//! for an unknown id or malformed arguments.
//!
//! The agent's model reads its prompt: each scripted step is a function of the request, so it
//! calls `recall` with the id it finds in a stub, as a real model would.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use troupe_agents::compression::{CompressionConfig, CompressorModel};
use troupe_agents::{
    AgentSpec, CompactionSettings, LlmAgent, RECALL_TOOL, WorkAhead, shared_counter, spawn_agent,
    spawn_compression_agent,
};
use troupe_compaction::{Archive, ContextPolicy, expand};
use troupe_models::{ScriptedModel, ScriptedReply};
use troupe_protocol::{
    ChatModel, ChatRequest, ChatStream, Conversation, Event, MessageId, ModelError, ModelInfo, Role,
};
use troupe_runtime::{Team, TeamConfig};
use troupe_tools::{ToolError, ToolRegistry};

/// One scripted step: the reply to a request, chosen by reading it.
type Step = Box<dyn Fn(&ChatRequest) -> ScriptedReply + Send + Sync>;

/// A model whose every answer is a function of the prompt it was sent.
struct ReadingModel {
    /// Plays each step's reply (and numbers its tool calls across the session).
    inner: ScriptedModel,
    steps: Mutex<VecDeque<Step>>,
}

impl ReadingModel {
    fn new(name: &str) -> Self {
        ReadingModel {
            inner: ScriptedModel::new(name, []),
            steps: Mutex::new(VecDeque::new()),
        }
    }

    /// Append steps for the next request(s).
    fn then(&self, steps: impl IntoIterator<Item = Step>) {
        self.steps.lock().unwrap().extend(steps);
    }

    fn requests(&self) -> Vec<ChatRequest> {
        self.inner.requests()
    }
}

#[async_trait]
impl ChatModel for ReadingModel {
    fn info(&self) -> ModelInfo {
        self.inner.info()
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        let step = self.steps.lock().unwrap().pop_front();
        if let Some(step) = step {
            self.inner.push([step(&request)]);
        }
        self.inner.chat_stream(request).await
    }
}

/// A fixed reply.
fn reply(r: ScriptedReply) -> Step {
    Box::new(move |_| r.clone())
}

/// A call of `recall` with these arguments.
fn recall(args: &str) -> Step {
    reply(ScriptedReply::call(RECALL_TOOL, args))
}

/// Answer with the text of the tool results that answer the last assistant message, one per
/// line block (what the test then reads from `ask`).
fn echo_results() -> Step {
    Box::new(|request| {
        let results: Vec<String> = request
            .messages
            .iter()
            .rev()
            .take_while(|m| m.role == Role::Tool)
            .map(|m| m.text())
            .collect();
        ScriptedReply::text(
            results
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n=====\n"),
        )
    })
}

/// The ids the stubs in the prompt name, oldest first: the last line of every
/// `[compressed] …` tool result is `[replaces mN]`.
fn stub_ids(request: &ChatRequest) -> Vec<String> {
    request
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool && m.text().starts_with("[compressed]"))
        .filter_map(|m| {
            let text = m.text();
            let last = text.trim_end().lines().next_back()?.to_string();
            let id = last.strip_prefix("[replaces ")?.strip_suffix(']')?;
            Some(id.to_string())
        })
        .collect()
}

/// What `read_file` returns for `path`: 60 numbered lines naming the file.
fn file_body(path: &str) -> String {
    (0..60)
        .map(|i| format!("{path}:{i}: let value_{i} = compute({i}); // checked\n"))
        .collect()
}

fn tools() -> ToolRegistry {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct PathArgs {
        path: String,
    }
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct CommandArgs {
        command: String,
    }
    let mut tools = ToolRegistry::new();
    tools
        .register_fn("read_file", "Read a file.", |args: PathArgs| async move {
            Ok::<_, ToolError>(file_body(&args.path))
        })
        .unwrap();
    tools
        .register_fn("shell", "Run a command.", |args: CommandArgs| async move {
            let lines: String = (0..30)
                .map(|i| format!("test tokenizer::case_{i} ... ok\n"))
                .collect();
            Ok::<_, ToolError>(format!("$ {}\n{lines}test result: ok", args.command))
        })
        .unwrap();
    tools
}

/// An 8k window compacted only by hand (`compact_agent`), down to `target`. A recall page is
/// then at most an eighth of the window: a file of `file_body` takes two.
fn settings(target: f64) -> CompactionSettings {
    CompactionSettings {
        policy: Some(ContextPolicy {
            target,
            tool_output_limit_tokens: 100_000,
            ..ContextPolicy::for_window(8_000)
        }),
        auto: false,
        work_ahead: WorkAhead::Off,
        output_reserve: Some(0),
        ..CompactionSettings::default()
    }
}

async fn start_team() -> Team {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    let mut config = CompressionConfig::new(shared_counter());
    // Mechanical summaries: the test is about what the agent reads back, not the summarizer.
    config.model = CompressorModel::None;
    spawn_compression_agent(&team, config).await.unwrap();
    team
}

/// An agent `coder` that has read four files (after running `COMMAND` when `run_command`),
/// talked through `chatter` long exchanges, then had its conversation compacted.
async fn compacted_agent(
    settings: CompactionSettings,
    run_command: bool,
    chatter: usize,
) -> (Team, Arc<ReadingModel>) {
    let model = Arc::new(ReadingModel::new("coder"));
    if run_command {
        model.then([reply(ScriptedReply::call(
            "shell",
            format!(r#"{{"command": "{COMMAND}"}}"#),
        ))]);
    }
    model.then(reads(0..4));
    model.then([reply(ScriptedReply::text("read them"))]);
    let team = start_team().await;
    let spec = AgentSpec::new("coder", model.clone())
        .tools(tools())
        .compaction(settings)
        .max_turns(12);
    spawn_agent(&team, spec).await.unwrap();
    assert_eq!(
        team.ask("coder", "read the files").await.unwrap(),
        "read them"
    );
    for i in 0..chatter {
        model.then([reply(ScriptedReply::text(format!(
            "step {i} done: {}",
            "I rewrote the branch for quoted strings and checked the tests. ".repeat(12)
        )))]);
        team.ask(
            "coder",
            &format!(
                "step {i}: {}",
                "look at the tokenizer state machine again. ".repeat(8)
            ),
        )
        .await
        .unwrap();
    }
    let compaction = team.agent::<LlmAgent>("coder").compact(None).await.unwrap();
    assert!(compaction.report.tokens_after < compaction.report.tokens_before);
    (team, model)
}

/// Calls of `read_file` on `src/f{i}.rs`, one per turn.
fn reads(files: std::ops::Range<usize>) -> impl Iterator<Item = Step> {
    files.map(|i| {
        reply(ScriptedReply::call(
            "read_file",
            format!(r#"{{"path": "src/f{i}.rs"}}"#),
        ))
    })
}

/// The ids every `[replaces …]` line in the prompt names (ranges spelled out).
fn named_ids(request: &ChatRequest) -> Vec<MessageId> {
    let mut ids = Vec::new();
    for message in &request.messages {
        let text = message.text();
        let Some(inner) = text
            .trim_end()
            .lines()
            .next_back()
            .and_then(|l| l.strip_prefix("[replaces "))
            .and_then(|l| l.strip_suffix(']'))
        else {
            continue;
        };
        for part in inner.split(", ") {
            match part.split_once("..") {
                Some((a, b)) => {
                    let (a, b): (MessageId, MessageId) = (a.parse().unwrap(), b.parse().unwrap());
                    ids.extend((a.0..=b.0).map(MessageId));
                }
                None => ids.push(part.parse().unwrap()),
            }
        }
    }
    ids
}

/// The command the agent ran first, which the compaction then summarized away.
const COMMAND: &str = "cargo test -p parser --lib -- tokenizer::quoted_strings";

async fn archive_and_conversation(team: &Team) -> (Archive, Conversation) {
    team.with_agent("coder", |a: &mut LlmAgent| {
        (a.archive().clone(), a.conversation().clone())
    })
    .await
    .unwrap()
    .unwrap()
}

fn offers_recall(request: &ChatRequest) -> bool {
    request.tools.iter().any(|t| t.name == RECALL_TOOL)
}

#[tokio::test]
async fn an_agent_recalls_a_masked_tool_result_by_the_id_in_its_stub_page_by_page() {
    let (team, model) = compacted_agent(settings(0.4), false, 0).await;
    let requests_before = model.requests().len();
    // Page 1 of the oldest stub's original, then page 2, then both answers back to the test.
    model.then([
        Box::new(|request: &ChatRequest| {
            let ids = stub_ids(request);
            assert!(!ids.is_empty(), "no stub in the prompt");
            ScriptedReply::call(RECALL_TOOL, format!(r#"{{"id": "{}"}}"#, ids[0]))
        }) as Step,
        Box::new(|request: &ChatRequest| {
            let ids = stub_ids(request);
            ScriptedReply::call(RECALL_TOOL, format!(r#"{{"id": "{}", "page": 2}}"#, ids[0]))
        }),
        Box::new(|request: &ChatRequest| {
            let results: Vec<String> = request
                .messages
                .iter()
                .filter(|m| m.role == Role::Tool)
                .rev()
                .take(2)
                .map(|m| m.text())
                .collect();
            ScriptedReply::text(format!("{}\n=====\n{}", results[1], results[0]))
        }),
    ]);
    let answer = team
        .ask("coder", "what exactly was in the first file you read?")
        .await
        .unwrap();

    // A fresh agent's tool list has no `recall`; once something is archived, it is offered.
    let requests = model.requests();
    assert!(!offers_recall(&requests[0]));
    assert!(offers_recall(&requests[requests_before]));

    let (archive, conversation) = archive_and_conversation(&team).await;
    let stubbed = stub_ids(&requests[requests_before]);
    let id: MessageId = stubbed[0].parse().unwrap();
    let original = archive
        .original(id)
        .expect("the stub names an archived original");
    let (page1, page2) = answer.split_once("\n=====\n").unwrap();
    // Page 1 says what the original was and how to go on.
    let call_id = original.message.tool_call_id.clone().unwrap();
    assert!(
        page1.starts_with(&format!(
            "{id}, tool result of read_file (call {call_id}), page 1 of 2:\n"
        )),
        "{page1}"
    );
    assert!(
        page1.ends_with(&format!(
            "[page 1 of 2: recall {{\"id\": \"{id}\", \"page\": 2}} for more]"
        )),
        "{page1}"
    );
    assert!(
        page2.ends_with(&format!("[page 2 of 2: the end of {id}]")),
        "{page2}"
    );
    // The two pages are the original, byte for byte.
    let body = |page: &str| {
        let inner = page.split_once('\n').unwrap().1;
        inner.rsplit_once('\n').unwrap().0.to_string()
    };
    let joined = format!("{}\n{}\n", body(page1), body(page2));
    assert_eq!(joined, original.message.text());
    assert_eq!(joined, file_body("src/f0.rs"));
    // The recalled original is not back in the conversation under its id: the answers are new
    // tool results of their own.
    assert!(conversation.get(id).is_none());
    team.shutdown().await;
}

#[tokio::test]
async fn a_search_finds_a_summarized_command_and_its_id_reads_it_back() {
    // Long exchanges after the reads: masking alone cannot reach the target, the oldest
    // turns are summarized.
    let mut low = settings(0.1);
    if let Some(policy) = low.policy.as_mut() {
        policy.protected_recent = 2;
    }
    let (team, model) = compacted_agent(low, true, 4).await;
    let (archive, conversation) = archive_and_conversation(&team).await;
    // The command's call was summarized: its message is archived, not in the conversation.
    let call_message = archive
        .entries()
        .iter()
        .map(|e| &e.original)
        .find(|m| m.message.calls().iter().any(|c| c.function.name == "shell"))
        .expect("the shell call was archived");
    assert!(conversation.get(call_message.id).is_none());
    assert!(
        !conversation
            .messages()
            .iter()
            .any(|m| m.calls().iter().any(|c| c.function.name == "shell")),
        "the shell call is still in the conversation"
    );

    model.then([
        recall(r#"{"query": "cargo test tokenizer quoted"}"#),
        Box::new(|request: &ChatRequest| {
            // The hit that ran the command: `- m2, assistant, calling shell: …` (its output,
            // which names the command too, is a hit of its own).
            let found = request.messages.last().unwrap().text();
            let id = found
                .lines()
                .filter_map(|l| l.strip_prefix("- "))
                .find(|l| l.contains(", assistant, calling shell: "))
                .and_then(|l| l.split(',').next())
                .unwrap()
                .to_string();
            ScriptedReply::call(RECALL_TOOL, format!(r#"{{"id": "{id}"}}"#))
        }) as Step,
        echo_results(),
    ]);
    let searched = model.requests().len() + 1;
    let answer = team
        .ask("coder", "which test command did you run at the start?")
        .await
        .unwrap();
    let search = model.requests()[searched].messages.last().unwrap().text();
    let hit = format!("- {}, assistant, calling shell: ", call_message.id);
    assert!(search.contains(&hit), "{search}");
    assert!(search.contains("tokenizer::quoted_strings"), "{search}");
    assert!(
        answer.starts_with(&format!("{}, assistant, calling shell:\n", call_message.id)),
        "{answer}"
    );
    assert!(
        answer.contains(&format!(r#"→ shell {{"command": "{COMMAND}"}}"#)),
        "{answer}"
    );
    team.shutdown().await;
}

#[tokio::test]
async fn an_unknown_id_and_malformed_arguments_are_tool_errors_and_the_turn_goes_on() {
    let (team, model) = compacted_agent(settings(0.4), false, 0).await;
    let mut events = team.subscribe();
    model.then([
        reply(ScriptedReply::ToolCalls(vec![
            (RECALL_TOOL.into(), r#"{"id": "m999"}"#.into()),
            (RECALL_TOOL.into(), "{}".into()),
            (RECALL_TOOL.into(), r#"{"id": 7}"#.into()),
            (RECALL_TOOL.into(), r#"{"id": "m2", "query": "x"}"#.into()),
            (RECALL_TOOL.into(), "not json".into()),
        ])),
        echo_results(),
    ]);
    let answer = team.ask("coder", "recall things").await.unwrap();
    let results: Vec<&str> = answer.split("\n=====\n").collect();
    assert_eq!(results.len(), 5, "{answer}");
    assert!(
        results[0]
            .starts_with("m999 is not archived: recall takes an id as a stub or summary names it"),
        "{}",
        results[0]
    );
    assert!(results[0].contains("the archive holds"), "{}", results[0]);
    assert!(
        results[1].contains("give `id` or `query`"),
        "{}",
        results[1]
    );
    assert!(
        results[2].contains("invalid arguments for recall: field \"id\""),
        "{}",
        results[2]
    );
    assert!(results[3].contains("not both"), "{}", results[3]);
    assert!(
        results[4].starts_with("malformed JSON arguments for recall"),
        "{}",
        results[4]
    );
    // Every call finished as an error the model saw; none ended the request.
    let mut errors = 0;
    while let Ok(record) = events.try_recv() {
        if let Event::ToolCallFinished { tool, is_error, .. } = record.event
            && tool == RECALL_TOOL
        {
            assert!(is_error);
            errors += 1;
        }
    }
    assert_eq!(errors, 5);
    team.shutdown().await;
}

#[tokio::test]
async fn a_recalled_answer_is_compacted_like_any_result_and_no_id_is_ever_doubled() {
    let (team, model) = compacted_agent(settings(0.4), false, 0).await;
    model.then([
        Box::new(|request: &ChatRequest| {
            let ids = stub_ids(request);
            ScriptedReply::call(RECALL_TOOL, format!(r#"{{"id": "{}"}}"#, ids[0]))
        }) as Step,
        reply(ScriptedReply::text("recalled")),
    ]);
    assert_eq!(team.ask("coder", "recall").await.unwrap(), "recalled");
    let (_, before) = archive_and_conversation(&team).await;
    let recalled = before
        .messages()
        .iter()
        .rev()
        .find(|m| m.role == Role::Tool)
        .unwrap()
        .as_ref()
        .clone();

    // Two more reads, and a compaction that archives the recall's answer too.
    model.then(reads(4..6));
    model.then([reply(ScriptedReply::text("read more"))]);
    assert_eq!(team.ask("coder", "read more").await.unwrap(), "read more");
    team.agent::<LlmAgent>("coder").compact(None).await.unwrap();
    let (archive, conversation) = archive_and_conversation(&team).await;
    assert!(
        conversation.get(recalled.id).is_none(),
        "the answer was not compacted"
    );
    assert_eq!(
        archive.original(recalled.id).unwrap().message.text(),
        recalled.text()
    );

    // The stub or summary that took its place names its id, which is recallable in turn.
    model.then([
        Box::new(move |request: &ChatRequest| {
            assert!(named_ids(request).contains(&recalled.id));
            ScriptedReply::call(RECALL_TOOL, format!(r#"{{"id": "{}"}}"#, recalled.id))
        }) as Step,
        echo_results(),
    ]);
    let again = team.ask("coder", "recall the recall").await.unwrap();
    assert!(again.contains("tool result of recall"), "{again}");

    // No id twice: in the conversation, nor in the whole history the archive restores.
    let (archive, conversation) = archive_and_conversation(&team).await;
    let live: Vec<MessageId> = conversation.messages().iter().map(|m| m.id).collect();
    assert_eq!(live.iter().collect::<HashSet<_>>().len(), live.len());
    let history = expand(&conversation.to_messages(), &archive).unwrap();
    let ids: HashSet<MessageId> = history.iter().map(|m| m.id).collect();
    assert_eq!(ids.len(), history.len());
    team.shutdown().await;
}

#[tokio::test]
async fn recall_is_not_offered_when_switched_off_or_when_a_tool_of_that_name_is_registered() {
    let (team, model) = compacted_agent(
        CompactionSettings {
            recall_tool: false,
            ..settings(0.4)
        },
        false,
        0,
    )
    .await;
    model.then([reply(ScriptedReply::text("ok"))]);
    team.ask("coder", "go on").await.unwrap();
    assert!(!offers_recall(model.requests().last().unwrap()));
    team.shutdown().await;

    // The registry's own `recall` wins: offered once, served by the registry.
    let model = Arc::new(ReadingModel::new("coder"));
    let mut tools = tools();
    tools
        .register_fn(
            RECALL_TOOL,
            "The user's own recall.",
            |_: troupe_tools::NoArgs| async { Ok::<_, ToolError>("the user's recall".to_string()) },
        )
        .unwrap();
    model.then(reads(0..4));
    model.then([reply(ScriptedReply::text("read them"))]);
    let team = start_team().await;
    spawn_agent(
        &team,
        AgentSpec::new("coder", model.clone())
            .tools(tools)
            .compaction(settings(0.4))
            .max_turns(12),
    )
    .await
    .unwrap();
    team.ask("coder", "read").await.unwrap();
    team.agent::<LlmAgent>("coder").compact(None).await.unwrap();
    model.then([recall("{}"), echo_results()]);
    assert_eq!(
        team.ask("coder", "recall").await.unwrap(),
        "the user's recall"
    );
    let last = model.requests().last().unwrap().clone();
    assert_eq!(
        last.tools.iter().filter(|t| t.name == RECALL_TOOL).count(),
        1
    );
    team.shutdown().await;
}
