//! Snapshot builders and snapshot files: ids and key hashes, records of every
//! kind, whole fixtures, timestamps in many spellings, the larger snapshots
//! of the production tests, and the ways a snapshot file is written,
//! replaced (renamed into place, backdated, gzipped) or written slowly.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tempfile::TempDir;

use super::KEY;

// ---------------------------------------------------------------------------
// Ids, keys and snapshots.
// ---------------------------------------------------------------------------

/// Returns a valid version-4-shaped UUID whose lexical order follows `n`.
pub fn uuid(n: u64) -> String {
    assert!(n < 1 << 48, "uuid({n}) does not fit in twelve hex digits");
    format!("00000000-0000-4000-8000-{n:012x}")
}

/// Every collection a snapshot holds, by its key in the file, in the order
/// the format lists them: the server's own list (`store::Collection`), so
/// that a collection added there is covered here without a second list.
pub const COLLECTIONS: [&str; portfolio_domain::store::Collection::COUNT] = {
    use portfolio_domain::store::Collection;
    let mut names = [""; Collection::COUNT];
    let mut i = 0;
    while i < Collection::COUNT {
        names[i] = Collection::ALL[i].name();
        i += 1;
    }
    names
};

/// Returns the lowercase hex SHA-256 of the whole key text, prefix included.
pub fn key_hash(key: &str) -> String {
    Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Returns the `version` that `snapshot` writes for a workspace.
pub fn version_of(workspace: &str) -> String {
    format!("2026-11-22T10:00:00.000Z#{workspace}")
}

/// Workspace `ws-acme` (read with `KEY`) of 300 companies at `version`,
/// company `changed` renamed: large enough that a publish sends a delta.
pub fn companies_renamed(version: &str, changed: u64) -> Value {
    let mut snap = fixture("ws-acme", &[super::KEY], 1);
    snap["version"] = json!(version);
    let name = |n| format!("Company {n} {}", if n == changed { version } else { "" });
    add(
        &mut snap,
        "companies",
        (100..400).map(|n| company(n, &name(n))),
    );
    snap
}

/// Returns a valid snapshot of `workspace` with no records, readable with `keys`.
pub fn snapshot(workspace: &str, keys: &[&str]) -> Value {
    let api_keys: Vec<Value> = keys
        .iter()
        .map(|k| json!({ "sha256": key_hash(k), "label": "test" }))
        .collect();
    json!({
        "format_version": 1,
        "version": version_of(workspace),
        "workspace": { "id": workspace, "name": format!("Workspace {workspace}") },
        "api_keys": api_keys,
    })
}

/// Appends `records` to the collection named `collection` of `snapshot`.
pub fn add(snapshot: &mut Value, collection: &str, records: impl IntoIterator<Item = Value>) {
    let obj = snapshot.as_object_mut().expect("a snapshot is an object");
    let list = obj.entry(collection).or_insert_with(|| json!([]));
    let list = list.as_array_mut().expect("a collection is an array");
    list.extend(records);
}

/// Returns a record in the API's `{ id, attributes }` shape.
pub fn record(id: u64, attributes: Value) -> Value {
    json!({ "id": uuid(id), "attributes": attributes })
}

/// Returns `rec` with the attributes of `extra` set on it (a null value sets null).
pub fn with(mut rec: Value, extra: Value) -> Value {
    let attrs = rec["attributes"]
        .as_object_mut()
        .expect("attributes is an object");
    for (k, v) in extra.as_object().expect("extra attributes are an object") {
        attrs.insert(k.clone(), v.clone());
    }
    rec
}

/// A company with only a name.
pub fn company(id: u64, name: &str) -> Value {
    record(id, json!({ "name": name }))
}

/// A task with only its required attributes.
pub fn task(id: u64, company: u64, created_at: &str) -> Value {
    record(
        id,
        json!({ "company_id": uuid(company), "created_at": created_at }),
    )
}

/// A company note with only its required attributes.
pub fn note(id: u64, company: u64, created_at: &str) -> Value {
    record(
        id,
        json!({ "company_id": uuid(company), "created_at": created_at }),
    )
}

/// An open role with only its required attributes.
pub fn role(id: u64, company: u64, opened_at: &str) -> Value {
    record(
        id,
        json!({ "company_id": uuid(company), "opened_at": opened_at }),
    )
}

/// A feed entry with its required attributes plus a type and the private flag.
pub fn feed_entry(id: u64, company: u64, published_at: &str) -> Value {
    record(
        id,
        json!({
            "company_id": uuid(company),
            "published_at": published_at,
            "type": "product-update",
            "private": false,
        }),
    )
}

/// One reported metric value; `company_id` sits beside `attributes`.
pub fn metric(id: u64, company: u64, name: &str, reported_at: &str) -> Value {
    json!({
        "id": uuid(id),
        "company_id": uuid(company),
        "attributes": { "name": name, "reported_at": reported_at },
    })
}

/// A meeting with every required attribute.
pub fn meeting(id: u64, company: u64, start_time: &str) -> Value {
    record(
        id,
        json!({
            "company_id": uuid(company),
            "title": format!("Meeting {id}"),
            "start_time": start_time,
            "end_time": null,
            "attendees": [ { "email": "ceo@example.com", "organizer": true } ],
            "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-02T00:00:00Z",
        }),
    )
}

/// A meeting note with every required attribute.
pub fn meeting_note(id: u64, meeting: u64, created_at: &str) -> Value {
    record(
        id,
        json!({
            "meeting_id": uuid(meeting),
            "type": "notetool",
            "notes": format!("Notes {id}"),
            "transcript": null,
            "synced_at": null,
            "created_at": created_at,
            "updated_at": "2026-01-02T00:00:00Z",
        }),
    )
}

/// The ids of the records of `fixture(.., base)`: one record of every kind.
pub struct Fixture {
    pub company: String,
    pub task: String,
    pub note: String,
    pub role: String,
    pub feed: String,
    pub metric: String,
    pub meeting: String,
    pub meeting_note: String,
}

impl Fixture {
    /// Returns the ids that `fixture(.., base)` uses.
    pub fn ids(base: u64) -> Fixture {
        Fixture {
            company: uuid(base + 1),
            task: uuid(base + 2),
            note: uuid(base + 3),
            role: uuid(base + 4),
            feed: uuid(base + 5),
            metric: uuid(base + 6),
            meeting: uuid(base + 7),
            meeting_note: uuid(base + 8),
        }
    }

    /// Returns every API path that answers 200 for this fixture.
    pub fn endpoints(&self) -> Vec<String> {
        let Fixture {
            company: c,
            task: t,
            note: n,
            meeting: m,
            ..
        } = self;
        vec![
            "/portfolio".to_string(),
            format!("/portfolio/{c}"),
            format!("/portfolio/{c}/tasks"),
            format!("/portfolio/{c}/roles"),
            format!("/portfolio/{c}/notes"),
            format!("/portfolio/{c}/metrics"),
            format!("/portfolio/{c}/meetings"),
            "/tasks".to_string(),
            format!("/tasks/{t}"),
            "/roles".to_string(),
            format!("/notes/{n}"),
            "/feed".to_string(),
            format!("/meetings/{m}"),
            format!("/meetings/{m}?include=notes"),
        ]
    }

    /// Returns every by-id path of this fixture, the company's sub-resources included.
    pub fn by_id_endpoints(&self) -> Vec<String> {
        let Fixture {
            company: c,
            task: t,
            note: n,
            meeting: m,
            ..
        } = self;
        vec![
            format!("/portfolio/{c}"),
            format!("/portfolio/{c}/tasks"),
            format!("/portfolio/{c}/roles"),
            format!("/portfolio/{c}/notes"),
            format!("/portfolio/{c}/metrics"),
            format!("/portfolio/{c}/meetings"),
            format!("/tasks/{t}"),
            format!("/notes/{n}"),
            format!("/meetings/{m}"),
            format!("/meetings/{m}?include=notes"),
        ]
    }
}

/// Returns a snapshot of `workspace` holding one record of every kind, with
/// the ids of `Fixture::ids(base)`.
pub fn fixture(workspace: &str, keys: &[&str], base: u64) -> Value {
    let mut snap = snapshot(workspace, keys);
    add(
        &mut snap,
        "companies",
        [company(base + 1, &format!("Company of {workspace}"))],
    );
    add(
        &mut snap,
        "tasks",
        [task(base + 2, base + 1, "2026-03-01T10:00:00Z")],
    );
    add(
        &mut snap,
        "notes",
        [note(base + 3, base + 1, "2026-03-01T10:00:00Z")],
    );
    add(
        &mut snap,
        "roles",
        [role(base + 4, base + 1, "2026-03-01T10:00:00Z")],
    );
    add(
        &mut snap,
        "feed",
        [feed_entry(base + 5, base + 1, "2026-03-01T10:00:00Z")],
    );
    add(
        &mut snap,
        "metrics",
        [metric(
            base + 6,
            base + 1,
            "Annualized Revenue",
            "2026-03-01T10:00:00Z",
        )],
    );
    add(
        &mut snap,
        "meetings",
        [meeting(base + 7, base + 1, "2026-03-01T10:00:00Z")],
    );
    add(
        &mut snap,
        "meeting_notes",
        [meeting_note(base + 8, base + 7, "2026-03-01T10:00:00Z")],
    );
    snap
}

/// Timestamps written in many forms, each with the rank of its instant: a
/// greater rank is a newer instant and equal ranks are the same instant.
///
/// Textual order, and parsing that ignores offsets or fractions, both give
/// another order than the instants do.
pub const INSTANTS: &[(&str, u32)] = &[
    ("2026-03-01T10:00:00Z", 5),
    ("2026-03-01T12:00:00+02:00", 5),
    ("2026-03-01T10:00:00.5Z", 8),
    ("2026-03-01T11:00:00+02:00", 2),
    ("2026-03-01T09:30:00-01:00", 9),
    ("2026-03-01T10:00:00.000000001Z", 6),
    ("2026-02-28T23:59:59.999Z", 1),
    ("2026-03-01T10:00:00.50Z", 8),
    ("2026-03-02T01:00:00+05:00", 10),
    ("2026-03-01T05:00:00.000-05:00", 5),
    ("2026-03-01T10:00:00.001+00:00", 7),
];

/// The id number given to the record at the same position of `INSTANTS`.
///
/// Within each group of equal instants the ids are neither in file order nor
/// in reverse file order, so only a real id tie-break gives the right order.
pub const INSTANT_IDS: &[u64] = &[3, 11, 7, 1, 5, 9, 2, 10, 4, 6, 8];

/// Returns the records that `make(id, timestamp)` builds for `INSTANTS`, in file order.
pub fn instant_records(offset: u64, make: impl Fn(u64, &str) -> Value) -> Vec<Value> {
    INSTANTS
        .iter()
        .zip(INSTANT_IDS)
        .map(|((ts, _), id)| make(offset + id, ts))
        .collect()
}

/// Returns the ids of `instant_records(offset, ..)` newest first, ties by id descending.
pub fn instant_ids_newest_first(offset: u64) -> Vec<String> {
    let mut ranked: Vec<(u32, u64)> = INSTANTS
        .iter()
        .zip(INSTANT_IDS)
        .map(|((_, rank), id)| (*rank, offset + id))
        .collect();
    ranked.sort_by(|a, b| b.cmp(a));
    ranked.into_iter().map(|(_, id)| uuid(id)).collect()
}

/// Returns the ids of `instant_records(offset, ..)` oldest first, ties by id ascending.
pub fn instant_ids_oldest_first(offset: u64) -> Vec<String> {
    let mut ids = instant_ids_newest_first(offset);
    ids.reverse();
    ids
}

// ---------------------------------------------------------------------------
// Snapshot files.
// ---------------------------------------------------------------------------

/// Returns a fresh temporary directory.
pub fn tempdir() -> TempDir {
    tempfile::Builder::new()
        .prefix("portfolio-it-")
        .tempdir()
        .expect("create a temporary directory")
}

/// Writes `value` as JSON to `dir/name` and returns the path.
pub fn write_json(dir: &Path, name: &str, value: &Value) -> PathBuf {
    write_bytes(
        dir,
        name,
        &serde_json::to_vec_pretty(value).expect("serialize"),
    )
}

/// Writes `bytes` to `dir/name` and returns the path.
pub fn write_bytes(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write a snapshot file");
    path
}

/// Returns the gzip compression of `bytes`.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    use flate2::{Compression, write::GzEncoder};
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    encoder.write_all(bytes).expect("gzip");
    encoder.finish().expect("gzip")
}

