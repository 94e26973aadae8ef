//! Unit tests of the scan over an object store origin, on object_store's
//! in-memory store (fast, no server); the same behaviour against a real S3
//! protocol server is in tests/it/objstore*.rs.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use object_store::memory::InMemory;
use std::time::Duration;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde_json::json;
use sha2::{Digest, Sha256};
use url::Url;

use super::{MemoryLimit, Snapshots};
use crate::metrics::Metrics;
use crate::storage::{Location, StorageOptions, StorageOrigin};
use portfolio_domain::store::Store;
use portfolio_wire::manifest::v1::ManifestV1;
use portfolio_wire::manifest::{MAX_CHANGES, Root, Version, WorkspaceRecord, record_path};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

const COMPANY: &str = "00000000-0000-4000-8000-100000000000";

fn snapshot(workspace: &str, version: &str, tasks: usize) -> Vec<u8> {
    let key = format!("{:x}", Sha256::digest(format!("cura_{workspace}")));
    let tasks: Vec<_> = (0..tasks)
        .map(|i| {
            json!({"id": format!("00000000-0000-4000-8000-{i:012x}"),
                   "attributes": {"company_id": COMPANY, "created_at": "2026-01-01T00:00:00Z"}})
        })
        .collect();
    serde_json::to_vec(&json!({
        "format_version": 1,
        "version": version,
        "workspace": {"id": workspace},
        "api_keys": [{"sha256": key, "label": "test"}],
        "companies": [{"id": COMPANY, "attributes": {"name": "c"}}],
        "tasks": tasks,
    }))
    .unwrap()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

struct Fixture {
    store: Arc<InMemory>,
    snapshots: Snapshots,
    catalog: Arc<Store>,
    /// The manifest format `write` writes.
    format: AtomicU32,
    /// Format 2 as last written: each record, and the root.
    written: Mutex<(BTreeMap<String, WorkspaceRecord>, Root)>,
}

impl Fixture {
    fn new(store: Arc<InMemory>, cache_dir: Option<&std::path::Path>) -> Fixture {
        let metrics = Arc::new(Metrics::new(&["other"]).with_object_store());
        let options = StorageOptions {
            cache_dir: cache_dir.map(ToOwned::to_owned),
            ..StorageOptions::default()
        };
        let origin = StorageOrigin::over_store(
            Arc::clone(&store) as Arc<dyn ObjectStore>,
            "fleet",
            "memory:///fleet/".to_owned(),
            &options,
            Arc::clone(&metrics),
        )
        .unwrap();
        let catalog = Arc::new(Store::default());
        let snapshots = Snapshots::new(
            Arc::new(origin),
            Arc::clone(&catalog),
            metrics,
            MemoryLimit::none(),
            false,
            None,
        );
        Fixture {
            store,
            snapshots,
            catalog,
            format: AtomicU32::new(2),
            written: Mutex::new((BTreeMap::new(), Root::empty())),
        }
    }

    /// A fixture in manifest mode that serves `ws-a` at `a1`, and the
    /// manifest it published.
    fn serving_a1() -> (Fixture, ManifestV1) {
        let f = Fixture::new(Arc::new(InMemory::new()), None);
        let mut manifest = ManifestV1::empty();
        f.publish(&mut manifest, "ws-a", &snapshot("ws-a", "a1", 1), "a1");
        f.snapshots.scan().unwrap();
        (f, manifest)
    }

    /// Writes `manifest` as a publisher would in the fixture's format: in
    /// format 2, the records whose versions changed and a root announcing
    /// them.
    fn write(&self, manifest: &ManifestV1) {
        if self.format.load(Ordering::Relaxed) == 1 {
            self.put("fleet/manifest.json", manifest.to_json());
            return;
        }
        let (records, root) = &mut *self.written.lock().unwrap();
        let mut changes = Vec::new();
        for (name, history) in &manifest.workspaces {
            let record = records
                .entry(name.clone())
                .or_insert_with(|| WorkspaceRecord {
                    workspace: name.clone(),
                    revision: 0,
                    updated_at: String::new(),
                    history: history.clone(),
                });
            if record.revision > 0 && record.history == *history {
                continue;
            }
            record.revision += 1;
            record.history = history.clone();
            let path = record_path(&ObjectPath::from("fleet"), name);
            self.put(path.as_ref(), record.to_json());
            let current = history.current_version().unwrap().clone();
            changes.push((name.clone(), record.revision, current));
        }
        root.announce(&changes, "now".into());
        self.put("fleet/manifest.json", root.to_json());
    }

    fn put(&self, key: &str, bytes: Vec<u8>) {
        rt().block_on(
            self.store
                .put(&ObjectPath::from(key), PutPayload::from(bytes)),
        )
        .unwrap();
    }

    fn delete(&self, key: &str) {
        rt().block_on(self.store.delete(&ObjectPath::from(key)))
            .unwrap();
    }

    /// Puts a one-task snapshot under each `(name, workspace, version)`.
    fn put_all(&self, files: &[(&str, &str, &str)]) {
        for (name, workspace, version) in files {
            self.put(&format!("fleet/{name}"), snapshot(workspace, version, 1));
        }
    }

    /// One scan, and how many catalogs it published.
    fn scan(&self) -> (super::ScanReport, u64) {
        let before = self.catalog.published();
        let report = self.snapshots.scan().unwrap();
        (report, self.catalog.published() - before)
    }

    fn serving(&self, workspace: &str) -> Option<String> {
        self.catalog
            .load()
            .workspace(workspace)
            .map(|d| d.version.clone())
    }

    fn status(&self, name: &str) -> super::FileStatus {
        self.snapshots
            .statuses()
            .into_iter()
            .find(|s| s.file == name)
            .unwrap_or_else(|| panic!("no status for {name}"))
    }

    /// Publishes `bytes` for `workspace` as the publisher would.
    fn publish(&self, manifest: &mut ManifestV1, workspace: &str, bytes: &[u8], version: &str) {
        let listed = self.upload(workspace, bytes, version, "x.json");
        manifest.publish(workspace, listed, 10);
        manifest.revision += 1;
        self.write(manifest);
    }

    /// Uploads `bytes` gzipped as `workspace`'s object and names it as a
    /// manifest does.
    fn upload(&self, workspace: &str, bytes: &[u8], version: &str, file: &str) -> Version {
        let gz = gzip(bytes);
        let sha256 = format!("{:x}", Sha256::digest(&gz));
        let key = format!("objects/{workspace}/{sha256}.json.gz");
        self.put(&format!("fleet/{key}"), gz.clone());
        Version {
            sha256,
            key,
            size: gz.len() as u64,
            version: version.to_owned(),
            published_at: String::new(),
            file: file.to_owned(),
            records: 0,
            key_hashes: None,
            delta: None,
            signature: None,
            plain_sha256: None,
            limits: None,
        }
    }
}

#[test]
fn prefix_mode_follows_creates_replacements_and_deletions() {
    let f = Fixture::new(Arc::new(InMemory::new()), None);
    f.put("fleet/a.json", snapshot("ws-a", "a1", 1));
    f.put("fleet/b.json.gz", gzip(&snapshot("ws-b", "b1", 1)));
    for ignored in [
        "fleet/.a.json",
        "fleet/a.json.tmp",
        "fleet/notes.txt",
        "fleet/sub/c.json",
    ] {
        f.put(ignored, snapshot("ws-c", "c1", 1));
    }
    let report = f.snapshots.scan().unwrap();
    assert!(report.listed && !report.source_failed, "{report:?}");
    assert_eq!(f.serving("ws-a").as_deref(), Some("a1"));
    assert_eq!(f.serving("ws-b").as_deref(), Some("b1"));
    assert_eq!(f.serving("ws-c"), None);
    let names: Vec<String> = f.snapshots.statuses().into_iter().map(|s| s.file).collect();
    assert_eq!(names, ["a.json", "b.json.gz"]);
    let source = f.status("a.json").source.expect("a source");
    assert_eq!(source.key, "fleet/a.json");
    assert!(source.etag.is_some() && source.sha256.is_none() && !source.from_cache);
    assert!(f.status("a.json").stale_seconds.is_some());

    // Nothing changed: nothing is downloaded.
    let report = f.snapshots.scan().unwrap();
    assert!(report.loaded.is_empty(), "{report:?}");

    f.put("fleet/a.json", snapshot("ws-a", "a2", 1));
    f.snapshots.scan().unwrap();
    assert_eq!(f.serving("ws-a").as_deref(), Some("a2"));

    // A bad replacement keeps the previous version.
    f.put("fleet/a.json", b"{\"format_version\": 1,".to_vec());
    let report = f.snapshots.scan().unwrap();
    assert_eq!(report.rejected, ["a.json"]);
    assert_eq!(f.serving("ws-a").as_deref(), Some("a2"));
    assert!(f.status("a.json").error.unwrap().contains("fleet/a.json"));

    f.delete("fleet/b.json.gz");
    let report = f.snapshots.scan().unwrap();
    assert_eq!(report.removed, ["b.json.gz"]);
    assert_eq!(f.serving("ws-b"), None);
}

#[test]
fn a_scan_with_nothing_to_publish_keeps_the_catalog() {
    let f = Fixture::new(Arc::new(InMemory::new()), None);
    f.put_all(&[("a.json", "ws-a", "a1"), ("b.json", "ws-b", "b1")]);
    f.snapshots.scan().unwrap();
    let published = Arc::clone(&f.catalog.load());

    // Nothing changed: no settle, no new catalog.
    for _ in 0..3 {
        let (report, swaps) = f.scan();
        assert!(report.listed && report.loaded.is_empty(), "{report:?}");
        assert_eq!(swaps, 0);
    }
    assert!(Arc::ptr_eq(&published, &Arc::clone(&f.catalog.load())));
    // Still confirmed fresh by each poll.
    assert!(f.status("a.json").stale_seconds.is_some());

    // A change publishes; so does a removal.
    f.put("fleet/a.json", snapshot("ws-a", "a2", 1));
    assert_eq!(f.scan().1, 1);
    assert_eq!(f.serving("ws-a").as_deref(), Some("a2"));
    f.delete("fleet/b.json");
    assert_eq!(f.scan().1, 1);
    assert_eq!(f.serving("ws-b"), None);
}

/// A scan settles, warms and publishes once per batch, what left first:
/// a file that lost a conflict to one removed is read again and serves
/// in the same scan, in a second swap.
#[test]
fn what_left_settles_first_and_a_loser_it_frees_serves_in_the_same_scan() {
    let f = Fixture::new(Arc::new(InMemory::new()), None);
    f.put_all(&[
        ("a.json", "ws-a", "a1"),
        ("b.json", "ws-a", "b1"),
        ("c.json", "ws-c", "c1"),
    ]);
    let (report, swaps) = f.scan();
    assert_eq!(f.serving("ws-a").as_deref(), Some("a1"), "{report:?}");
    assert_eq!(report.rejected, ["b.json"]);
    assert_eq!(swaps, 1, "three small files, one swap");

    f.delete("fleet/a.json");
    let (report, swaps) = f.scan();
    assert_eq!(report.removed, ["a.json"]);
    assert_eq!(report.reread, ["b.json"]);
    assert_eq!(report.loaded, ["b.json"], "read once");
    assert_eq!(f.serving("ws-a").as_deref(), Some("b1"));
    assert_eq!(swaps, 2, "what left, then the load");
    assert_eq!(f.serving("ws-c").as_deref(), Some("c1"));
}

/// A file gone while a new name appears serves on until the new one
/// loads (it may be the same workspace renamed); when the new one serves
/// another workspace, the old one leaves at the end of the scan, and a
/// file that lost to it serves before the scan ends.
#[test]
fn an_entry_not_succeeded_leaves_last_and_what_it_held_serves_in_the_same_scan() {
    let f = Fixture::new(Arc::new(InMemory::new()), None);
    f.put_all(&[("a.json", "ws-a", "a1"), ("b.json", "ws-a", "b1")]);
    f.snapshots.scan().unwrap();
    assert_eq!(f.serving("ws-a").as_deref(), Some("a1"));

    f.delete("fleet/a.json");
    f.put("fleet/d.json", snapshot("ws-d", "d1", 1));
    let (report, swaps) = f.scan();
    assert_eq!(report.loaded, ["d.json", "b.json"], "{report:?}");
    assert_eq!(report.removed, ["a.json"]);
    assert_eq!(f.serving("ws-d").as_deref(), Some("d1"));
    assert_eq!(f.serving("ws-a").as_deref(), Some("b1"));
    assert_eq!(swaps, 3, "the load of d, a's leaving, the load of b");
}

fn manifest_mode_serves_what_the_manifest_names(format: u32) {
    let f = Fixture::new(Arc::new(InMemory::new()), None);
    f.format.store(format, Ordering::Relaxed);
    let mut manifest = ManifestV1::empty();
    f.publish(&mut manifest, "ws-a", &snapshot("ws-a", "a1", 1), "a1");
    // An object directly under the prefix is not followed once there is a manifest.
    f.put("fleet/stray.json", snapshot("ws-s", "s1", 1));
    f.snapshots.scan().unwrap();
    assert_eq!(f.serving("ws-a").as_deref(), Some("a1"));
    assert_eq!(f.serving("ws-s"), None);
    let status = f.status("ws-a");
    let source = status.source.unwrap();
    assert_eq!(source.manifest_revision, Some(1));
    let by_record = (format == 2).then_some(1);
    assert_eq!(source.workspace_revision, by_record);
    assert_eq!(
        source.sha256.as_deref(),
        Some(&manifest.workspaces["ws-a"].current[..])
    );
    assert_eq!(f.snapshots.source_status().unwrap().mode, "manifest");

    f.publish(&mut manifest, "ws-a", &snapshot("ws-a", "a2", 1), "a2");
    f.snapshots.scan().unwrap();
    assert_eq!(f.serving("ws-a").as_deref(), Some("a2"));
    let history = manifest.workspaces.get_mut("ws-a").unwrap();
    history.rollback("ws-a", None).unwrap();
    manifest.revision += 1;
    f.write(&manifest);
    f.snapshots.scan().unwrap();
    assert_eq!(f.serving("ws-a").as_deref(), Some("a1"));
}

#[test]
fn manifest_mode_serves_what_a_format_2_manifest_names() {
    manifest_mode_serves_what_the_manifest_names(2);
}

#[test]
fn manifest_mode_still_follows_a_format_1_manifest() {
    manifest_mode_serves_what_the_manifest_names(1);
}

/// A replica further behind than the root's journal reaches reads the
/// records; one within it applies the journal; a change announced late
/// never turns a workspace back.
#[test]
fn format_2_follows_the_journal_and_reads_the_records_when_it_fell_behind() {
    let f = Fixture::new(Arc::new(InMemory::new()), None);
    let mut manifest = ManifestV1::empty();
    f.publish(&mut manifest, "ws-a", &snapshot("ws-a", "a1", 1), "a1");
    f.publish(&mut manifest, "ws-b", &snapshot("ws-b", "b1", 1), "b1");
    f.snapshots.scan().unwrap();
    assert_eq!(f.serving("ws-b").as_deref(), Some("b1"));

    // More changes than the journal keeps, all to other workspaces, and
    // one to ws-a among the first: only the records still say so.
    f.publish(&mut manifest, "ws-a", &snapshot("ws-a", "a2", 1), "a2");
    for n in 0..MAX_CHANGES {
        let name = format!("ws-{n}");
        let version = format!("v{n}");
        f.publish(
            &mut manifest,
            &name,
            &snapshot(&name, &version, 0),
            &version,
        );
    }
    assert!(f.written.lock().unwrap().1.since(2).is_none());
    f.snapshots.scan().unwrap();
    assert_eq!(f.serving("ws-a").as_deref(), Some("a2"));
    assert_eq!(f.serving("ws-7").as_deref(), Some("v7"));

    // Two publishers of ws-b announce out of order: b3 (record revision 3)
    // first, then b2 (revision 2), which must not turn ws-b back.
    let b_revision = f.written.lock().unwrap().0["ws-b"].revision;
    let mut versions = Vec::new();
    for name in ["b2", "b3"] {
        versions.push(f.upload("ws-b", &snapshot("ws-b", name, 1), name, "b.json"));
    }
    let late = (String::from("ws-b"), b_revision + 1, versions[0].clone());
    let early = (String::from("ws-b"), b_revision + 2, versions[1].clone());
    let root = {
        let root = &mut f.written.lock().unwrap().1;
        root.announce(&[early], "now".into());
        root.announce(&[late], "now".into());
        root.to_json()
    };
    f.put("fleet/manifest.json", root);
    f.snapshots.scan().unwrap();
    assert_eq!(f.serving("ws-b").as_deref(), Some("b3"));
}

#[test]
fn a_broken_manifest_or_a_missing_object_unloads_nothing() {
    let (f, manifest) = Fixture::serving_a1();

    f.put("fleet/manifest.json", b"{ not json".to_vec());
    let report = f.snapshots.scan().unwrap();
    assert!(!report.listed, "{report:?}");
    assert_eq!(f.serving("ws-a").as_deref(), Some("a1"));
    let source = f.snapshots.source_status().unwrap();
    assert_eq!(source.error_kind.as_deref(), Some("manifest"), "{source:?}");
    assert!(source.error.unwrap().contains("not a valid manifest"));

    // A manifest naming an object that is not there.
    let mut dangling = manifest.clone();
    let good = dangling.workspaces["ws-a"].versions[0].clone();
    let missing = Version {
        sha256: "ab".repeat(32),
        key: format!("objects/ws-a/{}.json.gz", "ab".repeat(32)),
        version: "a9".to_owned(),
        ..good
    };
    dangling.publish("ws-a", missing, 10);
    dangling.revision += 1;
    f.write(&dangling);
    f.snapshots.scan().unwrap();
    assert_eq!(f.serving("ws-a").as_deref(), Some("a1"));
    assert!(f.snapshots.source_status().unwrap().error.is_none());
    let status = f.status("ws-a");
    assert_eq!(
        status.source_error_kind.as_deref(),
        Some("not_found"),
        "{status:?}"
    );
    assert!(
        status
            .source_error
            .unwrap()
            .contains("which does not exist")
    );

    // An object that is not the bytes the manifest names.
    let mut corrupt = manifest.clone();
    f.publish(&mut corrupt, "ws-a", &snapshot("ws-a", "a3", 1), "a3");
    let key = corrupt.workspaces["ws-a"].versions[0].key.clone();
    let size = corrupt.workspaces["ws-a"].versions[0].size as usize;
    f.put(&format!("fleet/{key}"), vec![b'x'; size]);
    f.snapshots.scan().unwrap();
    assert_eq!(f.serving("ws-a").as_deref(), Some("a1"));
    assert_eq!(
        f.status("ws-a").source_error_kind.as_deref(),
        Some("incomplete")
    );

    // Once fixed, the error clears.
    f.publish(&mut corrupt, "ws-a", &snapshot("ws-a", "a4", 1), "a4");
    f.snapshots.scan().unwrap();
    assert_eq!(f.serving("ws-a").as_deref(), Some("a4"));
    assert_eq!(f.status("ws-a").source_error, None);
}

#[test]
fn switching_from_prefix_to_manifest_never_unloads_the_workspace() {
    let f = Arc::new(Fixture::new(Arc::new(InMemory::new()), None));
    f.put("fleet/a.json", snapshot("ws-a", "a1", 1));
    f.snapshots.scan().unwrap();
    assert_eq!(f.serving("ws-a").as_deref(), Some("a1"));

    // A load long enough for a watcher to see a gap if there were one.
    let mut manifest = ManifestV1::empty();
    f.publish(&mut manifest, "ws-a", &snapshot("ws-a", "a2", 20_000), "a2");
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (f, done) = (Arc::clone(&f), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut gaps = 0;
            while !done.load(Ordering::Acquire) {
                gaps += usize::from(f.serving("ws-a").is_none());
            }
            gaps
        })
    };
    let report = f.snapshots.scan().unwrap();
    done.store(true, Ordering::Release);
    assert_eq!(
        watcher.join().unwrap(),
        0,
        "ws-a was unloaded during the switch"
    );
    assert_eq!(report.removed, ["a.json"]);
    assert_eq!(f.serving("ws-a").as_deref(), Some("a2"));
    let names: Vec<String> = f.snapshots.statuses().into_iter().map(|s| s.file).collect();
    assert_eq!(names, ["ws-a"]);
}

