//! The command line (docs/operations.md#command-line), parsed once into typed values.
//!
//! Every `serve` flag can also come from a `PORTFOLIO_*` environment variable;
//! a flag on the command line wins over the variable.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::serve::api::Cors;
use crate::serve::loader::parse_bytes;
use crate::serve::server::HttpLimits;
use crate::storage::{Location, StorageOptions};
use portfolio_generate::{Scale, TextStyle};

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

impl Cli {
    /// Parses the process's arguments as `Cli::parse` does, with a tip for
    /// a flag that other servers have and this one spells differently
    /// (clap suggests only flags whose names are close).
    pub fn parse_with_tips() -> Cli {
        let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
        Cli::try_parse_from(&args).unwrap_or_else(|e| with_tip(e, &args).exit())
    }
}

/// A usage error (exit 2) found after parsing, as clap reports its own: in
/// the terms, and with the usage line, of `subcommand` (`None`: the
/// top-level command, that is `serve`).
pub fn usage_error(subcommand: Option<&str>, message: impl std::fmt::Display) -> clap::Error {
    use clap::CommandFactory;
    let kind = clap::error::ErrorKind::ArgumentConflict;
    let mut cli = Cli::command();
    // Built, so that a subcommand's usage names the binary before it.
    cli.build();
    match subcommand.and_then(|name| cli.find_subcommand_mut(name)) {
        Some(command) => command.error(kind, message),
        None => cli.error(kind, message),
    }
}

/// `error` with a tip added when it is an unknown flag that `tip_for` knows.
pub fn with_tip(mut error: clap::Error, args: &[std::ffi::OsString]) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if error.kind() != ErrorKind::UnknownArgument {
        return error;
    }
    let tip = match error.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(flag)) => tip_for(flag, args),
        _ => None,
    };
    if let Some(tip) = tip {
        error.insert(
            ContextKind::Suggested,
            ContextValue::StyledStrs(vec![tip.into()]),
        );
    }
    error
}

/// The tip for an unknown `flag`, given the whole command line (`args`) to
/// reuse the value that followed it: `--port 18620` becomes
/// `--listen 127.0.0.1:18620`.
fn tip_for(flag: &str, args: &[std::ffi::OsString]) -> Option<String> {
    let name = flag.split_once('=').map_or(flag, |(name, _)| name);
    let args: Vec<std::borrow::Cow<'_, str>> = args.iter().map(|a| a.to_string_lossy()).collect();
    let joined = format!("{name}=");
    let value = args.iter().enumerate().find_map(|(i, a)| {
        if a == name {
            args.get(i + 1).map(|v| v.to_string())
        } else {
            a.strip_prefix(&joined).map(str::to_owned)
        }
    });
    let port = value
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        .unwrap_or_else(|| "PORT".to_owned());
    match name {
        "--port" => Some(format!(
            "there is no --port: give the API's address with --listen 127.0.0.1:{port} \
             (0.0.0.0:{port} for every interface), and the admin endpoints' with --admin-listen"
        )),
        "--admin-port" => Some(format!(
            "there is no --admin-port: give the admin endpoints' address with \
             --admin-listen 127.0.0.1:{port}"
        )),
        "--host" | "--bind" | "--address" => Some(
            "give the API's address as HOST:PORT with --listen (e.g. --listen 0.0.0.0:8080)"
                .to_owned(),
        ),
        _ => None,
    }
}

