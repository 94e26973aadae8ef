//! Helpers shared by every test module: a server harness, a hand-written
//! HTTP/1.1 client, snapshot builders, key hashing and the command-line runner.
//!
//! The tests treat the server as a black box. They only use the public
//! `serve` entry point, the `portfolio-replica` binary and HTTP on loopback.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use portfolio_replica::ServeConfig;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tempfile::TempDir;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The key most tests authenticate with; it carries the default `cura` prefix.
pub const KEY: &str = "cura_test_key";

/// A second key, used where a second workspace is needed.
pub const OTHER_KEY: &str = "cura_other_key";

/// The exact body of every 401 response (CONTRACT §5).
pub const UNAUTHORIZED_BODY: &str = r#"{"error":"Invalid or missing API key"}"#;

/// How long one HTTP exchange may take before the test fails.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a server may take to answer `GET /readyz` with 200.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one run of the command-line tool may take.
const CLI_TIMEOUT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------
// Ids, keys and snapshots.
// ---------------------------------------------------------------------------

/// Returns a valid version-4-shaped UUID whose lexical order follows `n`.
pub fn uuid(n: u64) -> String {
    assert!(n < 1 << 48, "uuid({n}) does not fit in twelve hex digits");
    format!("00000000-0000-4000-8000-{n:012x}")
}

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
    use std::io::Write;
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    encoder.write_all(bytes).expect("gzip");
    encoder.finish().expect("gzip")
}

/// Writes `value` to `dir/name` through a temporary name and a rename, as a writer should.
pub fn replace_json(dir: &Path, name: &str, value: &Value) {
    let tmp = format!("{name}.tmp");
    write_json(dir, &tmp, value);
    std::fs::rename(dir.join(&tmp), dir.join(name)).expect("rename a snapshot into place");
}

/// Percent-encodes every byte of `s` other than the unreserved characters.
pub fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

// ---------------------------------------------------------------------------
// HTTP.
// ---------------------------------------------------------------------------

/// One parsed HTTP response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    /// Header names are lower-cased; values are as sent, trimmed.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// Returns the first value of the header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Returns the body as text, lossily.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Returns the body parsed as JSON, failing the test if it is not JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}), status {}: {}",
                self.status,
                self.text()
            )
        })
    }

    /// Returns the ids of the records in `data`, which must be an array.
    pub fn ids(&self) -> Vec<String> {
        let body = self.json();
        let data = body["data"]
            .as_array()
            .unwrap_or_else(|| panic!("data is not an array: {body}"));
        data.iter()
            .map(|r| {
                r["id"]
                    .as_str()
                    .unwrap_or_else(|| panic!("record without a string id: {r}"))
                    .to_string()
            })
            .collect()
    }

    /// Fails the test unless this is a JSON success with the given status.
    pub fn assert_ok(&self, context: &str) -> Value {
        assert_eq!(self.status, 200, "{context}: status, body {}", self.text());
        assert_eq!(
            self.header("content-type"),
            Some("application/json"),
            "{context}: content-type"
        );
        self.json()
    }

    /// Returns why this is not a well-formed error reply with `status`, if it is not.
    pub fn error_problem(&self, status: u16) -> Option<String> {
        if self.status != status {
            return Some(format!(
                "status {} instead of {status}, body {}",
                self.status,
                self.text()
            ));
        }
        if self.header("content-type") != Some("application/json") {
            return Some(format!(
                "content-type {:?} instead of application/json",
                self.header("content-type")
            ));
        }
        let body: Value = match serde_json::from_slice(&self.body) {
            Ok(v) => v,
            Err(e) => return Some(format!("body is not JSON ({e}): {}", self.text())),
        };
        let Some(obj) = body.as_object() else {
            return Some(format!("body is not an object: {body}"));
        };
        if obj.len() != 1 || !obj.get("error").is_some_and(Value::is_string) {
            return Some(format!(
                "body is not exactly {{\"error\": <string>}}: {body}"
            ));
        }
        if status == 401 {
            if self.text() != UNAUTHORIZED_BODY {
                return Some(format!(
                    "401 body {:?} instead of {UNAUTHORIZED_BODY:?}",
                    self.text()
                ));
            }
            if let Some(p) = self.www_authenticate_problem() {
                return Some(p);
            }
        }
        None
    }

    /// Returns why this response lacks `WWW-Authenticate: Bearer`, if it does.
    pub fn www_authenticate_problem(&self) -> Option<String> {
        match self.header("www-authenticate") {
            Some(v) if v == "Bearer" || v.starts_with("Bearer ") => None,
            other => Some(format!("WWW-Authenticate is {other:?}, not Bearer")),
        }
    }

    /// Fails the test unless this is a well-formed error reply with `status`.
    pub fn assert_error(&self, status: u16, context: &str) {
        if let Some(problem) = self.error_problem(status) {
            panic!("{context}: {problem}");
        }
    }
}

