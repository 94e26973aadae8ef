//! Where `--snapshots` (or `--to`) points: a directory, or an object store
//! URL (`s3://bucket/prefix/`, `gs://`, `az://`, `file:///path/`), and the
//! object_store client for such a URL, configured from the standard
//! environment variables and the command line's storage settings.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{ClientConfigKey, ObjectStore, ObjectStoreScheme};
use url::Url;

use super::backoff::request_retries;
use super::error::{LocationError, OpenError};
use crate::metrics::Metrics;
use crate::storage::objects::client::{ClientLog, Connector};

/// What `--snapshots` names, typed once by the command line (clap's
/// `value_parser`) so that nothing later parses text: a directory, or the
/// URL of an object store prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    Directory(PathBuf),
    Url(Url),
}

impl Location {
    /// A `scheme://` text is a URL of a supported store; anything else is a
    /// directory. The error says what is wrong with the text; clap puts the
    /// flag's name before it.
    pub fn parse(text: &str) -> Result<Location, LocationError> {
        let Some((scheme, _)) = text.split_once("://") else {
            return Ok(Location::Directory(PathBuf::from(text)));
        };
        if scheme.is_empty() || !scheme.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Ok(Location::Directory(PathBuf::from(text)));
        }
        let url = Url::parse(text).map_err(|source| LocationError::NotAUrl {
            text: text.to_owned(),
            source,
        })?;
        match ObjectStoreScheme::parse(&url) {
            Ok((ObjectStoreScheme::Memory | ObjectStoreScheme::Http, _)) | Err(_) => {
                Err(LocationError::UnsupportedUrl {
                    text: text.to_owned(),
                })
            }
            Ok(_) => Ok(Location::Url(url)),
        }
    }
}

/// The directory as given, or the URL without user or password: what the
/// `serving` log line shows.
impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Directory(dir) => dir.display().fmt(f),
            Location::Url(url) => f.write_str(&display(url)),
        }
    }
}

/// A path is a directory, whatever it spells: library users and tests
/// that hold a `Path` mean the directory.
impl From<PathBuf> for Location {
    fn from(dir: PathBuf) -> Location {
        Location::Directory(dir)
    }
}

impl From<&std::path::Path> for Location {
    fn from(dir: &std::path::Path) -> Location {
        Location::Directory(dir.to_owned())
    }
}

/// What `publish`, `rollback` and `versions` take as `--to`: the object
/// store URL the replicas read. A directory is refused: replicas reading a
/// directory take files copied into it, and there is no manifest to write.
pub fn parse_target(text: &str) -> Result<Url, LocationError> {
    match Location::parse(text)? {
        Location::Url(url) => Ok(url),
        Location::Directory(dir) => Err(LocationError::DirectoryTarget(dir)),
    }
}

/// Storage settings beyond the URL. Each one left `None` comes from the
/// standard environment variables (`AWS_*`, `GOOGLE_*`, `AZURE_*`).
#[derive(Clone)]
pub struct StorageOptions {
    /// S3-compatible endpoint (MinIO, Ceph, R2, moto); wins over
    /// `AWS_ENDPOINT_URL`, which wins over `AWS_ENDPOINT`.
    pub endpoint: Option<String>,
    /// Wins over `AWS_REGION`, which wins over `AWS_DEFAULT_REGION`.
    pub region: Option<String>,
    /// Allow a plain-HTTP endpoint; else `AWS_ALLOW_HTTP`.
    pub allow_http: Option<bool>,
    /// Credentials given by a program rather than the environment (tests,
    /// library users). Never logged.
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    /// Bound of one listing or manifest request, and of a download that
    /// stops sending bytes.
    pub timeout: Duration,
    /// Where downloads are kept, the last good object of each entry, for a
    /// restart (and under a memory budget, a directory's private copies,
    /// in `copies/`); `None`: a private temporary directory, removed when
    /// the server stops, so that nothing is kept past the process.
    pub cache_dir: Option<PathBuf>,
    /// `--trust-key`: what is verified before it loads, and what was
    /// accepted ([`super::signatures`]); off by default.
    pub trust: Arc<super::signatures::Trust>,
}

impl Default for StorageOptions {
    fn default() -> StorageOptions {
        StorageOptions {
            endpoint: None,
            region: None,
            allow_http: None,
            access_key_id: None,
            secret_access_key: None,
            timeout: Duration::from_secs(10),
            cache_dir: None,
            trust: Arc::default(),
        }
    }
}

