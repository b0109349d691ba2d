#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::checks::MIN_FILLED_SECTIONS;
use super::*;
use crate::summary::prompt::{per_message_prompt, segment_prompt};
use troupe_protocol::Role;
use troupe_tokens::CharEstimateCounter;

const CONVERSATION: &str = "[m1 user]\nThe tokenizer in src/lexer.rs panics on unterminated strings. Fix it without allocating; keep the public API of Lexer::next_token.\n[m2 assistant]\nI will read the lexer first.\n→ read_file {\"path\": \"src/lexer.rs\"}\n[m3 tool read_file]\nfn next_token(&mut self) -> Token { match self.peek() { '\"' => self.quoted(), _ => self.word() } }\n[m4 assistant]\nThe root cause is quoted() indexing past the end. I decided to return Token::Error instead of panicking.\n→ edit_file {\"path\": \"src/lexer.rs\"}\n[m5 tool edit_file]\nok\n[m6 user]\nGood. Now run cargo test and add a regression test for the unterminated string.";

const GOOD: &str = "## Goal\n- Stop the tokenizer in src/lexer.rs from panicking on unterminated strings.\n\n## Constraints & Preferences\n- No allocation; keep the public API of Lexer::next_token.\n\n## Progress\n### Done\n- [x] Found the root cause: quoted() indexes past the end.\n- [x] Edited src/lexer.rs so quoted() returns Token::Error.\n### In Progress\n- [ ] Regression test for the unterminated string.\n### Blocked\n- (none)\n\n## Key Decisions\n- **Return Token::Error instead of panicking**: callers already handle error tokens.\n\n## Next Steps\n1. Add the regression test.\n2. Run cargo test.\n\n## Critical Context\n- Lexer::next_token dispatches to quoted() on a '\"'.";

fn prompt() -> SummaryPrompt {
    segment_prompt(CONVERSATION, None, None, 400)
}

fn vet(answer: &str) -> Result<(), SummaryRejection> {
    vet_summary(answer, &prompt(), &CharEstimateCounter)
}

#[test]
fn a_faithful_structured_summary_is_trusted() {
    assert_eq!(vet(GOOD), Ok(()));
    // Wrapped in a fence and tags, as models like to do: still the same summary.
    assert_eq!(
        vet(&format!("```markdown\n<summary>\n{GOOD}\n</summary>\n```")),
        Ok(())
    );
}

#[test]
fn the_bare_skeleton_is_rejected_as_a_skeleton() {
    let skeleton = "## Goal\n- (not provided)\n## Constraints & Preferences\n- (none)\n## Progress\n### Done\n- (not provided)\n### In Progress\n- (none)\n### Blocked\n- (none)\n## Key Decisions\n- none\n## Next Steps\n- (not provided)\n## Critical Context\n- n/a";
    assert_eq!(vet(skeleton), Err(SummaryRejection::Skeleton));
    assert_eq!(
        vet("  \n<summary>\n</summary>"),
        Err(SummaryRejection::Empty)
    );
    assert_eq!(
        vet(skeleton).unwrap_err().to_string(),
        "its answer had no content beyond the section headings"
    );
}

#[test]
fn missing_and_thin_sections_are_rejected() {
    let cut = GOOD.split("## Next Steps").next().unwrap();
    assert_eq!(
        vet(cut),
        Err(SummaryRejection::MissingSections(vec![
            "Next Steps".into(),
            "Critical Context".into()
        ]))
    );
    let thin = "## Goal\n- Fix the tokenizer panic in src/lexer.rs.\n## Constraints & Preferences\n- (none)\n## Progress\n### Done\n- (none)\n### In Progress\n- (none)\n### Blocked\n- (none)\n## Key Decisions\n- (none)\n## Next Steps\n1. Run cargo test.\n## Critical Context\n- (none)";
    assert_eq!(
        vet(thin),
        Err(SummaryRejection::ThinSections {
            filled: 2,
            required: MIN_FILLED_SECTIONS
        })
    );
}