/// Writes `value` to `dir/name` through a temporary name and a rename, as a writer should.
pub fn replace_json(dir: &Path, name: &str, value: &Value) {
    replace_bytes(
        dir,
        name,
        &serde_json::to_vec_pretty(value).expect("serialize"),
    );
}

/// Writes `bytes` to `dir/name.tmp` and renames it over `dir/name`.
pub fn replace_bytes(dir: &Path, name: &str, bytes: &[u8]) {
    let tmp = format!("{name}.tmp");
    write_bytes(dir, &tmp, bytes);
    std::fs::rename(dir.join(&tmp), dir.join(name)).expect("rename a snapshot into place");
}

/// Writes `bytes` to `dir/name.tmp`, dates it two seconds back and renames it
/// over `dir/name`, as `rsync -t` or `cp -p` deliver a file.
///
/// A server may leave a file modified in the last moments for a later scan,
/// since it may still be being written; a file that arrives complete with an
/// old modification time can be loaded at once, so the server need not wait
/// for the writer to finish.
pub fn replace_backdated(dir: &Path, name: &str, bytes: &[u8]) {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut file = std::fs::File::create(&tmp).expect("create a snapshot file");
    file.write_all(bytes).expect("write a snapshot file");
    file.set_modified(SystemTime::now() - Duration::from_secs(2))
        .expect("date a snapshot file back");
    drop(file);
    std::fs::rename(&tmp, dir.join(name)).expect("rename a snapshot into place");
}

