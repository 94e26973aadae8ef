//! Where downloads go (`--cache-dir`): each entry's last good object, so
//! that a replica that restarts while storage is unreachable serves what it
//! served before, and one that restarts while storage is fine downloads only
//! what changed.
//!
//! Per entry, a data file named after the entry and the object's tag, and a
//! small JSON record of where it came from. A download is written under a
//! `.download-*` name first and renamed into place only once it has loaded,
//! so the cache never holds an object that was rejected or half written.
//! Without `--cache-dir`, downloads go to a private temporary directory
//! that goes with the process; the last good object of each entry stays
//! there too (never restored from), as the base a delta applies to and
//! what a load on demand reads.
//!
//! An entry rebuilt from a delta keeps its uncompressed bytes (`plain`),
//! the next delta's base.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::storage::listing::{EntryStamp, FetchedFile, Listing, ObjectVersion};
use portfolio_wire::status::SourceStatus;

/// What the cache records of one entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheRecord {
    /// The entry's name (an object name, or a workspace in manifest mode).
    pub name: String,
    pub key: String,
    pub tag: String,
    pub size: u64,
    pub etag: Option<String>,
    pub sha256: Option<String>,
    pub manifest_revision: Option<u64>,
    #[serde(default)]
    pub workspace_revision: Option<u64>,
    pub fetched_at: String,
    /// When the object was written (milliseconds since the epoch), for
    /// conflicts; absent from records of older builds.
    #[serde(default)]
    pub written_ms: Option<u64>,
    /// The data file, in the cache directory.
    pub data: String,
    /// The data file holds the object's content uncompressed (rebuilt from
    /// a delta): its length and SHA-256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plain: Option<Plain>,
}

/// An uncompressed data file's length and SHA-256.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plain {
    pub len: u64,
    pub sha256: String,
}

impl CacheRecord {
    pub fn version(&self) -> ObjectVersion {
        ObjectVersion {
            key: self.key.clone(),
            tag: self.tag.clone(),
            size: self.size,
            written: self
                .written_ms
                .map(|ms| std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(ms)),
        }
    }

    pub fn source(&self) -> SourceStatus {
        SourceStatus {
            key: self.key.clone(),
            etag: self.etag.clone(),
            sha256: self.sha256.clone(),
            size: self.size,
            manifest_revision: self.manifest_revision,
            workspace_revision: self.workspace_revision,
            fetched_at: self.fetched_at.clone(),
            from_cache: true,
            from_delta: None,
        }
    }
}

/// The download cache of one object store source.
pub struct Cache {
    dir: PathBuf,
    /// `--cache-dir` was given; otherwise `dir` is private and temporary.
    keep: bool,
    downloads: AtomicU64,
}

impl Cache {
    /// The cache in `dir` (created if missing; downloads left half done by
    /// an earlier process are deleted), or a private temporary directory.
    pub fn open(dir: Option<&Path>) -> std::io::Result<Cache> {
        let (dir, keep) = match dir {
            Some(dir) => (dir.to_owned(), true),
            // One directory per cache: several servers may run in one
            // process, and each deletes its own directory when it stops.
            None => (
                crate::storage::private_dirs::private_dir("portfolio-replica-downloads")?,
                false,
            ),
        };
        std::fs::create_dir_all(&dir)?;
        let cache = Cache {
            dir,
            keep,
            downloads: AtomicU64::new(0),
        };
        cache.clean();
        Ok(cache)
    }

    /// The cache directory, if `--cache-dir` was given.
    pub fn kept_dir(&self) -> Option<&Path> {
        self.keep.then_some(self.dir.as_path())
    }

    /// A fresh path to download an object with `key` to. Its name keeps
    /// the key's ending, which says whether it is gzip.
    pub fn download_path(&self, key: &str) -> PathBuf {
        // A temporary directory may have been cleaned up under us (tmpwatch,
        // systemd-tmpfiles): make it again.
        let _ = std::fs::create_dir_all(&self.dir);
        let n = self.downloads.fetch_add(1, Ordering::Relaxed);
        self.dir.join(format!(
            ".download-{}-{n}{}",
            std::process::id(),
            ending(key)
        ))
    }

    /// The cached copy of `name` at `version`, if the cache holds it.
    pub fn lookup(&self, name: &str, version: &ObjectVersion) -> Option<(PathBuf, CacheRecord)> {
        if !self.keep {
            return None;
        }
        let record = self.record(name)?;
        let path = self.dir.join(&record.data);
        let len = std::fs::metadata(&path).ok()?.len();
        let expected = record.plain.as_ref().map_or(version.size, |p| p.len);
        (record.version() == *version && len == expected).then_some((path, record))
    }