#[derive(Debug, Subcommand)]
// One `Command` is parsed per process and matched once: the size of `Serve`
// (its typed `--snapshots` URL included) costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
pub enum Command {
    /// Serve the API (the default).
    Serve(ServeArgs),
    /// Validate snapshot files as the server would; exit 1 if any is rejected.
    Check {
        /// Snapshot files (`.json` or `.json.gz`), or directories: a
        /// directory stands for the files the server would read in it.
        #[arg(required = true, value_name = "FILE|DIR")]
        files: Vec<PathBuf>,
        /// Also say what a replica with these --trust-key files would say
        /// of each file's signature (`<file>.sig`); exit 1 if it would
        /// refuse one.
        #[arg(
            long = "trust-key",
            env = "PORTFOLIO_TRUST_KEY",
            value_name = "FILE",
            value_delimiter = ','
        )]
        trust_keys: Vec<PathBuf>,
    },
    /// Print the SHA-256 of an API key, to put in a snapshot's `api_keys`.
    HashKey {
        /// The whole key, prefix included (e.g. cura_s3cret). Omit it, or
        /// give `-`, to read it from stdin and keep it out of shell history.
        #[arg(value_name = "KEY")]
        key: Option<String>,
        /// The prefix the server is run with: a key without it is refused.
        #[arg(long, env = "PORTFOLIO_KEY_PREFIX", value_name = "TEXT", default_value = "cura", value_parser = parse_prefix)]
        key_prefix: String,
    },
    /// Exit 0 if URL answers 200 within the timeout, else 1 with the reason:
    /// a health check for images without a shell or curl.
    Probe {
        /// An http:// URL (no TLS).
        #[arg(
            long,
            env = "PORTFOLIO_PROBE_URL",
            value_name = "URL",
            default_value = "http://127.0.0.1:8080/readyz"
        )]
        url: crate::tools::http_client::HttpUrl,
        /// Seconds to wait for the status line, connecting included (fractions allowed).
        #[arg(long, value_name = "SECS", default_value = "2", value_parser = parse_timeout)]
        timeout: Duration,
    },
    /// Write realistic synthetic snapshots.
    Generate {
        /// Directory to write into (created if missing).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// small ≈ the demo, medium ≈ 100 MB, large ≈ 1 GB of JSON; micro
        /// ≈ 10 KB, tiny ≈ 100 KB and midsize ≈ 5 MB per workspace, for a
        /// fleet.
        #[arg(long, value_enum, default_value = "small")]
        scale: Scale,
        /// Seed of the generator: the same seed writes the same bytes.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// With --scale micro, tiny or midsize: write N workspaces, each with its own
        /// id and key, listed in keys.tsv beside the files.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        workspaces: Option<u64>,
        /// plain: the generator's prose; escapes: every free-text field also
        /// full of JSON escapes and non-ASCII (quotes, backslashes, \u
        /// escapes, CJK, emoji, combining marks).
        #[arg(long, value_enum, default_value = "plain")]
        text: TextStyle,
    },
    /// Check snapshot files and publish them to object storage: each is
    /// uploaded as an immutable object and made current in the manifest.
    Publish {
        /// Snapshot files (`.json` or `.json.gz`); nothing is published if
        /// any is rejected.
        #[arg(required_unless_present = "refresh_signatures", value_name = "FILE")]
        files: Vec<PathBuf>,
        /// The replicas' `--snapshots` URL (s3://bucket/prefix/, file:///path/).
        #[arg(long, env = "PORTFOLIO_PUBLISH_TO", value_name = "URL", value_parser = parse_to)]
        to: String,
        /// Versions of each workspace the manifest keeps (for rollback).
        #[arg(long, value_name = "N", default_value_t = portfolio_wire::manifest::DEFAULT_KEEP as u64,
              value_parser = clap::value_parser!(u64).range(1..=1000))]
        keep: u64,
        /// Check, and print what would change against each workspace's
        /// current version, without uploading or writing anything.
        #[arg(long, conflicts_with = "refresh_signatures")]
        dry_run: bool,
        /// Publish no file: re-sign each current version whose signature is
        /// missing, by another key, or past half its validity (a daily
        /// cron job; needs --sign-key).
        #[arg(long, requires = "sign_key", conflicts_with = "files")]
        refresh_signatures: bool,
        /// With --refresh-signatures: only this workspace (repeat for more).
        #[arg(long = "workspace", value_name = "ID", requires = "refresh_signatures")]
        workspaces: Vec<String>,
        #[command(flatten)]
        signing: SignArgs,
        #[command(flatten)]
        storage: StorageArgs,
    },
    /// What changed between two snapshots, per collection: records added,
    /// changed, removed and unchanged. Exit 1 if either is rejected.
    Diff {
        /// The earlier snapshot: a file (`.json` or `.json.gz`), or with
        /// --to a published version, WORKSPACE@VERSION.
        #[arg(value_name = "OLD")]
        old: PathBuf,
        /// The later snapshot, as OLD.
        #[arg(value_name = "NEW")]
        new: PathBuf,
        /// Print the counts and the ids of the records as JSON.
        #[arg(long)]
        json: bool,
        /// Compare versions published at this URL: OLD and NEW are then
        /// WORKSPACE@VERSION (a snapshot version, 8+ digits of its sha256,
        /// or `current`).
        #[arg(long, value_name = "URL", value_parser = parse_to)]
        to: Option<String>,
        #[command(flatten)]
        storage: StorageArgs,
    },
    /// Point a workspace back at an earlier published version (by default
    /// the one before the current); the fleet follows on its next poll.
    Rollback {
        /// The workspace id.
        workspace: String,
        /// The replicas' `--snapshots` URL.
        #[arg(long, env = "PORTFOLIO_PUBLISH_TO", value_name = "URL", value_parser = parse_to)]
        to: String,
        /// The version to serve: a snapshot version, or 8+ digits of its sha256.
        #[arg(long, value_name = "V")]
        version: Option<String>,
        #[command(flatten)]
        signing: SignArgs,
        #[command(flatten)]
        storage: StorageArgs,
    },
    /// List each workspace's current and earlier versions in the manifest.
    Versions {
        /// The replicas' `--snapshots` URL.
        #[arg(long, env = "PORTFOLIO_PUBLISH_TO", value_name = "URL", value_parser = parse_to)]
        to: String,
        /// Print the manifest's head and the workspaces' versions as JSON.
        #[arg(long)]
        json: bool,
        /// Only this workspace (repeat for more); by default every
        /// workspace's record is read, one request each.
        #[arg(long = "workspace", value_name = "ID")]
        workspaces: Vec<String>,
        /// A replica's admin address (--admin-listen), HOST:PORT or
        /// http://HOST:PORT: show what it serves against the manifest
        /// (repeat for each replica).
        #[arg(long = "replica", value_name = "HOST:PORT")]
        replicas: Vec<crate::tools::http_client::HttpUrl>,
        #[command(flatten)]
        storage: StorageArgs,
    },
    /// Turn a manifest written by an older build (format 1, one document
    /// for the whole fleet) into format 2 (a record per workspace), once,
    /// after every replica runs a build that reads format 2.
    Migrate {
        /// The replicas' `--snapshots` URL.
        #[arg(long, env = "PORTFOLIO_PUBLISH_TO", value_name = "URL", value_parser = parse_to)]
        to: String,
        #[command(flatten)]
        storage: StorageArgs,
    },
    /// Make a signing key: OUT.key, the secret key (mode 0600), for
    /// `publish --sign-key`; OUT.pub, its public key, for the replicas.
    Keygen {
        /// The two files' path without their ending: `--out keys/publisher`
        /// writes keys/publisher.key and keys/publisher.pub. Neither may
        /// exist.
        #[arg(long, value_name = "PATH")]
        out: PathBuf,
    },
    /// Sign snapshot files for replicas that serve a directory with
    /// --trust-key: each file is checked as `check` does, then its
    /// signature written beside it as FILE.sig.
    // `--sign-key` is optional for publish and rollback, not here, and
    // signs files, not the versions those two make current.
    #[command(mut_arg("sign_key", |a| a.required(true).help(
        "The secret key file (from `keygen`) to sign each file with"
    )))]
    Sign {
        /// The files to sign (`.json` or `.json.gz`), or directories: each
        /// file the server would read in a directory is signed.
        #[arg(required = true, value_name = "FILE|DIR")]
        files: Vec<PathBuf>,
        #[command(flatten)]
        signing: SignArgs,
    },
}

