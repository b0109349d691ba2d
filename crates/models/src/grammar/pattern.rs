//! A string schema's `pattern` (a regular expression anchored with `^...$`) as grammar rules,
//! ported from llama.cpp's `_visit_pattern` / `_pattern_to_rule`. It works on bytes as the C++
//! does: a literal may end inside a multi-byte character, which makes the grammar not UTF-8 (and
//! llama.cpp's converter refuse it, as this port does in `schema_to_grammar`).
//!
//! A pattern with no grammar equivalent (lookarounds, anchors inside, unsupported escapes) is
//! accepted as any string, with a warning; one that is not a valid regex refuses the schema.

use std::collections::HashMap;

use super::SchemaGrammarError;
use super::convert::Converter;
use super::primitives::primitive;
use super::ranges::repetition;

/// Why a pattern did not convert.
enum PatternError {
    /// A valid regex with no grammar equivalent: the string is left unconstrained.
    Unsupported(String),
    /// Not a valid regex: the schema is refused.
    Invalid(String),
}

const MAX_PATTERN_DEPTH: i32 = 100;

/// Characters that end a literal run.
fn is_non_literal(c: u8) -> bool {
    b"|.()[]{}*+?^$".contains(&c)
}

/// Characters a regex escapes that a grammar literal takes as they are.
fn escaped_in_regexps_but_not_in_literals(c: u8) -> bool {
    b"^$.[]()|{}*+?".contains(&c)
}

/// The length of the grammar escape at `pos` (`\x41`, `\u0041`, `\n`, `\-`, ...), 0 if there is
/// none the grammar parser knows (kept in step with llama.cpp's `parse_char`).
fn gbnf_escape_length(pattern: &[u8], pos: usize) -> usize {
    if pos + 1 >= pattern.len() || pattern[pos] != b'\\' {
        return 0;
    }
    let n_hex = match pattern[pos + 1] {
        b'x' => 2,
        b'u' => 4,
        b'U' => 8,
        b't' | b'r' | b'n' | b'\\' | b'"' | b'[' | b']' | b'-' => return 2,
        _ => return 0,
    };
    if pos + 2 + n_hex > pattern.len() {
        return 0;
    }
    if pattern[pos + 2..pos + 2 + n_hex]
        .iter()
        .all(u8::is_ascii_hexdigit)
    {
        2 + n_hex
    } else {
        0
    }
}

/// `std::stoi` on a repetition bound: leading whitespace, a sign, digits up to the first
/// non-digit; `None` where it throws (no digits, or outside `i32`).
fn stoi(text: &str) -> Option<i32> {
    let text = text.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let sign_len = usize::from(text.starts_with(['-', '+']));
    let digits = text[sign_len..]
        .bytes()
        .take_while(u8::is_ascii_digit)
        .count();
    if digits == 0 {
        return None;
    }
    text[..sign_len + digits].parse().ok()
}

/// A sequence item: literal text (to be quoted) or a rule expression.
type Item = (Vec<u8>, bool);

fn to_rule((text, is_literal): &Item) -> Vec<u8> {
    if *is_literal {
        [b"\"".as_slice(), text, b"\""].concat()
    } else {
        text.clone()
    }
}

fn non_literal(text: impl Into<Vec<u8>>) -> Item {
    (text.into(), false)
}

struct Transform<'c> {
    converter: &'c mut Converter,
    name: String,
    pattern: Vec<u8>,
    i: usize,
    paren_depth: i32,
    /// The rules made for repeated groups, shared by the whole pattern.
    sub_rule_ids: HashMap<Vec<u8>, String>,
}

impl Converter {
    /// The rule for a string matching `pattern`, named `name`.
    pub(super) fn visit_pattern(
        &mut self,
        pattern: &str,
        name: &str,
    ) -> Result<String, SchemaGrammarError> {
        let snapshot = self.rules.clone();
        match self.pattern_to_rule(pattern, name) {
            Ok(rule) => Ok(rule),
            Err(PatternError::Unsupported(reason)) => {
                self.rules = snapshot;
                tracing::warn!(
                    pattern,
                    reason,
                    "a JSON schema pattern has no grammar equivalent; accepting any string"
                );
                let rule = self.add_primitive("string", primitive("string"))?;
                Ok(self.add_rule(name, rule.into_bytes()))
            }
            Err(PatternError::Invalid(reason)) => {
                self.rules = snapshot;
                Err(SchemaGrammarError::InvalidPattern {
                    pattern: pattern.to_string(),
                    reason,
                })
            }
        }
    }