/// Writes a snapshot slowly: whitespace (which JSON allows before a value)
/// every 20 ms until `finish` (or until `within` has passed),
/// then the document. The server cannot judge a file still being written,
/// so its first scan, and readiness, wait for it.
pub struct SlowWriter {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SlowWriter {
    pub fn start(path: &Path, snapshot: &Value, within: Duration) -> SlowWriter {
        let mut file = std::fs::File::create(path).expect("create the slow snapshot");
        file.write_all(b" ").expect("write the slow snapshot");
        let bytes = serde_json::to_vec(snapshot).expect("serialize");
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let deadline = Instant::now() + within;
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                    file.write_all(b" ").expect("write the slow snapshot");
                }
                file.write_all(&bytes).expect("write the slow snapshot");
            })
        };
        SlowWriter {
            stop,
            thread: Some(thread),
        }
    }

    /// Writes the document and waits for the writer to end.
    pub fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().expect("the slow writer panicked");
        }
    }
}

impl Drop for SlowWriter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

// ---------------------------------------------------------------------------
// The larger snapshots of the production tests.
// ---------------------------------------------------------------------------

/// The fixture of every endpoint plus a few more tasks and feed entries, so
/// that lists have pages.
pub fn etag_snapshot(workspace: &str) -> Value {
    let mut snap = fixture(workspace, &[KEY], 0);
    add(
        &mut snap,
        "tasks",
        (20..25).map(|i| task(i, 1, &format!("2026-04-01T10:00:{i:02}Z"))),
    );
    add(
        &mut snap,
        "feed",
        (30..35).map(|i| feed_entry(i, 1, &format!("2026-04-01T10:00:{i:02}Z"))),
    );
    snap
}

