//! Storage trouble: why a listing or a download failed, and its kind as
//! metrics and `/snapshots` label it; and why a place to read from cannot
//! be named or opened.

use std::path::PathBuf;

/// Why the listing failed.
#[derive(Debug)]
pub enum ListError {
    /// The directory cannot be listed.
    Io(std::io::Error),
    /// The object store cannot be listed now; the origin has logged and
    /// counted it already. `backs_off`: the trouble calls for polling less
    /// often ([`ErrorKind::backs_off`]).
    Source { backs_off: bool },
}

/// Kinds of storage trouble, as `portfolio_replica_source_errors_total`
/// labels them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// No connection: refused, reset, DNS.
    Network,
    Timeout,
    /// 503 SlowDown, 429.
    Throttling,
    /// Any other 5xx.
    ServerError,
    /// 401, 403: credentials or policy.
    Auth,
    /// An object gone between the listing and the download, or named by the
    /// manifest but missing.
    NotFound,
    /// A body shorter than its Content-Length, or not what the manifest says
    /// (size, SHA-256).
    Incomplete,
    /// The manifest is not valid JSON, or not a manifest this build reads.
    Manifest,
    /// The cache directory or the temporary file cannot be written.
    Disk,
    Other,
}

impl ErrorKind {
    pub const fn label(self) -> &'static str {
        match self {
            ErrorKind::Network => "network",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Throttling => "throttling",
            ErrorKind::ServerError => "server_error",
            ErrorKind::Auth => "auth",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Incomplete => "incomplete",
            ErrorKind::Manifest => "manifest",
            ErrorKind::Disk => "disk",
            ErrorKind::Other => "other",
        }
    }

    /// Whether polling should slow down: storage is failing or throttling.
    /// A missing object, a bad manifest or a full disk are not storage
    /// failing, and polling on finds their fix soonest.
    pub const fn backs_off(self) -> bool {
        !matches!(
            self,
            ErrorKind::NotFound | ErrorKind::Manifest | ErrorKind::Disk
        )
    }
}

/// One failure to read the object store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StorageError {
    pub kind: ErrorKind,
    pub message: String,
}

impl StorageError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> StorageError {
        StorageError {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for StorageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.kind.label())
    }
}

/// A manifest or record a replica cannot trust: polling goes on (its fix
/// is found soonest so) and nothing changes until a valid one replaces it.
impl From<portfolio_wire::manifest::ManifestError> for StorageError {
    fn from(error: portfolio_wire::manifest::ManifestError) -> StorageError {
        StorageError::new(ErrorKind::Manifest, error.to_string())
    }
}

/// Why the text of `--snapshots` or `--to` names no place to read or
/// publish. Clap prints it after "invalid value"; the messages are the
/// ones users have always seen (the command-line tests compare them).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LocationError {
    #[error("{text:?} is not a valid URL: {source}")]
    NotAUrl {
        text: String,
        source: url::ParseError,
    },
    /// A URL of a store this build does not read (`http://`, `memory://`).
    #[error(
        "{text:?}: unsupported storage URL; use s3://bucket/prefix/, gs://bucket/prefix/, az://container/prefix/ or file:///path/"
    )]
    UnsupportedUrl { text: String },
    /// `--to` names a directory: there is no manifest to write there.
    #[error(
        "{}: --to takes the replicas' object store URL (s3://bucket/prefix/, file:///path/); replicas reading a directory take files copied into it",
        .0.display()
    )]
    DirectoryTarget(PathBuf),
}

