//! An HTTP answer's body read to a cap within an idle limit: a peer that sends too much is
//! refused at the cap (or at once, when its Content-Length says so), one that stalls is left.

use std::time::Duration;

use crate::error::A2aError;

/// The body of `response`, at most `cap` bytes, each chunk within `idle`.
pub(crate) async fn read_capped(
    mut response: reqwest::Response,
    cap: usize,
    idle: Duration,
    what: &str,
) -> Result<Vec<u8>, A2aError> {
    let too_large = || A2aError::TooLarge {
        what: what.to_string(),
        cap,
    };
    if response
        .content_length()
        .is_some_and(|length| length > cap as u64)
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    loop {
        let chunk = tokio::time::timeout(idle, response.chunk())
            .await
            .map_err(|_| A2aError::Timeout {
                what: what.to_string(),
                secs: idle.as_secs_f64(),
            })?
            .map_err(|source| A2aError::Http {
                what: what.to_string(),
                source,
            })?;
        let Some(chunk) = chunk else {
            return Ok(body);
        };
        if body.len() + chunk.len() > cap {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
}
