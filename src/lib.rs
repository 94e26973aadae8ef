//! portfolio-replica serves the read-only Portfolio API straight from memory,
//! fed by JSON snapshot files in a directory or in an object store (S3 and
//! compatible stores, GCS, Azure).
//!
//! # Layout
//!
//! The workspace's crates keep the layers (ARCHITECTURE.md, "Crates"):
//! `portfolio-os` (system calls and hints) under `portfolio-domain` (the
//! domain, re-exported here as [`store`], and the file format,
//! [`snapshot`]: no IO, no threads of their own), `gzip-fragments` (the
//! deflate codec), `portfolio-wire` (the manifest, deltas and the
//! `/snapshots` body that publisher and replicas share) and
//! `portfolio-generate` (synthetic snapshots). This crate is the binary:
//!
//! - [`storage`]: where snapshots come from, a directory or a prefix of an
//!   object store: listing, fetching, the cache, backoff; used by the
//!   server and the publisher alike.
//! - [`serve`](mod@serve): the server, [`serve::run`]: the scan and its reloader
//!   thread, the API, the operators' listener, the accept loop.
//! - [`metrics`]: the Prometheus metrics the server and its storage count.
//! - [`tools`]: the other subcommands: `check`, `diff`, `publish` and its
//!   kin, `hash-key`, `probe`.
//! - [`config`]: the command line, parsed once into typed values;
//!   [`threads`]: the threads a load may use.
//!
//! [`serve()`] runs the whole server on listeners the caller bound, until a
//! shutdown future completes; tests bind `127.0.0.1:0` and stop it at will.

pub mod config;
pub mod metrics;
pub mod serve;
pub mod storage;
pub mod threads;
pub mod tools;

#[cfg(test)]
mod testing;

/// The domain and the file format, a crate of their own (no IO, no
/// threads): re-exported so that the tests and benches reach the whole
/// product through this crate, as the binary does.
pub use portfolio_domain::{snapshot, store};
/// System calls and processor hints, below every layer.
use portfolio_os as os;

pub use config::ServeConfig;
pub use serve::run as serve;
