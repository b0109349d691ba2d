//! `http_get` (opt-in): fetch a URL whose host is on an allowlist.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::Url;
use reqwest::redirect::Policy;
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::sync::OnceCell;

use crate::context::ToolContext;
use crate::error::ToolError;
use crate::tool::Tool;

/// Redirects followed at most.
const MAX_REDIRECTS: usize = 5;

/// Which hosts `http_get` may reach and how much it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpGetConfig {
    /// Hosts allowed: exact names (`docs.rs`, `127.0.0.1`) or `*.example.com` for any subdomain.
    /// Empty means every request is refused.
    pub allowed_hosts: Vec<String>,
    /// A request taking longer is abandoned (default 30 s).
    pub timeout: Duration,
    /// Most body bytes read (default 64 KiB); the rest is never downloaded.
    pub max_bytes: usize,
}

impl Default for HttpGetConfig {
    fn default() -> Self {
        HttpGetConfig {
            allowed_hosts: Vec::new(),
            timeout: Duration::from_secs(30),
            max_bytes: 64 * 1024,
        }
    }
}

impl HttpGetConfig {
    /// A config allowing exactly these hosts, with default limits.
    pub fn allowing<I, S>(hosts: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        HttpGetConfig {
            allowed_hosts: hosts.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// Whether `url`'s scheme is http(s) and its host is allowed.
    pub fn allows(&self, url: &Url) -> bool {
        matches!(url.scheme(), "http" | "https")
            && url
                .host_str()
                .is_some_and(|host| host_allowed(&self.allowed_hosts, host))
    }
}

fn host_allowed(allowed: &[String], host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    allowed.iter().any(|pattern| {
        let pattern = pattern.to_ascii_lowercase();
        match pattern.strip_prefix("*.") {
            Some(domain) => host.ends_with(&format!(".{domain}")),
            None => host == pattern,
        }
    })
}

/// The `http_get` tool; see [`http_get_tool`].
#[derive(Debug, Clone)]
pub struct HttpGet {
    config: Arc<HttpGetConfig>,
    client: Arc<OnceCell<reqwest::Client>>,
}

/// An `http_get` tool to register:
/// `registry.register(http_get_tool(HttpGetConfig::allowing(["docs.rs"])))`.
///
/// Redirects are followed only to allowed hosts.
pub fn http_get_tool(config: HttpGetConfig) -> HttpGet {
    HttpGet {
        config: Arc::new(config),
        client: Arc::new(OnceCell::new()),
    }
}

/// Arguments of `http_get`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct HttpGetArgs {
    /// The http:// or https:// URL to fetch.
    pub url: String,
}

impl HttpGet {
    async fn client(&self) -> Result<&reqwest::Client, ToolError> {
        self.client
            .get_or_try_init(|| async {
                let config = Arc::clone(&self.config);
                reqwest::Client::builder()
                    .timeout(self.config.timeout)
                    .redirect(Policy::custom(move |attempt| {
                        if attempt.previous().len() >= MAX_REDIRECTS {
                            attempt.error("too many redirects")
                        } else if config.allows(attempt.url()) {
                            attempt.follow()
                        } else {
                            let host = attempt.url().host_str().unwrap_or("").to_string();
                            attempt.error(format!("redirect to host \"{host}\" is not allowed"))
                        }
                    }))
                    .build()
                    .map_err(|e| ToolError::fatal(format!("cannot build the HTTP client: {e}")))
            })
            .await
    }

    fn refuse(&self, url: &Url) -> ToolError {
        let why = if matches!(url.scheme(), "http" | "https") {
            format!(
                "host \"{}\" is not on the allowlist",
                url.host_str().unwrap_or("")
            )
        } else {
            format!("scheme \"{}\" is not http or https", url.scheme())
        };
        let allowed = if self.config.allowed_hosts.is_empty() {
            "no hosts are allowed".to_string()
        } else {
            format!("allowed hosts: {}", self.config.allowed_hosts.join(", "))
        };
        ToolError::respond(format!("http_get refused {url}: {why} ({allowed})"))
    }
}

#[async_trait]
impl Tool for HttpGet {
    type Args = HttpGetArgs;
    type Output = String;

    fn name(&self) -> &str {
        "http_get"
    }

    fn description(&self) -> &str {
        "Fetch a web page or API response with an HTTP GET. Only allowlisted hosts can be \
         reached. Returns the status line, content type and (bounded) body text."
    }

    fn timeout(&self) -> Option<Duration> {
        Some(self.config.timeout + Duration::from_secs(5))
    }

    async fn call(&self, _ctx: &ToolContext, args: HttpGetArgs) -> Result<String, ToolError> {
        let url = Url::parse(args.url.trim()).map_err(|e| {
            ToolError::respond(format!(
                "\"{}\" is not a valid URL ({e}); give a full URL such as https://example.com/page",
                args.url
            ))
        })?;
        if !self.config.allows(&url) {
            return Err(self.refuse(&url));
        }
        let mut response = self
            .client()
            .await?
            .get(url.clone())
            .send()
            .await
            .map_err(|e| ToolError::respond(format!("GET {url} failed: {e}")))?;
        let status = response.status();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("unknown")
            .to_string();
        let mut body = Vec::new();
        let mut truncated = false;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| ToolError::respond(format!("reading the body of {url} failed: {e}")))?
        {
            let room = self.config.max_bytes - body.len();
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        let mut out = format!("HTTP {status}\ncontent-type: {content_type}\n\n");
        if is_text(&content_type) {
            out.push_str(&String::from_utf8_lossy(&body));
        } else {
            let _ = write!(
                out,
                "[{} bytes of {content_type} not shown: not text]",
                body.len()
            );
        }
        if truncated {
            let _ = write!(out, "\n[body cut after {} bytes]", self.config.max_bytes);
        }
        Ok(out)
    }
}

fn is_text(content_type: &str) -> bool {
    let ct = content_type.to_ascii_lowercase();
    ct.starts_with("text/")
        || [
            "json",
            "xml",
            "javascript",
            "yaml",
            "toml",
            "csv",
            "unknown",
        ]
        .iter()
        .any(|t| ct.contains(t))
}
