//! The grammar's built-in rules and literal quoting, word for word llama.cpp's
//! (`common/json-schema-to-grammar.cpp`): a rule text that differs by one space makes a different
//! grammar than llama.cpp's.

/// Optional whitespace between JSON tokens, bounded so that a model cannot pad forever.
pub(super) const SPACE_RULE: &str = r#"| " " | "\n"{1,2} [ \t]{0,20}"#;

/// A rule the converter adds by name when a schema needs it, with the rules it refers to.
pub(super) struct BuiltinRule {
    pub(super) content: &'static str,
    pub(super) deps: &'static [&'static str],
}

const PRIMITIVE_RULES: [(&str, BuiltinRule); 12] = [
    (
        "boolean",
        BuiltinRule {
            content: r#"("true" | "false")"#,
            deps: &[],
        },
    ),
    (
        "decimal-part",
        BuiltinRule {
            content: "[0-9]{1,16}",
            deps: &[],
        },
    ),
    (
        "integral-part",
        BuiltinRule {
            content: "[0] | [1-9] [0-9]{0,15}",
            deps: &[],
        },
    ),
    (
        "number",
        BuiltinRule {
            content: r#"("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?"#,
            deps: &["integral-part", "decimal-part"],
        },
    ),
    (
        "integer",
        BuiltinRule {
            content: r#"("-"? integral-part)"#,
            deps: &["integral-part"],
        },
    ),
    (
        "value",
        BuiltinRule {
            content: "object | array | string | number | boolean | null",
            deps: &["object", "array", "string", "number", "boolean", "null"],
        },
    ),
    (
        "object",
        BuiltinRule {
            content: r#""{" space ( string ":" space value ("," space string ":" space value)* )? space "}""#,
            deps: &["string", "value"],
        },
    ),
    (
        "array",
        BuiltinRule {
            content: r#""[" space ( value ("," space value)* )? space "]""#,
            deps: &["value"],
        },
    ),
    (
        "uuid",
        BuiltinRule {
            content: r#""\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\"""#,
            deps: &[],
        },
    ),
    (
        "char",
        BuiltinRule {
            content: r#"[^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})"#,
            deps: &[],
        },
    ),
    (
        "string",
        BuiltinRule {
            content: r#""\"" char* "\"""#,
            deps: &["char"],
        },
    ),
    (
        "null",
        BuiltinRule {
            content: r#""null""#,
            deps: &[],
        },
    ),
];

const STRING_FORMAT_RULES: [(&str, BuiltinRule); 6] = [
    (
        "date",
        BuiltinRule {
            content: r#"[0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] )"#,
            deps: &[],
        },
    ),
    (
        "time",
        BuiltinRule {
            content: r#"([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )"#,
            deps: &[],
        },
    ),
    (
        "date-time",
        BuiltinRule {
            content: r#"date "T" time"#,
            deps: &["date", "time"],
        },
    ),
    (
        "date-string",
        BuiltinRule {
            content: r#""\"" date "\"""#,
            deps: &["date"],
        },
    ),
    (
        "time-string",
        BuiltinRule {
            content: r#""\"" time "\"""#,
            deps: &["time"],
        },
    ),
    (
        "date-time-string",
        BuiltinRule {
            content: r#""\"" date-time "\"""#,
            deps: &["date-time"],
        },
    ),
];

/// The built-in primitive rule `name` (`boolean`, `string`, `value`, ...).
pub(super) fn primitive(name: &str) -> Option<&'static BuiltinRule> {
    PRIMITIVE_RULES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, rule)| rule)
}

/// The built-in string-format rule `name` (`date`, `time-string`, ...).
pub(super) fn string_format(name: &str) -> Option<&'static BuiltinRule> {
    STRING_FORMAT_RULES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, rule)| rule)
}

/// A name a schema's own rule may not take (it gets a `-` appended): `root` and the built-ins.
pub(super) fn is_reserved_name(name: &str) -> bool {
    name == "root" || primitive(name).is_some() || string_format(name).is_some()
}

/// `name` as a rule name: every run of characters other than `[a-zA-Z0-9-]` becomes one `-`.
pub(super) fn rule_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_run = false;
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '-' {
            out.push(c);
            in_run = false;
        } else if !in_run {
            out.push('-');
            in_run = true;
        }
    }
    out
}

/// `literal` as a quoted grammar literal (`\r`, `\n`, `"` and `\` escaped).
pub(super) fn format_literal(literal: &str) -> String {
    let mut out = String::with_capacity(literal.len() + 2);
    out.push('"');
    for c in literal.chars() {
        match c {
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