/// Signing what is published (docs/object-storage.md#signing).
#[derive(Clone, Debug, Args)]
pub struct SignArgs {
    /// The secret key file (from `keygen`) to sign with, for replicas that
    /// check signatures: publish and rollback sign each version they make
    /// current.
    #[arg(long, env = "PORTFOLIO_SIGN_KEY", value_name = "FILE")]
    pub sign_key: Option<PathBuf>,
    /// How long a signature is valid: `30m`, `12h`, `7d`, `3600s`; more
    /// than 0 and at most 365d.
    #[arg(long, env = "PORTFOLIO_SIGN_VALID_FOR", value_name = "DURATION",
          default_value = DEFAULT_SIGN_VALID_FOR, value_parser = parse_valid_for)]
    pub sign_valid_for: Duration,
}

/// `--sign-valid-for`'s default, `signed::DEFAULT_VALID_FOR` as the flag
/// takes it (a test keeps them equal).
const DEFAULT_SIGN_VALID_FOR: &str = "7d";

/// Object storage settings beyond the URL; each defaults to the standard
/// environment variables (docs/object-storage.md#configuration).
#[derive(Clone, Debug, Args)]
pub struct StorageArgs {
    /// S3-compatible endpoint (MinIO, Ceph, R2); default AWS_ENDPOINT_URL.
    #[arg(long, env = "PORTFOLIO_STORAGE_ENDPOINT", value_name = "URL")]
    pub storage_endpoint: Option<String>,
    /// Region of the bucket; default AWS_REGION.
    #[arg(long, env = "PORTFOLIO_STORAGE_REGION", value_name = "REGION")]
    pub storage_region: Option<String>,
    /// Allow a plain-HTTP endpoint; default AWS_ALLOW_HTTP.
    #[arg(long, env = "PORTFOLIO_STORAGE_ALLOW_HTTP", value_name = "BOOL")]
    pub storage_allow_http: Option<bool>,
    /// Seconds one listing or manifest request may take, and a download may
    /// go without receiving a byte.
    #[arg(long, env = "PORTFOLIO_STORAGE_TIMEOUT", value_name = "SECS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=600))]
    pub storage_timeout: u64,
}

