//! The in-process server harness: `TestServer` runs `portfolio_replica::serve`
//! on two loopback ports (API and admin) over a temporary snapshot directory,
//! sends requests to it with the client of `http`, and waits for readiness,
//! for a version to be served or for a file to be reported rejected.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use portfolio_replica::ServeConfig;
use serde_json::Value;
use tempfile::TempDir;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::http::exchange;
use super::{IO_TIMEOUT, READY_TIMEOUT, Response, eventually, tempdir, write_json};

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
        match tokio::time::timeout(IO_TIMEOUT, exchange(self.api, method, bytes.to_vec())).await {
            Ok(Ok(resp)) => resp,
            Ok(Err(e)) => panic!("{what}: {e}"),
            Err(_) => panic!("{what}: no complete answer within {IO_TIMEOUT:?}"),
        }
    }

    /// Sends `GET path` to the admin port.
    pub async fn admin_get(&self, path: &str) -> Response {
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.admin
        );
        match tokio::time::timeout(IO_TIMEOUT, exchange(self.admin, "GET", req.into_bytes())).await
        {
            Ok(Ok(resp)) => resp,
            Ok(Err(e)) => panic!("admin GET {path}: {e}"),
            Err(_) => panic!("admin GET {path}: no complete answer within {IO_TIMEOUT:?}"),
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

    /// Waits until admin `/snapshots` lists `file` with an error, and returns the entry.
    pub async fn wait_error(&self, file: &str) -> Value {
        let mut found = Value::Null;
        eventually(
            &format!("/snapshots reports an error for {file}"),
            async || match self.snapshot_status(file).await {
                Some(entry) if entry["error"].as_str().is_some_and(|e| !e.is_empty()) => {
                    found = entry;
                    Ok(())
                }
                other => Err(format!("entry {other:?}")),
            },
        )
        .await;
        found
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
