//! Typed answers (#34): `Team::ask_typed` sends the type's schema with the request, parses the
//! answer, checks it against the schema's rules (#41), asks once more with the error, and names
//! the field (and the rule) when the answer still does not fit.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use troupe::models::{OpenAiConfig, OpenAiModel, ScriptedModel, ScriptedReply};
use troupe::prelude::*;
use troupe::protocol::ResponseFormat;
use troupe::runtime::typed::TypedAnswerError;
use troupe::{AgentSpec, AskError, Team};

use super::support::chat_server::ChatServer;

/// A small answer type: a name, a number and an enum.
#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
struct City {
    name: String,
    population: u32,
    size: Size,
}

#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Size {
    Town,
    Metropolis,
}

const VALID: &str = r#"{"name": "Oslo", "population": 700000, "size": "town"}"#;
const WRONG_POPULATION: &str = r#"{"name": "Oslo", "population": "many", "size": "town"}"#;

fn oslo() -> City {
    City {
        name: "Oslo".into(),
        population: 700_000,
        size: Size::Town,
    }
}

async fn team_on(model: Arc<dyn ChatModel>) -> Team {
    Team::builder()
        .agent(AgentSpec::new("geo", model).max_turns(2))
        .start()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_wrong_answer_is_asked_once_more_with_the_error() {
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        [
            ScriptedReply::text(WRONG_POPULATION),
            ScriptedReply::text(VALID),
        ],
    ));
    let team = team_on(model.clone()).await;
    let city = team.ask_typed::<City>("geo", "Describe Oslo.").await;
    team.shutdown().await;
    assert_eq!(city, Ok(oslo()));
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "one retry");
    let format = ResponseFormat::of::<City>();
    for request in &requests {
        assert_eq!(request.response_format.as_ref(), Some(&format));
    }
    // The retry continues the conversation: the wrong answer, then the error naming the field.
    let retry = &requests[1].messages;
    assert_eq!(retry[retry.len() - 2].text(), WRONG_POPULATION);
    let correction = retry[retry.len() - 1].text();
    assert!(correction.contains("`population`"), "{correction}");
}