    /// The data file of `name`'s last good object if it is the object
    /// whose tag is `tag` (with or without `--cache-dir`): a delta's base.
    pub fn base(&self, name: &str, tag: &str) -> Option<(PathBuf, CacheRecord)> {
        let record = self.record(name).filter(|r| r.tag == tag)?;
        let path = self.dir.join(&record.data);
        path.is_file().then_some((path, record))
    }

    /// The data file of `name`'s last good object (with or without
    /// `--cache-dir`): where a load on demand reads it.
    pub fn kept(&self, name: &str) -> Option<PathBuf> {
        let record = self.record(name)?;
        Some(self.dir.join(&record.data))
    }

    /// The cached copy of `name` at `version`, ready to load, if the cache
    /// holds it.
    pub fn local(&self, name: &str, version: &ObjectVersion) -> Option<FetchedFile> {
        let (path, record) = self.lookup(name, version)?;
        Some(FetchedFile {
            path,
            label: version.key.clone(),
            len: version.size,
            source: Some(record.source()),
            download: false,
            written: version.written,
            plain: record.plain.map(|p| (p.len, p.sha256)),
            signed: None,
            file: None,
        })
    }

    /// A download that loaded (`ok`) becomes the cached copy of `name`;
    /// one that was rejected is deleted.
    pub fn settle(&self, name: &str, local: FetchedFile, ok: bool) {
        let (true, Some(source)) = (ok, local.source) else {
            self.discard(&local.path);
            return;
        };
        let record = CacheRecord {
            name: name.to_owned(),
            key: source.key,
            tag: source
                .sha256
                .clone()
                .or(source.etag.clone())
                .unwrap_or_default(),
            size: source.size,
            etag: source.etag,
            sha256: source.sha256,
            manifest_revision: source.manifest_revision,
            workspace_revision: source.workspace_revision,
            fetched_at: source.fetched_at,
            written_ms: local
                .written
                .and_then(|at| at.duration_since(std::time::SystemTime::UNIX_EPOCH).ok())
                .map(|d| d.as_millis() as u64),
            data: String::new(),
            plain: local.plain.map(|p| Plain {
                len: p.0,
                sha256: p.1,
            }),
        };
        if let Err(e) = self.commit(name, &local.path, record) {
            tracing::warn!(file = %name, error = %e, "cannot keep the download in the cache directory");
            self.discard(&local.path);
        }
    }

    /// Keeps `download` as the last good object of `name` (without
    /// `--cache-dir`, in the private directory, for deltas and loads on
    /// demand only).
    pub fn commit(
        &self,
        name: &str,
        download: &Path,
        mut record: CacheRecord,
    ) -> std::io::Result<()> {
        let old = self.record(name);
        // A rebuilt file is plain JSON whatever the object's key says.
        let ending = if record.plain.is_some() {
            ".json"
        } else {
            ending(&record.key)
        };
        record.data = format!(
            "{}.{}{}",
            file_stem(name),
            &hex(&Sha256::digest(record.tag.as_bytes()))[..16],
            ending
        );
        std::fs::rename(download, self.dir.join(&record.data))?;
        let meta = self.dir.join(format!("{}.meta.json", file_stem(name)));
        let temp = self.dir.join(format!(".{}.meta.json.tmp", file_stem(name)));
        std::fs::write(
            &temp,
            serde_json::to_vec_pretty(&record).unwrap_or_default(),
        )?;
        std::fs::rename(&temp, &meta)?;
        if let Some(old) = old
            && old.data != record.data
        {
            let _ = remove(&self.dir.join(old.data));
        }
        Ok(())
    }

    /// Deletes a download that was not kept.
    pub fn discard(&self, download: &Path) {
        let _ = remove(download);
    }

    /// Forgets `name`, which has left the listing.
    pub fn forget(&self, name: &str) {
        if let Some(record) = self.record(name) {
            let _ = remove(&self.dir.join(record.data));
        }
        let _ = remove(&self.dir.join(format!("{}.meta.json", file_stem(name))));
    }

    /// Every entry the cache holds a good object of, by name (none
    /// without `--cache-dir`: a private directory is never restored from).
    pub fn records(&self) -> Vec<CacheRecord> {
        if !self.keep {
            return Vec::new();
        }
        self.all_records()
    }

