//! How an approval rule reads a string argument: as a shell command line, so that a rule about
//! `rm ` also sees `rm\t-rf x`, `/bin/rm x`, `"rm" x`, `env sudo rm x` and `true; rm x`.
//!
//! The reading is a shell's first pass, not a shell: quotes and backslashes are removed, the
//! line is cut into commands at `;`, `&`, `|`, newlines and parentheses, command and process
//! substitutions (`$(…)`, `` `…` ``, `<(…)`) and `sh -c '…'` / `eval …` strings are read as
//! command lines of their own, redirections and leading `NAME=value` assignments are skipped,
//! and each command is seen from its program's base name. What a line hides beyond that (a
//! program named by a variable, a script the command writes first, an alias) is out of reach:
//! [`CommandLine::has_hidden_program`] says when a program cannot be read, and the policy then
//! never allows on a rule's word (see `super::ApprovalRule`).

mod lexer;

use lexer::{Lexer, Word};

/// Programs that run the rest of their words as a command (`sudo rm x`): every later word may
/// be that command's program.
const WRAPPERS: &[&str] = &[
    "builtin", "chroot", "command", "doas", "env", "exec", "ionice", "nice", "nohup", "setsid",
    "stdbuf", "sudo", "time", "timeout", "unbuffer", "xargs",
];

/// `find`'s actions that run a command of their own.
const FIND_EXEC: &[&str] = &["-exec", "-execdir", "-ok", "-okdir"];

/// Shells whose `-c` argument is a command line of its own.
const SHELLS: &[&str] = &["ash", "bash", "dash", "ksh", "mksh", "sh", "zsh", "busybox"];

/// Reserved words that may stand before a command's program (`if rm x; then …`).
const KEYWORDS: &[&str] = &[
    "!", "{", "}", "if", "then", "else", "elif", "do", "while", "until",
];

/// How deep substitutions and `sh -c` strings are followed before the line counts as hidden.
const MAX_DEPTH: usize = 8;

/// The commands a command line runs, as far as reading it tells.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CommandLine {
    /// Each simple command's words (assignments, keywords and redirections left out).
    commands: Vec<Vec<Word>>,
    /// A substitution or `sh -c` string nested past [`MAX_DEPTH`], or left unclosed.
    unreadable: bool,
}

impl CommandLine {
    /// Read `line`.
    pub(crate) fn read(line: &str) -> Self {
        let mut out = CommandLine::default();
        out.read_into(line, 0);
        out
    }

    fn read_into(&mut self, line: &str, depth: usize) {
        if depth > MAX_DEPTH {
            self.unreadable = true;
            return;
        }
        let mut lexer = Lexer::new(line);
        lexer.run();
        if lexer.unclosed {
            self.unreadable = true;
        }
        for inner in &lexer.substitutions {
            self.read_into(inner, depth + 1);
        }
        for words in lexer.commands {
            let words = strip_prefix_words(words);
            if words.is_empty() {
                continue;
            }
            for nested in nested_lines(&words) {
                self.read_into(&nested, depth + 1);
            }
            self.commands.push(words);
        }
    }

    /// Whether some command's program is unknown until the shell runs (`$PROG x`,
    /// `$(echo rm) x`), or part of the line could not be read.
    pub(crate) fn has_hidden_program(&self) -> bool {
        self.unreadable
            || self
                .commands
                .iter()
                .any(|words| program_positions(words).any(|i| words[i].expands))
    }

    /// Whether any command, seen from any word that may be its program, starts with `prefix`.
    pub(crate) fn any_command_starts_with(&self, prefix: &str) -> bool {
        let prefix = collapse_spaces(prefix);
        self.commands.iter().any(|words| {
            program_positions(words)
                .any(|i| candidates(&words[i..]).any(|c| c.starts_with(&prefix)))
        })
    }

    /// Whether there is a command, and every one, seen from its first program, starts with
    /// `prefix` (with its program as written or by its base name).
    pub(crate) fn every_command_starts_with(&self, prefix: &str) -> bool {
        let prefix = collapse_spaces(prefix);
        !self.commands.is_empty()
            && self
                .commands
                .iter()
                .all(|words| candidates(words).any(|c| c.starts_with(&prefix)))
    }
}

/// The word positions that may be a command's program: the first; after a wrapper every later
/// one (`sudo -u root rm x`: `-u`, `root` and `rm` all may be); and `find`'s `-exec` command.
fn program_positions(words: &[Word]) -> impl Iterator<Item = usize> + '_ {
    let program = words.first().map_or("", |w| base_name(&w.text));
    let wrapped = WRAPPERS.contains(&program);
    let find = program == "find";
    (0..words.len()).filter(move |&i| {
        i == 0 || wrapped || (find && FIND_EXEC.contains(&words[i - 1].text.as_str()))
    })
}

