//! Reading one snapshot file: its name decides whether it is a snapshot at all,
//! and whether it is gzip. A file is a [`portfolio_domain::snapshot::Source`]: the load
//! streams it (a `.json.gz` is inflated as a stream, never into one buffer);
//! only a rejected file is read whole, to say exactly why.
//!
//! A file the scan or a load on demand reads is opened once ([`OpenFile`]):
//! without blocking (a FIFO or a device named like a snapshot cannot stall
//! the reloader), checked to be a regular file, and read at most to the
//! length it had then. Every later read of it (the streaming pass, the
//! error path, the SHA-256 under `--trust-key`) is of that open file, never
//! of its path again, so a symlink flipped or a file renamed over it after
//! the open changes nothing of what loads. Under `--trust-key` the stored
//! bytes are hashed as the load reads them ([`SnapshotFile::digesting`]):
//! what was hashed is exactly what was parsed.

use std::io::{BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use portfolio_domain::snapshot::{SnapshotError, Source};

pub use portfolio_domain::snapshot::is_snapshot_name;

/// The stored size, in bytes, from which a snapshot file is handled alone:
/// the scan loads one this large by itself rather than in a batch, and a
/// directory holds one open once it has loaded (`storage/directory/`).
pub const LARGE_SNAPSHOT_FILE_BYTES: u64 = 16 << 20;

/// A regular file opened once, read by position (so that any number of
/// readers start from its beginning) and never past the length it had
/// when it was opened.
#[derive(Debug)]
pub struct OpenFile {
    file: std::fs::File,
    len: u64,
}

impl OpenFile {
    /// Opens `path` without blocking and checks that it is a regular file.
    pub fn open(path: &Path) -> std::io::Result<OpenFile> {
        use std::os::unix::fs::OpenOptionsExt;
        // O_NONBLOCK: opening a FIFO for reading would otherwise wait for
        // a writer forever. It changes nothing for a regular file.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(portfolio_os::OPEN_NONBLOCK)
            .open(path)?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(std::io::Error::other("not a regular file"));
        }
        Ok(OpenFile {
            file,
            len: meta.len(),
        })
    }

    /// Its length when it was opened: no read goes past it.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A reader of its bytes from `from` up to its length.
    pub fn reader(&self, from: u64) -> impl Read + '_ {
        FileWindow {
            file: &self.file,
            at: from.min(self.len),
            end: self.len,
        }
    }

    /// Copies its bytes to a new file at `to` (in the kernel, a reflink
    /// where the file system can); returns how many.
    pub fn copy_to(&self, to: &Path) -> std::io::Result<u64> {
        let mut out = std::fs::File::create_new(to)?;
        // The file's own offset is at its start: nothing else reads it
        // through the offset (readers go by position).
        let copied = std::io::copy(&mut (&self.file).take(self.len), &mut out)?;
        Ok(copied)
    }

    /// The last `N` bytes (a gzip trailer), if it has that many.
    pub fn tail<const N: usize>(&self) -> Option<[u8; N]> {
        let at = self.len.checked_sub(N as u64)?;
        let mut bytes = [0u8; N];
        self.file.read_exact_at(&mut bytes, at).ok()?;
        Some(bytes)
    }
}

/// A window of an open file, read by position.
struct FileWindow<'a> {
    file: &'a std::fs::File,
    at: u64,
    end: u64,
}

impl Read for FileWindow<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = usize::try_from(self.end - self.at).unwrap_or(usize::MAX);
        let want = buf.len().min(left);
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

/// A snapshot file, as a source of its (decompressed) bytes.
pub struct SnapshotFile {
    path: PathBuf,
    /// The name errors give: the file name, or the path when it has none.
    name: String,
    /// Whether the file is gzip, as its name ends.
    gzip: bool,
    /// Opened once ([`SnapshotFile::opened`]): every read is of this file,
    /// whatever its path names by then. `None`: the path is opened at each
    /// read (the command line's tools, which read files they were named).
    opened: Option<Arc<OpenFile>>,
    /// Hashing the stored bytes as the first reader reads them.
    digest: Option<Digesting>,
    /// A gzip file inflates to at most this many bytes, or its reading
    /// fails ([`SnapshotFile::inflating_at_most`]).
    inflated_at_most: Option<u64>,
}

