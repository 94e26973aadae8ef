//! What operators and browser clients see around the API: CORS, readiness
//! with `--require-workspaces`, the status of rejected replacements, the
//! OpenAPI document's server, and log lines that say what really happened.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use portfolio_replica::serve::api::Cors;
use serde_json::{Value, json};

use crate::util::*;

const ORIGIN: &str = "https://app.example.com";

fn header_lists(resp: &Response, name: &str, token: &str) -> bool {
    resp.header(name).is_some_and(|v| {
        v.split(',')
            .any(|item| item.trim().eq_ignore_ascii_case(token))
    })
}

fn one_workspace() -> TestServerFiles {
    let mut s = snapshot("ws-a", &[KEY]);
    add(&mut s, "companies", [company(1, "A")]);
    add(&mut s, "tasks", [task(2, 1, "2026-03-01T10:00:00Z")]);
    vec![("a.json", s)]
}

type TestServerFiles = Vec<(&'static str, Value)>;

async fn serve(files: TestServerFiles, cors: Option<Cors>) -> TestServer {
    let dir = tempdir();
    for (name, value) in &files {
        write_json(dir.path(), name, value);
    }
    TestServer::start_in(dir, |c| c.cors = cors).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_is_off_by_default() {
    let server = serve(one_workspace(), None).await;
    let preflight = server
        .request(
            "OPTIONS",
            "/tasks",
            &[("Origin", ORIGIN), ("Access-Control-Request-Method", "GET")],
        )
        .await;
    assert_eq!(preflight.status, 405, "no CORS: OPTIONS is not allowed");
    let auth = format!("Bearer {KEY}");
    let resp = server
        .request(
            "GET",
            "/tasks",
            &[("Authorization", &auth), ("Origin", ORIGIN)],
        )
        .await;
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("access-control-allow-origin"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_origins_get_preflights_and_exposed_headers_others_get_nothing() {
    let cors = Cors::parse(ORIGIN).expect("an origin");
    let server = serve(one_workspace(), Some(cors)).await;

    let preflight = server
        .request(
            "OPTIONS",
            "/tasks?limit=5",
            &[
                ("Origin", ORIGIN),
                ("Access-Control-Request-Method", "GET"),
                ("Access-Control-Request-Headers", "authorization"),
            ],
        )
        .await;
    assert_eq!(preflight.status, 204, "{}", preflight.text());
    assert_eq!(
        preflight.header("access-control-allow-origin"),
        Some(ORIGIN)
    );
    assert!(header_lists(
        &preflight,
        "access-control-allow-methods",
        "GET"
    ));
    assert!(header_lists(
        &preflight,
        "access-control-allow-headers",
        "Authorization"
    ));
    assert!(header_lists(&preflight, "vary", "Origin"));

    let auth = format!("Bearer {KEY}");
    let ok = server
        .request(
            "GET",
            "/tasks",
            &[("Authorization", &auth), ("Origin", ORIGIN)],
        )
        .await;
    assert_eq!(ok.status, 200);
    assert_eq!(ok.header("access-control-allow-origin"), Some(ORIGIN));
    for exposed in ["X-Snapshot-Version", "ETag"] {
        assert!(
            header_lists(&ok, "access-control-expose-headers", exposed),
            "{exposed} must be exposed: {:?}",
            ok.headers
        );
    }
    assert!(header_lists(&ok, "vary", "Origin"), "{:?}", ok.headers);
    assert!(
        header_lists(&ok, "vary", "Authorization"),
        "{:?}",
        ok.headers
    );

    let denied = server.request("GET", "/tasks", &[("Origin", ORIGIN)]).await;
    assert_eq!(denied.status, 401);
    assert_eq!(
        denied.header("access-control-allow-origin"),
        Some(ORIGIN),
        "a browser client must be able to read the 401"
    );

    let other = server
        .request(
            "GET",
            "/tasks",
            &[("Authorization", &auth), ("Origin", "https://evil.example")],
        )
        .await;
    assert_eq!(other.status, 200);
    assert_eq!(other.header("access-control-allow-origin"), None);
    assert!(header_lists(&other, "vary", "Origin"));
    let other_preflight = server
        .request(
            "OPTIONS",
            "/tasks",
            &[
                ("Origin", "https://evil.example"),
                ("Access-Control-Request-Method", "GET"),
            ],
        )
        .await;
    assert_eq!(other_preflight.header("access-control-allow-origin"), None);
    assert_eq!(other_preflight.header("access-control-allow-methods"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_origin_is_a_star_without_vary_origin() {
    let server = serve(one_workspace(), Some(Cors::Any)).await;
    let auth = format!("Bearer {KEY}");
    let ok = server
        .request(
            "GET",
            "/tasks",
            &[("Authorization", &auth), ("Origin", "https://x.example")],
        )
        .await;
    assert_eq!(ok.header("access-control-allow-origin"), Some("*"));
    assert!(!header_lists(&ok, "vary", "Origin"), "{:?}", ok.headers);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_waits_for_the_required_number_of_workspaces() {
    let dir = tempdir();
    let mut a = snapshot("ws-a", &[KEY]);
    add(&mut a, "companies", [company(1, "A")]);
    write_json(dir.path(), "a.json", &a);
    let server = TestServer::spawn_in(dir, |c| c.require_workspaces = 2).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let waiting = loop {
        let resp = server.get("/readyz", None).await;
        if resp.status == 503 && resp.json()["status"] == "waiting for workspaces" {
            break resp.json();
        }
        assert!(Instant::now() < deadline, "readyz: {}", resp.text());
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    assert_eq!(waiting["serving"], 1);
    assert_eq!(waiting["required"], 2);
    // The one workspace serves meanwhile: readiness is about the balancer.
    server.get_ok("/tasks", KEY).await;

    write_json(server.dir(), "b.json", &snapshot("ws-b", &[OTHER_KEY]));
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.get("/readyz", None).await.status != 200 {
        assert!(Instant::now() < deadline, "readyz never turned 200");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_a_replica_with_no_workspace_is_ready() {
    let server = TestServer::start_in(tempdir(), |_| {}).await;
    assert_eq!(server.get("/readyz", None).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_replacement_says_when_it_failed_and_which_version_serves() {
    let server = serve(one_workspace(), None).await;
    let before = server.snapshot_status("a.json").await.expect("listed");
    assert_eq!(before["failed_at"], Value::Null);
    let serving = before["version"].as_str().expect("a version").to_owned();
    assert_eq!(before["serving_version"], serving.as_str());

    write_bytes(
        server.dir(),
        "a.json.tmp",
        b"{\"format_version\": 1, \"workspace\": ",
    );
    std::fs::rename(server.dir().join("a.json.tmp"), server.dir().join("a.json"))
        .expect("rename into place");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        let status = server.snapshot_status("a.json").await.expect("listed");
        if !status["error"].is_null() {
            break status;
        }
        assert!(Instant::now() < deadline, "never rejected: {status}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    let failed_at = status["failed_at"].as_str().expect("failed_at is set");
    assert!(
        failed_at.ends_with('Z') && failed_at.contains('T'),
        "{failed_at}"
    );
    assert_eq!(status["serving_version"], serving.as_str(), "{status}");
    // `version` is the same field under its first name (operations.md).
    assert_eq!(status["version"], serving.as_str(), "{status}");
    server.wait_version("/tasks", KEY, &serving).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_that_conflicts_keeps_its_previous_version_serving() {
    let mut a = snapshot("ws-a", &[KEY]);
    add(&mut a, "companies", [company(1, "A")]);
    let mut b = snapshot("ws-b", &[OTHER_KEY]);
    add(&mut b, "companies", [company(2, "B")]);
    let server = serve(vec![("a.json", a), ("b.json", b.clone())], None).await;
    let serving = version_of("ws-b");
    server.wait_version("/portfolio", OTHER_KEY, &serving).await;

    // The new b.json also lists a's key: it is rejected, and b's previous
    // version must keep serving b's own key.
    let mut b2 = snapshot("ws-b", &[OTHER_KEY, KEY]);
    b2["version"] = "b-2".into();
    replace_json(server.dir(), "b.json", &b2);
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        let status = server.snapshot_status("b.json").await.expect("listed");
        if !status["error"].is_null() {
            break status;
        }
        assert!(Instant::now() < deadline, "never rejected: {status}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    let error = status["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("a.json") && error.contains("b.json"),
        "{error}"
    );
    assert_eq!(status["serving_version"], serving.as_str(), "{status}");
    assert_eq!(status["version"], serving.as_str(), "{status}");
    server.wait_version("/portfolio", OTHER_KEY, &serving).await;
    server
        .wait_version("/portfolio", KEY, &version_of("ws-a"))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_names_the_server_it_is_reached_at() {
    let server = serve(one_workspace(), None).await;
    let doc = server.get("/openapi.json", None).await.json();
    assert_eq!(doc["servers"][0]["url"], "/", "{}", doc["servers"]);
}

/// The real binary with JSON logs on stderr, polling its directory.
struct Logged {
    child: Child,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Logged {
    fn start(dir: tempfile::TempDir) -> Logged {
        let log = dir.path().join(".server.log");
        let stderr = std::fs::File::create(&log).expect("a log file");
        let child = Command::new(env!("CARGO_BIN_EXE_portfolio-replica"))
            .args(["--snapshots"])
            .arg(dir.path())
            .args([
                "--listen",
                "127.0.0.1:0",
                "--admin-listen",
                "127.0.0.1:0",
                "--poll-interval",
                "50",
                "--log-format",
                "json",
            ])
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("the binary starts");
        Logged {
            child,
            log,
            _dir: dir,
        }
    }

    fn lines(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Waits until a line satisfies `check`, and returns every line.
    fn wait_for(&self, what: &str, check: impl Fn(&Value) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let lines = self.lines();
            if lines.iter().any(&check) {
                return lines;
            }
            assert!(Instant::now() < deadline, "no log line {what}: {lines:#?}");
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn message(line: &Value) -> &str {
    line["fields"]["message"].as_str().unwrap_or_default()
}

#[test]
fn an_empty_snapshot_directory_is_warned_about_with_the_ignored_names() {
    let dir = tempdir();
    std::fs::write(dir.path().join("acme.json.tmp"), "{}").expect("write");
    std::fs::write(dir.path().join("notes.txt"), "x").expect("write");
    let server = Logged::start(dir);
    let lines = server.wait_for("warning of an empty directory", |l| {
        message(l).contains("holds no snapshot files")
    });
    let warning = lines
        .iter()
        .find(|l| message(l).contains("holds no snapshot files"))
        .expect("the warning");
    assert_eq!(warning["level"], "WARN", "{warning}");
    // Two names ignored, plus the server's own log file in the directory.
    assert_eq!(warning["fields"]["ignored_names"], 3, "{warning}");
}

#[test]
fn a_duplicate_workspace_is_never_logged_as_loaded_and_its_removal_unloads_nothing() {
    let dir = tempdir();
    write_json(dir.path(), "a.json", &snapshot("ws-a", &[KEY]));
    write_json(dir.path(), "b.json", &snapshot("ws-a", &[OTHER_KEY]));
    let server = Logged::start(dir);
    let lines = server.wait_for("rejecting b.json", |l| {
        l["fields"]["file"] == "b.json" && message(l).starts_with("snapshot rejected")
    });
    let loaded: Vec<&Value> = lines
        .iter()
        .filter(|l| message(l) == "snapshot loaded")
        .collect();
    assert!(
        loaded.iter().all(|l| l["fields"]["file"] == "a.json") && loaded.len() == 1,
        "only a.json loads: {loaded:#?}"
    );

    std::fs::remove_file(server._dir.path().join("b.json")).expect("remove b.json");
    let lines = server.wait_for("the removal of b.json", |l| {
        l["fields"]["file"] == "b.json" && message(l).starts_with("snapshot file removed")
    });
    let removal = lines
        .iter()
        .find(|l| {
            l["fields"]["file"] == "b.json" && message(l).starts_with("snapshot file removed")
        })
        .expect("the removal line");
    assert!(
        message(removal).contains("nothing is unloaded"),
        "b.json served nothing: {removal}"
    );
}

#[test]
fn a_missing_snapshot_directory_is_a_fatal_error_never_preceded_by_serving() {
    let dir = tempdir();
    let missing = dir.path().join("no-such-dir");
    let output = Command::new(env!("CARGO_BIN_EXE_portfolio-replica"))
        .arg("--snapshots")
        .arg(&missing)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--log-format",
            "json",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("the binary runs");
    assert_eq!(output.status.code(), Some(1));
    let lines: Vec<Value> = String::from_utf8_lossy(&output.stderr)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        !lines.iter().any(|l| message(l) == "serving"),
        "nothing serves: {lines:#?}"
    );
    let fatal = lines
        .iter()
        .find(|l| l["level"] == "ERROR")
        .unwrap_or_else(|| panic!("an ERROR line: {lines:#?}"));
    let error = fatal["fields"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("no-such-dir"), "{fatal}");
}

/// The peak resident memory of a process (VmHWM), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the process runs");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("a number");
    kib * 1024
}

/// A replacement several times larger than `--memory-limit` is refused
/// before it is built: the previous version keeps serving, `/snapshots`
/// says why, and the process's peak memory stays under the limit (a build
/// would have taken about the file's size).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_that_would_not_fit_the_memory_limit_is_refused_and_the_old_one_serves() {
    const LIMIT_MIB: u64 = 96;
    let dir = tempdir();
    let mut small = snapshot("ws-a", &[KEY]);
    add(&mut small, "companies", [company(1, "A")]);
    write_json(dir.path(), "a.json", &small);
    let log = dir.path().join(".server.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_portfolio-replica"))
        .arg("--snapshots")
        .arg(dir.path())
        .args([
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--poll-interval",
            "50",
            "--log-format",
            "json",
            "--memory-limit",
            &format!("{LIMIT_MIB}M"),
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("a log file"))
        .spawn()
        .expect("the binary starts");
    struct Kill(u32);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = Command::new("kill").arg(self.0.to_string()).status();
        }
    }
    let _kill = Kill(child.id());
    let lines = || -> Vec<Value> {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let (api, admin) = loop {
        if let Some(serving) = lines().into_iter().find(|l| message(l) == "serving") {
            let addr = |f: &str| {
                serving["fields"][f]
                    .as_str()
                    .expect("an address")
                    .parse()
                    .expect("an address")
            };
            break (addr("listen"), addr("admin_listen"));
        }
        assert!(
            child.try_wait().expect("wait").is_none(),
            "the server exited: {:#?}",
            lines()
        );
        assert!(Instant::now() < deadline, "never served: {:#?}", lines());
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    let version = version_of("ws-a");
    eventually("the small file serves", || async {
        let resp = get_from(api, "/portfolio", Some(KEY)).await?;
        (resp.header("x-snapshot-version") == Some(version.as_str()))
            .then_some(())
            .ok_or_else(|| format!("status {}", resp.status))
    })
    .await;

    // A replacement of about three times the limit: one company whose
    // description is a long text.
    let mut big = snapshot("ws-a", &[KEY]);
    big["version"] = "big".into();
    let text = "a snapshot far larger than the limit ".repeat((3 * LIMIT_MIB as usize) << 20 >> 5);
    add(
        &mut big,
        "companies",
        [with(company(1, "A"), json!({ "description": text }))],
    );
    replace_json(dir.path(), "a.json", &big);
    drop(big);

    let status = loop {
        let resp = get_from(admin, "/snapshots", None)
            .await
            .expect("/snapshots");
        let body = resp.json();
        let file = body["files"][0].clone();
        if !file["error"].is_null() {
            break file;
        }
        assert!(
            Instant::now() < deadline + Duration::from_secs(20),
            "never refused: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let error = status["error"].as_str().unwrap_or_default();
    assert!(error.contains("memory limit"), "{error}");
    assert_eq!(status["serving_version"], version.as_str(), "{status}");
    let resp = get_from(api, "/portfolio", Some(KEY))
        .await
        .expect("the API");
    assert_eq!(resp.header("x-snapshot-version"), Some(version.as_str()));
    let peak = peak_rss(child.id());
    assert!(
        peak < LIMIT_MIB << 20,
        "peak RSS {} MiB: the refused file was built anyway",
        peak >> 20
    );
    assert!(
        lines()
            .iter()
            .any(|l| message(l).starts_with("snapshot refused")),
        "the refusal is logged"
    );
}

/// A workspace whose file is renamed (`acme-1.json` to `acme-2.json`, a new
/// version) is never unloaded in between: the old file serves until the new
/// one is published, in the same swap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renaming_a_workspace_file_never_unloads_the_workspace() {
    let big = |version: &str| {
        let mut s = snapshot("ws-a", &[KEY]);
        s["version"] = version.into();
        add(&mut s, "companies", [company(1, "A")]);
        // Enough records that the new file takes a while to load.
        add(
            &mut s,
            "tasks",
            (0..20_000).map(|i| task(100 + i, 1, "2026-03-01T10:00:00Z")),
        );
        s
    };
    let dir = tempdir();
    write_json(dir.path(), "acme-1.json", &big("v1"));
    let server = TestServer::start_in(dir, |_| {}).await;
    server.wait_version("/portfolio", KEY, "v1").await;

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let api = server.api;
    let flag = std::sync::Arc::clone(&stop);
    let watcher = tokio::spawn(async move {
        let mut statuses = std::collections::BTreeMap::new();
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            let resp = get_from(api, "/portfolio?limit=1", Some(KEY))
                .await
                .expect("an answer");
            *statuses.entry(resp.status).or_insert(0u32) += 1;
        }
        statuses
    });
    // The new name is written under a hidden name, then both renames land
    // in one directory change: the old name goes, the new one comes.
    let bytes = serde_json::to_vec(&big("v2")).expect("serialize");
    write_bytes(server.dir(), ".acme-2.json.tmp", &bytes);
    std::fs::rename(
        server.dir().join(".acme-2.json.tmp"),
        server.dir().join("acme-2.json"),
    )
    .expect("rename in");
    std::fs::remove_file(server.dir().join("acme-1.json")).expect("remove the old name");
    server.wait_version("/portfolio", KEY, "v2").await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let statuses = watcher.await.expect("the watcher");
    assert_eq!(
        statuses.keys().copied().collect::<Vec<u16>>(),
        vec![200],
        "every answer during the rename: {statuses:?}"
    );
}
