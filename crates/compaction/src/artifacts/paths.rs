//! File paths an agent named: in the arguments of the shell commands it ran (`cd`, `cat`,
//! `grep`, `sed`, `cp`, `mv` … — relative and partial ones such as `core/session.ts`
//! included), in path arguments of its other tools, and in its prose (backticked or not, and
//! in file trees it drew in code fences).
//!
//! Two spellings of one file (`/repo/src/a.py` and `src/a.py`) are kept once, in the longer
//! form: it names the shorter one too.

use super::ledger::Recent;

/// At most this many paths are taken from one message or command.
pub(super) const PATHS_PER_SOURCE: usize = 64;

/// Extensions that make a bare word a file name (`setup.py`, `README.md`).
const EXTENSIONS: [&str; 40] = [
    "rs", "py", "pyi", "pyx", "ts", "tsx", "js", "jsx", "mjs", "cjs", "json", "jsonl", "md", "rst",
    "toml", "yaml", "yml", "txt", "sh", "c", "h", "cc", "cpp", "hpp", "go", "java", "kt", "rb",
    "php", "cfg", "ini", "lock", "html", "css", "scss", "sql", "xml", "csv", "proto", "log",
];

/// How sure the place a word was found makes us that it is meant as a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Where {
    /// The value of a tool's path argument: a path whatever its shape.
    Argument,
    /// An argument of a shell command: a path when it has a `/` or a file extension.
    Shell,
    /// The agent's prose: only shapes prose rarely has otherwise (`and/or` is not a path).
    Prose,
}

/// The extension of a path's last segment (`a.py` → `py`).
fn extension(path: &str) -> Option<&str> {
    let last = path.rsplit('/').next()?;
    let (stem, ext) = last.rsplit_once('.')?;
    let ok = !stem.is_empty()
        && (1..=8).contains(&ext.len())
        && ext.chars().all(|c| c.is_ascii_alphanumeric())
        && ext.chars().any(|c| c.is_ascii_alphabetic());
    ok.then_some(ext)
}

/// `word` as a path found at `place`, normalized (a leading `./`, a trailing `/`, a location
/// suffix `:12` and sentence punctuation dropped), or `None`.
pub(super) fn path_in(word: &str, place: Where) -> Option<String> {
    if word.contains("://") || word.starts_with("http") {
        return None;
    }
    let word = word.split(':').next().unwrap_or_default();
    let word = word.trim_end_matches(['.', ',', ';', '!', '?']);
    let word = word.strip_prefix("./").unwrap_or(word);
    let word = word.trim_end_matches('/');
    let clean = word
        .chars()
        .all(|c| c.is_alphanumeric() || "/._-@+~".contains(c));
    if !clean
        || word.chars().count() < 3
        || word.contains("//")
        || !word.chars().any(char::is_alphabetic)
    {
        return None;
    }
    let known =
        extension(word).is_some_and(|e| EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()));
    if !word.contains('/') {
        return (place == Where::Argument || known).then(|| word.to_string());
    }
    let segments: Vec<&str> = word
        .split('/')
        .filter(|s| !s.is_empty() && !matches!(*s, "." | ".." | "~"))
        .collect();
    if segments.iter().all(|s| !s.chars().any(char::is_alphabetic)) {
        return None;
    }
    let rooted = word.starts_with(['/', '~']) || word.starts_with("../");
    let path = match place {
        Where::Argument | Where::Shell => true,
        Where::Prose => {
            extension(word).is_some() || segments.len() >= 3 || (rooted && segments.len() >= 2)
        }
    };
    path.then(|| word.to_string())
}

/// The paths among a shell command's arguments, first ones first; heredoc bodies (what the
/// command writes) are not arguments.
pub(super) fn paths_in_command(command: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in command_lines(command) {
        let words = line
            .split(|c: char| c.is_whitespace() || "'\"`;|&<>(){}$".contains(c))
            .flat_map(|w| w.split('='));
        for word in words {
            if let Some(path) = path_in(word, Where::Shell)
                && !found.contains(&path)
                && found.len() < PATHS_PER_SOURCE
            {
                found.push(path);
            }
        }
    }
    found
}

