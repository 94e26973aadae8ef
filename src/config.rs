//! The command line (docs/operations.md#command-line), parsed once into typed values.
//!
//! Every `serve` flag can also come from a `PORTFOLIO_*` environment variable;
//! a flag on the command line wins over the variable.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::api::Cors;
use crate::server::HttpLimits;

#[derive(Debug, Parser)]
#[command(
    name = "portfolio-replica",
    version,
    about = "Serves the read-only Portfolio API from memory, hot-loaded from JSON snapshot files",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// With no subcommand, the server runs with these flags.
    #[command(flatten)]
    pub serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the API (the default).
    Serve(ServeArgs),
    /// Validate snapshot files; exit 1 if any is rejected.
    Check {
        /// Snapshot files (`.json` or `.json.gz`).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// Print the SHA-256 of an API key, to put in a snapshot's `api_keys`.
    HashKey {
        /// The whole key, prefix included (e.g. cura_s3cret).
        key: String,
    },
    /// Write realistic synthetic snapshots.
    Generate {
        /// Directory to write into (created if missing).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// small ≈ the demo, medium ≈ 100 MB, large ≈ 1 GB of JSON.
        #[arg(long, value_enum, default_value = "small")]
        scale: Scale,
        /// Seed of the generator: the same seed writes the same bytes.
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
}

#[derive(Clone, Debug, Args)]
pub struct ServeArgs {
    /// Directory of snapshot files, one per workspace.
    #[arg(
        long,
        env = "PORTFOLIO_SNAPSHOTS",
        value_name = "DIR",
        default_value = "./snapshots"
    )]
    pub snapshots: PathBuf,
    /// Address of the API (and /healthz, /readyz).
    #[arg(
        long,
        env = "PORTFOLIO_LISTEN",
        value_name = "ADDR",
        default_value = "127.0.0.1:8080"
    )]
    pub listen: String,
    /// Address of the operators' endpoints (/metrics, /snapshots).
    #[arg(
        long,
        env = "PORTFOLIO_ADMIN_LISTEN",
        value_name = "ADDR",
        default_value = "127.0.0.1:9090"
    )]
    pub admin_listen: String,
    /// API keys are `<prefix>_<secret>`.
    #[arg(long, env = "PORTFOLIO_KEY_PREFIX", value_name = "TEXT", default_value = "cura", value_parser = parse_prefix)]
    pub key_prefix: String,
    /// Poll the directory every MS milliseconds instead of waiting for file events.
    #[arg(long, env = "PORTFOLIO_POLL_INTERVAL", value_name = "MS", value_parser = parse_poll_interval)]
    pub poll_interval: Option<u64>,
    /// Most connections served at once; accepting pauses at the cap.
    #[arg(long, env = "PORTFOLIO_MAX_CONNECTIONS", value_name = "N", default_value_t = 10_000,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,
    /// Largest request head (request line plus headers) in bytes; larger gets 431.
    #[arg(long, env = "PORTFOLIO_MAX_HEADER_BYTES", value_name = "BYTES", default_value_t = 16_384,
          value_parser = clap::value_parser!(u32).range(1024..=1_048_576))]
    pub max_header_bytes: u32,
    /// Seconds a client has to send a request's head (against slowloris).
    #[arg(long, env = "PORTFOLIO_HEADER_READ_TIMEOUT", value_name = "SECS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub header_read_timeout: u64,
    /// Seconds an idle keep-alive connection is kept open; keep it above the
    /// load balancer's idle timeout.
    #[arg(long, env = "PORTFOLIO_KEEP_ALIVE_TIMEOUT", value_name = "SECS", default_value_t = 75,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub keep_alive_timeout: u64,
    /// Seconds in-flight requests get to finish after SIGTERM/SIGINT.
    #[arg(long, env = "PORTFOLIO_SHUTDOWN_GRACE", value_name = "SECS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub shutdown_grace: u64,
    /// gzip bodies of 1 KiB or more for clients that accept it (`off` where a
    /// proxy compresses, or CPU matters more than bytes on the wire).
    #[arg(long, env = "PORTFOLIO_COMPRESSION", value_enum, default_value = "on")]
    pub compression: Switch,
    /// Compress every record once, at load, so that a gzip answer costs
    /// about what a plain one does (`off` saves about half the size of the
    /// records in memory; gzip answers are then compressed per request).
    #[arg(long, env = "PORTFOLIO_PRECOMPRESS", value_enum, default_value = "on")]
    pub precompress: Switch,
    /// Log format: `text` for people, `json` for log pipelines.
    #[arg(long, env = "PORTFOLIO_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// /readyz answers 503 while fewer than N workspaces serve (by default a
    /// replica is ready once the first scan is done, even with none).
    #[arg(
        long,
        env = "PORTFOLIO_REQUIRE_WORKSPACES",
        value_name = "N",
        default_value_t = 0
    )]
    pub require_workspaces: usize,
    /// Let browser clients of these origins call the API: `*`, or origins
    /// separated by commas (off by default).
    #[arg(long, env = "PORTFOLIO_CORS_ALLOW_ORIGIN", value_name = "ORIGIN|*", value_parser = Cors::parse)]
    pub cors_allow_origin: Option<Cors>,
}