impl StorageArgs {
    /// The settings, with downloads kept in `cache_dir`.
    pub fn options(&self, cache_dir: Option<PathBuf>) -> StorageOptions {
        StorageOptions {
            endpoint: self.storage_endpoint.clone(),
            region: self.storage_region.clone(),
            allow_http: self.storage_allow_http,
            timeout: Duration::from_secs(self.storage_timeout),
            cache_dir,
            ..StorageOptions::default()
        }
    }
}

#[derive(Clone, Debug, Args)]
pub struct ServeArgs {
    /// Directory of snapshot files, one per workspace, or an object store
    /// URL: s3://bucket/prefix/, gs://bucket/prefix/, az://container/prefix/,
    /// file:///path/.
    #[arg(
        long,
        env = "PORTFOLIO_SNAPSHOTS",
        value_name = "DIR|URL",
        default_value = "./snapshots",
        value_parser = Location::parse
    )]
    pub snapshots: Location,
    /// Address of the API (and /healthz, /readyz).
    #[arg(
        long,
        env = "PORTFOLIO_LISTEN",
        value_name = "ADDR",
        default_value = "127.0.0.1:8080",
        value_parser = parse_listen
    )]
    pub listen: String,
    /// Address of the operators' endpoints (/metrics, /snapshots).
    #[arg(
        long,
        env = "PORTFOLIO_ADMIN_LISTEN",
        value_name = "ADDR",
        default_value = "127.0.0.1:9090",
        value_parser = parse_listen
    )]
    pub admin_listen: String,
    /// API keys are `<prefix>_<secret>`.
    #[arg(long, env = "PORTFOLIO_KEY_PREFIX", value_name = "TEXT", default_value = "cura", value_parser = parse_prefix)]
    pub key_prefix: String,
    /// Poll the directory (or object store) this often: `1s`, `500ms`, `2m`,
    /// or plain milliseconds. A directory is otherwise watched for file
    /// events; an object store is polled every 10s by default.
    #[arg(long, env = "PORTFOLIO_POLL_INTERVAL", value_name = "DURATION", value_parser = parse_poll_interval)]
    pub poll_interval: Option<u64>,
    /// Most connections served at once; accepting pauses at the cap.
    #[arg(long, env = "PORTFOLIO_MAX_CONNECTIONS", value_name = "N", default_value_t = 10_000,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,
    /// Largest request head (request line plus headers) in bytes, 1K to
    /// 1M (K and M suffixes as --memory-limit); larger gets 431.
    #[arg(long, env = "PORTFOLIO_MAX_HEADER_BYTES", value_name = "BYTES", default_value_t = 16_384,
          value_parser = parse_header_bytes)]
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
    /// Compress records once, after their snapshot loads, in the order of
    /// each main list, so that a gzip answer of those lists costs about
    /// what a plain one does (on by default). It costs about 0.45 times the
    /// snapshot's size in memory and a background pass after each load;
    /// `off` compresses every gzip answer per request.
    #[arg(long, env = "PORTFOLIO_PRECOMPRESS", value_enum, default_value = "on")]
    pub precompress: Switch,
    /// Also expose the metric series of every file and workspace (loads,
    /// failures, last load, records). Off by default: they grow with the
    /// fleet, ten series a workspace.
    #[arg(long, env = "PORTFOLIO_METRICS_PER_WORKSPACE")]
    pub metrics_per_workspace: bool,
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
    /// Refuse, before building, a snapshot whose load would push the
    /// process over this many bytes (K, M, G suffixes); default: the
    /// cgroup's memory limit, when there is one.
    #[arg(long, env = "PORTFOLIO_MEMORY_LIMIT", value_name = "BYTES", value_parser = parse_bytes)]
    pub memory_limit: Option<u64>,
    /// Hold at most about this many bytes of workspaces in memory (K, M,
    /// G suffixes; under 1 MiB only with its unit, so that a forgotten one,
    /// `64` for 64MiB, is not taken for bytes); the others are loaded when
    /// a request needs them and the least useful evicted. Default: every
    /// workspace resident.
    #[arg(long, env = "PORTFOLIO_MEMORY_BUDGET", value_name = "BYTES", value_parser = parse_budget)]
    pub memory_budget: Option<u64>,
    /// A directory on a writable disk for what the replica keeps on disk:
    /// from an object store, the last good download of each workspace, to
    /// serve from at a restart while storage is unreachable; with
    /// --memory-budget, the copies loads on demand read (DIR/copies,
    /// remade at each start); with --trust-key, the newest signed revision
    /// accepted per workspace (DIR/accepted), so a restart refuses older
    /// ones. Default: a temporary directory, and nothing remembered.
    #[arg(long, env = "PORTFOLIO_CACHE_DIR", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Requests per second each workspace may send to this replica: `100`
    /// or `100/s`; over it, 429 with Retry-After. Default: no limit.
    #[arg(long, env = "PORTFOLIO_RATE_LIMIT", value_name = "RATE", value_parser = parse_rate)]
    pub rate_limit: Option<std::num::NonZeroU32>,
    /// Requests a workspace may send at once under --rate-limit. Default:
    /// one second's worth.
    #[arg(
        long,
        env = "PORTFOLIO_RATE_BURST",
        value_name = "N",
        requires = "rate_limit"
    )]
    pub rate_burst: Option<std::num::NonZeroU32>,
    /// Requests of one workspace answered at once, at most; more get 429.
    /// Default: no cap.
    #[arg(long, env = "PORTFOLIO_MAX_IN_FLIGHT", value_name = "N")]
    pub max_in_flight: Option<std::num::NonZeroU32>,
    /// Serve only versions signed by a key in this public key file
    /// (`keygen` writes one; a file may hold several keys). Repeat it, or
    /// give several paths separated by commas in the environment variable.
    #[arg(
        long = "trust-key",
        env = "PORTFOLIO_TRUST_KEY",
        value_name = "FILE",
        value_delimiter = ','
    )]
    pub trust_keys: Vec<PathBuf>,
    #[command(flatten)]
    pub storage: StorageArgs,
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

