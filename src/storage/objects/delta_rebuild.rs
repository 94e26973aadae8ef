//! A replica's side of deltas (docs/object-storage.md#deltas): the new
//! version of a workspace rebuilt from the bytes of the version it serves,
//! kept on disk by the cache, and the delta the manifest names, instead of
//! downloading the whole object. The delta is downloaded like an object
//! (verified against its size and SHA-256), checked against the base it
//! names, and applied into a plain file in the download directory; the
//! result must be exactly the target the delta ends with. Any failure is
//! the caller's to fall back from, to the whole object.

use std::io::BufReader;
use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use sha2::{Digest, Sha256};

use super::ObjectSource;
use super::download::{DownloadError, Expect, download};
use super::download_cache::{Cache, CacheRecord, Plain};
use crate::storage::listing::{Fetch, FetchedFile, ObjectVersion};
use portfolio_domain::store::time::utc_now;
use portfolio_wire::delta::{self, DeltaError};
use portfolio_wire::manifest::DeltaRef;
use portfolio_wire::status::SourceStatus;

impl ObjectSource {
    /// `version` of `name` rebuilt from the version this replica serves
    /// and `delta`, or `None` to download the whole object: this replica
    /// does not hold the delta's base (a cold start, a missed version, a
    /// rollback), or the delta failed (logged and counted).
    pub(super) fn try_delta(
        &self,
        name: &str,
        version: &ObjectVersion,
        delta: &DeltaRef,
        revisions: Option<(u64, Option<u64>)>,
        signed_plain: Option<&str>,
    ) -> Option<Fetch> {
        let Some((base, record)) = self.cache.base(name, &delta.base) else {
            self.metrics.source_delta("no_base");
            return None;
        };
        let started = std::time::Instant::now();
        let metrics = &self.metrics;
        let result = self.block_on(rebuild(
            self.store.as_ref(),
            &self.cache,
            delta,
            (&base, &record),
            result_bound(version),
            &mut |n| metrics.source_bytes(n),
        ));
        // A delta that rebuilds anything but the signed content is refused
        // like one that does not apply.
        let result = result.and_then(|rebuilt| match signed_plain {
            Some(signed) if signed != rebuilt.plain.sha256 => {
                let _ = std::fs::remove_file(&rebuilt.path);
                Err(RebuildError::NotSigned {
                    rebuilt: rebuilt.plain.sha256,
                    signed: signed.to_owned(),
                })
            }
            _ => Ok(rebuilt),
        });
        let rebuilt = match result {
            Ok(rebuilt) => rebuilt,
            Err(error) => {
                self.metrics.source_delta("failed");
                tracing::warn!(
                    file = %name,
                    key = %version.key,
                    error = %error,
                    "cannot rebuild the new version from its delta; downloading the whole object"
                );
                return None;
            }
        };
        self.metrics.source_delta("applied");
        tracing::info!(
            file = %name,
            key = %version.key,
            delta = %delta.key,
            bytes = rebuilt.fetched,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "object rebuilt from a delta"
        );
        Some(Fetch::Ready(FetchedFile {
            path: rebuilt.path,
            label: version.key.clone(),
            len: rebuilt.plain.len,
            source: Some(SourceStatus {
                key: version.key.clone(),
                etag: None,
                sha256: Some(version.tag.clone()),
                size: version.size,
                manifest_revision: revisions.map(|(root, _)| root),
                workspace_revision: revisions.and_then(|(_, record)| record),
                fetched_at: utc_now(),
                from_cache: false,
                from_delta: Some(delta.base.clone()),
            }),
            download: true,
            written: version.written,
            plain: Some((rebuilt.plain.len, rebuilt.plain.sha256)),
            signed: None,
            file: None,
        }))
    }
}

/// A file rebuilt from a delta.
pub struct Rebuilt {
    pub path: PathBuf,
    pub plain: Plain,
    /// The delta's size: what was downloaded.
    pub fetched: u64,
}

/// Why a delta could not be applied; `try_delta` logs it and downloads
/// the whole object instead, whatever went wrong.
#[derive(Debug, thiserror::Error)]
pub enum RebuildError {
    /// The manifest names a delta key that is not an object path.
    #[error("{key}: {source}")]
    Key {
        key: String,
        source: object_store::path::Error,
    },
    /// `{why:?}`: what the log has always shown of a failed download.
    #[error("cannot download the delta {key}: {why:?}")]
    Download { key: ObjectPath, why: DownloadError },
    /// The delta does not apply to the base, or reading or writing failed.
    /// (`why`, not `source`: `DeltaError` is not a `std::error::Error`.)
    #[error("{key}: {why}")]
    Apply { key: ObjectPath, why: DeltaError },
    /// It applied, but what it rebuilt is not what the version's signature
    /// names (`--trust-key`).
    #[error("the delta rebuilt content with SHA-256 {rebuilt}, not the signed {signed}")]
    NotSigned { rebuilt: String, signed: String },
}

