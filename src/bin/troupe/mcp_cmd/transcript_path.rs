//! `compact_transcript`'s `path`: a transcript file beneath the server's root, opened the way
//! the file tools open files (kept beneath the root by the kernel, regular files only, opened
//! without blocking on a FIFO or a device), no larger than [`MAX_TRANSCRIPT_BYTES`], read off
//! the async threads, and refused in words that never quote the file: the client may be
//! probing for files it should not see, so what a file holds must not come back in an error.

use std::io::Read as _;
use std::path::Path;
use std::sync::Arc;

use serde_json::error::Category;
use troupe::compaction::transcript::TranscriptError;
use troupe::tools::ToolError;
use troupe::tools::workspace::{EscapeKind, FileError, PathError, RootDir, WorkspacePath};
use troupe_cli::transcript_file::{TranscriptFile, TranscriptFileError};

/// The largest transcript file `path` may name.
pub(super) const MAX_TRANSCRIPT_BYTES: u64 = 32 * 1024 * 1024;

/// The directory `path` is confined to.
pub(super) struct TranscriptRoot {
    dir: RootDir,
}

impl TranscriptRoot {
    /// The root `dir`, opened once for the server's life.
    pub(super) fn open(dir: &Path) -> anyhow::Result<Arc<Self>> {
        let dir = dir
            .canonicalize()
            .map_err(|e| anyhow::anyhow!("--root {}: {e}", dir.display()))?;
        Ok(Arc::new(TranscriptRoot {
            dir: RootDir::open(&dir)?,
        }))
    }

    /// The root's path.
    pub(super) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The transcript at `requested` and its exact text, read on a blocking thread so that the
    /// call's timeout and cancellation stay in force.
    pub(super) async fn read(
        self: &Arc<Self>,
        requested: String,
    ) -> Result<(TranscriptFile, String), ToolError> {
        let root = self.clone();
        tokio::task::spawn_blocking(move || root.read_blocking(&requested))
            .await
            .map_err(|e| ToolError::respond(format!("reading the transcript failed: {e}")))?
    }

    fn read_blocking(&self, requested: &str) -> Result<(TranscriptFile, String), ToolError> {
        let path = self.dir.resolve(requested).map_err(|e| self.refusal(e))?;
        let bytes = self.read_bytes(&path)?;
        let name = &path.relative;
        let text = String::from_utf8(bytes).map_err(|e| {
            ToolError::respond(format!(
                "\"{name}\" is not UTF-8 text (the bytes after offset {} are not valid \
                 UTF-8), so it is not a transcript",
                e.utf8_error().valid_up_to()
            ))
        })?;
        let file = TranscriptFile::parse(Path::new(name), &text)
            .map_err(|e| ToolError::respond(not_a_transcript(name, &e)))?;
        Ok((file, text))
    }

    /// The whole file, refused before anything is read when it is not a regular file or is
    /// too large.
    fn read_bytes(&self, path: &WorkspacePath) -> Result<Vec<u8>, ToolError> {
        let name = &path.relative;
        let (file, stat) = self.dir.open_regular(path).map_err(|e| match e {
            FileError::NotRegular { kind, .. } => ToolError::respond(format!(
                "\"{name}\" is a {kind}, not a regular file; `path` names a transcript file"
            )),
            other => self.refusal(other),
        })?;
        let too_large = |size: String| {
            ToolError::respond(format!(
                "\"{name}\" is {size} bytes, more than the {MAX_TRANSCRIPT_BYTES} bytes a \
                 transcript `path` may have; give a smaller transcript"
            ))
        };
        let size = u64::try_from(stat.st_size).unwrap_or(u64::MAX);
        if size > MAX_TRANSCRIPT_BYTES {
            return Err(too_large(size.to_string()));
        }
        let mut bytes = Vec::new();
        // `take` holds the cap even if the file grows after the `fstat`.
        file.take(MAX_TRANSCRIPT_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| ToolError::respond(format!("cannot read \"{name}\": {e}")))?;
        if bytes.len() as u64 > MAX_TRANSCRIPT_BYTES {
            return Err(too_large("over".to_string()));
        }
        Ok(bytes)
    }