    fn pattern_to_rule(&mut self, pattern: &str, name: &str) -> Result<String, PatternError> {
        let bytes = pattern.as_bytes();
        if bytes.len() < 2 || bytes[0] != b'^' || bytes[bytes.len() - 1] != b'$' {
            return Err(PatternError::Unsupported(
                "not anchored with '^' and '$'".into(),
            ));
        }
        let mut transform = Transform {
            converter: self,
            name: name.to_string(),
            pattern: bytes[1..bytes.len() - 1].to_vec(),
            i: 0,
            paren_depth: 0,
            sub_rule_ids: HashMap::new(),
        };
        let rule = to_rule(&transform.transform()?);
        if transform.paren_depth != 0 {
            return Err(PatternError::Invalid("unbalanced parentheses".into()));
        }
        Ok(self.add_rule(
            name,
            [b"\"\\\"\" (".as_slice(), &rule, b") \"\\\"\""].concat(),
        ))
    }
}

impl Transform<'_> {
    fn dot(&mut self) -> String {
        // llama.cpp's json_schema_to_grammar converts without dotall.
        self.converter.add_rule("dot", b"[^\\x0A\\x0D]".to_vec())
    }

    fn transform(&mut self) -> Result<Item, PatternError> {
        let mut seq: Vec<Item> = Vec::new();
        let length = self.pattern.len();
        while self.i < length {
            let c = self.pattern[self.i];
            match c {
                b'.' => {
                    let dot = self.dot();
                    seq.push(non_literal(dot));
                    self.i += 1;
                }
                b'(' => {
                    self.i += 1;
                    if self.i < length && self.pattern[self.i] == b'?' {
                        if self.i + 1 < length && self.pattern[self.i + 1] == b':' {
                            // a non-capturing group is a group
                            self.i += 2;
                        } else {
                            return Err(PatternError::Unsupported(
                                "unsupported group syntax".into(),
                            ));
                        }
                    }
                    self.paren_depth += 1;
                    if self.paren_depth > MAX_PATTERN_DEPTH {
                        return Err(PatternError::Unsupported("pattern nesting too deep".into()));
                    }
                    let inner = to_rule(&self.transform()?);
                    seq.push(non_literal([b"(".as_slice(), &inner, b")"].concat()));
                }
                b')' => {
                    self.i += 1;
                    if self.paren_depth == 0 {
                        return Err(PatternError::Invalid("unbalanced parentheses".into()));
                    }
                    self.paren_depth -= 1;
                    return Ok(join_seq(&seq));
                }
                b'^' | b'$' => {
                    return Err(PatternError::Unsupported(
                        "anchor inside the pattern".into(),
                    ));
                }
                b'[' => seq.push(self.character_class()?),
                b'|' => {
                    seq.push(non_literal("|"));
                    self.i += 1;
                }
                b'*' | b'+' | b'?' => {
                    let Some(last) = seq.last_mut() else {
                        return Err(PatternError::Invalid("nothing to repeat".into()));
                    };
                    let mut rule = to_rule(last);
                    rule.push(c);
                    *last = non_literal(rule);
                    self.i += 1;
                }
                b'{' => self.curly_brackets(&mut seq)?,
                _ => seq.push(self.literal(c)?),
            }
        }
        Ok(join_seq(&seq))
    }

    fn character_class(&mut self) -> Result<Item, PatternError> {
        let length = self.pattern.len();
        let mut class = vec![b'['];
        self.i += 1;
        while self.i < length && self.pattern[self.i] != b']' {
            if self.pattern[self.i] == b'\\' {
                let escape = gbnf_escape_length(&self.pattern, self.i);
                if escape == 0 {
                    let end = (self.i + 2).min(length);
                    return Err(PatternError::Unsupported(format!(
                        "unsupported escape in character class: {}",
                        String::from_utf8_lossy(&self.pattern[self.i..end])
                    )));
                }
                class.extend_from_slice(&self.pattern[self.i..self.i + escape]);
                self.i += escape;
            } else {
                class.push(self.pattern[self.i]);
                self.i += 1;
            }
        }
        if self.i >= length {
            return Err(PatternError::Invalid("unterminated character class".into()));
        }
        class.push(b']');
        self.i += 1;
        Ok(non_literal(class))
    }

    fn curly_brackets(&mut self, seq: &mut [Item]) -> Result<(), PatternError> {
        let length = self.pattern.len();
        let start = self.i + 1;
        self.i += 1;
        while self.i < length && self.pattern[self.i] != b'}' {
            self.i += 1;
        }
        if self.i >= length {
            return Err(PatternError::Unsupported(
                "unterminated curly brackets".into(),
            ));
        }
        let inner = String::from_utf8_lossy(&self.pattern[start..self.i]).into_owned();
        self.i += 1;
        let nums: Vec<&str> = inner.split(',').collect();
        let (min_times, max_times) = match nums.as_slice() {
            [n] => {
                let n = stoi(n).ok_or_else(invalid_number)?;
                (n, n)
            }
            [min, max] => (
                if min.is_empty() {
                    0
                } else {
                    stoi(min).ok_or_else(invalid_number)?
                },
                if max.is_empty() {
                    i32::MAX
                } else {
                    stoi(max).ok_or_else(invalid_number)?
                },
            ),
            _ => {
                return Err(PatternError::Unsupported(
                    "wrong number of values in curly brackets".into(),
                ));
            }
        };
        let Some(last) = seq.last_mut() else {
            return Err(PatternError::Invalid("nothing to repeat".into()));
        };
        let (sub, is_literal) = last.clone();
        let item = if is_literal {
            [b"\"".as_slice(), &sub, b"\""].concat()
        } else {
            match self.sub_rule_ids.get(&sub) {
                Some(id) => id.clone().into_bytes(),
                None => {
                    let id_name = format!("{}-{}", self.name, self.sub_rule_ids.len() + 1);
                    let id = self.converter.add_rule(&id_name, sub.clone());
                    self.sub_rule_ids.insert(sub, id.clone());
                    id.into_bytes()
                }
            }
        };
        // The item is ASCII rule names or the pattern's own bytes; a lossless round trip
        // through `String` is not needed for `repetition`, which only wraps it.
        *last = non_literal(repeat_bytes(&item, min_times, max_times));
        Ok(())
    }

    fn literal(&mut self, c: u8) -> Result<Item, PatternError> {
        let length = self.pattern.len();
        let p = &self.pattern;
        let mut literal: Vec<u8> = Vec::new();
        while self.i < length {
            let i = self.i;
            if p[i] == b'\\' {
                if i == length - 1 {
                    return Err(PatternError::Invalid("trailing backslash".into()));
                }
                let next = p[i + 1];
                if escaped_in_regexps_but_not_in_literals(next) {
                    literal.push(next);
                    self.i += 2;
                } else {
                    let escape = gbnf_escape_length(p, i);
                    if escape == 0 {
                        return Err(PatternError::Unsupported(format!(
                            "unsupported escape: {}",
                            String::from_utf8_lossy(&p[i..i + 2])
                        )));
                    }
                    literal.extend_from_slice(&p[i..i + escape]);
                    self.i += escape;
                }
            } else if p[i] == b'"' {
                literal.extend_from_slice(b"\\\"");
                self.i += 1;
            } else if !is_non_literal(p[i])
                && (i == length - 1
                    || literal.is_empty()
                    || p[i + 1] == b'.'
                    || !is_non_literal(p[i + 1]))
            {
                literal.push(p[i]);
                self.i += 1;
            } else {
                break;
            }
        }
        if literal.is_empty() {
            // nothing was consumed, e.g. a stray ']' or '}'
            return Err(PatternError::Unsupported(format!(
                "unsupported character: {}",
                String::from_utf8_lossy(&[c])
            )));
        }
        Ok((literal, true))
    }
}