/// A running server on loopback ports, stopped when dropped.
pub struct TestServer {
    pub api: SocketAddr,
    pub admin: SocketAddr,
    dir: TempDir,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<anyhow::Result<()>>>,
}

impl TestServer {
    /// Writes `files` as JSON into a fresh directory and serves it.
    pub async fn start(files: &[(&str, Value)]) -> TestServer {
        let dir = tempdir();
        for (name, value) in files {
            write_json(dir.path(), name, value);
        }
        TestServer::start_in(dir, |_| {}).await
    }

    /// Serves `dir`, whose files are already written, with the default
    /// configuration changed by `configure`.
    pub async fn start_in(dir: TempDir, configure: impl FnOnce(&mut ServeConfig)) -> TestServer {
        let mut server = TestServer::spawn_in(dir, configure).await;
        server.wait_ready().await;
        server
    }

    /// Like `start_in`, but returns as soon as the server runs, before it is ready.
    pub async fn spawn_in(dir: TempDir, configure: impl FnOnce(&mut ServeConfig)) -> TestServer {
        let mut config = ServeConfig::new(dir.path());
        configure(&mut config);
        let api_listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the api port");
        let admin_listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the admin port");
        let api = api_listener.local_addr().expect("api address");
        let admin = admin_listener.local_addr().expect("admin address");
        let (tx, rx) = oneshot::channel::<()>();
        let shutdown = async move {
            let _ = rx.await;
        };
        let task = tokio::spawn(portfolio_replica::serve(
            config,
            api_listener,
            admin_listener,
            shutdown,
        ));
        TestServer {
            api,
            admin,
            dir,
            shutdown: Some(tx),
            task: Some(task),
        }
    }

