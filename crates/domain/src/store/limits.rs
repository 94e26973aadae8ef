//! A workspace's own limits, as its snapshot may give them (the optional
//! top-level `limits` member, docs/snapshot-format.md#limits): a plan's
//! limits travel with its data and change with a publish. The binary's
//! API enforces them (`serve::api::limits`); here they are only numbers.

use serde::{Deserialize, Serialize};

/// The most a snapshot may set any limit to.
pub const MAX_LIMIT: u32 = 1_000_000;

/// What a snapshot sets; a member not given falls back to the replica's
/// flags (`--rate-limit`, `--rate-burst`, `--max-in-flight`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceLimits {
    /// Requests per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_second: Option<u32>,
    /// Requests at once under the rate; by default one second's worth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
    /// Requests answered at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_in_flight: Option<u32>,
}

impl WorkspaceLimits {
    /// Reads the member's JSON, refusing what a replica could not enforce:
    /// a member it does not know, a number that is not an integer from 1
    /// to [`MAX_LIMIT`], a burst without a rate.
    pub fn parse(json: &str) -> Result<WorkspaceLimits, String> {
        let shape = || {
            format!(
                "limits must be an object of rate_per_second, burst and max_in_flight, each a whole number from 1 to {MAX_LIMIT}"
            )
        };
        // An object only: serde would take a struct from an array too.
        let value: serde_json::Value = serde_json::from_str(json).map_err(|_| shape())?;
        if !value.is_object() {
            return Err(shape());
        }
        let limits: WorkspaceLimits =
            serde_json::from_value(value).map_err(|e| format!("{}: {e}", shape()))?;
        for (name, value) in [
            ("rate_per_second", limits.rate_per_second),
            ("burst", limits.burst),
            ("max_in_flight", limits.max_in_flight),
        ] {
            if value.is_some_and(|v| v == 0 || v > MAX_LIMIT) {
                return Err(format!(
                    "limits.{name} must be a whole number from 1 to {MAX_LIMIT}"
                ));
            }
        }
        if limits.burst.is_some() && limits.rate_per_second.is_none() {
            return Err("limits.burst needs limits.rate_per_second".to_owned());
        }
        Ok(limits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_limits_a_replica_can_enforce_are_read() {
        let read = WorkspaceLimits::parse(r#"{"rate_per_second": 100, "max_in_flight": 8}"#);
        assert_eq!(
            read,
            Ok(WorkspaceLimits {
                rate_per_second: Some(100),
                burst: None,
                max_in_flight: Some(8),
            })
        );
        for bad in [
            r#"{"rate_per_second": 0}"#,
            r#"{"rate_per_second": 1.5}"#,
            r#"{"rate": 10}"#,
            r#"{"burst": 10}"#,
            r#"[]"#,
            r#"{"max_in_flight": 2000000}"#,
        ] {
            assert!(WorkspaceLimits::parse(bad).is_err(), "{bad}");
        }
    }
}
