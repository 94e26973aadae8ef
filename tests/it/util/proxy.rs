//! A tiny HTTP/1.1 proxy between the replicas and moto, on 127.0.0.1:0, to
//! inject what a real object store does on a bad day: throttling (503
//! SlowDown), server errors, a request that never gets an answer, a body cut
//! short of its Content-Length, an object deleted between the listing and
//! the download, a store that is down. It counts the requests it sees by
//! kind, and can pass writes through one at a time (moto checks a
//! conditional PUT and then writes, not atomically across its threads; the
//! tests are about the publishers, not about moto).
//!
//! One request per connection: each answer goes back with `Connection:
//! close`, and the client opens a new connection for the next request.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// What the proxy does to the requests a fault applies to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Forward as is.
    None,
    /// Close the connection without an answer (storage down).
    Down,
    /// Answer with this status and an S3 error body of this code.
    Status(u16, &'static str),
    /// Never answer (until the client gives up, or 30 s).
    Stall,
    /// Forward, then send only the first half of the body, and close.
    Truncate,
    /// Delete the object upstream, then forward the GET (a deletion between
    /// the listing and the download).
    DeleteFirst,
}

/// Which requests a fault applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    All,
    /// Downloads of snapshot objects only (GETs of `.json`/`.json.gz`
    /// other than the manifest).
    Objects,
}

struct State {
    upstream: SocketAddr,
    fault: Fault,
    scope: Scope,
    counts: BTreeMap<&'static str, u64>,
}

/// The proxy; stopped when dropped.
pub struct FaultProxy {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    task: JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FaultProxy {
    /// A proxy to `upstream`; `serialize` passes requests through one at a time.
    pub async fn start(upstream: SocketAddr, serialize: bool) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy address");
        let state = Arc::new(Mutex::new(State {
            upstream,
            fault: Fault::None,
            scope: Scope::All,
            counts: BTreeMap::new(),
        }));
        let one_at_a_time = Arc::new(tokio::sync::Mutex::new(()));
        let shared = Arc::clone(&state);
        let task = tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let state = Arc::clone(&shared);
                let one_at_a_time = Arc::clone(&one_at_a_time);
                tokio::spawn(async move {
                    let _turn = if serialize {
                        Some(one_at_a_time.lock_owned().await)
                    } else {
                        None
                    };
                    let _ = handle(conn, &state).await;
                });
            }
        });
        FaultProxy { addr, state, task }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies `fault` to the requests in `scope` from now on.
    pub fn set(&self, fault: Fault, scope: Scope) {
        let mut state = self.state();
        state.fault = fault;
        state.scope = scope;
    }

    pub fn clear(&self) {
        self.set(Fault::None, Scope::All);
    }

    /// Sends what comes next to another server.
    pub fn set_upstream(&self, upstream: SocketAddr) {
        self.state().upstream = upstream;
    }

    /// Requests seen so far, by kind (`list`, `get`, `conditional_get`,
    /// `head`, `put`, `delete`, `other`).
    pub fn counts(&self) -> BTreeMap<&'static str, u64> {
        self.state().counts.clone()
    }
}

/// One parsed request: the head as received and the body.
struct Request {
    head: String,
    body: Vec<u8>,
    method: String,
    target: String,
}

async fn handle(mut conn: TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    let Some(request) = read_request(&mut conn).await? else {
        return Ok(());
    };
    let kind = kind(&request);
    let (upstream, fault) = {
        let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
        *state.counts.entry(kind).or_default() += 1;
        let applies = match state.scope {
            Scope::All => true,
            Scope::Objects => {
                request.method == "GET"
                    && kind != "list"
                    && !request.target.contains("manifest.json")
                    && (request.target.contains(".json") || request.target.ends_with(".gz"))
            }
        };
        let fault = if applies {
            state.fault.clone()
        } else {
            Fault::None
        };
        (state.upstream, fault)
    };
    match fault {
        Fault::Down => return Ok(()),
        Fault::Stall => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            return Ok(());
        }
        Fault::Status(status, code) => {
            let body = format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code><Message>injected by the test proxy</Message></Error>"
            );
            let answer = format!(
                "HTTP/1.1 {status} Injected\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            return conn.write_all(answer.as_bytes()).await;
        }
        Fault::DeleteFirst => {
            let delete = Request {
                head: request
                    .head
                    .replacen(&request.method, "DELETE", 1)
                    .replace("Content-Length:", "X-Ignored:"),
                body: Vec::new(),
                method: "DELETE".to_owned(),
                target: request.target.clone(),
            };
            forward(&delete, upstream).await?;
        }
        Fault::None | Fault::Truncate => {}
    }
    let mut answer = forward(&request, upstream).await?;
    if fault == Fault::Truncate
        && let Some(head_end) = find(&answer, b"\r\n\r\n")
    {
        let body = answer.len() - (head_end + 4);
        answer.truncate(head_end + 4 + body / 2);
    }
    conn.write_all(&answer).await?;
    conn.shutdown().await
}

/// The kind of an S3 request, as the metrics of the replica name them.
fn kind(request: &Request) -> &'static str {
    let lower = request.head.to_ascii_lowercase();
    match request.method.as_str() {
        "GET" if request.target.contains("list-type=") => "list",
        "GET" if lower.contains("\r\nif-none-match:") => "conditional_get",
        "GET" => "get",
        "HEAD" => "head",
        "PUT" | "POST" => "put",
        "DELETE" => "delete",
        _ => "other",
    }
}

/// Reads one request: the head, and the body its Content-Length announces.
async fn read_request(conn: &mut TcpStream) -> std::io::Result<Option<Request>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 << 10];
    let head_end = loop {
        if let Some(at) = find(&buf, b"\r\n\r\n") {
            break at;
        }
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut line = head.lines().next().unwrap_or("").split(' ');
    let method = line.next().unwrap_or("").to_owned();
    let target = line.next().unwrap_or("").to_owned();
    let length: usize = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Ok(Some(Request {
        head,
        body,
        method,
        target,
    }))
}

/// Sends `request` upstream with `Connection: close` and reads the whole
/// answer (to the end of the stream).
async fn forward(request: &Request, upstream: SocketAddr) -> std::io::Result<Vec<u8>> {
    let mut head: Vec<&str> = request
        .head
        .split("\r\n")
        .filter(|l| {
            !l.to_ascii_lowercase().starts_with("connection:")
                && !l.to_ascii_lowercase().starts_with("x-ignored:")
        })
        .collect();
    head.push("Connection: close");
    let mut out = head.join("\r\n").into_bytes();
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(&request.body);
    let mut up = TcpStream::connect(upstream).await?;
    up.write_all(&out).await?;
    let mut answer = Vec::new();
    up.read_to_end(&mut answer).await?;
    Ok(answer)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
