//! The served agents' auth: every caller holds a key of its own, sent as an HTTP Bearer token
//! or in an API-key header (one scheme for all, declared on every card) and checked on every
//! JSON-RPC request before its body is read (the cards themselves are public, as A2A has
//! them). A key names its caller: the tasks and conversations a caller starts are its own
//! (`tasks.rs`), and another caller's key reaches none of them. Keys come from the
//! environment or are made for the run ([`ServerAuth::random_key`]), and are held out of
//! `Debug` and traces.
//!
//! There is no keyless server: a loopback port is open to every local user and, through DNS
//! rebinding or a careless proxy, further, and a served agent acts (its tools run). Without a
//! key of the operator's, `troupe a2a serve` makes one and prints it once, as the live view
//! does with its token.

use std::collections::BTreeMap;

use axum::http::{HeaderMap, header};

use crate::error::ServeError;
use crate::wire::{
    ApiKeySecurityScheme, HttpAuthSecurityScheme, SecurityRequirement, SecurityScheme, StringList,
};

/// The longest name a caller may have (its conversations' logs are kept under it).
pub(crate) const MAX_CALLER_BYTES: usize = 64;

/// How a key travels.
#[derive(Clone, PartialEq, Eq)]
enum Scheme {
    /// `Authorization: Bearer <key>` (the scheme in any case, as RFC 7235 has it).
    Bearer,
    /// `<header>: <key>`.
    ApiKey { header: String },
}

/// One caller and its key.
#[derive(Clone, PartialEq, Eq)]
struct CallerKey {
    caller: String,
    key: String,
}

/// Who may call the served agents, and how they say who they are.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerAuth {
    scheme: Scheme,
    callers: Vec<CallerKey>,
}

impl std::fmt::Debug for ServerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let callers: Vec<&str> = self.callers.iter().map(|c| c.caller.as_str()).collect();
        match &self.scheme {
            Scheme::Bearer => write!(f, "ServerAuth::Bearer({callers:?}, keys <redacted>)"),
            Scheme::ApiKey { header } => {
                write!(
                    f,
                    "ServerAuth::ApiKey({header}, {callers:?}, keys <redacted>)"
                )
            }
        }
    }
}

impl ServerAuth {
    /// Bearer auth: `caller` holds `key`.
    pub fn bearer(caller: impl Into<String>, key: impl Into<String>) -> Self {
        ServerAuth {
            scheme: Scheme::Bearer,
            callers: vec![CallerKey {
                caller: caller.into(),
                key: key.into(),
            }],
        }
    }

    /// API-key auth in `header`: `caller` holds `key`.
    pub fn api_key(
        header: impl Into<String>,
        caller: impl Into<String>,
        key: impl Into<String>,
    ) -> Self {
        ServerAuth {
            scheme: Scheme::ApiKey {
                header: header.into(),
            },
            ..Self::bearer(caller, key)
        }
    }

    /// Bearer auth with the key in the environment variable `env` (read through
    /// `troupe_host::credentials`); the caller is named `env`.
    ///
    /// # Errors
    /// [`ServeError::MissingKey`] when it is unset or empty.
    pub fn bearer_from_env(env: &str) -> Result<Self, ServeError> {
        Ok(Self::bearer(env, key_from(env)?))
    }

    /// API-key auth in `header` with the key in the environment variable `env`; the caller is
    /// named `env`.
    ///
    /// # Errors
    /// [`ServeError::MissingKey`] when it is unset or empty.
    pub fn api_key_from_env(header: impl Into<String>, env: &str) -> Result<Self, ServeError> {
        Ok(Self::api_key(header, env, key_from(env)?))
    }

    /// Another caller, holding `key`, by the same scheme.
    pub fn with_caller(mut self, caller: impl Into<String>, key: impl Into<String>) -> Self {
        self.callers.push(CallerKey {
            caller: caller.into(),
            key: key.into(),
        });
        self
    }

    /// Another caller whose key is in the environment variable `env` (and who is named so).
    ///
    /// # Errors
    /// [`ServeError::MissingKey`] when it is unset or empty.
    pub fn with_caller_from_env(self, env: &str) -> Result<Self, ServeError> {
        let key = key_from(env)?;
        Ok(self.with_caller(env, key))
    }

