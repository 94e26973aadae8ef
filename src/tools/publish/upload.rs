//! One checked snapshot file made into an immutable object: gzipped if it
//! is plain JSON (streamed into a temporary file, hashed on the way), then
//! uploaded under its content address `objects/<workspace>/<sha256>.json.gz`,
//! in parts when large, so that neither step holds the file in memory. An
//! object already there under that key is the same content and is not sent
//! again.

use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, WriteMultipart};
use sha2::{Digest, Sha256};

use super::error::PublishError;
use portfolio_wire::delta::hex;

/// Objects up to this size are sent in one request, larger ones in parts of
/// this size (S3 wants parts of 5 MiB or more).
const PART: usize = 8 << 20;

/// A snapshot ready to upload: gzip bytes on disk and their identity.
pub struct Prepared {
    pub path: PathBuf,
    /// `path` is a temporary file of ours, deleted on drop.
    temporary: bool,
    pub sha256: String,
    pub size: u64,
    /// The SHA-256 of the JSON inside (what a delta rebuilds); empty for
    /// a delta.
    pub plain_sha256: String,
}

impl Drop for Prepared {
    fn drop(&mut self) {
        if self.temporary {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Hashes `file` as it is if it is gzip already, or gzips it into a
/// temporary file first.
pub fn prepare(file: &Path, is_gzip: bool) -> std::io::Result<Prepared> {
    let mut input = BufReader::with_capacity(1 << 20, std::fs::File::open(file)?);
    if is_gzip {
        let mut hashing = Sha256Writer::new(std::io::sink());
        std::io::copy(&mut input, &mut hashing)?;
        // The JSON inside, read a second time.
        let mut plain = Sha256Writer::new(std::io::sink());
        let reopened = BufReader::with_capacity(1 << 20, std::fs::File::open(file)?);
        std::io::copy(&mut flate2::read::MultiGzDecoder::new(reopened), &mut plain)?;
        return Ok(Prepared {
            path: file.to_owned(),
            temporary: false,
            sha256: hex(&hashing.hasher.finalize()),
            size: hashing.written,
            plain_sha256: hex(&plain.hasher.finalize()),
        });
    }
    let name = file
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let (mut prepared, plain) = gzip_to_temporary(&format!("{name}.json.gz"), |encoder| {
        let mut plain = Sha256Writer::new(encoder);
        std::io::copy(&mut input, &mut plain)?;
        Ok(hex(&plain.hasher.finalize()))
    })?;
    prepared.plain_sha256 = plain;
    Ok(prepared)
}

/// Writes what `write` writes, gzipped, into a temporary file named after
/// `name`, hashed on the way: a delta, ready to upload like an object.
pub fn gzip_to_temporary<T>(
    name: &str,
    write: impl FnOnce(
        &mut GzEncoder<Sha256Writer<std::io::BufWriter<std::fs::File>>>,
    ) -> std::io::Result<T>,
) -> std::io::Result<(Prepared, T)> {
    let path = std::env::temp_dir().join(format!(
        "portfolio-replica-publish-{}-{name}",
        std::process::id()
    ));
    let out = std::fs::File::create(&path)?;
    let mut prepared = Prepared {
        path,
        temporary: true,
        sha256: String::new(),
        size: 0,
        plain_sha256: String::new(),
    };
    let mut encoder = GzEncoder::new(
        Sha256Writer::new(std::io::BufWriter::with_capacity(1 << 20, out)),
        Compression::default(),
    );
    let made = write(&mut encoder)?;
    let mut hashing = encoder.finish()?;
    hashing.inner.flush()?;
    prepared.sha256 = hex(&hashing.hasher.finalize());
    prepared.size = hashing.written;
    Ok((prepared, made))
}

/// Uploads `prepared` to `key`. Returns false if the object was there
/// already (the same key is the same content).
pub async fn upload(
    store: &dyn ObjectStore,
    key: &ObjectPath,
    prepared: &Prepared,
) -> Result<bool, PublishError> {
    match store.head(key).await {
        Ok(meta) if meta.size == prepared.size => return Ok(false),
        Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
        Err(source) => {
            return Err(PublishError::Look {
                key: key.clone(),
                source,
            });
        }
    }
    let local = |source| PublishError::Local {
        path: prepared.path.clone(),
        source,
    };
    let failed = |source| PublishError::Upload {
        key: key.clone(),
        source,
    };
    let mut file = std::fs::File::open(&prepared.path).map_err(local)?;
    if prepared.size <= PART as u64 {
        let mut bytes = Vec::with_capacity(prepared.size as usize);
        file.read_to_end(&mut bytes).map_err(local)?;
        let options = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        return match store.put_opts(key, PutPayload::from(bytes), options).await {
            Ok(_) => Ok(true),
            // Another publisher sent the same content meanwhile.
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(failed(e)),
        };
    }
    let multipart = store
        .put_multipart(key)
        .await
        .map_err(|source| PublishError::StartUpload {
            key: key.clone(),
            source,
        })?;
    let mut writer = WriteMultipart::new_with_chunk_size(multipart, PART);
    loop {
        let mut chunk = vec![0u8; PART];
        let n = read_full(&mut file, &mut chunk).map_err(local)?;
        if n == 0 {
            break;
        }
        chunk.truncate(n);
        // Two parts in flight at most: memory stays at a few parts.
        if let Err(e) = writer.wait_for_capacity(2).await {
            let _ = writer.abort().await;
            return Err(failed(e));
        }
        writer.put(Bytes::from(chunk));
    }
    writer.finish().await.map_err(failed)?;
    Ok(true)
}

/// Reads until `buf` is full or the file ends.
fn read_full(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// A writer that hashes and counts what goes through it.
pub struct Sha256Writer<W> {
    inner: W,
    hasher: Sha256,
    written: u64,
}

impl<W> Sha256Writer<W> {
    fn new(inner: W) -> Sha256Writer<W> {
        Sha256Writer {
            inner,
            hasher: Sha256::new(),
            written: 0,
        }
    }
}

impl<W: Write> Write for Sha256Writer<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_json_is_gzipped_and_hashed_as_uploaded() {
        let dir = std::env::temp_dir().join(format!("prepare-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let plain = dir.join("a.json");
        std::fs::write(&plain, br#"{"x": 1}"#).unwrap();
        let prepared = prepare(&plain, false).unwrap();
        let bytes = std::fs::read(&prepared.path).unwrap();
        assert_eq!(prepared.size, bytes.len() as u64);
        assert_eq!(prepared.sha256, hex(&Sha256::digest(&bytes)));
        let mut text = String::new();
        flate2::read::GzDecoder::new(bytes.as_slice())
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, r#"{"x": 1}"#);
        let inside = hex(&Sha256::digest(br#"{"x": 1}"#));
        assert_eq!(prepared.plain_sha256, inside);
        // A gzip file is sent as it is.
        let gz = dir.join("a.json.gz");
        std::fs::write(&gz, &bytes).unwrap();
        let again = prepare(&gz, true).unwrap();
        assert_eq!(
            (again.sha256.as_str(), again.path.as_path()),
            (prepared.sha256.as_str(), gz.as_path())
        );
        assert_eq!(again.plain_sha256, inside);
        let temp = prepared.path.clone();
        drop(prepared);
        assert!(!temp.exists());
        drop(again);
        assert!(gz.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
