//! `tools/list`, page after page, within bounds: a server that paginates forever (or lists
//! without end) is refused with a clear reason instead of growing troupe's memory.

use std::collections::HashSet;

use rmcp::RoleClient;
use rmcp::model::{PaginatedRequestParams, Tool as McpToolInfo};

/// The most pages one listing may take.
pub(crate) const MAX_PAGES: usize = 1_000;

/// The most tools one server may offer.
pub(crate) const MAX_TOOLS: usize = 10_000;

/// The most bytes (as JSON) one server's tool definitions may take.
pub(crate) const MAX_LIST_BYTES: usize = 32 * 1024 * 1024;

/// Why a listing failed.
#[derive(Debug)]
pub(crate) enum ListError {
    /// The server answered with an error or the connection failed.
    Service(rmcp::ServiceError),
    /// The listing went past a bound.
    Unbounded(String),
}

impl std::fmt::Display for ListError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListError::Service(e) => write!(f, "{e}"),
            ListError::Unbounded(reason) => f.write_str(reason),
        }
    }
}

/// Every page of the server's tools, within [`MAX_PAGES`], [`MAX_TOOLS`] and [`MAX_LIST_BYTES`];
/// a cursor the server gave before ends the listing as an error too (it would loop).
pub(crate) async fn list_tools(
    peer: &rmcp::Peer<RoleClient>,
) -> Result<Vec<McpToolInfo>, ListError> {
    let mut tools = Vec::new();
    let mut bytes = 0usize;
    let mut cursors = HashSet::new();
    let mut cursor = None;
    for page in 1..=MAX_PAGES {
        let params = PaginatedRequestParams::default().with_cursor(cursor);
        let listed = peer
            .list_tools(Some(params))
            .await
            .map_err(ListError::Service)?;
        for tool in &listed.tools {
            bytes = bytes.saturating_add(serde_json::to_vec(tool).map_or(0, |json| json.len()));
        }
        tools.extend(listed.tools);
        if tools.len() > MAX_TOOLS {
            return Err(ListError::Unbounded(format!(
                "it lists more than {MAX_TOOLS} tools (the most troupe takes from one server)"
            )));
        }
        if bytes > MAX_LIST_BYTES {
            return Err(ListError::Unbounded(format!(
                "its tool definitions take more than {} MiB (the most troupe takes from one \
                 server)",
                MAX_LIST_BYTES / (1024 * 1024)
            )));
        }
        match listed.next_cursor {
            None => return Ok(tools),
            Some(next) if !cursors.insert(next.clone()) => {
                return Err(ListError::Unbounded(format!(
                    "its `tools/list` pages loop: page {page} gives again the cursor `{}`",
                    next.chars().take(64).collect::<String>()
                )));
            }
            Some(next) => cursor = Some(next),
        }
    }
    Err(ListError::Unbounded(format!(
        "its `tools/list` goes on past {MAX_PAGES} pages (the most troupe reads)"
    )))
}