/// The SHA-256 of what the first reader read, and how far it read.
#[derive(Default)]
struct Digesting {
    started: AtomicBool,
    read: Mutex<Option<(Sha256, u64)>>,
}

impl SnapshotFile {
    pub fn new(path: &Path) -> SnapshotFile {
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        SnapshotFile {
            gzip: name.ends_with(".gz"),
            path: path.to_owned(),
            name,
            opened: None,
            digest: None,
            inflated_at_most: None,
        }
    }

    /// A file that errors call `name`: a download is named after its
    /// object, not after the temporary file it was written to.
    pub fn named(path: &Path, name: &str) -> SnapshotFile {
        SnapshotFile {
            name: name.to_owned(),
            ..SnapshotFile::new(path)
        }
    }

    /// The file `file`, opened once from `path`, that errors call `name`.
    pub fn opened(file: Arc<OpenFile>, path: &Path, name: &str) -> SnapshotFile {
        SnapshotFile {
            opened: Some(file),
            ..SnapshotFile::named(path, name)
        }
    }

    /// This file, its stored bytes hashed as they are read
    /// ([`SnapshotFile::sha256`]). Only for a file opened once.
    pub fn digesting(self) -> SnapshotFile {
        SnapshotFile {
            digest: self.opened.is_some().then(Digesting::default),
            ..self
        }
    }

    /// This file, which must inflate to at most `bytes` if it is gzip: what
    /// the memory limit counted it at from its trailer (ISIZE, the size
    /// modulo 4 GiB of the last member only), so that a file whose size
    /// wrapped, or of several members, fails to load rather than load
    /// beyond what was counted.
    pub fn inflating_at_most(self, bytes: u64) -> SnapshotFile {
        SnapshotFile {
            inflated_at_most: self.gzip.then_some(bytes),
            ..self
        }
    }

    /// The SHA-256 (lower-case hex) of the stored bytes, as the first
    /// reader read them and, past where it stopped, as they are now in the
    /// same open file: the digest of exactly the bytes that were parsed
    /// (the streaming pass stops at the end of the JSON; what follows it
    /// is hashed here). `None` unless [`SnapshotFile::digesting`].
    pub fn sha256(&self) -> Option<std::io::Result<String>> {
        let (digest, opened) = (self.digest.as_ref()?, self.opened.as_ref()?);
        let read = digest.read.lock().unwrap_or_else(|p| p.into_inner()).take();
        let (mut hasher, from) = read.unwrap_or_default();
        let rest = std::io::copy(&mut opened.reader(from), &mut HashWriter(&mut hasher));
        Some(rest.map(|_| portfolio_domain::store::key::to_hex(&hasher.finalize().into())))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn is_gzip(&self) -> bool {
        self.gzip
    }

    /// The stored length: the open file's, or the path's now.
    pub fn stored_len(&self) -> u64 {
        match &self.opened {
            Some(file) => file.len(),
            None => std::fs::metadata(&self.path).map_or(0, |m| m.len()),
        }
    }

    /// The last 4 bytes as stored (a gzip file's ISIZE).
    pub fn trailer(&self) -> Option<[u8; 4]> {
        match &self.opened {
            Some(file) => file.tail::<4>(),
            None => OpenFile::open(&self.path).ok()?.tail::<4>(),
        }
    }

    fn cannot_read(&self, err: std::io::Error) -> SnapshotError {
        SnapshotError::new(&self.name, format!("cannot read the file: {err}"))
    }

    /// A reader of the stored bytes from the start.
    fn raw(&self) -> Result<Box<dyn Read + '_>, SnapshotError> {
        match &self.opened {
            Some(file) => {
                let window = file.reader(0);
                match &self.digest {
                    Some(digest) if !digest.started.swap(true, Ordering::Relaxed) => {
                        Ok(Box::new(HashingReader {
                            inner: window,
                            hasher: Sha256::new(),
                            read: 0,
                            into: &digest.read,
                        }))
                    }
                    _ => Ok(Box::new(window)),
                }
            }
            None => Ok(Box::new(
                std::fs::File::open(&self.path).map_err(|e| self.cannot_read(e))?,
            )),
        }
    }
}

