//! Retry and backoff, in one place: how long a replica waits before the
//! next poll while storage fails ([`PollBackoff`]), how object_store
//! retries one request itself ([`request_retries`]), and how long a
//! publisher waits before another attempt at a conditional write that lost
//! a race ([`after_conflict`]). Every retried call takes its policy from
//! here, so that the waits a fleet puts on its storage are read, and
//! changed, together.

use std::time::{Duration, SystemTime};

use object_store::{BackoffConfig, RetryConfig};

/// The longest a failing source waits between polls, unless the poll
/// interval itself is longer.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The waits between polls of one source: the interval, doubled for each
/// poll in a row that had trouble (up to [`MAX_BACKOFF`], or the interval if
/// longer), then jittered by up to ±20% so that a fleet does not poll in
/// step.
#[derive(Debug)]
pub struct PollBackoff {
    /// Polls in a row in which a request failed in a way that calls for
    /// backing off (the listing or a download).
    steps: u32,
    /// xorshift64* state, seeded per process so that replicas started
    /// together draw different waits.
    random: u64,
}

impl PollBackoff {
    pub fn new() -> PollBackoff {
        let seed = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            ^ (u64::from(std::process::id()) << 32);
        PollBackoff {
            steps: 0,
            // xorshift never leaves zero.
            random: seed | 1,
        }
    }

    /// Records whether the poll that just ended had trouble that calls for
    /// backing off; one without resets the wait to the interval.
    pub fn polled(&mut self, trouble: bool) {
        self.steps = if trouble {
            self.steps.saturating_add(1)
        } else {
            0
        };
    }

    /// The wait before the next poll, for a poll interval of `interval`.
    pub fn next_poll(&mut self, interval: Duration) -> Duration {
        let cap = MAX_BACKOFF.max(interval);
        let base = interval
            .checked_mul(1 << self.steps.min(16))
            .unwrap_or(cap)
            .min(cap);
        jittered(base, next_random(&mut self.random))
    }
}

impl Default for PollBackoff {
    fn default() -> PollBackoff {
        PollBackoff::new()
    }
}

/// How object_store retries one request itself. It would retry 10 times
/// over 3 minutes by default; a poll must fail within its timeout instead:
/// the reloader retries on the next poll, with [`PollBackoff`], and a
/// replica whose storage is down stays responsive to shutdown and SIGHUP.
pub fn request_retries(timeout: Duration) -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            base: 2.0,
        },
        max_retries: 2,
        retry_timeout: timeout,
    }
}

/// The wait before attempt `attempt + 1` at a write that lost a race to
/// another publisher: 50 ms doubling to 1.6 s, with up to 50% more at
/// random, so that publishers that collided do not collide again in step.
pub fn after_conflict(attempt: u32) -> Duration {
    let base = Duration::from_millis(50) * (1 << attempt.min(5));
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    base + base.mul_f64(f64::from(nanos % 1000) / 2000.0)
}

/// xorshift64*: enough to spread a fleet's polls, no dependency needed.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// `base` scaled by a factor from 0.8 to 1.2 drawn from `random`.
fn jittered(base: Duration, random: u64) -> Duration {
    let unit = (random >> 11) as f64 / (1u64 << 53) as f64;
    base.mul_f64(0.8 + 0.4 * unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_while_polls_fail_up_to_the_cap_and_reset() {
        let mut backoff = PollBackoff::new();
        let second = Duration::from_secs(1);
        let within = |wait: Duration, base_ms: u128| {
            (base_ms * 8 / 10..=base_ms * 12 / 10).contains(&wait.as_millis())
        };
        assert!(within(backoff.next_poll(second), 1000));
        backoff.polled(true);
        backoff.polled(true);
        assert!(within(backoff.next_poll(second), 4000));
        for _ in 0..40 {
            backoff.polled(true);
        }
        assert!(within(backoff.next_poll(second), 30_000));
        // An interval longer than the cap is the cap.
        assert!(within(backoff.next_poll(Duration::from_secs(60)), 60_000));
        backoff.polled(false);
        assert!(within(backoff.next_poll(second), 1000));
    }
}