    /// Waits until `GET /readyz` answers 200, failing after `READY_TIMEOUT`.
    pub async fn wait_ready(&mut self) {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if self.task.as_ref().is_some_and(|t| t.is_finished()) {
                let task = self.task.take().expect("the server task");
                match task.await {
                    Ok(Ok(())) => panic!("serve returned before it was ready"),
                    Ok(Err(e)) => panic!("serve failed before it was ready: {e:#}"),
                    Err(e) => panic!("serve panicked before it was ready: {e}"),
                }
            }
            let probe = tokio::time::timeout(
                Duration::from_secs(1),
                exchange(
                    self.api,
                    "GET",
                    b"GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
                        .to_vec(),
                ),
            )
            .await;
            if let Ok(Ok(resp)) = probe
                && resp.status == 200
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the server was not ready within {READY_TIMEOUT:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Returns the snapshot directory the server reads.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Sends `GET path` on the API port with `Authorization: Bearer key` when a key is given.
    pub async fn get(&self, path: &str, key: Option<&str>) -> Response {
        let auth = key.map(|k| format!("Bearer {k}"));
        let headers: Vec<(&str, &str)> =
            auth.iter().map(|a| ("Authorization", a.as_str())).collect();
        self.request("GET", path, &headers).await
    }

    /// Sends `GET path` with the given key and fails unless it is a JSON 200.
    pub async fn get_ok(&self, path: &str, key: &str) -> Value {
        self.get(path, Some(key))
            .await
            .assert_ok(&format!("GET {path}"))
    }

    /// Sends a request with exactly these headers plus `Host` and `Connection: close`.
    pub async fn request(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> Response {
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
            self.api
        );
        for (name, value) in headers {
            req.push_str(&format!("{name}: {value}\r\n"));
        }
        if method != "GET" && method != "HEAD" {
            req.push_str("Content-Length: 0\r\n");
        }
        req.push_str("\r\n");
        self.raw_as(method, req.as_bytes()).await
    }

    /// Sends these exact bytes to the API port and parses the answer as a GET answer.
    pub async fn raw(&self, bytes: &[u8]) -> Response {
        self.raw_as("GET", bytes).await
    }

    async fn raw_as(&self, method: &str, bytes: &[u8]) -> Response {
        let what = String::from_utf8_lossy(bytes.split(|b| *b == b'\r').next().unwrap_or_default())
            .into_owned();
        match tokio::time::timeout(REQUEST_TIMEOUT, exchange(self.api, method, bytes.to_vec()))
            .await
        {
            Ok(Ok(resp)) => resp,
            Ok(Err(e)) => panic!("{what}: {e}"),
            Err(_) => panic!("{what}: no complete answer within {REQUEST_TIMEOUT:?}"),
        }
    }

    /// Sends `GET path` to the admin port.
    pub async fn admin_get(&self, path: &str) -> Response {
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.admin
        );
        match tokio::time::timeout(
            REQUEST_TIMEOUT,
            exchange(self.admin, "GET", req.into_bytes()),
        )
        .await
        {
            Ok(Ok(resp)) => resp,
            Ok(Err(e)) => panic!("admin GET {path}: {e}"),
            Err(_) => panic!("admin GET {path}: no complete answer within {REQUEST_TIMEOUT:?}"),
        }
    }

    /// Returns the entry of `GET /snapshots` (admin) whose `file` ends with `name`.
    pub async fn snapshot_status(&self, name: &str) -> Option<Value> {
        let resp = self.admin_get("/snapshots").await;
        assert_eq!(resp.status, 200, "admin /snapshots: {}", resp.text());
        let body = resp.json();
        let files = body["files"]
            .as_array()
            .unwrap_or_else(|| panic!("admin /snapshots has no files array: {body}"));
        files
            .iter()
            .find(|f| {
                f["file"]
                    .as_str()
                    .is_some_and(|f| f == name || f.ends_with(&format!("/{name}")))
            })
            .cloned()
    }

    /// Sends every `(path, status)` case with `key` and fails listing every
    /// case whose answer differs; error answers must also be well formed.
    pub async fn check_statuses<P: AsRef<str>>(&self, key: Option<&str>, cases: &[(P, u16)]) {
        let mut failures = Vec::new();
        for (path, status) in cases {
            let path = path.as_ref();
            let resp = self.get(path, key).await;
            let problem = if *status == 200 {
                (resp.status != 200 || resp.header("content-type") != Some("application/json"))
                    .then(|| {
                        format!(
                            "status {} content-type {:?}, body {}",
                            resp.status,
                            resp.header("content-type"),
                            resp.text()
                        )
                    })
            } else {
                resp.error_problem(*status)
            };
            if let Some(problem) = problem {
                failures.push(format!("GET {path} (expected {status}): {problem}"));
            }
        }
        assert!(
            failures.is_empty(),
            "{} of {} cases failed:\n{}",
            failures.len(),
            cases.len(),
            failures.join("\n")
        );
    }

    /// Waits until `GET path` with `key` carries `X-Snapshot-Version: version`.
    pub async fn wait_version(&self, path: &str, key: &str, version: &str) {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let resp = self.get(path, Some(key)).await;
            if resp.status == 200 && resp.header("x-snapshot-version") == Some(version) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "version {version} was not served within {READY_TIMEOUT:?}"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// Sends `GET path` to `addr` with `Authorization: Bearer key` when a key is
/// given; for a server the tests did not start themselves (the binary).
pub async fn get_from(addr: SocketAddr, path: &str, key: Option<&str>) -> Result<Response, String> {
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(key) = key {
        req.push_str(&format!("Authorization: Bearer {key}\r\n"));
    }
    req.push_str("\r\n");
    match tokio::time::timeout(REQUEST_TIMEOUT, exchange(addr, "GET", req.into_bytes())).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "GET {path}: no complete answer within {REQUEST_TIMEOUT:?}"
        )),
    }
}

