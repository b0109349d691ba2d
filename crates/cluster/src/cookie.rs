//! How strong a cookie must be.
//!
//! The cookie is the cluster's one shared secret, and ractor_cluster's handshake shows a
//! challenge and its digest to whichever address a node connects to: with those two, a
//! guessable cookie is found offline at millions of guesses a second (a dictionary-like cookie
//! fell in 25 ms). So a node refuses a cookie that is short or repetitive, before it listens or
//! connects anywhere.

use crate::error::ClusterError;

/// The fewest characters a cookie may have.
pub const MIN_COOKIE_CHARS: usize = 32;

/// The least estimated strength of a cookie, in bits.
pub const MIN_COOKIE_BITS: u32 = 128;

/// Refuse an empty, short or low-entropy cookie, saying why and how to make a good one.
pub(crate) fn check_cookie(cookie: &str) -> Result<(), ClusterError> {
    let chars = cookie.chars().count();
    let bits = estimated_bits(cookie);
    if chars >= MIN_COOKIE_CHARS && bits >= f64::from(MIN_COOKIE_BITS) {
        return Ok(());
    }
    let what = if chars == 0 {
        "the cookie is empty".to_string()
    } else {
        format!("the cookie has {chars} characters and about {bits:.0} bits of entropy")
    };
    Err(ClusterError::WeakCookie(format!(
        "{what}; a node shows a handshake digest of it to every address it connects to, so a \
         guessable cookie can be found offline. Use at least {MIN_COOKIE_CHARS} random \
         characters (about {MIN_COOKIE_BITS} bits), e.g. `openssl rand -hex 32`"
    )))
}

/// The cookie's length times the Shannon entropy of its own characters: a random string scores
/// close to its true strength (64 hex digits: about 245 bits), a repeated or single-character
/// one scores low whatever its length. It cannot see a dictionary phrase, hence the length
/// floor as well.
fn estimated_bits(cookie: &str) -> f64 {
    let mut counts = std::collections::HashMap::<char, usize>::new();
    for c in cookie.chars() {
        *counts.entry(c).or_default() += 1;
    }
    let total = counts.values().sum::<usize>() as f64;
    if total == 0.0 {
        return 0.0;
    }
    let per_char: f64 = counts
        .values()
        .map(|&n| {
            let p = n as f64 / total;
            -p * p.log2()
        })
        .sum();
    per_char * total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_or_repetitive_cookies_are_refused_with_the_rule_and_a_recipe() {
        for weak in [
            "",
            "secret",
            "test-cookie",
            "my-cluster-cookie",
            &"a".repeat(200),
            &"ab".repeat(40),
        ] {
            match check_cookie(weak) {
                Err(ClusterError::WeakCookie(why)) => {
                    assert!(why.contains("openssl rand -hex 32"), "{why}");
                    assert!(why.contains("32"), "{why}");
                }
                other => panic!("{weak:?} was accepted: {other:?}"),
            }
        }
    }

    #[test]
    fn random_cookies_pass() {
        // `openssl rand -hex 32` and `openssl rand -base64 32` outputs.
        for strong in [
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "3q2+7wX9kLmN0pQrStUvWxYz1A2B3C4D5E6F7G8H9I0=",
        ] {
            assert_eq!(check_cookie(strong), Ok(()), "{strong}");
        }
    }
}