/// The texts a command starting at `words[0]` is matched as: as written, and with its
/// program's base name; words joined by one space.
fn candidates(words: &[Word]) -> impl Iterator<Item = String> + '_ {
    let rest: Vec<&str> = words.iter().skip(1).map(|w| w.text.as_str()).collect();
    let rest = rest.join(" ");
    let join = move |program: &str| {
        if rest.is_empty() {
            program.to_string()
        } else {
            format!("{program} {rest}")
        }
    };
    let program = words.first().map_or("", |w| w.text.as_str());
    let written = join(program);
    let base = (base_name(program) != program).then(|| join(base_name(program)));
    std::iter::once(written).chain(base)
}

/// `/bin/rm` → `rm`.
fn base_name(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// Runs of whitespace as one space: a rule's `rm  -rf` is `rm -rf`, as the command is read.
fn collapse_spaces(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    for c in text.trim_start().chars() {
        if c.is_whitespace() {
            space = true;
        } else {
            if space && !out.is_empty() {
                out.push(' ');
            }
            space = false;
            out.push(c);
        }
    }
    // A trailing space says "the word ends here" (`rm ` is not `rmdir`): keep one.
    if space && !out.is_empty() {
        out.push(' ');
    }
    out
}

/// A command's words without the assignments and reserved words before its program.
fn strip_prefix_words(words: Vec<Word>) -> Vec<Word> {
    let skip = words
        .iter()
        .take_while(|w| {
            !w.expands && (is_assignment(&w.text) || KEYWORDS.contains(&w.text.as_str()))
        })
        .count();
    words.into_iter().skip(skip).collect()
}

/// `NAME=value`.
fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else {
        return false;
    };
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Command lines a command runs from its words: `sh -c 'LINE'` (a shell's `-c` string, behind
/// any wrappers) and `eval WORDS…`.
fn nested_lines(words: &[Word]) -> Vec<String> {
    let mut lines = Vec::new();
    for i in program_positions(words) {
        let program = base_name(&words[i].text);
        if program == "eval" {
            let rest: Vec<&str> = words[i + 1..].iter().map(|w| w.text.as_str()).collect();
            lines.push(rest.join(" "));
        } else if SHELLS.contains(&program) {
            // `-c`, or a cluster of flags holding it (`-ec`, `-lc`): the next plain word.
            let after = words[i + 1..].iter().skip_while(|w| {
                !(w.text.starts_with('-') && !w.text.starts_with("--") && w.text.contains('c'))
            });
            if let Some(line) = after.skip(1).find(|w| !w.text.starts_with('-')) {
                lines.push(line.text.clone());
            }
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::CommandLine;

    fn denies(line: &str) -> bool {
        let read = CommandLine::read(line);
        read.any_command_starts_with("rm ") || read.any_command_starts_with("sudo")
    }

    #[test]
    fn the_ways_around_a_prefix_are_read_as_the_command_they_run() {
        for line in [
            "rm x",
            "  rm x",
            "rm\t-rf x",
            "/bin/rm x",
            "./rm x",
            "\\rm x",
            "'rm' x",
            "\"rm\" x",
            "r''m x",
            "env sudo ls",
            "env -i PATH=/bin rm x",
            "sudo -u root rm x",
            "nohup nice -n 5 rm x &",
            "true; rm x",
            "true && rm x",
            "false || rm x",
            "ls | xargs rm -f",
            "ls & rm x",
            "(rm x)",
            "{ rm x; }",
            "if rm x; then :; fi",
            "X=1 rm x",
            "echo $(rm x)",
            "echo `rm x`",
            "cat <(rm x)",
            "sh -c 'rm x'",
            "bash -lc \"rm x\"",
            "eval rm x",
            "echo hi >/dev/null; rm x 2>&1",
            "> out rm x",
            "echo ok\nrm x",
            "time rm x",
            "find . -name '*.o' -exec rm {} +",
            "sudo ls",
        ] {
            assert!(denies(line), "{line:?} was not read as running rm or sudo");
        }
    }

    #[test]
    fn words_that_only_mention_a_program_are_not_its_command() {
        for line in [
            "ls",
            "echo rm x",
            "git commit -m 'rm old file'",
            "grep -r 'sudo' .",
            "rmdir x",
            "cat rm.txt",
            "# rm x",
            "echo 'a; rm x'",
            "echo \"rm x\" > notes.txt",
        ] {
            assert!(!denies(line), "{line:?} was read as running rm or sudo");
        }
    }

    #[test]
    fn a_program_named_by_an_expansion_is_hidden() {
        for line in [
            "$PROG x",
            "${PROG} x",
            "$(echo rm) x",
            "`echo rm` x",
            "echo 'x",
            "X=rm; \"$X\" y",
        ] {
            assert!(CommandLine::read(line).has_hidden_program(), "{line:?}");
        }
        for line in ["rm $HOME/x", "echo \"$(date)\"", "ls"] {
            assert!(!CommandLine::read(line).has_hidden_program(), "{line:?}");
        }
    }

    #[test]
    fn every_command_must_start_with_an_allowed_prefix() {
        let read = |l: &str| CommandLine::read(l).every_command_starts_with("ls");
        assert!(read("ls -la"));
        assert!(read("/bin/ls; ls x"));
        assert!(!read("ls; rm x"));
        assert!(!read("ls $(rm x)"));
        assert!(!read("ls | sh"));
        assert!(!read(""));
    }
}