/// The lines of a shell command that are the command (heredoc bodies left out), and the
/// bodies apart.
pub(super) fn command_lines(command: &str) -> Vec<&str> {
    split_heredocs(command).0
}

/// The heredoc bodies of a shell command (`cat > x.py << 'EOF'` … `EOF`): text it writes.
pub(super) fn heredoc_bodies(command: &str) -> Vec<&str> {
    split_heredocs(command).1
}

fn split_heredocs(command: &str) -> (Vec<&str>, Vec<&str>) {
    let (mut lines, mut bodies) = (Vec::new(), Vec::new());
    let mut until: Option<String> = None;
    for line in command.lines() {
        if let Some(end) = &until {
            if line.trim() == end {
                until = None;
            } else {
                bodies.push(line);
            }
            continue;
        }
        lines.push(line);
        if let Some(at) = line.find("<<") {
            let rest = line[at + 2..].trim_start_matches(['-', '~']).trim_start();
            let delimiter: String = rest
                .trim_start_matches(['\'', '"'])
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !delimiter.is_empty() {
                until = Some(delimiter);
            }
        }
    }
    (lines, bodies)
}

/// The paths in an assistant message's prose, code fences included (file trees), first ones
/// first.
pub(super) fn paths_in_prose(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for word in text.split(|c: char| c.is_whitespace() || "`'\"()[]{}<>,;*|│├└─".contains(c))
    {
        if let Some(path) = path_in(word, Where::Prose)
            && !found.contains(&path)
            && found.len() < PATHS_PER_SOURCE
        {
            found.push(path);
        }
    }
    found
}

/// Whether `long` names `short` too: the same, or `short` is its tail after a `/`.
fn names(long: &str, short: &str) -> bool {
    long == short
        || (long.len() > short.len()
            && long.ends_with(short)
            && long.as_bytes()[long.len() - short.len() - 1] == b'/')
}

/// Record `path` as the newest path, one spelling per file: a spelling already kept that names
/// it is kept (and made the newest); spellings it names are replaced by it.
pub(super) fn record_path(paths: &mut Recent<()>, path: &str) {
    let kept = paths
        .oldest_first()
        .map(|(k, _)| k)
        .find(|k| names(k, path))
        .map(str::to_string);
    match kept {
        Some(longer) => paths.record(longer, ()),
        None => {
            paths.retain(|k| !names(path, k));
            paths.record(path, ());
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn shell_arguments_relative_and_partial_paths_and_no_heredoc_bodies() {
        let command = "cd /workspace/repo && cat core/session.ts | grep -n x src/a.ts; sed -n 1,9p README.md; cp a.py b/c.py 2>/dev/null; python --config=conf/dev.toml\ncat > gen/x.py << 'EOF'\nimport body/only.py\nEOF";
        assert_eq!(
            paths_in_command(command),
            [
                "/workspace/repo",
                "core/session.ts",
                "src/a.ts",
                "README.md",
                "a.py",
                "b/c.py",
                "/dev/null",
                "conf/dev.toml",
                "gen/x.py"
            ]
        );
        assert_eq!(heredoc_bodies(command), ["import body/only.py"]);
    }

    #[test]
    fn prose_paths_without_backticks_and_in_trees_but_not_urls_or_fractions() {
        let text = "See core/session.ts, `docs/a.md` and ./src/main.rs:12; /etc/app/conf too. \
                    Not and/or, 1/2 or https://x.com/a/b.html.\n```\npackages/\n├── tui/\n│   └── renderer.ts\n```";
        assert_eq!(
            paths_in_prose(text),
            [
                "core/session.ts",
                "docs/a.md",
                "src/main.rs",
                "/etc/app/conf",
                "renderer.ts"
            ]
        );
    }

    #[test]
    fn one_spelling_per_file_the_longer_one() {
        let mut paths = Recent::default();
        record_path(&mut paths, "src/a.py");
        record_path(&mut paths, "other.py");
        record_path(&mut paths, "/repo/src/a.py");
        record_path(&mut paths, "a.py");
        record_path(&mut paths, "ba.py");
        let kept: Vec<&str> = paths.oldest_first().map(|(k, _)| k).collect();
        assert_eq!(kept, ["other.py", "/repo/src/a.py", "ba.py"]);
    }
}
