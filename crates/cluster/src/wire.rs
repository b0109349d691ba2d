//! What crosses the wire between nodes: versioned JSON frames inside one ractor message type.
//!
//! Agents' own mailboxes never leave their process (they carry closures and type-erased jobs).
//! Each node runs one gateway actor whose message, [`GatewayMsg`], is the only serializable
//! type troupe sends: a frame of bytes and the port its reply frame goes back on. A frame is
//! `{"protocol": N, "body": …}`: a node reads the version before anything else, so a node on
//! another protocol gets a clear refusal instead of a decoding error or, worse, a misread.

use ractor::message::{BoxedDowncastErr, SerializedMessage};
use ractor::{Message, RpcReplyPort};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use troupe_protocol::ResponseFormat;
use troupe_protocol::ToolDefinition;
use troupe_runtime::AskError;

/// The troupe wire protocol this build speaks. Bump it with any change to `WireRequest` or
/// `WireReply` that an older node would misread. 2: an agent's model error travels as the
/// typed `ModelError` (`AgentError::Model`), and a compaction request names its focus `focus`.
/// (A delivery's `response_format` is not a new version: a node without it ignores the field
/// and runs the ask unconstrained, and the asker checks the answer either way.)
pub const WIRE_PROTOCOL: u32 = 2;

/// The largest JSON Schema a delivery may carry, serialized: schemas derived from answer types
/// are a few KiB, and a peer's schema reaches the model's request (and a local model's grammar
/// compiler), so one no real type needs is refused at the door.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;

/// The variant name ractor carries with a serialized call (it must match on both ends).
const CALL_VARIANT: &str = "troupe.call";

/// The gateway's mailbox: one framed request and where its framed reply goes.
pub(crate) enum GatewayMsg {
    Call {
        frame: Vec<u8>,
        reply: RpcReplyPort<Vec<u8>>,
    },
}

impl Message for GatewayMsg {
    fn serializable() -> bool {
        true
    }

    fn serialize(self) -> Result<SerializedMessage, BoxedDowncastErr> {
        let GatewayMsg::Call { frame, reply } = self;
        Ok(SerializedMessage::Call {
            variant: CALL_VARIANT.to_string(),
            args: frame,
            reply,
            metadata: None,
        })
    }

    fn deserialize(message: SerializedMessage) -> Result<Self, BoxedDowncastErr> {
        match message {
            SerializedMessage::Call {
                variant,
                args,
                reply,
                ..
            } if variant == CALL_VARIANT => Ok(GatewayMsg::Call { frame: args, reply }),
            _ => Err(BoxedDowncastErr),
        }
    }
}

/// A request from one node's route to another node's gateway.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum WireRequest {
    /// Hand a request to a local agent; answered at once with [`WireReply::Accepted`] (the
    /// acknowledgement), the work goes on after. Boxed: it is most of what the enum holds, and
    /// serde writes a box as its content, so the frame is the same.
    Deliver(Box<Delivery>),
    /// Wait for the answer to a delivered request, at most `timeout_ms`.
    Await { request_id: String, timeout_ms: u64 },
    /// Which protocol and name the node has (sent when nodes connect).
    Hello { node: String },
}

/// One request for an agent, as it travels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Delivery {
    /// Unique per request: a delivery seen twice is acknowledged, not handled twice.
    pub(crate) request_id: String,
    /// The agent asked.
    pub(crate) agent: String,
    /// The asking agent, or `None` for a program/user.
    pub(crate) from: Option<String>,
    /// The request text, or a job's JSON when `job_kind` is set.
    pub(crate) text: String,
    /// A typed job's kind (`WireJob::KIND`): the agent is given that job, not text.
    #[serde(default)]
    pub(crate) job_kind: Option<String>,
    /// W3C `traceparent`: the request's trace and the sending span on the asking node.
    pub(crate) traceparent: String,
    /// The asking node's name (for the receiving side's traces and errors).
    pub(crate) from_node: String,
    /// How long the asker waits; the receiving side stops waiting for the agent after it.
    pub(crate) timeout_ms: u64,
    /// `false` for a `send`: nobody will await the answer, so none is kept.
    pub(crate) wants_answer: bool,
    /// A typed ask's answer format, for every model call the agent makes for it. Absent from
    /// older nodes' deliveries (and left out when `None`, so untyped frames are unchanged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) response_format: Option<WireResponseFormat>,
}