#[test]
fn downloads_are_cached_and_serve_while_storage_is_unreachable() {
    let dir = std::env::temp_dir().join(format!("objects-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    {
        let f = Fixture::new(Arc::new(InMemory::new()), Some(&dir));
        f.put("fleet/a.json", snapshot("ws-a", "a1", 1));
        f.snapshots.scan().unwrap();
        assert_eq!(f.serving("ws-a").as_deref(), Some("a1"));
    }
    // The same cache, storage at a port where nothing listens.
    let metrics = Arc::new(Metrics::new(&["other"]).with_object_store());
    let options = StorageOptions {
        endpoint: Some("http://127.0.0.1:1".to_owned()),
        allow_http: Some(true),
        region: Some("us-east-1".to_owned()),
        access_key_id: Some("test".to_owned()),
        secret_access_key: Some("test".to_owned()),
        timeout: Duration::from_secs(2),
        cache_dir: Some(dir.clone()),
        ..StorageOptions::default()
    };
    let url = Url::parse("s3://bucket/fleet/").unwrap();
    let origin =
        StorageOrigin::open(&Location::Url(url), &options, Arc::clone(&metrics), false).unwrap();
    let catalog = Arc::new(Store::default());
    let snapshots = Snapshots::new(
        Arc::new(origin),
        Arc::clone(&catalog),
        Arc::clone(&metrics),
        MemoryLimit::none(),
        false,
        None,
    );
    let report = snapshots.scan().unwrap();
    assert!(
        report.listed,
        "the cache stands in for the listing: {report:?}"
    );
    assert_eq!(
        catalog
            .load()
            .workspace("ws-a")
            .map(|d| d.version.clone())
            .as_deref(),
        Some("a1")
    );
    let status = snapshots.source_status().unwrap();
    assert!(status.serving_from_cache, "{status:?}");
    assert_eq!(status.error_kind.as_deref(), Some("network"), "{status:?}");
    let entry = &snapshots.statuses()[0];
    assert!(entry.source.as_ref().unwrap().from_cache);
    assert_eq!(entry.stale_seconds, None, "never confirmed by storage");
    // Later failed polls change nothing.
    let report = snapshots.scan().unwrap();
    assert!(!report.listed && report.source_failed);
    assert!(catalog.load().workspace("ws-a").is_some());
    let text = metrics.encode(crate::metrics::Format::Classic);
    assert!(
        text.contains("portfolio_replica_source_errors_total{kind=\"network\"} 2"),
        "{text}"
    );
    drop(snapshots);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn polls_are_jittered_and_back_off_while_failing() {
    let f = Fixture::new(Arc::new(InMemory::new()), None);
    let origin = f.snapshots.origin();
    let interval = Duration::from_secs(1);
    let waits: Vec<Duration> = (0..200).map(|_| origin.next_poll(interval)).collect();
    assert!(
        waits.iter().all(|w| (800..=1200).contains(&w.as_millis())),
        "{waits:?}"
    );
    assert!(
        waits.iter().any(|w| w.as_millis() < 950) && waits.iter().any(|w| w.as_millis() > 1050)
    );
    for _ in 0..3 {
        origin.polled(true);
    }
    let wait = origin.next_poll(interval);
    assert!((6400..=9600).contains(&wait.as_millis()), "{wait:?}");
    for _ in 0..20 {
        origin.polled(true);
    }
    assert!(origin.next_poll(interval) <= Duration::from_secs(36));
    origin.polled(false);
    assert!(origin.next_poll(interval) <= Duration::from_millis(1200));
}

/// A prefix that takes three LIST requests is polled a third as often, so
/// that its listing costs one request per interval, as a small one does.
#[test]
fn a_large_prefix_is_listed_less_often() {
    let f = Fixture::new(Arc::new(InMemory::new()), None);
    f.put("fleet/a.json", snapshot("ws-a", "a1", 1));
    f.snapshots.scan().unwrap();
    let origin = f.snapshots.origin();
    let interval = Duration::from_secs(1);
    assert!(origin.next_poll(interval) <= Duration::from_millis(1200));
    for n in 0..2001 {
        f.put(&format!("fleet/notes-{n}.txt"), b"x".to_vec());
    }
    f.snapshots.scan().unwrap();
    let wait = origin.next_poll(interval);
    assert!((2400..=3600).contains(&wait.as_millis()), "{wait:?}");
}

/// A workspace record that cannot be read stops the poll, not the fleet:
/// everything keeps serving, the error names the record, and once it is
/// fixed the replica follows again.
#[test]
fn a_broken_workspace_record_unloads_nothing() {
    let (f, mut manifest) = Fixture::serving_a1();
    assert_eq!(f.serving("ws-a").as_deref(), Some("a1"));

    // A record broken by hand, and a root that sends every replica to
    // read the records (as `migrate` does).
    f.put("fleet/workspaces/ws-b.json", b"{\"workspace\": ".to_vec());
    let root = {
        let root = &mut f.written.lock().unwrap().1;
        root.restart("now".into());
        root.to_json()
    };
    f.put("fleet/manifest.json", root);
    let report = f.snapshots.scan().unwrap();
    assert!(!report.listed, "{report:?}");
    assert_eq!(f.serving("ws-a").as_deref(), Some("a1"));
    let source = f.snapshots.source_status().unwrap();
    assert_eq!(source.error_kind.as_deref(), Some("manifest"), "{source:?}");
    assert!(
        source
            .error
            .as_deref()
            .unwrap()
            .contains("workspaces/ws-b.json"),
        "{source:?}"
    );

    f.delete("fleet/workspaces/ws-b.json");
    f.publish(&mut manifest, "ws-a", &snapshot("ws-a", "a2", 1), "a2");
    f.snapshots.scan().unwrap();
    assert_eq!(f.serving("ws-a").as_deref(), Some("a2"));
    assert!(f.snapshots.source_status().unwrap().error.is_none());
}