fn invalid_number() -> PatternError {
    PatternError::Unsupported("invalid number in curly brackets".into())
}

/// [`repetition`] over bytes: the item may hold a pattern's bytes that are not UTF-8 alone.
fn repeat_bytes(item: &[u8], min: i32, max: i32) -> Vec<u8> {
    // `repetition` only appends ASCII around the item, at its start: splice the bytes back in.
    const MARK: &str = "\u{0}";
    let text = repetition(MARK, min, max, "");
    let mut out = Vec::with_capacity(text.len() + item.len());
    for b in text.bytes() {
        if b == 0 {
            out.extend_from_slice(item);
        } else {
            out.push(b);
        }
    }
    out
}

/// The sequence joined with spaces, consecutive literals merged into one.
fn join_seq(seq: &[Item]) -> Item {
    let mut parts: Vec<Vec<u8>> = Vec::new();
    let mut literal: Vec<u8> = Vec::new();
    for (text, is_literal) in seq {
        if *is_literal {
            literal.extend_from_slice(text);
        } else {
            if !literal.is_empty() {
                parts.push(to_rule(&(std::mem::take(&mut literal), true)));
            }
            parts.push(text.clone());
        }
    }
    if !literal.is_empty() {
        parts.push(to_rule(&(literal, true)));
    }
    (parts.join(b" ".as_slice()), false)
}
