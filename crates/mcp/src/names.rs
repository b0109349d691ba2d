//! The registry names of a server's tools: `SERVER__tool`, made valid and unique.

/// The longest tool name OpenAI-style function calling accepts.
const MAX_NAME: usize = 64;

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
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
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
    use super::registry_name;

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
