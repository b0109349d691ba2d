//! `write_file`: create or replace a file, atomically (temporary file, then rename).

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::read_file::blocking;
use super::text::{line_count, sha256_hex};
use crate::context::ToolContext;
use crate::error::ToolError;
use crate::tool::Tool;
use crate::workspace::{FileError, RootDir};
use troupe_protocol::FileAccess;

/// The `write_file` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteFile;

/// Arguments of `write_file`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct WriteFileArgs {
    /// Path of the file, relative to the workspace root; missing parent directories are created.
    pub path: String,
    /// The complete new content of the file.
    pub content: String,
}

/// What `write_file` returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteFileOutput {
    /// The path relative to the workspace root.
    pub path: String,
    /// Bytes written.
    pub bytes: usize,
    /// Lines in the file now.
    pub line_count: usize,
    /// Hex sha256 of the file now.
    pub sha256: String,
    /// Whether the file did not exist before.
    pub created: bool,
}

#[async_trait]
impl Tool for WriteFile {
    type Args = WriteFileArgs;
    type Output = WriteFileOutput;

    fn name(&self) -> &str {
        "write_file"
    }

    fn description(&self) -> &str {
        "Create a file in the workspace, or replace an existing file's whole content. Prefer \
         edit_file for changing part of an existing file."
    }

    async fn call(
        &self,
        ctx: &ToolContext,
        args: WriteFileArgs,
    ) -> Result<WriteFileOutput, ToolError> {
        let root = RootDir::open(&ctx.root)?;
        let file = root.resolve(&args.path)?;
        let created = {
            let (file, content) = (file.clone(), args.content.clone());
            blocking(move || root.write_atomically(&file, content.as_bytes())).await?
        }
        .map_err(|e| match e {
            FileError::IsDirectory { path } => ToolError::respond(format!(
                "\"{path}\" is a directory; give the path of a file inside it"
            )),
            other => other.into(),
        })?;
        let lines = line_count(&args.content);
        let sha256 = sha256_hex(args.content.as_bytes());
        ctx.ledger.record(
            ctx.ledger_entry(file.relative.clone(), FileAccess::Written)
                .with_line_count(lines)
                .with_sha256(sha256.clone()),
        );
        Ok(WriteFileOutput {
            path: file.relative,
            bytes: args.content.len(),
            line_count: lines,
            sha256,
            created,
        })
    }
}
