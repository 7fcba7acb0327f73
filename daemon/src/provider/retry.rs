//! When and how long to wait before asking a provider again (SPEC §10): exponential backoff with
//! jitter, the provider's own `Retry-After` when it gives one, and a bound on both.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::ops::RangeInclusive;
use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, RETRY_AFTER};

/// How a model call is retried after a retryable fault ([`super::ProviderError::is_retryable`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt; 0 never retries.
    pub max_retries: u32,
    /// The backoff before the first retry; it doubles for each later one.
    pub first_delay: Duration,
    /// No wait is longer. A provider asking for a longer wait is not retried at all: waiting
    /// less than it asked would only fail again.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    /// Four retries over about 15 s of backoff: enough to ride out a rate-limit window or a
    /// restarting gateway, short enough that a real outage is reported while the user waits.
    fn default() -> RetryPolicy {
        RetryPolicy {
            max_retries: 4,
            first_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
        }
    }
}

/// How long one model call may take and how often it is tried, set per profile in config.json.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallLimits {
    /// `idle_timeout_secs`: an attempt that receives no data for this long is abandoned (and
    /// retried). `: keep-alive` comments are not data.
    pub idle_timeout: Duration,
    /// `request_timeout_secs`: the whole call, every attempt and wait included, ends in failure
    /// after this long, however slowly the provider keeps sending.
    pub request_timeout: Duration,
    /// `max_attempts`: the first attempt and its retries together.
    pub max_attempts: u32,
}

impl CallLimits {
    /// The ranges config.json accepts; beyond them a call could hang for hours or never retry.
    pub const IDLE_TIMEOUT_SECS: RangeInclusive<u64> = 1..=3600;
    pub const REQUEST_TIMEOUT_SECS: RangeInclusive<u64> = 1..=86_400;
    pub const MAX_ATTEMPTS: RangeInclusive<u64> = 1..=10;
}

impl Default for CallLimits {
    /// Reasoning models may think a minute before their first token, but not much longer
    /// without a keep-alive; ten minutes is past any answer seen, and stops a provider that
    /// drips a byte a minute; five attempts with [`RetryPolicy::default`]'s backoff.
    fn default() -> CallLimits {
        CallLimits {
            idle_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(600),
            max_attempts: RetryPolicy::default().max_retries + 1,
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `retry` (1 for the first), or `None` when there is to be no
    /// such retry. The provider's `retry_after` is honoured as given; otherwise the backoff is
    /// "equal jitter": half the exponential delay, plus a random part of the other half, so
    /// clients that failed together do not come back together.
    pub(super) fn wait(&self, retry: u32, retry_after: Option<Duration>) -> Option<Duration> {
        if retry == 0 || retry > self.max_retries {
            return None;
        }
        if let Some(asked) = retry_after {
            return (asked <= self.max_delay).then_some(asked);
        }
        let doubling = 2u32.saturating_pow(retry - 1);
        let backoff = self
            .first_delay
            .saturating_mul(doubling)
            .min(self.max_delay);
        let half = backoff / 2;
        Some(half + jitter(backoff - half))
    }
}

/// A random duration in `0..=span`. `RandomState` is seeded randomly per instance, which is all
/// the randomness spreading retries needs.
fn jitter(span: Duration) -> Duration {
    let nanos = u64::try_from(span.as_nanos()).unwrap_or(u64::MAX);
    let random = RandomState::new().build_hasher().finish();
    Duration::from_nanos(random % nanos.saturating_add(1))
}

/// The provider's requested wait: Azure's and OpenAI's `retry-after-ms` (finer than the
/// standard header, so preferred), else `Retry-After` in seconds or as an HTTP date.
pub(super) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name| headers.get(name)?.to_str().ok().map(str::trim);
    if let Some(millis) = header("retry-after-ms").and_then(|value| value.parse::<f64>().ok())
        && millis.is_finite()
        && millis >= 0.0
    {
        return Some(Duration::from_secs_f64(millis / 1000.0));
    }
    let value = header(RETRY_AFTER.as_str())?;
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn retry_after_in_seconds() {
        let now = SystemTime::now();
        assert_eq!(
            retry_after(&headers(&[("retry-after", "7")]), now),
            Some(Duration::from_secs(7))
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")]), now), None);
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
    }

    #[test]
    fn retry_after_as_an_http_date() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "Sun, 06 Nov 1994 08:50:07 GMT")]),
                now
            ),
            Some(Duration::from_secs(30))
        );
        // A date already past means "now".
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "Sun, 06 Nov 1994 08:49:00 GMT")]),
                now
            ),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn azure_retry_after_ms_wins_over_retry_after() {
        let now = SystemTime::now();
        assert_eq!(
            retry_after(
                &headers(&[("retry-after-ms", "1500"), ("retry-after", "2")]),
                now
            ),
            Some(Duration::from_millis(1500))
        );
    }

    #[test]
    fn backoff_doubles_with_jitter_within_bounds() {
        let policy = RetryPolicy {
            max_retries: 6,
            first_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(1000),
        };
        for (retry, full) in [(1, 100), (2, 200), (3, 400), (4, 800), (5, 1000), (6, 1000)] {
            for _ in 0..50 {
                let wait = policy.wait(retry, None).unwrap();
                let full = Duration::from_millis(full);
                assert!(wait >= full / 2 && wait <= full, "{retry}: {wait:?}");
            }
        }
        assert_eq!(policy.wait(7, None), None);
        assert_eq!(policy.wait(0, None), None);
    }

    #[test]
    fn jitter_actually_varies() {
        let policy = RetryPolicy::default();
        let waits: std::collections::HashSet<Duration> =
            (0..20).filter_map(|_| policy.wait(3, None)).collect();
        assert!(waits.len() > 1, "{waits:?}");
    }

    #[test]
    fn the_providers_wait_is_honoured_up_to_the_bound() {
        let policy = RetryPolicy::default();
        assert_eq!(
            policy.wait(1, Some(Duration::from_secs(12))),
            Some(Duration::from_secs(12))
        );
        assert_eq!(policy.wait(1, Some(Duration::from_secs(31))), None);
        assert_eq!(policy.wait(5, Some(Duration::ZERO)), None);
    }
}
