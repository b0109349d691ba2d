//! A model's shared rate limit in the configuration: `[models.NAME] rate_limit`, one limit for
//! every agent and the compression agent calling that model (see
//! [`troupe_models::RateLimitedModel`]).
//!
//! ```toml
//! [models.gpt]
//! rate_limit = { requests_per_minute = 60, tokens_per_minute = 100000 }   # either optional
//! ```

use serde::{Deserialize, Serialize};
use troupe_models::RateLimit;

use super::validate::Problem;

/// `[models.NAME] rate_limit`: per minute, for every caller of the model together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Requests per minute.
    pub requests_per_minute: Option<i64>,
    /// Tokens (prompt and output) per minute.
    pub tokens_per_minute: Option<i64>,
}

impl RateLimitConfig {
    /// The limit; `None` for one [`check`] refuses.
    pub(super) fn limit(self) -> Option<RateLimit> {
        let requests = self
            .requests_per_minute
            .map(u32::try_from)
            .transpose()
            .ok()?;
        let tokens = self.tokens_per_minute.map(u64::try_from).transpose().ok()?;
        RateLimit::per_minute(requests, tokens).ok()
    }
}

/// Each limit given is a positive whole number (read as signed, so that a negative one gets
/// this message instead of a type error), and at least one is given.
pub(super) fn check(model: &str, rate_limit: Option<&RateLimitConfig>) -> Result<(), Problem> {
    let Some(rate_limit) = rate_limit else {
        return Ok(());
    };
    let key = |field: &str| format!("models.{model}.rate_limit.{field}");
    let limits = [
        (
            "requests_per_minute",
            rate_limit.requests_per_minute,
            u32::MAX as i64,
        ),
        ("tokens_per_minute", rate_limit.tokens_per_minute, i64::MAX),
    ];
    for (field, value, max) in limits {
        if let Some(value) = value
            && !(1..=max).contains(&value)
        {
            return Err((
                key(field),
                format!(
                    "must be a whole number from 1 to {max} (leave it out for no limit), got {value}"
                ),
            ));
        }
    }
    if rate_limit.requests_per_minute.is_none() && rate_limit.tokens_per_minute.is_none() {
        return Err((
            format!("models.{model}.rate_limit"),
            "sets no limit: give requests_per_minute, tokens_per_minute or both".to_string(),
        ));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::collections::BTreeMap;
    use std::num::{NonZeroU32, NonZeroU64};
    use std::sync::Arc;

    use troupe_agents::compression::CompressorModel;
    use troupe_protocol::ChatModel;

    use super::super::{Config, build_model};

    fn rate_limit(line: &str) -> Result<Config, String> {
        Config::parse(&format!(
            "[models.gpt]\nprovider = \"openai\"\nrate_limit = {line}\n"
        ))
        .map_err(|e| e.to_string())
    }

    #[test]
    fn a_rate_limit_reads_either_or_both_limits() {
        let config =
            rate_limit("{ requests_per_minute = 60, tokens_per_minute = 100000 }").unwrap();
        let limit = config.models["gpt"].rate_limit.unwrap().limit().unwrap();
        assert_eq!(limit.requests_per_minute, NonZeroU32::new(60));
        assert_eq!(limit.tokens_per_minute, NonZeroU64::new(100_000));
        let config = rate_limit("{ tokens_per_minute = 5000 }").unwrap();
        let limit = config.models["gpt"].rate_limit.unwrap().limit().unwrap();
        assert_eq!(limit.requests_per_minute, None);
        assert_eq!(limit.tokens_per_minute, NonZeroU64::new(5000));
    }

    /// The same allocation: the one limit every holder shares.
    fn same(a: &Arc<dyn ChatModel>, b: &Arc<dyn ChatModel>) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
    }

    #[tokio::test]
    async fn the_agents_and_the_compression_agent_share_the_one_limited_model() {
        let config = Config::parse(
            "[models.gpt]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
             model = \"gpt-test\"\nrate_limit = { requests_per_minute = 2 }\n\
             [agents.a]\nmodel = \"gpt\"\n[agents.b]\nmodel = \"gpt\"\n\
             [compaction]\nmodel = \"gpt\"\n",
        )
        .unwrap();
        let built = build_model("gpt", &config.models["gpt"]).await.unwrap();
        assert_eq!(
            built.info().name,
            "gpt-test",
            "the limited model is the provider's"
        );
        let models = BTreeMap::from([("gpt".to_string(), Arc::clone(&built))]);
        for agent in ["a", "b"] {
            let spec = config.agent_spec(agent, &models, None).unwrap();
            assert!(same(&spec.model, &built), "agent {agent}");
        }
        match config.compression_config(&models, None).unwrap().model {
            CompressorModel::Fixed(model) => assert!(same(&model, &built)),
            _ => panic!("the configured compaction model"),
        }
    }

    #[tokio::test]
    async fn a_zero_limit_built_in_code_is_refused_not_dropped() {
        let mut config = Config::parse("[models.gpt]\nprovider = \"openai\"\n").unwrap();
        let gpt = config.models.get_mut("gpt").unwrap();
        gpt.rate_limit = Some(super::RateLimitConfig {
            requests_per_minute: Some(0),
            tokens_per_minute: None,
        });
        let err = build_model("gpt", gpt).await.err().map(|e| e.to_string());
        assert!(
            err.as_deref()
                .is_some_and(|e| e.contains("model `gpt`") && e.contains("at least 1")),
            "{err:?}"
        );
    }

    #[test]
    fn a_zero_negative_empty_or_unknown_limit_is_refused_by_key() {
        for (line, key, says) in [
            (
                "{ requests_per_minute = 0 }",
                "models.gpt.rate_limit.requests_per_minute",
                "got 0",
            ),
            (
                "{ tokens_per_minute = -5 }",
                "models.gpt.rate_limit.tokens_per_minute",
                "got -5",
            ),
            (
                "{ requests_per_minute = 99999999999 }",
                "models.gpt.rate_limit.requests_per_minute",
                "from 1 to 4294967295",
            ),
            ("{}", "models.gpt.rate_limit", "sets no limit"),
            (
                "{ requests_per_hour = 5 }",
                "models.gpt.rate_limit",
                "requests_per_hour",
            ),
        ] {
            let err = rate_limit(line).unwrap_err();
            assert!(err.contains(key), "{line}: {err}");
            assert!(err.contains(says), "{line}: {err}");
        }
    }
}