/// A snapshot of `workspace` with `n` tasks (ids 101..) whose titles are
/// `title_len` bytes long, beside one company.
pub fn tasks_snapshot(
    workspace: &str,
    key: &str,
    version: &str,
    n: u64,
    title_len: usize,
) -> Value {
    let mut snap = snapshot(workspace, &[key]);
    snap["version"] = json!(version);
    add(&mut snap, "companies", [company(1, "Only company")]);
    add(
        &mut snap,
        "tasks",
        (1..=n).map(|i| {
            let mut title = format!("Task {i:03} of {version}: ");
            while title.len() < title_len {
                title.push_str("follow up on the board deck and the hiring plan; ");
            }
            title.truncate(title_len);
            with(
                task(
                    100 + i,
                    1,
                    &format!("2026-03-01T10:{:02}:{:02}Z", i / 60, i % 60),
                ),
                json!({ "title": title, "status": if i % 2 == 0 { "triage" } else { "done" } }),
            )
        }),
    );
    snap
}

/// The title length that makes `/tasks?limit=100` of a `tasks_snapshot`
/// half as large again as the most the kernel buffers for a socket's
/// sending side (`tcp_wmem`, 4 MiB by default): with the client's receive
/// buffer at 4 KiB, most of such a response is still in the server process
/// until the client reads.
pub fn in_flight_title_len() -> usize {
    let wmem_max = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem")
        .ok()
        .and_then(|s| s.split_whitespace().nth(2)?.parse::<usize>().ok())
        .unwrap_or(4 << 20);
    (wmem_max * 3 / 2 / 100).max(60_000)
}

/// The ids of `snap`'s records of `collection`, in file order (none if it
/// has no such list).
pub fn record_ids(snap: &Value, collection: &str) -> Vec<String> {
    snap[collection]
        .as_array()
        .map(|records| {
            records
                .iter()
                .filter_map(|r| r["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// What follows `/portfolio/{id}`: the company itself, then each of its
/// lists (docs/api.md).
pub const COMPANY_PATHS: [&str; 5] = ["", "/tasks", "/roles", "/notes", "/metrics"];
