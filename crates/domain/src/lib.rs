//! The portfolio's domain and its snapshot file format, with no IO and no
//! threads of their own: what the server serves and what `check`, `diff`,
//! `publish` and `generate` reason about.
//!
//! - [`store`]: ids, instants and the one timestamp writer, key hashes,
//!   the conflict rule, cursors, the one list of collections, `Dataset`
//!   with its indexes and pages, the `Builder` fed plain values, what
//!   warming a dataset means (its gzip fragments), `Catalog`, `Store`.
//! - [`snapshot`]: the file format: wire types, the streaming parse and
//!   every validation rule, rendering records as the API serves them,
//!   `SnapshotError`. It drives the store's builder and knows nothing of
//!   where its bytes come from (a [`snapshot::Source`] is the caller's).
//!
//! Where a load works in parallel, its caller hands it the threads
//! ([`store::Threads`]); files, sockets, clocks of the wall and
//! background threads belong to the crates above.

pub mod snapshot;
pub mod store;

/// Hints to the kernel and the processor (huge pages, prefetching), below
/// every layer.
use portfolio_os as os;
