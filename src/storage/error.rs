//! Storage trouble: why a listing or a download failed, and its kind as
//! metrics and `/snapshots` label it.

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