    /// A fresh key: 128 random bits as 32 hex digits.
    ///
    /// # Errors
    /// [`ServeError::Key`] when the system has no randomness to give.
    pub fn random_key() -> Result<String, ServeError> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|e| ServeError::Key(e.to_string()))?;
        Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// Why these callers cannot be served, if they cannot: a caller without a name or with
    /// one over [`MAX_CALLER_BYTES`], an empty key, a key two callers hold, a name two use.
    pub(crate) fn check(&self) -> Result<(), ServeError> {
        let bad = |why: String| Err(ServeError::Auth(why));
        for (n, entry) in self.callers.iter().enumerate() {
            if entry.caller.is_empty() || entry.caller.len() > MAX_CALLER_BYTES {
                return bad(format!(
                    "a caller's name is 1 to {MAX_CALLER_BYTES} bytes (`{}` is not)",
                    entry.caller
                ));
            }
            if entry.key.trim().is_empty() {
                return bad(format!("the key of caller `{}` is empty", entry.caller));
            }
            for other in &self.callers[..n] {
                if other.key == entry.key {
                    return bad(format!(
                        "callers `{}` and `{}` hold the same key: each needs its own",
                        other.caller, entry.caller
                    ));
                }
                if other.caller == entry.caller {
                    return bad(format!("two callers are named `{}`", entry.caller));
                }
            }
        }
        Ok(())
    }

    /// The card's `securitySchemes` and `securityRequirements`.
    pub(crate) fn card_security(
        &self,
    ) -> (BTreeMap<String, SecurityScheme>, Vec<SecurityRequirement>) {
        let (name, scheme) = match &self.scheme {
            Scheme::Bearer => (
                "bearer",
                SecurityScheme {
                    http_auth_security_scheme: Some(HttpAuthSecurityScheme {
                        scheme: "Bearer".into(),
                    }),
                    ..SecurityScheme::default()
                },
            ),
            Scheme::ApiKey { header } => (
                "apiKey",
                SecurityScheme {
                    api_key_security_scheme: Some(ApiKeySecurityScheme {
                        location: "header".into(),
                        name: header.clone(),
                    }),
                    ..SecurityScheme::default()
                },
            ),
        };
        let requirement = SecurityRequirement {
            schemes: BTreeMap::from([(name.to_string(), StringList::default())]),
        };
        (
            BTreeMap::from([(name.to_string(), scheme)]),
            vec![requirement],
        )
    }

    /// The caller whose key `headers` carry, if any does.
    pub(crate) fn caller_of(&self, headers: &HeaderMap) -> Option<&str> {
        let given = match &self.scheme {
            Scheme::Bearer => {
                let value = headers.get(header::AUTHORIZATION)?.as_bytes();
                let at = value.iter().position(|b| *b == b' ')?;
                let (scheme, token) = value.split_at(at);
                if !scheme.eq_ignore_ascii_case(b"bearer") {
                    return None;
                }
                token.trim_ascii()
            }
            Scheme::ApiKey { header } => headers.get(header.as_str())?.as_bytes().trim_ascii(),
        };
        if given.is_empty() {
            return None;
        }
        // Every key is compared, whichever matches: the time taken says nothing of which.
        let mut found = None;
        for entry in &self.callers {
            if same(given, entry.key.as_bytes()) && found.is_none() {
                found = Some(entry.caller.as_str());
            }
        }
        found
    }
}

fn key_from(env: &str) -> Result<String, ServeError> {
    troupe_host::credentials::var(env)
        .filter(|k| !k.trim().is_empty())
        .ok_or_else(|| ServeError::MissingKey(env.to_string()))
}

/// Equal bytes, compared in time that depends on the lengths only: a wrong key's prefix is not
/// told apart by how long the refusal took.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn with(name: &'static str, value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(name, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn a_key_names_its_caller_whatever_the_schemes_case() {
        let auth = ServerAuth::bearer("alice", "k-alice").with_caller("bob", "k-bob");
        assert_eq!(
            auth.caller_of(&with("authorization", "Bearer k-alice")),
            Some("alice")
        );
        assert_eq!(
            auth.caller_of(&with("authorization", "bearer k-bob")),
            Some("bob")
        );
        assert_eq!(
            auth.caller_of(&with("authorization", "BEARER   k-bob")),
            Some("bob")
        );
        for refused in [
            "Bearer k-carol",
            "Basic k-alice",
            "Bearer",
            "Bearer ",
            "k-alice",
            "",
        ] {
            assert_eq!(
                auth.caller_of(&with("authorization", refused)),
                None,
                "{refused}"
            );
        }
        let api = ServerAuth::api_key("x-api-key", "alice", "k-alice");
        assert_eq!(api.caller_of(&with("x-api-key", "k-alice")), Some("alice"));
        assert_eq!(
            api.caller_of(&with("authorization", "Bearer k-alice")),
            None
        );
        assert!(!format!("{auth:?}").contains("k-alice"));
    }

    #[test]
    fn callers_without_a_name_or_key_of_their_own_are_refused() {
        assert!(
            ServerAuth::bearer("a", "k")
                .with_caller("b", "l")
                .check()
                .is_ok()
        );
        for auth in [
            ServerAuth::bearer("", "k"),
            ServerAuth::bearer("a".repeat(65), "k"),
            ServerAuth::bearer("a", " "),
            ServerAuth::bearer("a", "k").with_caller("b", "k"),
            ServerAuth::bearer("a", "k").with_caller("a", "l"),
        ] {
            assert!(matches!(auth.check(), Err(ServeError::Auth(_))), "{auth:?}");
        }
        let key = ServerAuth::random_key().unwrap();
        assert_eq!(key.len(), 32);
        assert_ne!(key, ServerAuth::random_key().unwrap());
    }
}
