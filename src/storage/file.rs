//! Reading one snapshot file: its name decides whether it is a snapshot at
//! all, and whether it is gzip. A file is a [`Source`]: the load streams it
//! (a `.json.gz` is inflated as a stream, never into one buffer); only a
//! rejected file is read whole, to say exactly why.

use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use crate::snapshot::{SnapshotError, Source};

pub use crate::snapshot::is_snapshot_name;

/// A snapshot file, as a source of its (decompressed) bytes.
pub struct SnapshotFile {
    path: PathBuf,
    /// The name errors give: the file name, or the path when it has none.
    name: String,
    /// Whether the file is gzip, as its name ends.
    gzip: bool,
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

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn is_gzip(&self) -> bool {
        self.gzip
    }

    fn cannot_read(&self, err: std::io::Error) -> SnapshotError {
        SnapshotError::new(&self.name, format!("cannot read the file: {err}"))
    }
}

impl Source for SnapshotFile {
    fn open(&self) -> Result<Box<dyn Read + '_>, SnapshotError> {
        let file = std::fs::File::open(&self.path).map_err(|e| self.cannot_read(e))?;
        Ok(if self.is_gzip() {
            Box::new(flate2::read::MultiGzDecoder::new(BufReader::with_capacity(
                1 << 16,
                file,
            )))
        } else {
            Box::new(file)
        })
    }

    fn read_all(&self) -> Result<Vec<u8>, SnapshotError> {
        let raw = read_all(&self.path).map_err(|err| self.cannot_read(err))?;
        decode(&self.name, self.gzip, raw)
    }

    /// The size on disk; a gzip file holds several times as much JSON.
    fn size_hint(&self) -> u64 {
        let len = std::fs::metadata(&self.path).map_or(0, |m| m.len());
        if self.is_gzip() {
            len.saturating_mul(6)
        } else {
            len
        }
    }
}

/// `std::fs::read`, into a buffer that asks for huge pages.
fn read_all(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata().map(|m| m.len() as usize).unwrap_or(0);
    let mut buf = Vec::with_capacity(len + 1);
    crate::os::prefer_huge_pages(&buf);
    file.read_to_end(&mut buf)?;
    Ok(buf)
}

/// Decompresses `raw` when it is `gzip`; passes it through otherwise.
fn decode(name: &str, gzip: bool, raw: Vec<u8>) -> Result<Vec<u8>, SnapshotError> {
    if !gzip {
        return Ok(raw);
    }
    let mut out = Vec::with_capacity(raw.len().saturating_mul(4));
    flate2::read::MultiGzDecoder::new(raw.as_slice())
        .read_to_end(&mut out)
        .map_err(|err| SnapshotError::new(name, format!("not a complete gzip file: {err}")))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::is_snapshot_name;

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
