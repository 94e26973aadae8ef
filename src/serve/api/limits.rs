//! Fair sharing between the workspaces of one replica: a rate per
//! workspace (GCRA, through `governor`'s keyed limiter, whose state per
//! workspace is one atomic word in a sharded map) and a cap on its
//! requests in flight. A workspace's own limits (its snapshot's `limits`
//! member) win over the flags (`--rate-limit`, `--rate-burst`,
//! `--max-in-flight`), member by member. A request is admitted after its
//! key is authenticated and before anything else (the contract's order of
//! checks), so an unknown key never costs limiter state; a workspace
//! without limits (no flags, none in its snapshot) costs its requests
//! nothing but the look at its policy; idle workspaces' state is dropped
//! by [`Limits::forget_idle`]. docs/api.md#rate-limits and
//! docs/operations.md#rate-limits say what clients and operators see.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use governor::clock::{Clock, DefaultClock};
use governor::state::keyed::DashMapStateStore;
use governor::{Quota, RateLimiter};

use portfolio_domain::store::limits::WorkspaceLimits;

/// A workspace's limits, as enforced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    /// Requests per second, and how many may come at once (the burst).
    pub rate: Option<(NonZeroU32, NonZeroU32)>,
    /// Requests of the workspace being answered at once.
    pub max_in_flight: Option<NonZeroU32>,
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

/// The limit a refused request is over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exceeded {
    /// Over the rate: admitted again after this long.
    Rate { retry_after: Duration },
    /// Over the cap on requests in flight.
    InFlight,
}

/// A request refused: the limit it is over, and the policy that set it
/// (the 429's headers say both).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverLimit {
    pub policy: Policy,
    pub why: Exceeded,
}

type Keyed = RateLimiter<u64, DashMapStateStore<u64>, DefaultClock>;

/// How often the throttled workspaces are logged and idle state dropped.
pub const LOOK_EVERY: Duration = Duration::from_secs(60);

/// The limiters of one replica: one keyed rate limiter per distinct rate
/// (the flags' and the few plans snapshots set), and the requests in
/// flight per workspace. Without flags ([`Limits::new`] of `None`), it
/// admits every request of a workspace whose snapshot sets no limits at
/// once, with no state kept.
pub struct Limits {
    /// The flags' policy, for what a workspace's snapshot does not set
    /// (no limits without flags).
    default: Policy,
    rates: DashMap<(NonZeroU32, NonZeroU32), Arc<Keyed>>,
    in_flight: DashMap<u64, u32>,
    /// Workspaces refused since the last look: their id and how many
    /// requests of theirs, for the log (bounded by the workspaces that
    /// were throttled in a minute).
    throttled: DashMap<u64, (String, u64)>,
}

/// A request admitted: under a cap on requests in flight, its place among
/// the workspace's, given back when dropped; else nothing.
#[must_use = "dropping it gives the request's place in flight back"]
pub struct Admitted(Option<InFlight>);

/// A place among a workspace's requests in flight.
struct InFlight {
    limits: Arc<Limits>,
    key: u64,
}

/// The limiter key of a workspace: a hash of its id, keyed afresh in each
/// process (SipHash with a random key): the limiters are this replica's
/// own, and an id crafted to collide with another workspace's (so as to
/// spend its rate) would need the key.
pub fn workspace_key(workspace: &str) -> u64 {
    use std::hash::BuildHasher;
    static KEYED: std::sync::LazyLock<std::collections::hash_map::RandomState> =
        std::sync::LazyLock::new(std::collections::hash_map::RandomState::new);
    KEYED.hash_one(workspace)
}

impl Exceeded {
    /// The metric label.
    pub fn reason(self) -> &'static str {
        match self {
            Exceeded::Rate { .. } => "rate",
            Exceeded::InFlight => "in_flight",
        }
    }
}

impl Limits {
    /// Limits of `default` (the flags) for what workspaces' snapshots do
    /// not set; `None`: none but those snapshots set.
    pub fn new(default: Option<Policy>) -> Limits {
        Limits {
            default: default.unwrap_or_default(),
            rates: DashMap::new(),
            in_flight: DashMap::new(),
            throttled: DashMap::new(),
        }
    }

    /// The policy of a workspace: what its snapshot sets, the flags for
    /// what it does not.
    pub fn policy(&self, own: Option<&WorkspaceLimits>) -> Policy {
        let default = self.default;
        let Some(own) = own else { return default };
        let rate = match own.rate_per_second.and_then(NonZeroU32::new) {
            Some(per_second) => {
                let burst = own.burst.and_then(NonZeroU32::new).unwrap_or(per_second);
                Some((per_second, burst))
            }
            None => default.rate,
        };
        Policy {
            rate,
            max_in_flight: own
                .max_in_flight
                .and_then(NonZeroU32::new)
                .or(default.max_in_flight),
        }
    }

    /// The keyed limiter of one rate, made on its first use.
    fn rate(&self, rate: (NonZeroU32, NonZeroU32)) -> Arc<Keyed> {
        if let Some(keyed) = self.rates.get(&rate) {
            return Arc::clone(&keyed);
        }
        let made = self.rates.entry(rate).or_insert_with(|| {
            let quota = Quota::per_second(rate.0).allow_burst(rate.1);
            Arc::new(RateLimiter::dashmap(quota))
        });
        Arc::clone(&made)
    }

