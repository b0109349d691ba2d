//! The registry names of a server's tools: `SERVER__tool`, made valid and unique.

use troupe_protocol::ToolDefinition;

/// The longest tool name OpenAI-style function calling accepts.
const MAX_NAME: usize = ToolDefinition::MAX_NAME;

/// The longest server name: its tools' names (`SERVER__tool`, at most 64 characters with a
/// `_N` suffix making them unique) always keep the whole `SERVER__` prefix.
pub const MAX_SERVER_NAME: usize = 48;

/// Why `name` cannot name an MCP server, or `None` when it can. A tool is offered as
/// `SERVER__tool`, so a server name is letters, digits, `-` and `_`, never contains `__`, never
/// ends with `_` and has at most [`MAX_SERVER_NAME`] characters: then no two servers' prefixes
/// overlap (`a` and `a__b` would both offer `a__b__x`, and one tool would hide the other) and the
/// prefix survives the cut of a name to 64 characters. [`crate::register_mcp`] and troupe's
/// config file apply this one rule.
pub fn server_name_problem(name: &str) -> Option<String> {
    if name.is_empty() || !name.chars().all(ToolDefinition::is_name_char) {
        return Some(
            "server names may use letters, digits, `-` and `_` only (they prefix tool names)"
                .to_string(),
        );
    }
    if name.contains("__") || name.ends_with('_') || name.len() > MAX_SERVER_NAME {
        return Some(format!(
            "server names may not contain `__` or end with `_`, and have at most \
             {MAX_SERVER_NAME} characters: tools are offered as `SERVER__tool`, and two servers' \
             tools must never share a name"
        ));
    }
    None
}

/// `SERVER__tool` with every character outside `a-zA-Z0-9_-` replaced by `_`, cut to 64
/// characters, and given a `_2`, `_3`, … suffix while `taken` says the name is in use.
pub(crate) fn registry_name(server: &str, tool: &str, taken: impl Fn(&str) -> bool) -> String {
    let base = format!("{}__{}", sanitize(server), sanitize(tool));
    let base = cut(&base, MAX_NAME);
    if !taken(&base) {
        return base;
    }
    (2u32..)
        .map(|n| {
            let suffix = format!("_{n}");
            format!("{}{suffix}", cut(&base, MAX_NAME - suffix.len()))
        })
        .find(|candidate| !taken(candidate))
        .unwrap_or(base)
}

fn sanitize(name: &str) -> String {
    let cleaned = ToolDefinition::sanitized_name(name);
    if cleaned.is_empty() {
        "_".to_string()
    } else {
        cleaned
    }
}

/// The first `max` bytes (all ASCII after [`sanitize`]).
fn cut(name: &str, max: usize) -> String {
    name.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    use super::{registry_name, server_name_problem};

    #[test]
    fn server_names_whose_tools_could_share_a_name_have_a_problem() {
        for name in ["a__b", "a_", "", "a.b", "a b", &"s".repeat(49)] {
            assert!(server_name_problem(name).is_some(), "{name:?}");
        }
        for name in ["a", "a_b", "a-b", "time2", &"s".repeat(48)] {
            assert_eq!(server_name_problem(name), None, "{name:?}");
        }
    }

    #[test]
    fn prefixes_and_sanitizes() {
        assert_eq!(
            registry_name("time", "get_current_time", |_| false),
            "time__get_current_time"
        );
        assert_eq!(registry_name("my.srv", "a/b c", |_| false), "my_srv__a_b_c");
    }

    #[test]
    fn long_names_are_cut_and_collisions_numbered() {
        let long = "x".repeat(100);
        let name = registry_name("s", &long, |_| false);
        assert_eq!(name.len(), 64);
        let taken = name.clone();
        let second = registry_name("s", &long, |n| n == taken);
        assert_eq!(second.len(), 64);
        assert!(second.ends_with("_2"));
        assert_eq!(registry_name("a", "b.c", |n| n == "a__b_c"), "a__b_c_2");
    }
}
