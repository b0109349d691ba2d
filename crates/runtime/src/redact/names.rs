//! Which names are credentials: field names, JSON keys, header and variable names.

/// Substrings of a field name that mark it as a credential wherever they occur.
const SECRET_NAME_PARTS: &[&str] = &[
    "authorization",
    "secret",
    "password",
    "passwd",
    "apikey",
    "api_key",
    "api-key",
    "credential",
    "cookie",
    "bearer",
];

/// Whole words of a name (split on punctuation and camelCase) that mark a credential;
/// `input_tokens` is a count, not a token, and `monkey` is not a key, so only whole words count.
const SECRET_WORDS: &[&str] = &["key", "token", "auth", "pat", "pwd", "signature"];

/// Names so generic that, in the `name: value` form, prose uses them too ("Invalid key: check
/// your settings"): their value is redacted only if it looks like a credential.
pub(super) const WEAK_NAMES: &[&str] = &["key", "token", "auth", "pat"];

/// The words of a field name: split on anything not alphanumeric and where a lowercase letter
/// meets an uppercase one (`apiKey` → `api`, `key`), lowercased.
fn words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            previous_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && previous_lower && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        current.push(c.to_ascii_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// Whether a field (or environment variable) with this name must never be written.
pub fn is_secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    SECRET_NAME_PARTS.iter().any(|part| lower.contains(part))
        || words(name)
            .iter()
            .any(|w| SECRET_WORDS.contains(&w.as_str()))
}