    /// A path refused by the confinement, saying which root it is confined to.
    fn refusal(&self, e: impl Into<FileError>) -> ToolError {
        let root = self.dir.path().display();
        let why = match e.into() {
            FileError::Path(PathError::Escape { requested, kind }) => {
                let how = match kind {
                    EscapeKind::AbsolutePath => "it is an absolute path outside the root",
                    EscapeKind::ParentTraversal => "its \"..\" components climb above the root",
                    EscapeKind::Symlink => "it goes through a symlink that points outside the root",
                };
                format!("path \"{requested}\" refused: {how}")
            }
            other => ToolError::from(other).to_string(),
        };
        ToolError::respond(format!(
            "{why}; troupe mcp serve reads transcripts only beneath {root} (its --root)"
        ))
    }
}

/// Why the text is not a transcript, without a word of the text: serde_json's own description
/// of a syntax error (which never quotes the input), or of a value of the wrong shape only
/// what was expected there, with the line and column either way.
fn not_a_transcript(name: &str, e: &TranscriptFileError) -> String {
    let shape = "not an OpenAI-format transcript ({\"messages\": [...]} or a message array)";
    let TranscriptFileError::Format {
        cause: TranscriptError::Format(json),
        ..
    } = e
    else {
        return format!("\"{name}\" is {shape}");
    };
    let (line, column) = (json.line(), json.column());
    let full = json.to_string();
    let bare = full
        .strip_suffix(&format!(" at line {line} column {column}"))
        .unwrap_or(&full);
    let what = match json.classify() {
        Category::Syntax | Category::Eof => format!("invalid JSON: {bare}"),
        Category::Data => wrong_value(bare),
        Category::Io => "a read error".to_string(),
    };
    format!("\"{name}\" is {shape}: {what} at line {line}, column {column}")
}

/// serde's messages for a value of the wrong shape name the value found (`invalid type:
/// string "…", expected …`): keep only what was expected, which comes from troupe's types.
fn wrong_value(message: &str) -> String {
    const QUOTING: [&str; 5] = [
        "invalid type: ",
        "invalid value: ",
        "invalid length ",
        "unknown variant ",
        "unknown field ",
    ];
    // Field names in these come from troupe's types, not from the file.
    if message.starts_with("missing field ") || message.starts_with("duplicate field ") {
        return message.to_string();
    }
    if QUOTING.iter().any(|p| message.starts_with(p))
        && let Some((_, expected)) = message.rsplit_once(", expected ")
    {
        return format!("a value that does not fit there (expected {expected})");
    }
    "a value that does not fit there".to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn refusal(text: &str) -> String {
        let e = TranscriptFile::parse(Path::new("t.json"), text).unwrap_err();
        not_a_transcript("t.json", &e)
    }

    #[test]
    fn a_refusal_never_quotes_the_file() {
        let secret = "root:$6$saltsalt$hashhashhash:19000:0:99999:7:::";
        for text in [
            format!("{secret}\n"),
            format!("{{\"messages\": \"{secret}\"}}"),
            format!("[{{\"role\": \"{secret}\", \"content\": \"x\"}}]"),
            format!("[{{\"role\": \"user\", \"content\": 5, \"{secret}\": 1}}]"),
            format!("[\"{secret}\"]"),
            format!("{{\"messages\": [], \"{secret}\": [}}"),
        ] {
            let message = refusal(&text);
            assert!(!message.contains("saltsalt"), "{message}");
            assert!(message.contains("line 1, column"), "{message}");
        }
    }

    #[test]
    fn a_refusal_says_what_was_expected_where() {
        let message = refusal("{\"messages\": \"x\"}");
        assert!(message.contains("expected a sequence"), "{message}");
        let message = refusal("{\"messages\": [\n}");
        assert!(message.contains("invalid JSON"), "{message}");
        assert!(message.contains("line 2, column 1"), "{message}");
    }
}
