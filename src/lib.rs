//! portfolio-replica serves the read-only Portfolio API straight from memory,
//! fed by JSON snapshot files in a directory or in an object store (S3 and
//! compatible stores, GCS, Azure).
//!
//! # Layout
//!
//! The workspace's crates keep the layers (ARCHITECTURE.md, "Crates"):
//! `portfolio-os` (system calls and hints) under `portfolio-domain` (the
//! domain, `portfolio_domain::store`, and the file format,
//! `portfolio_domain::snapshot`: no IO, no threads of their own; named by
//! their crate's name, never re-exported as if modules of this one), `gzip-fragments` (the
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

pub use config::ServeConfig;
pub use serve::run as serve;