// The value parsers below return their reason as text, not a typed error:
// clap is their only caller (besides their tests), and it prints the reason
// once after "invalid value"; nothing decides on a kind. (`Cors::parse`,
// `Location::parse`, `parse_bytes` and the `LocationError` that `parse_to`
// passes on have types because they are public outside this file.)

/// `--to`: refused on the command line (exit 2, before any file is read)
/// unless it is an object store URL; kept as given, `publish` opens it.
fn parse_to(text: &str) -> Result<String, crate::storage::LocationError> {
    crate::storage::location::parse_target(text).map(|_| text.to_owned())
}

fn parse_prefix(text: &str) -> Result<String, String> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("the key prefix must be non-empty visible ASCII without spaces".into());
    }
    Ok(text.to_owned())
}

/// A listening address: `HOST:PORT` with an IP address (`[::1]:8080` for
/// IPv6) or a host name to resolve (`localhost:8080`).
fn parse_listen(text: &str) -> Result<String, String> {
    const SHAPE: &str = "expected HOST:PORT such as 127.0.0.1:8080 or 0.0.0.0:8080";
    if text.parse::<SocketAddr>().is_ok() {
        return Ok(text.to_owned());
    }
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "{text} has no host: {SHAPE} (127.0.0.1:{text} for this machine only, \
             0.0.0.0:{text} for every interface)"
        ));
    }
    match text.rsplit_once(':') {
        Some(("", _)) => Err(format!("no host before the port: {SHAPE}")),
        Some((host, port)) if is_host_name(host) => match port.parse::<u16>() {
            Ok(_) => Ok(text.to_owned()),
            Err(_) => Err(format!("{port:?} is not a port (0 to 65535): {SHAPE}")),
        },
        _ => Err(SHAPE.to_owned()),
    }
}