    /// Admits a request of the workspace `workspace` (its id) whose
    /// snapshot sets `own` limits, or says which limit it is over. A
    /// refused request counts against nothing. Under no limits at all
    /// (neither flags nor `own`), it is admitted with nothing counted:
    /// no hash of the id, no map touched.
    pub fn admit(
        self: &Arc<Self>,
        workspace: &str,
        own: Option<&WorkspaceLimits>,
    ) -> Result<Admitted, OverLimit> {
        let policy = self.policy(own);
        if policy == Policy::default() {
            return Ok(Admitted(None));
        }
        let key = workspace_key(workspace);
        let refused = |why| {
            self.throttled
                .entry(key)
                .or_insert_with(|| (workspace.to_owned(), 0))
                .1 += 1;
            OverLimit { policy, why }
        };
        let mut admitted = Admitted(None);
        if let Some(cap) = policy.max_in_flight {
            let mut count = self.in_flight.entry(key).or_insert(0);
            if *count >= cap.get() {
                return Err(refused(Exceeded::InFlight));
            }
            *count += 1;
            admitted.0 = Some(InFlight {
                limits: Arc::clone(self),
                key,
            });
        }
        if let Some(rate) = policy.rate.map(|rate| self.rate(rate))
            && let Err(not_until) = rate.check_key(&key)
        {
            // The limiter's own clock: making one calibrates it.
            let retry_after = not_until.wait_time_from(rate.clock().now());
            // `admitted` gives its in-flight place back as it drops.
            return Err(refused(Exceeded::Rate { retry_after }));
        }
        Ok(admitted)
    }

    /// Every [`LOOK_EVERY`]: logs the workspaces throttled since the last
    /// look (one line each, with how many of their requests were refused),
    /// and forgets idle ones.
    pub fn look(&self) {
        let keys: Vec<u64> = self.throttled.iter().map(|entry| *entry.key()).collect();
        for key in keys {
            if let Some((_, (workspace, refused))) = self.throttled.remove(&key) {
                tracing::warn!(
                    workspace = %workspace,
                    refused,
                    every_s = LOOK_EVERY.as_secs(),
                    "workspace throttled: requests over its limits answered 429"
                );
            }
        }
        self.forget_idle();
    }

    /// Drops the state of workspaces whose rate has fully recovered and
    /// that have nothing in flight: an idle workspace costs no memory.
    pub fn forget_idle(&self) {
        for keyed in self.rates.iter() {
            keyed.retain_recent();
            keyed.shrink_to_fit();
        }
        self.in_flight.retain(|_, count| *count > 0);
        self.in_flight.shrink_to_fit();
    }

    /// Workspaces with limiter state now.
    pub fn tracked(&self) -> usize {
        let rates: usize = self.rates.iter().map(|keyed| keyed.len()).sum();
        rates.max(self.in_flight.len())
    }
}

impl Drop for InFlight {
    /// Gives the place back; the entry itself stays until
    /// [`Limits::forget_idle`], so a busy workspace does not insert and
    /// remove it on every request.
    fn drop(&mut self) {
        if let Some(mut count) = self.limits.in_flight.get_mut(&self.key) {
            *count = count.saturating_sub(1);
        }
    }
}

/// The longest a 429 is held back before it is sent.
const HOLD_AT_MOST: Duration = Duration::from_millis(10);

/// How long a refused request's 429 is held back: the time until the
/// workspace would be admitted again, at most `HOLD_AT_MOST`. A client
/// that ignores 429s (a runaway loop on many connections) would otherwise
/// make the replica answer a 429 every few microseconds, and the quiet
/// workspaces would wait behind those; held, its connections wait instead.
/// A client that obeys `Retry-After` waits longer anyway.
pub fn hold(why: Exceeded) -> Duration {
    match why {
        Exceeded::Rate { retry_after } => retry_after.min(HOLD_AT_MOST),
        Exceeded::InFlight => HOLD_AT_MOST,
    }
}

/// The 429 of a refused request: the API's error body, `Retry-After` in
/// whole seconds, and the IETF `RateLimit-Policy` / `RateLimit` fields
/// (draft-ietf-httpapi-ratelimit-headers-10) naming the limit hit (a
/// rate's policy with its burst beside it).
pub fn too_many(OverLimit { policy, why }: OverLimit) -> warp::reply::Response {
    use warp::http::StatusCode;
    use warp::http::header::{HeaderValue, RETRY_AFTER};
    let (message, retry, policy_field, state) = match why {
        Exceeded::Rate { retry_after } => {
            let (rate, burst) = policy.rate.map_or((0, 0), |(per_second, burst)| {
                (per_second.get(), burst.get())
            });
            let seconds = retry_after.as_secs_f64().ceil().max(1.0) as u64;
            (
                format!("Too many requests: this workspace may send {rate} per second"),
                seconds,
                // The draft has no burst parameter; a field may list several
                // quota policies, so the burst is its own: a quota of
                // `burst` requests with no window (`w` is optional), that
                // many may come at once (docs/api.md#rate-limits).
                format!("\"default\";q={rate};w=1, \"burst\";q={burst}"),
                format!("\"default\";r=0;t={seconds}"),
            )
        }
        Exceeded::InFlight => {
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
mod tests;
