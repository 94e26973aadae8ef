//! Fair sharing between the workspaces of one replica (`--rate-limit`,
//! `--rate-burst`, `--max-in-flight`): a rate per workspace (GCRA, through
//! `governor`'s keyed limiter, whose state per workspace is one atomic
//! word in a sharded map) and a cap on its requests in flight. A request
//! is admitted after its key is authenticated and before anything else
//! (the contract's order of checks), so an unknown key never costs limiter
//! state; idle workspaces' state is dropped by [`Limits::forget_idle`].
//!
//! STATUS (branch `issue31`): flags-wide limits only; limits carried by
//! snapshots are not done yet (see NOTES-issue31.md).

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::keyed::DashMapStateStore;
use governor::{Quota, RateLimiter};

/// A workspace's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Requests per second, and how many may come at once (the burst).
    pub rate: Option<(NonZeroU32, NonZeroU32)>,
    /// Requests of the workspace being answered at once.
    pub max_in_flight: Option<NonZeroU32>,
}

/// Why a request is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Over the rate: admitted again after this long.
    Rate { retry_after: Duration },
    /// Over the cap on requests in flight.
    InFlight,
}

type Keyed = RateLimiter<u64, DashMapStateStore<u64>, DefaultClock, StateInformationMiddleware>;

/// The limiters of one replica.
pub struct Limits {
    policy: Policy,
    rate: Option<Keyed>,
    in_flight: DashMap<u64, u32>,
}

/// A request admitted: its place among the workspace's requests in
/// flight, given back when dropped.
pub struct Admitted {
    limits: Arc<Limits>,
    key: u64,
    counted: bool,
    /// Requests the workspace may still send now, under its rate.
    pub remaining: Option<u32>,
}

impl Policy {
    /// The policy of the flags: a rate with its burst (by default one
    /// second's worth) and a cap; `None` when neither is set.
    pub fn of(
        rate: Option<NonZeroU32>,
        burst: Option<NonZeroU32>,
        max_in_flight: Option<NonZeroU32>,
    ) -> Option<Policy> {
        let rate = rate.map(|per_second| (per_second, burst.unwrap_or(per_second)));
        (rate.is_some() || max_in_flight.is_some()).then_some(Policy {
            rate,
            max_in_flight,
        })
    }
}

/// The limiter key of a workspace: a hash of its id.
pub fn workspace_key(workspace: &str) -> u64 {
    use std::hash::Hasher;
    let mut hasher = rustc_hash::FxHasher::default();
    hasher.write(workspace.as_bytes());
    hasher.finish()
}

impl Limits {
    /// Limits of `policy` for every workspace.
    pub fn new(policy: Policy) -> Limits {
        let rate = policy.rate.map(|(per_second, burst)| {
            let quota = Quota::per_second(per_second).allow_burst(burst);
            RateLimiter::dashmap(quota).with_middleware::<StateInformationMiddleware>()
        });
        Limits {
            policy,
            rate,
            in_flight: DashMap::new(),
        }
    }

    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Admits a request of the workspace `key` (a hash of its id), or says
    /// why not. A refused request counts against nothing.
    pub fn admit(self: &Arc<Self>, key: u64) -> Result<Admitted, Refusal> {
        let mut admitted = Admitted {
            limits: Arc::clone(self),
            key,
            counted: false,
            remaining: None,
        };
        if let Some(cap) = self.policy.max_in_flight {
            let mut count = self.in_flight.entry(key).or_insert(0);
            if *count >= cap.get() {
                return Err(Refusal::InFlight);
            }
            *count += 1;
            admitted.counted = true;
        }
        if let Some(rate) = &self.rate {
            match rate.check_key(&key) {
                Ok(state) => admitted.remaining = Some(state.remaining_burst_capacity()),
                Err(not_until) => {
                    // The limiter's own clock: making one calibrates it.
                    let retry_after = not_until.wait_time_from(rate.clock().now());
                    // `admitted` gives its in-flight place back as it drops.
                    return Err(Refusal::Rate { retry_after });
                }
            }
        }
        Ok(admitted)
    }

    /// Drops the state of workspaces whose rate has fully recovered: an
    /// idle workspace costs no memory. Call it now and then (the reloader's
    /// tick).
    pub fn forget_idle(&self) {
        if let Some(rate) = &self.rate {
            rate.retain_recent();
            rate.shrink_to_fit();
        }
        self.in_flight.retain(|_, count| *count > 0);
        self.in_flight.shrink_to_fit();
    }