/// A DNS name or a dotted address: labels of letters, digits and `-`.
fn is_host_name(host: &str) -> bool {
    host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

impl ServeArgs {
    /// Why the two listeners cannot both bind, when that is plain from the
    /// addresses alone: the same address, or the same port where one of
    /// them is every interface.
    pub fn listeners_conflict(&self) -> Option<String> {
        let (api, admin) = (&self.listen, &self.admin_listen);
        let clash = match (api.parse::<SocketAddr>(), admin.parse::<SocketAddr>()) {
            (Ok(a), Ok(b)) => {
                let covers = |wide: SocketAddr, other: SocketAddr| {
                    wide.ip().is_unspecified() && (wide.is_ipv6() || other.is_ipv4())
                };
                a.port() == b.port()
                    && a.port() != 0
                    && (a.ip() == b.ip() || covers(a, b) || covers(b, a))
            }
            _ => api.eq_ignore_ascii_case(admin) && !api.ends_with(":0"),
        };
        clash.then(|| {
            format!(
                "--listen {api} and --admin-listen {admin} (or PORTFOLIO_LISTEN and \
                 PORTFOLIO_ADMIN_LISTEN) are the same address: the API and the admin \
                 endpoints need different ones, e.g. --admin-listen 127.0.0.1:9090"
            )
        })
    }
}

/// Below this, a `--memory-budget` of plain digits is a unit left out
/// (`64` for `64MiB`) rather than a budget: no workspace fits in a few
/// hundred bytes. A smaller budget is meant when its unit is written
/// (`256KiB` for a fleet of 10 KB workspaces, as the tests run).
const BARE_BUDGET_MIN: u64 = 1 << 20;

/// `--memory-budget`: a size, as `--memory-limit` takes it; plain digits
/// below 1 MiB are refused, with the unit they most likely lack.
fn parse_budget(text: &str) -> Result<u64, String> {
    let bytes = parse_bytes(text).map_err(|e| e.to_string())?;
    let text = text.trim();
    if bytes < BARE_BUDGET_MIN && text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "--memory-budget {text} (or PORTFOLIO_MEMORY_BUDGET): {text} bytes, below 1 MiB; \
             did you mean {text}MiB? (a budget under 1 MiB takes its unit: 512KiB, or \
             {text}B for bytes)"
        ));
    }
    Ok(bytes)
}

/// `--max-header-bytes`: a size, as the memory flags take it, from 1 KiB
/// (no request line and headers of a real client fit in less) to 1 MiB.
fn parse_header_bytes(text: &str) -> Result<u32, String> {
    let bytes = parse_bytes(text).map_err(|e| e.to_string())?;
    match u32::try_from(bytes) {
        Ok(bytes) if (1 << 10..=1 << 20).contains(&bytes) => Ok(bytes),
        _ => Err(format!(
            "{:?} is not from 1KiB (1024) to 1MiB (1048576) bytes",
            text.trim()
        )),
    }
}

/// `100/s`, or a plain `100` (what a snapshot's `limits.rate_per_second`
/// holds): requests per second.
fn parse_rate(text: &str) -> Result<std::num::NonZeroU32, String> {
    let number = text.trim();
    let number = number.strip_suffix("/s").unwrap_or(number);
    number.trim().parse().map_err(|_| {
        format!("{text:?} is not a rate: give requests per second, more than 0, like 100 or 100/s")
    })
}

fn parse_timeout(text: &str) -> Result<Duration, String> {
    match text.parse::<f64>() {
        Ok(secs) if secs > 0.0 && secs <= 3600.0 => Ok(Duration::from_secs_f64(secs)),
        _ => Err("the timeout is seconds, more than 0 and at most 3600 (e.g. 2 or 0.5)".into()),
    }
}