/// A [`ResponseFormat`] as it travels; [`WireResponseFormat::checked`] turns a peer's back into
/// one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct WireResponseFormat {
    pub(crate) name: String,
    pub(crate) schema: serde_json::Value,
    #[serde(default)]
    pub(crate) strict: bool,
}

impl From<ResponseFormat> for WireResponseFormat {
    fn from(format: ResponseFormat) -> Self {
        WireResponseFormat {
            name: format.name,
            schema: format.schema,
            strict: format.strict,
        }
    }
}

impl WireResponseFormat {
    /// The format, if it is one this node's models can be given: a name as
    /// [`ResponseFormat::of`] makes them (1 to 64 of `[A-Za-z0-9_-]`, what OpenAI accepts), a
    /// schema that is a JSON object of at most [`MAX_SCHEMA_BYTES`]. Otherwise why not.
    pub(crate) fn checked(self) -> Result<ResponseFormat, String> {
        let name_ok = (1..=ToolDefinition::MAX_NAME).contains(&self.name.len())
            && self.name.chars().all(ToolDefinition::is_name_char);
        if !name_ok {
            return Err(format!(
                "response format name {:?} is not 1 to 64 of [A-Za-z0-9_-]",
                self.name.chars().take(80).collect::<String>()
            ));
        }
        if !self.schema.is_object() {
            return Err("response format schema is not a JSON object".to_string());
        }
        let size = serde_json::to_vec(&self.schema).map_or(usize::MAX, |bytes| bytes.len());
        if size > MAX_SCHEMA_BYTES {
            return Err(format!(
                "response format schema is {size} bytes, more than {MAX_SCHEMA_BYTES}"
            ));
        }
        Ok(ResponseFormat {
            name: self.name,
            schema: self.schema,
            strict: self.strict,
        })
    }
}

/// A gateway's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum WireReply {
    /// The delivery was taken (or had been taken before: deliveries are not handled twice).
    Accepted,
    /// The agent's answer, or the error a local ask there gave.
    Answer(Result<String, AskError>),
    /// No delivery of that id is known (never delivered, or its answer was already dropped).
    UnknownRequest,
    /// The node's name and protocol, answering [`WireRequest::Hello`].
    Hello { node: String },
    /// The frame could not be taken: another protocol version, or a malformed body.
    Refused(String),
}

#[derive(Serialize)]
struct FrameOut<'a, T> {
    protocol: u32,
    body: &'a T,
}

#[derive(Deserialize)]
struct FrameIn {
    protocol: u32,
    body: serde_json::Value,
}

/// Why a frame could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The sender speaks another version of the troupe wire protocol.
    #[error("the peer speaks troupe wire protocol {theirs}, this node speaks {WIRE_PROTOCOL}")]
    Protocol {
        /// The sender's version.
        theirs: u32,
    },
    /// Not a troupe frame, or a body this version cannot read.
    #[error("malformed troupe frame: {0}")]
    Malformed(String),
}

/// `body` framed with this build's protocol version.
pub(crate) fn encode<T: Serialize>(body: &T) -> Vec<u8> {
    encode_as(WIRE_PROTOCOL, body)
}

/// `body` framed as protocol `protocol` (tests speak other versions with it).
pub(crate) fn encode_as<T: Serialize>(protocol: u32, body: &T) -> Vec<u8> {
    // Serializing plain data (strings, numbers, enums) into a Vec cannot fail.
    serde_json::to_vec(&FrameOut { protocol, body }).unwrap_or_default()
}