/// A reader that hashes what passes through it, and leaves the hash and
/// the count where [`SnapshotFile::sha256`] finds them when it is dropped.
struct HashingReader<'a, R> {
    inner: R,
    hasher: Sha256,
    read: u64,
    into: &'a Mutex<Option<(Sha256, u64)>>,
}

impl<R: Read> Read for HashingReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.read += n as u64;
        Ok(n)
    }
}

impl<R> Drop for HashingReader<'_, R> {
    fn drop(&mut self) {
        let hashed = (std::mem::take(&mut self.hasher), self.read);
        *self.into.lock().unwrap_or_else(|p| p.into_inner()) = Some(hashed);
    }
}

/// A reader that fails once more than `at_most` bytes came through it.
struct AtMost<R> {
    inner: R,
    left: u64,
    at_most: u64,
}

impl<R: Read> Read for AtMost<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.left = self.left.checked_sub(n as u64).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "it inflates past the {} bytes its gzip trailer records (a .json.gz must be one gzip member of under 4 GiB uncompressed to be counted against the memory limit; store a larger one as .json)",
                    self.at_most
                ),
            )
        })?;
        Ok(n)
    }
}

/// Feeds what is written into a hasher.
struct HashWriter<'a>(&'a mut Sha256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Source for SnapshotFile {
    fn open(&self) -> Result<Box<dyn Read + '_>, SnapshotError> {
        let raw = self.raw()?;
        if !self.is_gzip() {
            return Ok(raw);
        }
        let inflated = flate2::read::MultiGzDecoder::new(BufReader::with_capacity(1 << 16, raw));
        Ok(match self.inflated_at_most {
            Some(at_most) => Box::new(AtMost {
                inner: inflated,
                left: at_most,
                at_most,
            }),
            None => Box::new(inflated),
        })
    }

    fn read_all(&self) -> Result<Vec<u8>, SnapshotError> {
        if self.is_gzip() {
            // Inflated as the load inflates it, bound and all.
            let mut out = Vec::with_capacity((self.stored_len() as usize).saturating_mul(4));
            self.open()?.read_to_end(&mut out).map_err(|err| {
                SnapshotError::new(&self.name, format!("not a complete gzip file: {err}"))
            })?;
            return Ok(out);
        }
        let len = self.stored_len() as usize;
        let mut raw = Vec::with_capacity(len + 1);
        portfolio_os::prefer_huge_pages(&raw);
        self.raw()?
            .read_to_end(&mut raw)
            .map_err(|err| self.cannot_read(err))?;
        Ok(raw)
    }

    /// The size on disk; a gzip file holds several times as much JSON.
    fn size_hint(&self) -> u64 {
        let len = self.stored_len();
        if self.is_gzip() {
            len.saturating_mul(6)
        } else {
            len
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gzip file that inflates past what it was counted at (its trailer
    /// wrapped past 4 GiB, or lies) fails to load, with the reason; below
    /// the bound it loads.
    #[test]
    fn a_gzip_file_inflating_past_its_count_is_refused() {
        use std::io::Write;
        let json =
            std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots/acme.json")).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&json).unwrap();
        let gz = gz.finish().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ws.json.gz");
        std::fs::write(&path, &gz).unwrap();
        let opened = || Arc::new(OpenFile::open(&path).unwrap());
        let load = |file: &SnapshotFile| {
            portfolio_domain::snapshot::load_from(
                "ws.json.gz",
                file,
                &portfolio_domain::store::OneThread,
                &mut |_, _| {},
            )
        };
        let exact = SnapshotFile::opened(opened(), &path, "ws.json.gz")
            .inflating_at_most(json.len() as u64);
        assert!(load(&exact).is_ok());
        let short = SnapshotFile::opened(opened(), &path, "ws.json.gz")
            .inflating_at_most(json.len() as u64 - 1);
        let error = load(&short).err().expect("refused");
        assert!(error.to_string().contains("inflates past"), "{error}");
    }

    #[test]
    fn only_json_and_json_gz_are_snapshots() {
        for name in ["acme.json", "acme.json.gz", "a.b.json"] {
            assert!(is_snapshot_name(name), "{name}");
        }
        for name in [
            ".acme.json",
            "acme.json.tmp",
            "acme.json.part",
            ".acme.json.swp",
            "acme.jsonl",
            "acme.gz",
            "acme",
        ] {
            assert!(!is_snapshot_name(name), "{name}");
        }
    }
}