/// Redacts the credentials: the configuration is logged and printed with
/// `{:?}`, and secrets never are.
impl std::fmt::Debug for StorageOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let redacted = |v: &Option<String>| v.as_ref().map(|_| "<redacted>");
        f.debug_struct("StorageOptions")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("allow_http", &self.allow_http)
            .field("access_key_id", &redacted(&self.access_key_id))
            .field("secret_access_key", &redacted(&self.secret_access_key))
            .field("timeout", &self.timeout)
            .field("cache_dir", &self.cache_dir)
            .field("trust", &self.trust)
            .finish()
    }
}

/// An object store client for a URL, and the prefix the URL names.
pub struct Opened {
    pub store: Arc<dyn ObjectStore>,
    pub prefix: ObjectPath,
    /// The URL without user or password, for logs.
    pub display: String,
    /// What the client saw of its last failed request.
    pub log: Arc<ClientLog>,
}

/// What a command does at the URL: `Read` (a replica, `versions`,
/// `rollback`) needs a `file://` prefix's directory to exist and creates
/// nothing; `Write` (`publish`) creates it. Object store prefixes need no
/// such step: an empty prefix is one a replica may poll before the first
/// publish.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// Opens the store `url` names to read. `metrics` counts its requests.
pub fn open(
    url: &Url,
    options: &StorageOptions,
    metrics: Option<Arc<Metrics>>,
) -> Result<Opened, OpenError> {
    open_for(Access::Read, url, options, metrics)
}

/// Opens the store `url` names for `access`. `metrics` counts its requests.
pub fn open_for(
    access: Access,
    url: &Url,
    options: &StorageOptions,
    metrics: Option<Arc<Metrics>>,
) -> Result<Opened, OpenError> {
    let (scheme, prefix) = ObjectStoreScheme::parse(url).map_err(|e| OpenError::NotAStoreUrl {
        url: display(url),
        source: Box::new(e),
    })?;
    let store_error = |source| OpenError::Store {
        url: display(url),
        source,
    };
    let log = Arc::new(ClientLog::default());
    let connector = Connector::new(Arc::clone(&log), metrics);
    let retry = request_retries(options.timeout);
    let client = client_settings(options.timeout);
    // The cloud builders share no trait, only these steps: the client
    // settings under each one's own key type, the retries, the connector.
    macro_rules! build {
        ($builder:expr, $client_key:path) => {{
            let mut builder = $builder;
            for (key, value) in &client {
                builder = builder.with_config($client_key(*key), value);
            }
            let store = builder
                .with_retry(retry)
                .with_http_connector(connector)
                .build()
                .map_err(store_error)?;
            Arc::new(store)
        }};
    }
    let store: Arc<dyn ObjectStore> = match scheme {
        ObjectStoreScheme::AmazonS3 => {
            let mut builder = AmazonS3Builder::from_env().with_url(url.as_str());
            // from_env reads AWS_ENDPOINT and AWS_ENDPOINT_URL (and the two
            // region variables) in no set order: make the documented ones win.
            for (variable, key) in [
                ("AWS_DEFAULT_REGION", AmazonS3ConfigKey::Region),
                ("AWS_REGION", AmazonS3ConfigKey::Region),
                ("AWS_ENDPOINT", AmazonS3ConfigKey::Endpoint),
                ("AWS_ENDPOINT_URL", AmazonS3ConfigKey::Endpoint),
            ] {
                if let Ok(value) = std::env::var(variable) {
                    builder = builder.with_config(key, value);
                }
            }
            if let Some(endpoint) = &options.endpoint {
                builder = builder.with_endpoint(endpoint);
            }
            if let Some(region) = &options.region {
                builder = builder.with_region(region);
            }
            if let Some(allow) = options.allow_http {
                builder = builder.with_allow_http(allow);
            }
            if let Some(id) = &options.access_key_id {
                builder = builder.with_access_key_id(id);
            }
            if let Some(secret) = &options.secret_access_key {
                builder = builder.with_secret_access_key(secret);
            }
            build!(builder, AmazonS3ConfigKey::Client)
        }
        ObjectStoreScheme::GoogleCloudStorage => {
            let builder = GoogleCloudStorageBuilder::from_env().with_url(url.as_str());
            build!(builder, GoogleConfigKey::Client)
        }
        ObjectStoreScheme::MicrosoftAzure => {
            let mut builder = MicrosoftAzureBuilder::from_env().with_url(url.as_str());
            if let Some(allow) = options.allow_http {
                builder = builder.with_allow_http(allow);
            }
            build!(builder, AzureConfigKey::Client)
        }
        ObjectStoreScheme::Local => {
            let root = local_root(url, access)?;
            let store = LocalFileSystem::new_with_prefix(&root).map_err(store_error)?;
            return Ok(Opened {
                store: Arc::new(store),
                prefix: ObjectPath::default(),
                display: display(url),
                log,
            });
        }
        _ => return Err(OpenError::UnsupportedUrl { url: display(url) }),
    };
    Ok(Opened {
        store,
        prefix,
        display: display(url),
        log,
    })
}