    /// Workspaces with limiter state now.
    pub fn tracked(&self) -> usize {
        self.rate
            .as_ref()
            .map_or(0, Keyed::len)
            .max(self.in_flight.len())
    }
}

impl Drop for Admitted {
    /// Gives the place back; the entry itself stays until
    /// [`Limits::forget_idle`], so a busy workspace does not insert and
    /// remove it on every request.
    fn drop(&mut self) {
        if self.counted
            && let Some(mut count) = self.limits.in_flight.get_mut(&self.key)
        {
            *count = count.saturating_sub(1);
        }
    }
}

/// The 429 of a refused request: the API's error body, `Retry-After` in
/// whole seconds, and the IETF `RateLimit-Policy` / `RateLimit` fields
/// (draft-ietf-httpapi-ratelimit-headers-10) naming the limit hit.
pub fn too_many(policy: Policy, refusal: Refusal) -> warp::reply::Response {
    use warp::http::StatusCode;
    use warp::http::header::{HeaderValue, RETRY_AFTER};
    let (message, retry, policy_field, state) = match refusal {
        Refusal::Rate { retry_after } => {
            let rate = policy.rate.map_or(0, |(per_second, _)| per_second.get());
            let seconds = retry_after.as_secs_f64().ceil().max(1.0) as u64;
            (
                format!("Too many requests: this workspace may send {rate} per second"),
                seconds,
                format!("\"default\";q={rate};w=1"),
                format!("\"default\";r=0;t={seconds}"),
            )
        }
        Refusal::InFlight => {
            let cap = policy.max_in_flight.map_or(0, NonZeroU32::get);
            (
                format!("Too many requests at once: this workspace may have {cap} in flight"),
                1,
                format!("\"in-flight\";q={cap};qu=\"concurrent-requests\""),
                "\"in-flight\";r=0".to_owned(),
            )
        }
    };
    let body = super::error::error_body(&message);
    let mut response = crate::serve::reply::json(StatusCode::TOO_MANY_REQUESTS, body.into());
    let headers = response.headers_mut();
    headers.insert(RETRY_AFTER, HeaderValue::from(retry));
    for (name, value) in [("ratelimit-policy", policy_field), ("ratelimit", state)] {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nz(n: u32) -> NonZeroU32 {
        NonZeroU32::new(n).unwrap()
    }

    #[test]
    fn a_workspace_over_its_rate_is_refused_with_when_to_come_back_and_others_are_not() {
        let limits = Arc::new(Limits::new(Policy {
            rate: Some((nz(10), nz(3))),
            max_in_flight: None,
        }));
        for left in [2, 1, 0] {
            assert_eq!(limits.admit(1).unwrap().remaining, Some(left));
        }
        match limits.admit(1) {
            Err(Refusal::Rate { retry_after }) => {
                assert!(retry_after > Duration::ZERO && retry_after <= Duration::from_millis(100))
            }
            other => panic!("{:?}", other.map(|a| a.remaining)),
        }
        assert!(
            limits.admit(2).is_ok(),
            "another workspace has its own rate"
        );
    }

    #[test]
    fn the_in_flight_cap_counts_what_is_being_answered() {
        let limits = Arc::new(Limits::new(Policy {
            rate: None,
            max_in_flight: Some(nz(2)),
        }));
        let first = limits.admit(7).unwrap();
        let second = limits.admit(7).unwrap();
        assert!(matches!(limits.admit(7), Err(Refusal::InFlight)));
        drop(first);
        let third = limits.admit(7).unwrap();
        drop((second, third));
        limits.forget_idle();
        assert_eq!(
            limits.in_flight.len(),
            0,
            "nothing kept for an idle workspace"
        );
    }

    #[test]
    fn idle_state_is_dropped() {
        let limits = Arc::new(Limits::new(Policy {
            rate: Some((nz(1000), nz(1000))),
            max_in_flight: None,
        }));
        for key in 0..1000 {
            drop(limits.admit(key));
        }
        assert_eq!(limits.tracked(), 1000);
        std::thread::sleep(Duration::from_millis(1100));
        limits.forget_idle();
        assert_eq!(limits.tracked(), 0);
    }
}