/// Sends one request on a fresh connection, reads to end of stream and parses the answer.
async fn exchange(addr: SocketAddr, method: &str, request: Vec<u8>) -> Result<Response, String> {
    // Readiness and `try_*` calls need only tokio's `net` feature, not `io-util`.
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    let mut written = 0;
    while written < request.len() {
        stream.writable().await.map_err(|e| format!("write: {e}"))?;
        match stream.try_write(&request[written..]) {
            Ok(n) => written += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(format!("write: {e}")),
        }
    }
    let mut raw = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        stream.readable().await.map_err(|e| format!("read: {e}"))?;
        match stream.try_read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            // A server may reset the connection after a complete answer.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset && !raw.is_empty() => break,
            Err(e) => return Err(format!("read: {e}")),
        }
    }
    parse_response(&raw, method == "HEAD")
}

/// Parses a complete HTTP/1.1 answer; for HEAD every byte after the head is the body.
fn parse_response(raw: &[u8], head: bool) -> Result<Response, String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("no end of headers in {:?}", String::from_utf8_lossy(raw)))?;
    let head_text =
        std::str::from_utf8(&raw[..end]).map_err(|e| format!("head is not UTF-8: {e}"))?;
    let mut lines = head_text.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let proto = parts.next().unwrap_or_default();
    if !proto.starts_with("HTTP/1.") {
        return Err(format!("bad status line {status_line:?}"));
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| format!("bad header line {line:?}"))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let rest = &raw[end + 4..];
    let find = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    let body = if head {
        rest.to_vec()
    } else if find("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        dechunk(rest)?
    } else if let Some(len) = find("content-length") {
        let len: usize = len
            .parse()
            .map_err(|_| format!("bad content-length {len:?}"))?;
        if rest.len() < len {
            return Err(format!(
                "body has {} bytes, content-length says {len}",
                rest.len()
            ));
        }
        rest[..len].to_vec()
    } else {
        rest.to_vec()
    };
    Ok(Response {
        status,
        headers,
        body,
    })
}

/// Decodes a chunked body.
fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("chunk size line without end")?;
        let size_text =
            std::str::from_utf8(&rest[..line_end]).map_err(|_| "chunk size is not text")?;
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| format!("bad chunk size {size_text:?}"))?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Ok(body);
        }
        if rest.len() < size + 2 {
            return Err("truncated chunk".to_string());
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

/// Fails the test unless `value` is an object with exactly the keys `keys`.
pub fn assert_keys(value: &Value, keys: &[&str], context: &str) {
    let obj = value
        .as_object()
        .unwrap_or_else(|| panic!("{context}: not an object: {value}"));
    let mut got: Vec<&str> = obj.keys().map(String::as_str).collect();
    got.sort_unstable();
    let mut want = keys.to_vec();
    want.sort_unstable();
    assert_eq!(got, want, "{context}: keys of {value}");
}

// ---------------------------------------------------------------------------
// The command-line tool.
// ---------------------------------------------------------------------------

/// What one run of the binary did.
#[derive(Debug)]
pub struct CliOutput {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `portfolio-replica args...` and waits for it, failing after `CLI_TIMEOUT`.
pub async fn cli<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> CliOutput {
    let args: Vec<std::ffi::OsString> = args.iter().map(|a| a.as_ref().to_os_string()).collect();
    tokio::task::spawn_blocking(move || run_cli(&args))
        .await
        .expect("the command-line runner panicked")
}

fn run_cli(args: &[std::ffi::OsString]) -> CliOutput {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_portfolio-replica"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start portfolio-replica");
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let out_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let deadline = Instant::now() + CLI_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for portfolio-replica") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("portfolio-replica {args:?} did not finish within {CLI_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    CliOutput {
        code: status.code(),
        stdout: String::from_utf8_lossy(&out_reader.join().expect("stdout reader")).into_owned(),
        stderr: String::from_utf8_lossy(&err_reader.join().expect("stderr reader")).into_owned(),
    }
}
