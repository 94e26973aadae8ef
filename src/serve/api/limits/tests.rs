//! The limiter alone: rates, the in-flight cap, a snapshot's own limits
//! over the flags, idle state dropped.

use super::*;

fn nz(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap()
}

fn limits(rate: Option<(u32, u32)>, max_in_flight: Option<u32>) -> Arc<Limits> {
    Arc::new(Limits::new(Some(Policy {
        rate: rate.map(|(r, b)| (nz(r), nz(b))),
        max_in_flight: max_in_flight.map(nz),
    })))
}

#[test]
fn a_workspace_over_its_rate_is_refused_with_when_to_come_back_and_others_are_not() {
    let limits = limits(Some((10, 3)), None);
    for n in 0..3 {
        assert!(
            limits.admit("ws-1", None).is_ok(),
            "request {n} of the burst"
        );
    }
    match limits
        .admit("ws-1", None)
        .map(drop)
        .map_err(|refused| refused.why)
    {
        Err(Exceeded::Rate { retry_after }) => {
            assert!(retry_after > Duration::ZERO && retry_after <= Duration::from_millis(100))
        }
        other => panic!("{other:?}"),
    }
    assert!(
        limits.admit("ws-2", None).is_ok(),
        "another workspace has its own rate"
    );
}

#[test]
fn the_in_flight_cap_counts_what_is_being_answered() {
    let limits = limits(None, Some(2));
    let first = limits.admit("ws-7", None).unwrap();
    let second = limits.admit("ws-7", None).unwrap();
    let third = limits.admit("ws-7", None).map_err(|refused| refused.why);
    assert!(matches!(third, Err(Exceeded::InFlight)));
    drop(first);
    let third = limits.admit("ws-7", None).unwrap();
    drop((second, third));
    limits.forget_idle();
    assert_eq!(limits.tracked(), 0, "nothing kept for an idle workspace");
}

#[test]
fn a_snapshots_own_limits_override_the_flags_member_by_member() {
    let flags = limits(Some((100, 100)), Some(8));
    let own = WorkspaceLimits {
        rate_per_second: Some(5),
        burst: None,
        max_in_flight: None,
    };
    let expected = Policy {
        rate: Some((nz(5), nz(5))),
        max_in_flight: Some(nz(8)),
    };
    assert_eq!(flags.policy(Some(&own)), expected);
    let none = Limits::new(None);
    assert_eq!(none.policy(None), Policy::default());
    assert_eq!(none.policy(Some(&own)).rate, Some((nz(5), nz(5))));
    // Without flags or own limits, everything is admitted.
    let none = Arc::new(none);
    for _ in 0..1000 {
        assert!(none.admit("ws-1", None).is_ok());
    }
    assert_eq!(none.tracked(), 0);
}

#[test]
fn idle_state_is_dropped() {
    let limits = limits(Some((1000, 1000)), None);
    for n in 0..1000 {
        drop(limits.admit(&format!("ws-{n}"), None));
    }
    assert_eq!(limits.tracked(), 1000);
    std::thread::sleep(Duration::from_millis(1100));
    limits.forget_idle();
    assert_eq!(limits.tracked(), 0);
}
