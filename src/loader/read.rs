//! Reading one snapshot file: its name decides whether it is a snapshot at
//! all, and whether it is gzip.

use std::io::Read;
use std::path::Path;

use crate::snapshot::SnapshotError;

/// Whether a directory entry is a snapshot: `*.json` or `*.json.gz`, not
/// hidden. Everything else (`*.tmp`, `*.part`, editor swap files) is a
/// writer's scratch space and ignored (docs/snapshot-format.md#file-names).
pub fn is_snapshot_name(name: &str) -> bool {
    !name.starts_with('.') && (name.ends_with(".json") || name.ends_with(".json.gz"))
}

/// Reads a snapshot file and, for `.json.gz`, decompresses it.
pub fn read_file(path: &Path) -> Result<Vec<u8>, SnapshotError> {
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let raw = read_all(path)
        .map_err(|err| SnapshotError::new(&name, format!("cannot read the file: {err}")))?;
    decode(&name, raw)
}

/// `std::fs::read`, into a buffer that asks for huge pages.
fn read_all(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata().map(|m| m.len() as usize).unwrap_or(0);
    let mut buf = Vec::with_capacity(len + 1);
    crate::mem::prefer_huge_pages(&mut buf);
    file.read_to_end(&mut buf)?;
    Ok(buf)
}

/// Decompresses `raw` when `name` ends in `.gz`; passes it through otherwise.
fn decode(name: &str, raw: Vec<u8>) -> Result<Vec<u8>, SnapshotError> {
    if !name.ends_with(".gz") {
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
