//! The one-time token every request carries: 128 random bits, compared in constant time.

use crate::error::UiError;

/// The view's token, as 32 hex digits.
#[derive(Clone)]
pub(crate) struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never in logs: whoever holds it can answer the team's approvals.
        f.write_str("Token(…)")
    }
}

impl Token {
    /// A fresh random token.
    pub(crate) fn random() -> Result<Self, UiError> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|e| UiError::Token(e.to_string()))?;
        Ok(Token(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    /// The token's text (hex digits only, so it goes into a URL or a page unescaped).
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `given` is this token; the time taken does not depend on where they differ.
    pub(crate) fn matches(&self, given: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), given.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_matches_itself_only() {
        let token = Token::random().unwrap();
        assert_eq!(token.as_str().len(), 32);
        assert!(token.matches(token.as_str()));
        assert!(!token.matches(""));
        assert!(!token.matches(&"0".repeat(32)));
        assert_ne!(token.as_str(), Token::random().unwrap().as_str());
    }
}