/// Why a source (or a publisher's target) cannot be opened: the store's
/// client refused the URL or its settings, the directory is not there, or
/// the cache or the client's runtime cannot start. `url` is the URL as
/// logs show it, without credentials. The messages are the ones users have
/// always seen.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// object_store's parse of the URL failed (its error type is private).
    #[error("{url}: {source}")]
    NotAStoreUrl {
        url: String,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The store's builder refused the configuration (a missing bucket,
    /// bad credentials settings, a `file://` root it cannot canonicalize).
    #[error("{url}: {source}")]
    Store {
        url: String,
        source: object_store::Error,
    },
    #[error("{url}: unsupported storage URL")]
    UnsupportedUrl { url: String },
    #[error("{url}: not a local path")]
    NotALocalPath { url: String },
    /// A `file://` URL that names a file (or passes through one).
    #[error(
        "{url}: {} is a file, not a directory: a file:// URL names the directory (the prefix) that holds the snapshots, such as file:///srv/snapshots/",
        .file.display()
    )]
    FilePrefix { url: String, file: PathBuf },
    #[error("{url}: cannot create {}: {source}", .dir.display())]
    CannotCreate {
        url: String,
        dir: PathBuf,
        source: std::io::Error,
    },
    /// A `file://` prefix to read whose directory does not exist.
    #[error(
        "{url}: the directory {} does not exist (a file:// prefix is read from an existing directory; `publish --to {url}` creates it)",
        .dir.display()
    )]
    NoPrefixDirectory { url: String, dir: PathBuf },
    #[error("{url}: {} cannot be read: {source}", .dir.display())]
    PrefixUnreadable {
        url: String,
        dir: PathBuf,
        source: std::io::Error,
    },
    /// With `--memory-budget`, the directory for the last good copies of
    /// the snapshots cannot be made (`<--cache-dir>/copies`, or one in the
    /// system's temporary directory).
    #[error(
        "cannot keep copies of the snapshots for loads on demand (--memory-budget) in {}: {source}; \
         {WRITABLE_CACHE_DIR}",
        copies_dir(.dir.as_deref())
    )]
    CopiesUnwritable {
        dir: Option<PathBuf>,
        source: std::io::Error,
    },
    /// `--snapshots DIR` cannot be read; a missing one is likely a first
    /// start, and the message says where snapshots go.
    #[error(
        "snapshot directory {} cannot be read: {source}{}",
        .dir.display(),
        first_start_hint(.dir, .source)
    )]
    DirectoryUnreadable {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{} is not a directory: --snapshots names the directory that holds the snapshot files (one per workspace), not a file",
        .0.display()
    )]
    NotADirectory(PathBuf),
    /// `--cache-dir` (or the temporary directory) cannot be made.
    #[error("cache directory {}: {source}; {WRITABLE_CACHE_DIR}", .dir.display())]
    CacheDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start the object store client: {0}")]
    Runtime(#[source] std::io::Error),
}

fn first_start_hint(dir: &std::path::Path, error: &std::io::Error) -> String {
    if error.kind() != std::io::ErrorKind::NotFound {
        return String::new();
    }
    format!(
        "; give the directory of snapshot files (or an object store URL) \
         with --snapshots (PORTFOLIO_SNAPSHOTS), or write the demo \
         snapshots there with `portfolio-replica generate --out {}`",
        dir.display()
    )
}

/// What to do about a directory the replica must write and cannot: both
/// the copies of a memory budget and an object store's downloads go under
/// `--cache-dir` when it is given.
const WRITABLE_CACHE_DIR: &str =
    "give --cache-dir DIR (PORTFOLIO_CACHE_DIR) with a directory on a writable disk";

/// Where the copies were to go: `<cache_dir>/copies`, or a new directory in
/// the system's temporary directory, named so that its disk can be found.
fn copies_dir(cache_dir: Option<&std::path::Path>) -> String {
    match cache_dir {
        Some(dir) => dir.join("copies").display().to_string(),
        None => format!(
            "a new directory in {} (the temporary directory)",
            std::env::temp_dir().display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Messages no command-line test reaches, as the text errors wrote
    /// them (`format!` of the same parts).
    #[test]
    fn messages_are_the_ones_users_saw_before() {
        let io = || std::io::Error::other("denied");
        let url = "file:///srv/x/".to_owned();
        let cases: [(Box<dyn std::error::Error>, String); 6] = [
            (
                Box::new(LocationError::NotAUrl {
                    text: "s3://".into(),
                    source: url::ParseError::EmptyHost,
                }),
                format!(
                    "{:?} is not a valid URL: {}",
                    "s3://",
                    url::ParseError::EmptyHost
                ),
            ),
            (
                Box::new(OpenError::NotALocalPath { url: url.clone() }),
                format!("{url}: not a local path"),
            ),
            (
                Box::new(OpenError::CannotCreate {
                    url: url.clone(),
                    dir: "/srv/x".into(),
                    source: io(),
                }),
                format!("{url}: cannot create /srv/x: {}", io()),
            ),
            (
                Box::new(OpenError::PrefixUnreadable {
                    url: url.clone(),
                    dir: "/srv/x".into(),
                    source: io(),
                }),
                format!("{url}: /srv/x cannot be read: {}", io()),
            ),
            (
                Box::new(OpenError::CacheDir {
                    dir: "$TMPDIR".into(),
                    source: io(),
                }),
                format!(
                    "cache directory $TMPDIR: {}; give --cache-dir DIR (PORTFOLIO_CACHE_DIR) \
                     with a directory on a writable disk",
                    io()
                ),
            ),
            (
                Box::new(OpenError::Runtime(io())),
                format!("cannot start the object store client: {}", io()),
            ),
        ];
        for (error, expected) in cases {
            assert_eq!(error.to_string(), expected);
        }
    }
}