/// A file removed when dropped, unless kept.
struct Scratch(Option<PathBuf>);

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// How large a delta's result may grow: the object's size if it is plain
/// JSON, 64 times it if it is gzip (JSON compresses 5 to 20 times). A
/// result past it is refused while it is written, and the whole object is
/// downloaded instead: the delta is not signed, and must not fill the disk.
fn result_bound(version: &ObjectVersion) -> u64 {
    if version.key.ends_with(".gz") {
        version.size.saturating_mul(64)
    } else {
        version.size
    }
}

/// Downloads `delta` and applies it to the base at `base` (the cache's
/// data file of `record`, the object the delta applies to), writing at most
/// `at_most` bytes of its result.
pub async fn rebuild(
    store: &dyn ObjectStore,
    cache: &Cache,
    delta: &DeltaRef,
    (base, record): (&Path, &CacheRecord),
    at_most: u64,
    on_chunk: &mut dyn FnMut(u64),
) -> Result<Rebuilt, RebuildError> {
    let key = ObjectPath::parse(&delta.key).map_err(|source| RebuildError::Key {
        key: delta.key.clone(),
        source,
    })?;
    let file = Scratch(Some(cache.download_path("delta.gz")));
    let path = file.0.as_deref().unwrap_or(Path::new(""));
    let expect = Expect {
        size: delta.size,
        sha256: Some(&delta.sha256),
        if_match: None,
    };
    if let Err(why) = download(store, &key, expect, path, on_chunk).await {
        return Err(RebuildError::Download { key, why });
    }
    let out = Scratch(Some(cache.download_path("rebuilt.json")));
    let plain = apply(
        cache,
        path,
        (base, record),
        out.0.as_deref().unwrap_or(Path::new("")),
        at_most,
    )
    .map_err(|why| RebuildError::Apply { key, why })?;
    let mut out = out;
    Ok(Rebuilt {
        path: out.0.take().unwrap_or_default(),
        plain,
        fetched: delta.size,
    })
}

/// Applies the delta downloaded to `delta` to the base, into `out`.
fn apply(
    cache: &Cache,
    delta: &Path,
    (base, record): (&Path, &CacheRecord),
    out: &Path,
    at_most: u64,
) -> Result<Plain, DeltaError> {
    // The base uncompressed, with its length and SHA-256: a file rebuilt
    // before is kept so, with them; a gzip object is inflated here once.
    let mut inflated = Scratch(None);
    let (base_path, base_len, base_sha) = match &record.plain {
        Some(plain) => (base.to_owned(), plain.len, plain.sha256.clone()),
        None if base.to_string_lossy().ends_with(".gz") => {
            let to = cache.download_path("base.json");
            inflated.0 = Some(to.clone());
            let mut reader = GzDecoder::new(BufReader::with_capacity(
                1 << 20,
                std::fs::File::open(base)?,
            ));
            let mut writer = HashingWriter {
                out: std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&to)?),
                hasher: Sha256::new(),
            };
            let len = std::io::copy(&mut reader, &mut writer)?;
            std::io::Write::flush(&mut writer.out)?;
            (to, len, delta::hex(&writer.hasher.finalize()))
        }
        // A plain object: its SHA-256 is the object's own.
        None => (
            base.to_owned(),
            std::fs::metadata(base)?.len(),
            record.tag.clone(),
        ),
    };
    let mut reader = GzDecoder::new(BufReader::new(std::fs::File::open(delta)?));
    let header = delta::read_header(&mut reader)?;
    header.check_base(&record.tag, base_len, &base_sha)?;
    let base_file = std::fs::File::open(&base_path)?;
    let mut writer = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(out)?);
    let applied = delta::apply(&base_file, base_len, &mut reader, &mut writer, at_most)?;
    std::io::Write::flush(&mut writer)?;
    Ok(Plain {
        len: applied.len,
        sha256: applied.sha256,
    })
}

struct HashingWriter<W> {
    out: W,
    hasher: Sha256,
}

impl<W: std::io::Write> std::io::Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}