    /// The entries the cache holds as a listing, standing in for storage
    /// at startup; `None` if it holds none.
    pub fn listing(&self) -> Option<Listing> {
        let records = self.records();
        if records.is_empty() {
            return None;
        }
        let mut listing = Listing::default();
        for record in records {
            listing.entries.insert(
                record.name.clone(),
                Ok(EntryStamp::Object(record.version())),
            );
        }
        Some(listing)
    }

    fn all_records(&self) -> Vec<CacheRecord> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut records: Vec<CacheRecord> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| name.ends_with(".meta.json") && !name.starts_with('.'))
            .filter_map(|meta| read_record(&self.dir.join(meta)))
            .filter(|r| self.dir.join(&r.data).is_file())
            .collect();
        records.sort_by(|a, b| a.name.cmp(&b.name));
        records
    }

    fn record(&self, name: &str) -> Option<CacheRecord> {
        read_record(&self.dir.join(format!("{}.meta.json", file_stem(name))))
            .filter(|r| r.name == name)
    }

    /// Deletes downloads an earlier process left, and data files no record
    /// names (a crash between writing one and its record).
    fn clean(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let named: Vec<String> = self.records().into_iter().map(|r| r.data).collect();
        for entry in entries.flatten() {
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let stray_download = name.starts_with(".download-") || name.ends_with(".meta.json.tmp");
            let stray_data = self.keep
                && !name.starts_with('.')
                && !name.ends_with(".meta.json")
                && (name.ends_with(".json") || name.ends_with(".json.gz"))
                && !named.contains(&name);
            if stray_download || stray_data {
                let _ = remove(&entry.path());
            }
        }
    }
}

impl Drop for Cache {
    /// A private download directory goes with the process.
    fn drop(&mut self) {
        if !self.keep {
            crate::storage::private_dirs::remove(&self.dir);
        }
    }
}

fn read_record(path: &Path) -> Option<CacheRecord> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

fn remove(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// `.json.gz` or `.json`, as the key ends.
fn ending(key: &str) -> &'static str {
    if key.ends_with(".gz") {
        ".json.gz"
    } else {
        ".json"
    }
}

/// A file name for an entry name: letters, digits, `-` and `_` kept, the
/// rest percent-encoded, so that no name escapes the directory or hides.
fn file_stem(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str, tag: &str) -> CacheRecord {
        CacheRecord {
            name: name.to_owned(),
            key: format!("prefix/{name}"),
            tag: tag.to_owned(),
            size: 5,
            etag: Some(tag.to_owned()),
            sha256: None,
            manifest_revision: None,
            workspace_revision: None,
            fetched_at: "2026-11-23T10:00:00.000Z".to_owned(),
            written_ms: None,
            data: String::new(),
            plain: None,
        }
    }

    #[test]
    fn keeps_the_last_good_object_and_forgets_on_request() {
        let dir = std::env::temp_dir().join(format!("cache-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = Cache::open(Some(&dir)).unwrap();
        let download = cache.download_path("prefix/a.json");
        std::fs::write(&download, b"12345").unwrap();
        cache
            .commit("../a.json", &download, record("../a.json", "e1"))
            .unwrap();
        let version = record("../a.json", "e1").version();
        let (path, kept) = cache.lookup("../a.json", &version).expect("cached");
        assert!(path.starts_with(&dir), "{path:?}");
        assert_eq!(std::fs::read(&path).unwrap(), b"12345");
        assert!(kept.source().from_cache);
        // Another version is not a hit; replacing removes the old data file.
        let other = cache.download_path("prefix/a.json");
        std::fs::write(&other, b"67890").unwrap();
        cache
            .commit("../a.json", &other, record("../a.json", "e2"))
            .unwrap();
        assert!(cache.lookup("../a.json", &version).is_none());
        assert!(!path.exists());
        assert_eq!(cache.records().len(), 1);
        // Leftovers of a crashed process are cleaned at open.
        std::fs::write(dir.join(".download-1-1.json"), b"x").unwrap();
        std::fs::write(dir.join("orphan.0123.json"), b"x").unwrap();
        drop(cache);
        let cache = Cache::open(Some(&dir)).unwrap();
        assert!(!dir.join(".download-1-1.json").exists());
        assert!(!dir.join("orphan.0123.json").exists());
        assert_eq!(cache.records().len(), 1);
        cache.forget("../a.json");
        assert!(cache.records().is_empty());
        drop(cache);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
