//! The command line's tools besides `serve`: each a subcommand that
//! `main` runs and that ends.
//!
//! - [`check`]: files validated together as the server would load them;
//! - [`diff`]: what changed between two snapshots, per collection;
//! - [`publish`]: `publish`, `rollback`, `versions`, `migrate`: the fleet's
//!   publisher side of object storage;
//! - [`sign`]: `keygen`, `sign`, and the signing key that `publish` and
//!   `rollback` sign with;
//! - [`commands`]: `hash-key` and `probe`;
//! - [`http_client`]: the one HTTP client they use (`probe`,
//!   `versions --replica`).
//!
//! `generate` is a crate of its own (`portfolio-generate`).

pub mod check;
pub mod commands;
pub mod diff;
pub mod http_client;
pub mod publish;
pub mod sign;
