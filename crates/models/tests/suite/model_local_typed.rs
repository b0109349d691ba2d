//! Typed answers on the embedded model (#34): the response format's schema becomes a grammar,
//! so even SmolLM2-135M answers with JSON that parses into the asked type.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use troupe_protocol::ResponseFormat;
use troupe_protocol::{ChatMessage, ChatModel, ChatRequest, ModelError};

use super::support::local::model;

#[derive(Debug, Deserialize, JsonSchema)]
struct Pet {
    #[schemars(length(max = 20))]
    name: String,
    #[schemars(range(max = 30))]
    age: u8,
    kind: Kind,
    // Every string is bounded: an unbounded one lets a 135M model loop ("Rex-Lemon-Lemon-…")
    // until `max_tokens` cuts the JSON mid-string, and where it loops depends on the CPU's
    // floating point (it passed here and failed on CI's machine).
    #[schemars(length(max = 20))]
    nickname: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Cat,
    Dog,
    Fish,
}

fn request(format: ResponseFormat) -> ChatRequest {
    ChatRequest {
        response_format: Some(format),
        max_tokens: Some(96),
        ..ChatRequest::new(vec![
            ChatMessage::system("You describe pets."),
            ChatMessage::user("My dog Rex is four years old. Describe him."),
        ])
    }
}

#[tokio::test]
async fn model_local_typed_answer_parses_into_the_type() {
    let model = model().await;
    let format = ResponseFormat::of::<Pet>();
    let nickname = format.schema["properties"]["nickname"].to_string();
    assert!(nickname.contains(r#""maxLength":20"#), "{nickname}");
    let answer = model
        .chat(request(format))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let text = answer.message.text();
    let pet: Pet =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not a Pet ({e}): {text}"));
    // The schema's bounds hold too: the grammar carries them.
    assert!(pet.name.chars().count() <= 20, "{pet:?}");
    assert!(pet.age <= 30, "{pet:?}");
    assert!(matches!(pet.kind, Kind::Cat | Kind::Dog | Kind::Fish));
    assert!(
        pet.nickname
            .is_none_or(|n| n.chars().count() <= 20 && !n.contains('"'))
    );
}

#[tokio::test]
async fn model_local_refuses_a_schema_its_grammar_cannot_express() {
    let model = model().await;
    let dangling = ResponseFormat {
        name: "Dangling".into(),
        schema: json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}),
        strict: false,
    };
    match model.chat(request(dangling)).await {
        Err(ModelError::InvalidRequest(why)) => assert!(why.contains("Dangling"), "{why}"),
        other => panic!("{other:?}"),
    }
}
