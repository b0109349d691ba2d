//! `troupe compact` and `expand` on generated transcripts in a temporary directory.

use std::path::{Path, PathBuf};

use serde_json::json;
use troupe_cli::transcript_file::TranscriptFile;

use super::binary::{ok, s};

/// A transcript of `turns` tool-using turns whose tool outputs are big enough to compact in an
/// 8000-token window. `flavour` changes every text, so two transcripts of the same shape differ.
pub(crate) fn transcript(turns: usize, flavour: &str) -> String {
    let mut messages = vec![json!({"role": "system", "content": "You are a coding agent."})];
    for i in 0..turns {
        let output: Vec<String> = (0..120)
            .map(|j| {
                format!("fn {flavour}_{i}_{j}() {{ let x = {j} * {i}; println!(\"{{}}\", x); }}")
            })
            .collect();
        messages.push(json!({"role": "user", "content": format!("Step {i}: fix bug {i} in src/{flavour}{i}.rs.")}));
        messages.push(json!({
            "role": "assistant",
            "content": null,
            "tool_calls": [{
                "id": format!("call_{i}"),
                "type": "function",
                "function": {"name": "read_file", "arguments": format!("{{\"path\": \"src/{flavour}{i}.rs\"}}")}
            }]
        }));
        messages.push(json!({"role": "tool", "tool_call_id": format!("call_{i}"), "content": output.join("\n")}));
        messages.push(json!({"role": "assistant", "content": format!("Fixed bug {i} in src/{flavour}{i}.rs.")}));
    }
    // serde_json's maps sort keys; troupe writes `role` first. Written in troupe's layout, the
    // file can come back byte for byte.
    let text = serde_json::to_string_pretty(&json!({ "messages": messages })).unwrap();
    TranscriptFile::parse(Path::new("generated.json"), &text)
        .unwrap()
        .to_text()
        .unwrap()
}

pub(crate) struct Fixture {
    pub(crate) dir: tempfile::TempDir,
}

impl Fixture {
    pub(crate) fn new() -> Self {
        Fixture {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes a transcript named `name` and returns its path.
    pub(crate) fn input(&self, name: &str, flavour: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, transcript(8, flavour)).unwrap();
        path
    }

    /// Compacts `input` to `out` + `archive` (which must succeed).
    pub(crate) fn compact(&self, input: &Path, out: &Path, archive: &Path) {
        ok(&compact_args(input, out, archive));
    }

    /// Expands `small` with `archive` into `restored` (which must succeed); returns stdout.
    pub(crate) fn expand(&self, small: &Path, archive: &Path, restored: &Path) -> String {
        ok(&[
            "expand",
            s(small),
            "--archive",
            s(archive),
            "--out",
            s(restored),
        ])
    }

    /// The names in the directory, sorted (to see that nothing, not even a temp file, was left).
    pub(crate) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

pub(crate) fn compact_args<'a>(input: &'a Path, out: &'a Path, archive: &'a Path) -> Vec<&'a str> {
    vec![
        "compact",
        s(input),
        "--window",
        "8000",
        "--model",
        "none",
        "--out",
        s(out),
        "--archive",
        s(archive),
    ]
}