#[tokio::test]
async fn a_second_wrong_answer_is_an_error_naming_the_field() {
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        [
            ScriptedReply::text(WRONG_POPULATION),
            ScriptedReply::text(r#"{"name": "Oslo", "population": 1}"#),
            ScriptedReply::text(VALID),
        ],
    ));
    let team = team_on(model.clone()).await;
    let city = team.ask_typed::<City>("geo", "Describe Oslo.").await;
    team.shutdown().await;
    match city {
        Err(TypedAnswerError::Mismatch {
            schema,
            field,
            message,
            answer,
        }) => {
            assert_eq!(schema, "City");
            assert_eq!(field, "size");
            assert!(message.contains("missing field"), "{message}");
            assert_eq!(answer, r#"{"name": "Oslo", "population": 1}"#);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(model.requests().len(), 2, "asked once more, not twice");
}

#[tokio::test]
async fn a_failed_ask_stays_an_ask_error() {
    let model = Arc::new(ScriptedModel::new("scripted", []));
    let team = team_on(model).await;
    let city = team.ask_typed::<City>("nobody", "Describe Oslo.").await;
    team.shutdown().await;
    assert!(
        matches!(
            city,
            Err(TypedAnswerError::Ask(AskError::NoSuchAgent { .. }))
        ),
        "{city:?}"
    );
}

#[tokio::test]
async fn the_openai_road_sends_the_schema_as_response_format() {
    let server = ChatServer::start_with(Arc::new(|_| VALID.to_string()));
    let config = OpenAiConfig::new(&server.url, "gpt-test").with_api_key("sk-test");
    let model: Arc<dyn ChatModel> = Arc::new(OpenAiModel::new(config).unwrap());
    let team = team_on(model).await;
    let city = team.ask_typed::<City>("geo", "Describe Oslo.").await;
    team.shutdown().await;
    assert_eq!(city, Ok(oslo()));
    assert_eq!(server.count(), 1);
    let sent = &server.request(0)["response_format"];
    assert_eq!(sent["type"], "json_schema");
    assert_eq!(sent["json_schema"]["name"], "City");
    assert_eq!(sent["json_schema"]["strict"], false);
    assert_eq!(
        sent["json_schema"]["schema"],
        ResponseFormat::of::<City>().schema
    );
    assert_eq!(
        sent["json_schema"]["schema"]["properties"]["population"]["type"],
        "integer"
    );
}

/// A reading whose schema bounds what serde alone would take: a level of 1 to 10, a station
/// name of at most 8 characters.
#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
struct Reading {
    #[schemars(range(min = 1, max = 10))]
    level: u8,
    #[schemars(length(max = 8))]
    station: String,
}

const LEVEL_ZERO: &str = r#"{"level": 0, "station": "Oslo"}"#;

#[tokio::test]
async fn an_answer_breaking_a_bound_of_its_schema_is_asked_once_more_naming_field_and_rule() {
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        [
            ScriptedReply::text(LEVEL_ZERO),
            ScriptedReply::text(r#"{"level": 4, "station": "Oslo"}"#),
        ],
    ));
    let team = team_on(model.clone()).await;
    let reading = team.ask_typed::<Reading>("geo", "Read the gauge.").await;
    team.shutdown().await;
    assert_eq!(
        reading,
        Ok(Reading {
            level: 4,
            station: "Oslo".into()
        })
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "one retry");
    let retry = &requests[1].messages;
    assert_eq!(retry[retry.len() - 2].text(), LEVEL_ZERO);
    let correction = retry[retry.len() - 1].text();
    assert!(correction.contains("at `level`"), "{correction}");
    assert!(correction.contains("`minimum`"), "{correction}");
    assert!(
        correction.contains("0 is less than the minimum of 1"),
        "{correction}"
    );
}

#[tokio::test]
async fn an_answer_breaking_its_schema_twice_is_an_error_naming_field_and_rule() {
    let too_long = r#"{"level": 3, "station": "Trondheim-Nord"}"#;
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        [
            ScriptedReply::text(LEVEL_ZERO),
            ScriptedReply::text(too_long),
            ScriptedReply::text(r#"{"level": 4, "station": "Oslo"}"#),
        ],
    ));
    let team = team_on(model.clone()).await;
    let reading = team.ask_typed::<Reading>("geo", "Read the gauge.").await;
    team.shutdown().await;
    match reading {
        Err(TypedAnswerError::Mismatch {
            schema,
            field,
            message,
            answer,
        }) => {
            assert_eq!(schema, "Reading");
            assert_eq!(field, "station");
            assert!(message.contains("`maxLength`"), "{message}");
            assert!(message.contains("longer than 8 characters"), "{message}");
            assert_eq!(answer, too_long);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(model.requests().len(), 2, "asked once more, not twice");
}

/// A type that suits OpenAI's strict mode: it denies unknown fields and every field is
/// required; no bound strict mode refuses.
#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Gauge {
    level: u8,
    station: String,
}

#[tokio::test]
async fn a_schema_that_suits_strict_mode_is_sent_strict_and_others_are_not() {
    assert!(ResponseFormat::of::<Gauge>().strict);
    // Open objects (no deny_unknown_fields), an `Option`, a length bound: not strict.
    assert!(!ResponseFormat::of::<City>().strict);
    assert!(!ResponseFormat::of::<Reading>().strict);
    let server = ChatServer::start_with(Arc::new(|_| r#"{"level": 3, "station": "Oslo"}"#.into()));
    let config = OpenAiConfig::new(&server.url, "gpt-test").with_api_key("sk-test");
    let model: Arc<dyn ChatModel> = Arc::new(OpenAiModel::new(config).unwrap());
    let team = team_on(model).await;
    let gauge = team.ask_typed::<Gauge>("geo", "Read the gauge.").await;
    team.shutdown().await;
    assert_eq!(
        gauge,
        Ok(Gauge {
            level: 3,
            station: "Oslo".into()
        })
    );
    let sent = &server.request(0)["response_format"]["json_schema"];
    assert_eq!(sent["strict"], true);
    assert_eq!(sent["schema"]["additionalProperties"], false);
    // The number's Rust type is no `format` strict mode would refuse; its range stays.
    assert!(
        sent["schema"]["properties"]["level"]
            .get("format")
            .is_none()
    );
    assert_eq!(sent["schema"]["properties"]["level"]["maximum"], 255);
}