#[test]
fn loops_are_rejected() {
    let line = "{\"name\": \"read_file\", \"arguments\": {\"path\": \"src/lexer.rs\"}}\n";
    let looping_line = format!("## Goal\n{}", line.repeat(6));
    assert!(
        matches!(
            vet(&looping_line),
            Err(SummaryRejection::RepeatedLine { times: 6, .. })
        ),
        "{:?}",
        vet(&looping_line)
    );
    let block = "- Found the root cause in quoted().\n- Edited src/lexer.rs.\n- Ran cargo test.\n";
    let looping_block = format!("{GOOD}\n{}", block.repeat(3));
    assert!(
        matches!(
            vet(&looping_block),
            Err(SummaryRejection::RepeatedBlock {
                times: 3,
                lines: 3,
                ..
            })
        ),
        "{:?}",
        vet(&looping_block)
    );
    let one_line = format!(
        "{GOOD}\n- {}",
        "the lexer returns Token::Error for quoted strings now and ".repeat(20)
    );
    assert!(
        matches!(
            vet(&one_line),
            Err(SummaryRejection::RepeatedPhrases { .. })
        ),
        "{:?}",
        vet(&one_line)
    );
}

#[test]
fn echoes_of_the_prompt_are_rejected() {
    let copied = format!("{GOOD}\n[m3 tool read_file]\nfn next_token(&mut self) -> Token");
    assert_eq!(
        vet(&copied),
        Err(SummaryRejection::EchoesPrompt("[m3 tool read_file]".into()))
    );
    let instructions = GOOD.replace(
        "## Next Steps\n1. Add the regression test.\n2. Run cargo test.",
        "## Next Steps\n1. The next concrete action.\n2. The actions after it, in order.",
    );
    assert!(
        matches!(
            vet(&instructions),
            Err(SummaryRejection::EchoesInstructions { lines: 2, .. })
        ),
        "{:?}",
        vet(&instructions)
    );
}

#[test]
fn json_or_code_instead_of_prose_is_rejected() {
    let json = "```json\n{\n  \"goal\": \"fix the tokenizer\",\n  \"files\": [\"src/lexer.rs\"],\n  \"done\": [\"edited quoted()\"],\n  \"next\": \"run cargo test\"\n}\n```";
    assert!(
        matches!(vet(json), Err(SummaryRejection::NotProse { .. })),
        "{:?}",
        vet(json)
    );
    // A short snippet in Critical Context is fine.
    let snippet = GOOD.replace(
        "- Lexer::next_token dispatches to quoted() on a '\"'.",
        "```rust\nmatch self.peek() { '\"' => self.quoted(), _ => self.word() }\n```",
    );
    assert_eq!(vet(&snippet), Ok(()));
}

#[test]
fn a_summary_of_something_else_is_rejected() {
    let invented = "## Goal\n- Deploy the Kubernetes cluster on AWS with Terraform.\n## Constraints & Preferences\n- Budget approval from finance department.\n## Progress\n### Done\n- [x] Provisioned networking modules and security groups.\n### In Progress\n- [ ] Helm charts for monitoring dashboards.\n### Blocked\n- (none)\n## Key Decisions\n- **Managed Postgres**: cheaper maintenance.\n## Next Steps\n1. Configure autoscaling policies.\n## Critical Context\n- Region eu-west-1.";
    assert!(
        matches!(vet(invented), Err(SummaryRejection::Ungrounded { .. })),
        "{:?}",
        vet(invented)
    );
}

#[test]
fn an_answer_over_its_budget_is_rejected() {
    let small = segment_prompt(CONVERSATION, None, None, 60);
    let tokens = CharEstimateCounter.count(GOOD);
    assert_eq!(
        vet_summary(GOOD, &small, &CharEstimateCounter),
        Err(SummaryRejection::OverBudget { tokens, budget: 60 })
    );
    // A little over is tolerated.
    let close = segment_prompt(CONVERSATION, None, None, tokens - 5);
    assert_eq!(vet_summary(GOOD, &close, &CharEstimateCounter), Ok(()));
}

#[test]
fn a_shortened_message_needs_no_sections_but_must_not_loop() {
    let prompt = per_message_prompt(Role::User, CONVERSATION, 100);
    let short =
        "The tokenizer in src/lexer.rs panics on unterminated strings; fix it without allocating.";
    assert_eq!(vet_summary(short, &prompt, &CharEstimateCounter), Ok(()));
    let looping = "Fix the tokenizer in src/lexer.rs now.\n".repeat(5);
    assert!(matches!(
        vet_summary(&looping, &prompt, &CharEstimateCounter),
        Err(SummaryRejection::RepeatedLine { .. })
    ));
}