/// The directory of a `file://` prefix. It must exist and be a directory
/// unless `access` writes, as `--snapshots DIR` must: a misspelled prefix
/// created on the spot would serve nothing, and say so only in a warning.
fn local_root(url: &Url, access: Access) -> Result<PathBuf, OpenError> {
    let shown = display(url);
    let root = url
        .to_file_path()
        .map_err(|()| OpenError::NotALocalPath { url: shown.clone() })?;
    let not_a_directory = |file: &std::path::Path| OpenError::FilePrefix {
        url: shown.clone(),
        file: file.to_owned(),
    };
    match std::fs::metadata(&root) {
        Ok(meta) if meta.is_dir() => Ok(root),
        Ok(_) => Err(not_a_directory(&root)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && access == Access::Write => {
            std::fs::create_dir_all(&root).map_err(|source| OpenError::CannotCreate {
                url: shown.clone(),
                dir: root.clone(),
                source,
            })?;
            Ok(root)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(OpenError::NoPrefixDirectory {
            url: shown,
            dir: root,
        }),
        // `file:///x/acme.json/`: the file is a part of the path.
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            // Rebuilt from its components: no trailing slash, which a
            // file's metadata refuses.
            let path: PathBuf = root.components().collect();
            match path.ancestors().find(|p| p.is_file()) {
                Some(file) => Err(not_a_directory(file)),
                None => Err(OpenError::PrefixUnreadable {
                    url: shown,
                    dir: root,
                    source: e,
                }),
            }
        }
        Err(e) => Err(OpenError::PrefixUnreadable {
            url: shown,
            dir: root,
            source: e,
        }),
    }
}

/// The URL as logs may show it: without user or password.
pub fn display(url: &Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.to_string()
}

/// Connections time out after 5 s (or `timeout`, if shorter); a response
/// that stops sending bytes for
/// `timeout` fails; a whole request may take an hour (a large download on a
/// slow link), listings are bounded by `timeout` by the caller.
fn client_settings(timeout: Duration) -> Vec<(ClientConfigKey, String)> {
    let secs = |d: Duration| format!("{}ms", d.as_millis().max(1));
    vec![
        (
            ClientConfigKey::ConnectTimeout,
            secs(timeout.min(Duration::from_secs(5))),
        ),
        (ClientConfigKey::ReadTimeout, secs(timeout)),
        (ClientConfigKey::Timeout, "3600s".to_owned()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_directories_are_told_apart() {
        assert_eq!(
            Location::parse("./snapshots"),
            Ok(Location::Directory(PathBuf::from("./snapshots")))
        );
        assert_eq!(
            Location::parse("/srv/a:b"),
            Ok(Location::Directory(PathBuf::from("/srv/a:b")))
        );
        for url in [
            "s3://bucket/prefix/",
            "s3://bucket",
            "gs://bucket/p/",
            "az://container/p/",
            "file:///tmp/x/",
        ] {
            assert!(
                matches!(Location::parse(url), Ok(Location::Url(_))),
                "{url}"
            );
        }
        for bad in ["ftp://host/x", "memory:///", "s3://"] {
            assert!(Location::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn logs_never_show_credentials() {
        let url = Url::parse("s3://AKIA:s3cret@bucket/prefix/").unwrap();
        assert_eq!(display(&url), "s3://bucket/prefix/");
        let options = StorageOptions {
            access_key_id: Some("AKIAEXAMPLE".into()),
            secret_access_key: Some("s3cret".into()),
            ..StorageOptions::default()
        };
        let shown = format!("{options:?}");
        assert!(
            !shown.contains("s3cret") && !shown.contains("AKIAEXAMPLE"),
            "{shown}"
        );
    }
}