/// A duration in milliseconds: a number (fractions allowed) and a unit,
/// `ms`, `s`, `m`, `h` or `d`; a bare number is `bare` milliseconds each.
/// NaN if it is neither.
fn duration_ms(text: &str, bare: f64) -> f64 {
    let text = text.trim();
    let (number, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(text.len()),
    );
    let scale = match unit.trim() {
        "" => bare,
        "ms" => 1.0,
        "s" => 1000.0,
        "m" => 60_000.0,
        "h" => 3_600_000.0,
        "d" => 86_400_000.0,
        _ => f64::NAN,
    };
    number.parse::<f64>().map(|n| n * scale).unwrap_or(f64::NAN)
}

/// A poll interval in milliseconds: `1s`, `1.5s`, `500ms`, `2m`, `1h`, or a plain
/// number of milliseconds (what the flag took before units), 10 ms to 1 h.
fn parse_poll_interval(text: &str) -> Result<u64, String> {
    let ms = duration_ms(text, 1.0);
    if (10.0..=3_600_000.0).contains(&ms) {
        Ok(ms.round() as u64)
    } else {
        Err(
            "the poll interval is a duration from 10ms to 1h: 1s, 500ms, 2m, or plain milliseconds"
                .into(),
        )
    }
}

/// `--sign-valid-for`: a unit is required (a bare number could be seconds
/// or days). Past a year a stolen, since-replaced key's signatures would
/// stay good too long to be a mistake anyone meant.
fn parse_valid_for(text: &str) -> Result<Duration, String> {
    const MAX_MS: f64 = 365.0 * 86_400_000.0;
    let ms = duration_ms(text, f64::NAN);
    if ms > 0.0 && ms <= MAX_MS {
        Ok(Duration::from_millis(ms.round() as u64))
    } else if ms > MAX_MS {
        Err(format!(
            "{text} is more than 365d: a signature is re-signed (publish --refresh-signatures), \
             not made to last; the default is {DEFAULT_SIGN_VALID_FOR}"
        ))
    } else {
        Err(
            "a signature's validity is a duration with its unit, more than 0 and at most 365d: \
             30m, 12h, 7d, 3600s"
                .into(),
        )
    }
}

/// What the server needs, independent of how it was asked for.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// Where the snapshots come from, typed by the command line.
    pub snapshots: Location,
    pub key_prefix: String,
    /// Poll instead of relying on file events.
    pub poll_interval: Option<Duration>,
    /// Rescan the directory on SIGHUP. The binary sets it; a library user
    /// running several servers in one process may not want that.
    pub rescan_on_sighup: bool,
    pub limits: HttpLimits,
    /// gzip for clients that accept it.
    pub compression: bool,
    /// Records compressed after each load for gzip answers. Pointless
    /// without `compression`.
    pub precompress: bool,
    /// `/readyz` is 503 while fewer workspaces serve.
    pub require_workspaces: usize,
    /// Cross-origin access for browsers; `None` is off.
    pub cors: Option<Cors>,
    /// Loads that would not fit are refused; `None`: the cgroup's limit.
    pub memory_limit: Option<u64>,
    /// Workspaces held in memory at most, in bytes; `None`: all of them.
    pub memory_budget: Option<u64>,
    /// Object storage: client settings and the download cache.
    pub storage: StorageOptions,
    /// Metric series per file and workspace, besides the fleet's.
    pub metrics_per_workspace: bool,
    /// Each workspace's rate and requests in flight, from the flags;
    /// `None`: none from them (a snapshot's own `limits` still hold for
    /// its workspace, and a workspace without any is not limited).
    pub workspace_limits: Option<crate::serve::api::limits::Policy>,
}

impl ServeConfig {
    /// Defaults of the command line: prefix `cura`, file events.
    pub fn new(snapshots: impl Into<Location>) -> ServeConfig {
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
            memory_limit: None,
            memory_budget: None,
            workspace_limits: None,
            storage: StorageOptions::default(),
            metrics_per_workspace: false,
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
            memory_limit: args.memory_limit,
            memory_budget: args.memory_budget,
            workspace_limits: crate::serve::api::limits::Policy::of(
                args.rate_limit,
                args.rate_burst,
                args.max_in_flight,
            ),
            storage: args.storage.options(args.cache_dir.clone()),
            metrics_per_workspace: args.metrics_per_workspace,
        }
    }
}

#[cfg(test)]
mod tests;
