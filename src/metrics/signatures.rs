//! What `/metrics` says of signed snapshots (`--trust-key`): versions
//! refused by reason, serving versions whose signature has expired, and
//! the earliest expiry among those that serve, which an alert watches
//! (deploy/prometheus/alerts.yml). Registered only when verification is on.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::ReasonLabels;

pub(super) struct SignatureMetrics {
    refusals: Family<ReasonLabels, Counter>,
    expired: Gauge,
    earliest: Gauge<f64, AtomicU64>,
}

/// The signatures of the serving versions at one moment.
#[derive(Debug, Default)]
pub struct Expiries {
    /// Serving versions whose signature has expired.
    pub expired: usize,
    /// The earliest expiry among the serving versions (Unix seconds).
    pub earliest: Option<f64>,
}

impl SignatureMetrics {
    /// Registers the families; every reason's series exists from the start.
    pub(super) fn register(registry: &mut Registry, reasons: &[&'static str]) -> SignatureMetrics {
        let refusals = Family::<ReasonLabels, Counter>::default();
        for &reason in reasons {
            let _ = refusals.get_or_create(&ReasonLabels { reason });
        }
        registry.register(
            "signature_refusals",
            "Versions refused by --trust-key before they loaded, by reason (unsigned, malformed, untrusted, invalid, mismatch, replayed, expired); the version before keeps serving",
            refusals.clone(),
        );
        let expired = Gauge::default();
        registry.register(
            "signatures_expired",
            "Serving versions whose accepted signature has expired: they keep serving, but the publisher has not re-signed them (or updates are withheld)",
            expired.clone(),
        );
        let earliest = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "signature_earliest_expiry_timestamp_seconds",
            "Unix time at which the first serving version's signature expires (0 when nothing serves)",
            earliest.clone(),
        );
        SignatureMetrics {
            refusals,
            expired,
            earliest,
        }
    }

    pub(super) fn refused(&self, reason: &'static str) {
        self.refusals.get_or_create(&ReasonLabels { reason }).inc();
    }

    pub(super) fn expiries(&self, expiries: &Expiries) {
        self.expired.set(expiries.expired as i64);
        self.earliest.set(expiries.earliest.unwrap_or(0.0));
    }
}