/// How much data `generate` writes, as the command line spells it; the
/// binary maps it to the generator's own `generate::Scale`, so the command
/// line does not depend on the generator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scale {
    /// Two demo workspaces of a few hundred kilobytes each.
    Small,
    /// One workspace of about 100 MB.
    Medium,
    /// One workspace of about 1 GB.
    Large,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    On,
    Off,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

fn parse_prefix(text: &str) -> Result<String, String> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("the key prefix must be non-empty visible ASCII without spaces".into());
    }
    Ok(text.to_owned())
}

fn parse_poll_interval(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(ms) if (10..=3_600_000).contains(&ms) => Ok(ms),
        _ => Err("the poll interval is milliseconds, from 10 to 3600000".into()),
    }
}

/// What the server needs, independent of how it was asked for.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub snapshots: PathBuf,
    pub key_prefix: String,
    /// Poll instead of relying on file events.
    pub poll_interval: Option<Duration>,
    /// Rescan the directory on SIGHUP. The binary sets it; a library user
    /// running several servers in one process may not want that.
    pub rescan_on_sighup: bool,
    pub limits: HttpLimits,
    /// gzip for clients that accept it.
    pub compression: bool,
    /// Records compressed at load for gzip answers. Process-wide: the
    /// setting of the last server started applies to every dataset built
    /// after. Pointless without `compression`.
    pub precompress: bool,
    /// `/readyz` is 503 while fewer workspaces serve.
    pub require_workspaces: usize,
    /// Cross-origin access for browsers; `None` is off.
    pub cors: Option<Cors>,
}

impl ServeConfig {
    /// Defaults of the command line: prefix `cura`, file events.
    pub fn new(snapshots: impl Into<PathBuf>) -> ServeConfig {
        ServeConfig {
            snapshots: snapshots.into(),
            key_prefix: "cura".to_owned(),
            poll_interval: None,
            rescan_on_sighup: false,
            limits: HttpLimits::default(),
            compression: true,
            precompress: true,
            require_workspaces: 0,
            cors: None,
        }
    }
}

impl From<&ServeArgs> for ServeConfig {
    fn from(args: &ServeArgs) -> ServeConfig {
        ServeConfig {
            snapshots: args.snapshots.clone(),
            key_prefix: args.key_prefix.clone(),
            poll_interval: args.poll_interval.map(Duration::from_millis),
            rescan_on_sighup: true,
            limits: HttpLimits {
                max_connections: args.max_connections as usize,
                max_header_bytes: args.max_header_bytes as usize,
                header_read_timeout: Duration::from_secs(args.header_read_timeout),
                keep_alive_timeout: Duration::from_secs(args.keep_alive_timeout),
                shutdown_grace: Duration::from_secs(args.shutdown_grace),
            },
            compression: args.compression == Switch::On,
            precompress: args.compression == Switch::On && args.precompress == Switch::On,
            require_workspaces: args.require_workspaces,
            cors: args.cors_allow_origin.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_subcommand_means_serve_with_defaults() {
        let cli = Cli::try_parse_from(["portfolio-replica"]).unwrap();
        assert!(cli.command.is_none());
        assert_eq!(cli.serve.listen, "127.0.0.1:8080");
        assert_eq!(cli.serve.key_prefix, "cura");
    }

    #[test]
    fn subcommands_parse() {
        let cli = Cli::try_parse_from([
            "portfolio-replica",
            "generate",
            "--out",
            "x",
            "--scale",
            "large",
            "--seed",
            "7",
        ])
        .unwrap();
        assert!(matches!(
            cli.command,
            Some(Command::Generate {
                scale: Scale::Large,
                seed: 7,
                ..
            })
        ));
        assert!(Cli::try_parse_from(["portfolio-replica", "check"]).is_err());
        assert!(Cli::try_parse_from(["portfolio-replica", "--poll-interval", "0"]).is_err());
        assert!(Cli::try_parse_from(["portfolio-replica", "--key-prefix", ""]).is_err());
    }

    #[test]
    fn precompression_is_on_unless_it_or_compression_is_off() {
        let config = |args: &[&str]| {
            let cli = Cli::try_parse_from([&["portfolio-replica"], args].concat()).unwrap();
            ServeConfig::from(&cli.serve)
        };
        assert!(config(&[]).precompress);
        assert!(!config(&["--precompress", "off"]).precompress);
        let off = config(&["--compression", "off"]);
        assert!(
            !off.compression && !off.precompress,
            "nothing to precompress for"
        );
        assert!(Cli::try_parse_from(["portfolio-replica", "--precompress", "maybe"]).is_err());
    }
}
