//! The formats that portfolio-replica's publisher and its replicas share,
//! so that both ends are built from one definition:
//!
//! - [`manifest`]: the object-store manifest (format 2's root and
//!   workspace records, format 1 read only), object names, key claims;
//! - [`delta`]: a new version sent as the bytes it shares with the one it
//!   replaces, encoded by `publish`, applied by a replica;
//! - [`signed`]: what a publisher signs and a replica verifies before it
//!   loads a version, and the key files;
//! - [`status`]: the admin listener's `/snapshots` body, written by a
//!   replica and read back by `versions --replica`.
//!
//! Text in, text out; the one read of a file is a delta's base, by
//! position.

pub mod delta;
pub mod manifest;
pub mod signed;
pub mod status;

/// The domain types the formats name (key hashes, instants, record spans
/// and counts).
use portfolio_domain::{snapshot, store};
