//! Which provider's cache a bill is emulated for, and at what rates.

use std::fmt;
use std::str::FromStr;

/// Prices per input token, in units of one uncached input token (so a bill reads as
/// "billed-equivalent input tokens" whatever the currency).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Rates {
    /// An input token read without the cache.
    pub input: f64,
    /// An input token read from the cache.
    pub cached_read: f64,
    /// An input token written to the cache (Anthropic's explicit cache writes).
    pub cache_write: f64,
}

impl Rates {
    /// OpenAI's automatic prefix caching: cached tokens at a tenth (the current models' price
    /// list; older ones charge half), no write premium.
    pub const OPENAI: Rates = Rates {
        input: 1.0,
        cached_read: 0.1,
        cache_write: 1.0,
    };

    /// Anthropic's explicit caching with the 5-minute TTL: reads at 0.1×, writes at 1.25×.
    pub const ANTHROPIC: Rates = Rates {
        input: 1.0,
        cached_read: 0.1,
        cache_write: 1.25,
    };

    /// These rates with some replaced by `spec`, a comma-separated list of `input=…`,
    /// `cached=…` and `write=…` (e.g. `input=1,cached=0.1,write=1.25`).
    pub fn with_overrides(self, spec: &str) -> Result<Rates, RatesError> {
        let mut rates = self;
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| RatesError::NotKeyValue(item.to_string()))?;
            let parsed: f64 = value
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| RatesError::BadValue(item.to_string()))?;
            match key.trim() {
                "input" => rates.input = parsed,
                "cached" | "cached_read" | "read" => rates.cached_read = parsed,
                "write" | "cache_write" => rates.cache_write = parsed,
                other => return Err(RatesError::UnknownRate(other.to_string())),
            }
        }
        Ok(rates)
    }
}

/// Why a `--rates` list could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RatesError {
    /// An item without `=`.
    #[error("`{0}` is not a rate (expected name=value, e.g. cached=0.1)")]
    NotKeyValue(String),
    /// A value that is not a non-negative number.
    #[error("`{0}`: a rate is a non-negative number")]
    BadValue(String),
    /// A name other than input, cached, write.
    #[error("unknown rate `{0}` (known: input, cached, write)")]
    UnknownRate(String),
}

/// A provider's prompt cache and its rates: which emulation [`super::PromptCache`] runs.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CostModel {
    /// Automatic prefix caching: any prefix of an earlier prompt from 1024 tokens on, in
    /// 128-token steps.
    #[serde(rename = "openai")]
    OpenAi(Rates),
    /// Explicit breakpoints (at most 4), entries living 5 minutes from their last use.
    Anthropic(Rates),
}

impl CostModel {
    /// OpenAI's caching at its default rates.
    pub fn openai() -> Self {
        CostModel::OpenAi(Rates::OPENAI)
    }

    /// Anthropic's caching at its default rates.
    pub fn anthropic() -> Self {
        CostModel::Anthropic(Rates::ANTHROPIC)
    }

    /// The model's rates.
    pub fn rates(&self) -> Rates {
        match self {
            CostModel::OpenAi(r) | CostModel::Anthropic(r) => *r,
        }
    }

    /// The same cache at other rates.
    pub fn with_rates(self, rates: Rates) -> Self {
        match self {
            CostModel::OpenAi(_) => CostModel::OpenAi(rates),
            CostModel::Anthropic(_) => CostModel::Anthropic(rates),
        }
    }

    /// Whether its rates are prices (finite, not negative): a policy from another node or a
    /// file is checked with it.
    pub fn is_priced(&self) -> bool {
        let r = self.rates();
        [r.input, r.cached_read, r.cache_write]
            .iter()
            .all(|v| v.is_finite() && *v >= 0.0)
    }

    /// `openai` or `anthropic`.
    pub fn name(&self) -> &'static str {
        match self {
            CostModel::OpenAi(_) => "openai",
            CostModel::Anthropic(_) => "anthropic",
        }
    }

    /// What one token of a freshly sent prefix costs: OpenAI bills it as input; troupe marks
    /// a breakpoint on Anthropic's last block, so there it is written.
    pub fn fresh_prefix_rate(&self) -> f64 {
        match self {
            CostModel::OpenAi(r) => r.input,
            CostModel::Anthropic(r) => r.cache_write,
        }
    }
}

impl fmt::Display for CostModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The error for a cost model name other than `openai` or `anthropic`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown cost model `{0}` (known: openai, anthropic)")]
pub struct UnknownCostModel(pub String);

impl FromStr for CostModel {
    type Err = UnknownCostModel;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "openai" => Ok(CostModel::openai()),
            "anthropic" => Ok(CostModel::anthropic()),
            _ => Err(UnknownCostModel(s.to_string())),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_unknown_ones_are_refused() {
        assert_eq!("openai".parse::<CostModel>().unwrap(), CostModel::openai());
        assert_eq!(
            " Anthropic".parse::<CostModel>().unwrap(),
            CostModel::anthropic()
        );
        let err = "foo".parse::<CostModel>().unwrap_err();
        assert!(err.to_string().contains("openai, anthropic"), "{err}");
    }

    #[test]
    fn overrides_replace_only_what_they_name() {
        let rates = Rates::ANTHROPIC.with_overrides("cached=0.5").unwrap();
        assert_eq!(rates.cached_read, 0.5);
        assert_eq!(rates.cache_write, 1.25);
        let all = Rates::OPENAI
            .with_overrides("input=2, cached=0.2,write=3")
            .unwrap();
        assert_eq!(
            (all.input, all.cached_read, all.cache_write),
            (2.0, 0.2, 3.0)
        );
        assert!(matches!(
            Rates::OPENAI.with_overrides("cached"),
            Err(RatesError::NotKeyValue(_))
        ));
        assert!(matches!(
            Rates::OPENAI.with_overrides("cached=-1"),
            Err(RatesError::BadValue(_))
        ));
        assert!(matches!(
            Rates::OPENAI.with_overrides("cheap=1"),
            Err(RatesError::UnknownRate(_))
        ));
    }
}
