//! The command line: `hash-key` prints the SHA-256 that a snapshot lists
//! (and refuses keys that could never authenticate), `check` exits 0 or 1, and `generate --scale small` writes snapshots that
//! `check` accepts and the server serves with the demo keys (docs/operations.md#subcommands).
//!
//! One module per subcommand: `hash_key`, `check`, `generate` (and
//! `generate_options` for `--workspaces` and `--text`), `probe`, `sign`
//! (`keygen`, `sign`, and `publish`'s signing flags); `serve`
//! for what the server itself says on the command line (listen addresses, a
//! listener that cannot bind, fatal errors, SIGTERM); `locations` for where
//! `--snapshots` and `--to` point.

mod check;
mod generate;
mod generate_options;
mod hash_key;
mod locations;
mod probe;
mod serve;
mod sign;

use crate::util::*;

/// What a run is given on stdin: `None` for nothing (`/dev/null`).
type Stdin<'a> = Option<&'a [u8]>;

/// Variables added to a run's environment.
type Env<'a> = Vec<(&'a str, &'a str)>;

/// Runs `portfolio-replica args...` with `stdin` as its input (none: empty)
/// and `env` added to an environment without `PORTFOLIO_*` and `RUST_LOG`.
async fn run(args: &[&str], stdin: Option<&[u8]>, env: &[(&str, &str)]) -> CliOutput {
    cli_with(args, stdin, env).await
}
