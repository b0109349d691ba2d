//! A `tools/call` result as the text a model reads: text as is, structured content as JSON,
//! images, audio and resources described rather than dropped.

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::Value;

/// The text of `result`, one block per paragraph. Structured content is added as JSON unless a
/// text block already carries the same value (servers are asked to send both).
pub(crate) fn render(result: &CallToolResult) -> String {
    let mut parts: Vec<String> = result.content.iter().map(describe_block).collect();
    if let Some(structured) = &result.structured_content {
        let repeated = result.content.iter().any(|block| match block {
            ContentBlock::Text(text) => {
                serde_json::from_str::<Value>(&text.text).ok().as_ref() == Some(structured)
            }
            _ => false,
        });
        if !repeated {
            parts.push(format!("structured content: {structured}"));
        }
    }
    if parts.is_empty() {
        "(the tool returned no content)".to_string()
    } else {
        parts.join("\n\n")
    }
}

fn describe_block(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => format!(
            "[image: {}, {} bytes, not shown]",
            image.mime_type,
            decoded_len(&image.data)
        ),
        ContentBlock::Audio(audio) => format!(
            "[audio: {}, {} bytes, not played]",
            audio.mime_type,
            decoded_len(&audio.data)
        ),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents {
                uri,
                mime_type,
                text,
                ..
            } => format!("[resource {uri}{}]\n{text}", describe_mime(mime_type)),
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => format!(
                "[resource {uri}{}: {} bytes of binary data, not shown]",
                describe_mime(mime_type),
                decoded_len(blob)
            ),
            other => format!("[resource of an unknown kind: {}]", to_json(other)),
        },
        ContentBlock::ResourceLink(link) => {
            let about = link
                .description
                .as_deref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default();
            format!(
                "[resource link {} ({}{}){about}]",
                link.uri,
                link.name,
                describe_mime(&link.mime_type)
            )
        }
        other => format!("[content of an unknown kind: {}]", to_json(other)),
    }
}

/// A block troupe has no description for, as JSON, so nothing is dropped silently.
fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|e| format!("(not serializable: {e})"))
}

fn describe_mime(mime: &Option<String>) -> String {
    mime.as_deref()
        .map(|m| format!(", {m}"))
        .unwrap_or_default()
}

/// The size of base64 `data` once decoded (padding aware), without decoding it.
fn decoded_len(data: &str) -> usize {
    let trimmed = data.trim_end_matches('=');
    trimmed.len() * 3 / 4
}
