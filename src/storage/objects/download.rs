//! Downloading one object to a local file, streamed: each chunk is written
//! to disk as it arrives and hashed on the way, so an object is never held
//! in memory (the load then streams the file as it streams any snapshot
//! file). A body that ends before its length, or that is not the size or
//! SHA-256 expected, is an error: the file is deleted and nothing is loaded.

use std::io::Write;
use std::path::Path;

use futures_util::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetResult, ObjectStore};
use sha2::{Digest, Sha256};

use crate::storage::error::{ErrorKind, StorageError};

/// A small object read whole into memory (the manifest, a workspace
/// record), and its ETag. One over `max` bytes is refused before its body
/// is read: `what` names whose limit it is ("a manifest").
pub(super) async fn read_small(
    result: GetResult,
    key: &ObjectPath,
    max: usize,
    what: &str,
) -> Result<(bytes::Bytes, Option<String>), StorageError> {
    if result.meta.size > max as u64 {
        return Err(StorageError::new(
            ErrorKind::Manifest,
            format!(
                "{key} is {} bytes, over the {max} {what} may have",
                result.meta.size
            ),
        ));
    }
    let etag = result.meta.e_tag.clone();
    let bytes = result
        .bytes()
        .await
        .map_err(|e| StorageError::new(ErrorKind::Incomplete, format!("cannot read {key}: {e}")))?;
    Ok((bytes, etag))
}

/// What a download wrote.
#[derive(Debug)]
pub struct Downloaded {
    pub len: u64,
    /// SHA-256 of the bytes, lower-case hex.
    pub sha256: String,
    pub etag: Option<String>,
}

/// Why a download failed.
#[derive(Debug)]
pub enum DownloadError {
    /// The object is no longer the version asked for (`If-Match` failed):
    /// it was replaced after the listing.
    Replaced,
    /// The request failed before the body (status, connection).
    Request(object_store::Error),
    /// The body failed part way.
    Body(object_store::Error, u64),
    /// The body was shorter or longer than announced or expected.
    Length { got: u64, expected: u64 },
    /// The bytes are not the SHA-256 the manifest names.
    Digest { got: String, expected: String },
    /// The local file could not be written.
    Disk(std::io::Error),
}

/// What is expected of a download.
pub struct Expect<'a> {
    pub size: u64,
    /// Manifest mode: the SHA-256 the manifest names.
    pub sha256: Option<&'a str>,
    /// Prefix mode: the ETag the listing gave; a different object is not
    /// downloaded.
    pub if_match: Option<&'a str>,
}

/// Downloads `key` into `to`; `on_chunk` is told the size of each chunk.
pub async fn download(
    store: &dyn ObjectStore,
    key: &ObjectPath,
    expect: Expect<'_>,
    to: &Path,
    on_chunk: &mut dyn FnMut(u64),
) -> Result<Downloaded, DownloadError> {
    let options = GetOptions {
        if_match: expect.if_match.map(str::to_owned),
        ..GetOptions::default()
    };
    let result = match store.get_opts(key, options).await {
        Ok(result) => result,
        Err(object_store::Error::Precondition { .. }) => return Err(DownloadError::Replaced),
        Err(err) => return Err(DownloadError::Request(err)),
    };
    let announced = result.range.end - result.range.start;
    let etag = result.meta.e_tag.clone();
    let file = std::fs::File::create(to).map_err(DownloadError::Disk)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 18, file);
    let mut hasher = Sha256::new();
    let mut len = 0u64;
    let mut stream = result.into_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| DownloadError::Body(e, len))?;
        // Not a byte past the size expected: a store that sends more (or
        // an object replaced by a larger one) cannot fill the disk.
        let got = len + chunk.len() as u64;
        if got > expect.size {
            return Err(DownloadError::Length {
                got,
                expected: expect.size,
            });
        }
        hasher.update(&chunk);
        out.write_all(&chunk).map_err(DownloadError::Disk)?;
        len += chunk.len() as u64;
        on_chunk(chunk.len() as u64);
    }
    out.flush().map_err(DownloadError::Disk)?;
    for expected in [announced, expect.size] {
        if len != expected {
            return Err(DownloadError::Length { got: len, expected });
        }
    }
    let sha256: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if let Some(expected) = expect.sha256
        && sha256 != expected
    {
        return Err(DownloadError::Digest {
            got: sha256,
            expected: expected.to_owned(),
        });
    }
    Ok(Downloaded { len, sha256, etag })
}

#[cfg(test)]
mod tests {
    use object_store::memory::InMemory;
    use object_store::{ObjectStoreExt, PutPayload};

    use super::*;

    /// A body longer than the size expected stops as it passes it: no more
    /// than that is ever written to disk.
    #[test]
    fn a_download_stops_at_the_size_expected() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let store = InMemory::new();
        let key = ObjectPath::from("ws.json");
        let body = vec![b'x'; 100_000];
        rt.block_on(store.put(&key, PutPayload::from(body)))
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let to = dir.path().join("ws.json");
        let expect = Expect {
            size: 1_000,
            sha256: None,
            if_match: None,
        };
        let got = rt.block_on(download(&store, &key, expect, &to, &mut |_| {}));
        assert!(
            matches!(
                got,
                Err(DownloadError::Length {
                    expected: 1_000,
                    ..
                })
            ),
            "{got:?}"
        );
        assert!(std::fs::metadata(&to).unwrap().len() <= 1_000);
    }
}