/// The body of a frame, checked to be of this build's protocol version first.
pub(crate) fn decode<T: DeserializeOwned>(frame: &[u8]) -> Result<T, FrameError> {
    let frame: FrameIn =
        serde_json::from_slice(frame).map_err(|e| FrameError::Malformed(e.to_string()))?;
    if frame.protocol != WIRE_PROTOCOL {
        return Err(FrameError::Protocol {
            theirs: frame.protocol,
        });
    }
    serde_json::from_value(frame.body).map_err(|e| FrameError::Malformed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery() -> Delivery {
        Delivery {
            request_id: "r1".into(),
            agent: "worker".into(),
            from: Some("lead".into()),
            text: "hello ✓".into(),
            job_kind: None,
            traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into(),
            from_node: "a".into(),
            timeout_ms: 1000,
            wants_answer: true,
            response_format: None,
        }
    }

    /// A typed ask's format, as `ResponseFormat::of` makes one.
    fn format() -> WireResponseFormat {
        WireResponseFormat {
            name: "City".into(),
            schema: serde_json::json!({
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"]
            }),
            strict: false,
        }
    }

    #[test]
    fn a_frame_round_trips() {
        let request = WireRequest::Deliver(Box::new(delivery()));
        assert_eq!(decode::<WireRequest>(&encode(&request)), Ok(request));
        let typed = WireRequest::Deliver(Box::new(Delivery {
            response_format: Some(format()),
            ..delivery()
        }));
        assert_eq!(decode::<WireRequest>(&encode(&typed)), Ok(typed));
        let reply = WireReply::Answer(Err(AskError::NodeDown { node: "b".into() }));
        assert_eq!(decode::<WireReply>(&encode(&reply)), Ok(reply));
    }

    #[test]
    fn another_protocol_version_is_refused_by_name_before_its_body_is_read() {
        let frame = encode_as(WIRE_PROTOCOL + 1, &serde_json::json!({"whatever": [1, 2]}));
        let error = decode::<WireRequest>(&frame).unwrap_err();
        assert_eq!(
            error,
            FrameError::Protocol {
                theirs: WIRE_PROTOCOL + 1
            }
        );
        let theirs = format!("protocol {}", WIRE_PROTOCOL + 1);
        assert!(error.to_string().contains(&theirs), "{error}");
    }

    #[test]
    fn a_delivery_from_a_node_without_response_formats_still_decodes() {
        // What a node of this protocol without typed asks sends: no `response_format` key.
        let mut body = serde_json::to_value(WireRequest::Deliver(Box::new(delivery()))).unwrap();
        let fields = body["Deliver"].as_object_mut().unwrap();
        assert!(
            !fields.contains_key("response_format"),
            "untyped frames unchanged"
        );
        let decoded = decode::<WireRequest>(&encode(&body)).unwrap();
        assert_eq!(decoded, WireRequest::Deliver(Box::new(delivery())));
    }

    #[test]
    fn a_peers_response_format_is_checked_before_it_reaches_a_model() {
        let checked = format().checked().unwrap();
        assert_eq!(checked.name, "City");
        assert_eq!(checked.schema, format().schema);
        let refused = |format: WireResponseFormat| format.checked().unwrap_err();
        for name in ["", "a b", "x\u{202e}", &"n".repeat(65)] {
            let reason = refused(WireResponseFormat {
                name: name.to_string(),
                ..format()
            });
            assert!(reason.contains("name"), "{reason}");
        }
        let reason = refused(WireResponseFormat {
            schema: serde_json::json!("anything"),
            ..format()
        });
        assert!(reason.contains("not a JSON object"), "{reason}");
        let huge = serde_json::json!({"description": "x".repeat(MAX_SCHEMA_BYTES)});
        let reason = refused(WireResponseFormat {
            schema: huge,
            ..format()
        });
        assert!(reason.contains("more than 65536"), "{reason}");
    }

    #[test]
    fn garbage_is_malformed_not_a_panic() {
        assert!(matches!(
            decode::<WireRequest>(b"\x00\x01not json"),
            Err(FrameError::Malformed(_))
        ));
        assert!(matches!(
            decode::<WireRequest>(&encode(&serde_json::json!({"Deliver": {"agent": 3}}))),
            Err(FrameError::Malformed(_))
        ));
    }
}
