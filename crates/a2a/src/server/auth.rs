//! The served agents' auth: one key, as an HTTP Bearer token or an API key in a header, declared
//! on every card and checked on every JSON-RPC request (the cards themselves are public, as A2A
//! has them). The key comes from the environment and is held out of `Debug` and traces.

use std::collections::BTreeMap;

use axum::http::HeaderMap;

use crate::error::ServeError;
use crate::wire::{
    ApiKeySecurityScheme, HttpAuthSecurityScheme, SecurityRequirement, SecurityScheme, StringList,
};

/// How callers authenticate.
#[derive(Clone, PartialEq, Eq)]
pub enum ServerAuth {
    /// `Authorization: Bearer <key>`.
    Bearer {
        /// The key.
        key: String,
    },
    /// `<header>: <key>`.
    ApiKey {
        /// The header's name.
        header: String,
        /// The key.
        key: String,
    },
}

impl std::fmt::Debug for ServerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServerAuth::Bearer { .. } => f.write_str("ServerAuth::Bearer(<redacted>)"),
            ServerAuth::ApiKey { header, .. } => {
                write!(f, "ServerAuth::ApiKey({header}: <redacted>)")
            }
        }
    }
}

impl ServerAuth {
    /// Bearer auth with the key in the environment variable `env` (read through
    /// `troupe_host::credentials`).
    ///
    /// # Errors
    /// [`ServeError::MissingKey`] when it is unset or empty.
    pub fn bearer_from_env(env: &str) -> Result<Self, ServeError> {
        Ok(ServerAuth::Bearer {
            key: key_from(env)?,
        })
    }

    /// API-key auth in `header` with the key in the environment variable `env`.
    ///
    /// # Errors
    /// [`ServeError::MissingKey`] when it is unset or empty.
    pub fn api_key_from_env(header: impl Into<String>, env: &str) -> Result<Self, ServeError> {
        Ok(ServerAuth::ApiKey {
            header: header.into(),
            key: key_from(env)?,
        })
    }

    /// The card's `securitySchemes` and `securityRequirements`.
    pub(crate) fn card_security(
        &self,
    ) -> (BTreeMap<String, SecurityScheme>, Vec<SecurityRequirement>) {
        let (name, scheme) = match self {
            ServerAuth::Bearer { .. } => (
                "bearer",
                SecurityScheme {
                    http_auth_security_scheme: Some(HttpAuthSecurityScheme {
                        scheme: "Bearer".into(),
                    }),
                    ..SecurityScheme::default()
                },
            ),
            ServerAuth::ApiKey { header, .. } => (
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

    /// Whether `headers` carry the key.
    pub(crate) fn admits(&self, headers: &HeaderMap) -> bool {
        let (header, expected) = match self {
            ServerAuth::Bearer { key } => ("authorization", format!("Bearer {key}")),
            ServerAuth::ApiKey { header, key } => (header.as_str(), key.clone()),
        };
        headers
            .get(header)
            .is_some_and(|given| same(given.as_bytes(), expected.as_bytes()))
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
