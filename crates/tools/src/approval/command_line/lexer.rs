//! The first pass of a shell over one command line, as an approval rule needs it: words with
//! quotes and backslashes removed, the simple commands they form (cut at `;`, `&`, `|`, newlines
//! and parentheses, redirections left out), and the text of every substitution, which the caller
//! reads as a command line of its own.

/// One word of a command: its text with quotes removed, and whether an expansion (`$X`,
/// `$(…)`, a backquote) makes part of it unknown until the shell runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Word {
    pub(super) text: String,
    pub(super) expands: bool,
}

/// The first pass over one command line: words, the commands they form, and the text of every
/// substitution in it (read as command lines of their own by the caller).
pub(super) struct Lexer<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    pub(super) commands: Vec<Vec<Word>>,
    words: Vec<Word>,
    word: Option<Word>,
    /// The next word is a redirection's target, not an argument.
    redirect: bool,
    pub(super) substitutions: Vec<String>,
    /// A quote or substitution was left open at the end of the line.
    pub(super) unclosed: bool,
}

impl<'a> Lexer<'a> {
    pub(super) fn new(line: &'a str) -> Self {
        Lexer {
            chars: line.chars().peekable(),
            commands: Vec::new(),
            words: Vec::new(),
            word: None,
            redirect: false,
            substitutions: Vec::new(),
            unclosed: false,
        }
    }

    pub(super) fn run(&mut self) {
        while let Some(c) = self.chars.next() {
            match c {
                '\\' => match self.chars.next() {
                    // A line continuation joins the lines.
                    Some('\n') | None => {}
                    Some(escaped) => self.push(escaped),
                },
                '\'' => {
                    self.touch();
                    self.single_quoted();
                }
                '"' => {
                    self.touch();
                    self.double_quoted();
                }
                '`' => self.backquoted(),
                '$' => self.dollar(),
                '#' if self.word.is_none() => {
                    // A comment runs to the end of the line.
                    while self.chars.peek().is_some_and(|&c| c != '\n') {
                        self.chars.next();
                    }
                }
                '<' | '>' => self.redirection(c),
                ';' | '&' | '|' | '\n' | '(' | ')' => self.end_command(),
                c if c.is_whitespace() => self.end_word(),
                c => self.push(c),
            }
        }
        self.end_command();
    }

    fn push(&mut self, c: char) {
        self.touch();
        if let Some(word) = &mut self.word {
            word.text.push(c);
        }
    }

    /// A word starts here (a quoted empty string is a word too).
    fn touch(&mut self) {
        if self.word.is_none() {
            self.word = Some(Word {
                text: String::new(),
                expands: false,
            });
        }
    }

    fn expands(&mut self) {
        self.touch();
        if let Some(word) = &mut self.word {
            word.expands = true;
        }
    }

    fn end_word(&mut self) {
        if let Some(word) = self.word.take() {
            if std::mem::take(&mut self.redirect) {
                return;
            }
            self.words.push(word);
        }
    }

    fn end_command(&mut self) {
        self.end_word();
        self.redirect = false;
        if !self.words.is_empty() {
            self.commands.push(std::mem::take(&mut self.words));
        }
    }

    fn single_quoted(&mut self) {
        loop {
            match self.chars.next() {
                Some('\'') => return,
                Some(c) => self.push(c),
                None => {
                    self.unclosed = true;
                    return;
                }
            }
        }
    }

    fn double_quoted(&mut self) {
        loop {
            match self.chars.next() {
                Some('"') => return,
                Some('\\') => match self.chars.next() {
                    Some(c @ ('"' | '\\' | '$' | '`')) => self.push(c),
                    Some('\n') => {}
                    Some(c) => {
                        self.push('\\');
                        self.push(c);
                    }
                    None => {
                        self.unclosed = true;
                        return;
                    }
                },
                Some('$') => self.dollar(),
                Some('`') => self.backquoted(),
                Some(c) => self.push(c),
                None => {
                    self.unclosed = true;
                    return;
                }
            }
        }
    }

    /// `$NAME`, `${…}`, `$(…)`, `$((…))`, or a lone `$`.
    fn dollar(&mut self) {
        match self.chars.peek() {
            Some('(') => {
                self.chars.next();
                self.expands();
                if let Some(inner) = self.parenthesized() {
                    self.substitutions.push(inner);
                }
            }
            Some('{') => {
                self.chars.next();
                self.expands();
                for c in self.chars.by_ref() {
                    if c == '}' {
                        return;
                    }
                }
                self.unclosed = true;
            }
            Some(&c) if c.is_ascii_alphanumeric() || "_@*#?$!-".contains(c) => {
                self.expands();
                if c.is_ascii_alphabetic() || c == '_' {
                    while self
                        .chars
                        .peek()
                        .is_some_and(|&c| c.is_ascii_alphanumeric() || c == '_')
                    {
                        self.chars.next();
                    }
                } else {
                    self.chars.next();
                }
            }
            _ => self.push('$'),
        }
    }

    /// The text up to the `)` that closes an opened `(` (nested ones and quotes respected).
    fn parenthesized(&mut self) -> Option<String> {
        let mut depth = 1usize;
        let mut inner = String::new();
        let mut quote: Option<char> = None;
        while let Some(c) = self.chars.next() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some('"'), '\\') => {
                    inner.push(c);
                    if let Some(next) = self.chars.next() {
                        inner.push(next);
                    }
                    continue;
                }
                (Some(_), _) => {}
                (None, '\'' | '"') => quote = Some(c),
                (None, '\\') => {
                    inner.push(c);
                    if let Some(next) = self.chars.next() {
                        inner.push(next);
                    }
                    continue;
                }
                (None, '(') => depth += 1,
                (None, ')') => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(inner);
                    }
                }
                (None, _) => {}
            }
            inner.push(c);
        }
        self.unclosed = true;
        None
    }

    fn backquoted(&mut self) {
        self.expands();
        let mut inner = String::new();
        while let Some(c) = self.chars.next() {
            match c {
                '`' => {
                    self.substitutions.push(inner);
                    return;
                }
                '\\' => {
                    if let Some(next) = self.chars.next() {
                        inner.push(next);
                    }
                }
                c => inner.push(c),
            }
        }
        self.unclosed = true;
    }

    /// `>`, `>>`, `<`, `2>`, `&>`, `>&2`, `<(…)`, `>(…)`: the redirection's target is not an
    /// argument; a process substitution is a command line of its own.
    fn redirection(&mut self, c: char) {
        if self.chars.peek() == Some(&'(') {
            self.chars.next();
            self.end_word();
            if let Some(inner) = self.parenthesized() {
                self.substitutions.push(inner);
            }
            return;
        }
        // A file descriptor number right before it (`2>`) belongs to the redirection.
        if self.word.as_ref().is_some_and(|w| {
            !w.expands && !w.text.is_empty() && w.text.chars().all(|d| d.is_ascii_digit())
        }) {
            self.word = None;
        } else {
            self.end_word();
        }
        while self
            .chars
            .peek()
            .is_some_and(|&n| n == c || n == '&' || n == '|' || (c == '<' && n == '>'))
        {
            self.chars.next();
        }
        // `>&2`: the target is the descriptor just read.
        if self.chars.peek().is_some_and(char::is_ascii_digit) {
            while self
                .chars
                .peek()
                .is_some_and(|n| n.is_ascii_digit() || *n == '-')
            {
                self.chars.next();
            }
            return;
        }
        self.redirect = true;
        // Whitespace before the target is not the end of a word yet.
        while self.chars.peek().is_some_and(|&n| n == ' ' || n == '\t') {
            self.chars.next();
        }
    }
}
