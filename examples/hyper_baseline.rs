//! The ceiling for any Rust server here: a bare hyper 1 HTTP/1.1 server that
//! answers each request from bytes captured beforehand, and does nothing
//! else. `scripts/load-bench.sh` captures our server's responses into a
//! directory, starts this on the same core and compares the two under `wrk`.
//!
//! ```text
//! cargo run --release --example hyper_baseline -- DIR [--listen ADDR] [--workers N]
//! ```
//!
//! `DIR/index.tsv` holds one line per request, tab-separated:
//!
//! ```text
//! /tasks?limit=50<TAB>tasks-0.body<TAB>content-type: application/json<TAB>x-snapshot-version: v1
//! ```
//!
//! the request target exactly as the client sends it (path and query), the
//! body's file in `DIR`, then any number of `name: value` response headers.
//! A request whose target is in the index gets `200` with that body and those
//! headers; anything else gets an empty `404`. A line whose headers include
//! `content-encoding: gzip` is the gzip form of its target: it answers the
//! requests that mention `gzip` in `Accept-Encoding`, the other line the
//! rest. Method and other request headers are not looked at. `--workers` is
//! the tokio runtime's worker threads (default: the cores the process may
//! run on, as for our server's runtime); `--listen` defaults to
//! `127.0.0.1:8081`.
//!
//! As lean as hyper gets: no tower stack, `http1::Builder` with keep-alive,
//! `service_fn`, a `HashMap` lookup and a refcount clone of the body. Like our
//! server, it sets `TCP_NODELAY` on accepted sockets.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderName, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// One captured response: its body and the headers to send with it.
struct Captured {
    body: Bytes,
    headers: Vec<(HeaderName, HeaderValue)>,
}

/// By target: the identity response, and the gzip one if captured.
type Table = HashMap<String, (Option<Captured>, Option<Captured>)>;

struct Args {
    dir: PathBuf,
    listen: SocketAddr,
    workers: usize,
}

const USAGE: &str = "usage: hyper_baseline DIR [--listen ADDR] [--workers N]";

fn parse_args() -> Result<Args, String> {
    let mut dir = None;
    let mut listen: SocketAddr = "127.0.0.1:8081".parse().expect("valid default address");
    let mut workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => {
                let value = args.next().ok_or("--listen needs an address")?;
                listen = value
                    .parse()
                    .map_err(|e| format!("--listen {value}: {e}"))?;
            }
            "--workers" => {
                let value = args.next().ok_or("--workers needs a number")?;
                workers = value
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("--workers {value}: not a positive number"))?;
            }
            "-h" | "--help" => return Err(USAGE.to_owned()),
            _ if dir.is_none() && !arg.starts_with('-') => dir = Some(PathBuf::from(arg)),
            _ => return Err(format!("unexpected argument {arg:?}\n{USAGE}")),
        }
    }
    Ok(Args {
        dir: dir.ok_or(USAGE)?,
        listen,
        workers,
    })
}

/// Reads `DIR/index.tsv` and every body it names.
fn load(dir: &Path) -> Result<Table, String> {
    let index_path = dir.join("index.tsv");
    let index = std::fs::read_to_string(&index_path)
        .map_err(|e| format!("cannot read {}: {e}", index_path.display()))?;
    let mut table = Table::new();
    for (n, line) in index.lines().enumerate() {
        let at = || format!("{}:{}", index_path.display(), n + 1);
        if line.trim().is_empty() {
            continue;
        }
        let mut fields = line.split('\t');
        let target = fields.next().unwrap_or_default();
        let file = fields
            .next()
            .ok_or_else(|| format!("{}: no body file", at()))?;
        let body_path = dir.join(file);
        let body = std::fs::read(&body_path)
            .map_err(|e| format!("{}: cannot read {}: {e}", at(), body_path.display()))?;
        let mut headers = Vec::new();
        for field in fields {
            let (name, value) = field
                .split_once(':')
                .ok_or_else(|| format!("{}: header {field:?} is not `name: value`", at()))?;
            let name = HeaderName::from_bytes(name.trim().as_bytes())
                .map_err(|e| format!("{}: header name {name:?}: {e}", at()))?;
            let value = HeaderValue::from_str(value.trim())
                .map_err(|e| format!("{}: header value {value:?}: {e}", at()))?;
            headers.push((name, value));
        }
        let gzip = headers.iter().any(|(name, value)| {
            name == hyper::header::CONTENT_ENCODING
                && value.as_bytes().eq_ignore_ascii_case(b"gzip")
        });
        let captured = Captured {
            body: Bytes::from(body),
            headers,
        };
        let entry = table.entry(target.to_owned()).or_default();
        if gzip {
            entry.1 = Some(captured);
        } else {
            entry.0 = Some(captured);
        }
    }
    if table.is_empty() {
        return Err(format!("{}: no requests", index_path.display()));
    }
    Ok(table)
}

fn answer(table: &Table, request: &Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
    let target = request.uri().path_and_query().map_or("/", |pq| pq.as_str());
    let wants_gzip = request
        .headers()
        .get(hyper::header::ACCEPT_ENCODING)
        .is_some_and(|v| {
            v.as_bytes()
                .windows(4)
                .any(|w| w.eq_ignore_ascii_case(b"gzip"))
        });
    let found = table.get(target).and_then(|(identity, gzip)| match gzip {
        Some(gzip) if wants_gzip => Some(gzip),
        _ => identity.as_ref(),
    });
    let Some(captured) = found else {
        let mut response = Response::new(Full::new(Bytes::new()));
        *response.status_mut() = StatusCode::NOT_FOUND;
        return response;
    };
    let mut response = Response::new(Full::new(captured.body.clone()));
    let headers = response.headers_mut();
    headers.reserve(captured.headers.len());
    for (name, value) in &captured.headers {
        headers.insert(name.clone(), value.clone());
    }
    response
}

async fn serve(listener: TcpListener, table: Arc<Table>) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(pair) => pair,
            Err(err) => {
                eprintln!("accept: {err}");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let table = Arc::clone(&table);
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let response = answer(&table, &request);
                async move { Ok::<_, Infallible>(response) }
            });
            // Keep-alive is on by default; errors are clients going away.
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn main() -> std::process::ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return std::process::ExitCode::from(2);
        }
    };
    let table = match load(&args.dir) {
        Ok(table) => Arc::new(table),
        Err(message) => {
            eprintln!("error: {message}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.workers)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        let listener = match TcpListener::bind(args.listen).await {
            Ok(listener) => listener,
            Err(err) => {
                eprintln!("error: cannot listen on {}: {err}", args.listen);
                return std::process::ExitCode::FAILURE;
            }
        };
        eprintln!(
            "hyper_baseline: {} responses from {} on {} with {} worker thread(s)",
            table.len(),
            args.dir.display(),
            args.listen,
            args.workers
        );
        serve(listener, table).await;
        std::process::ExitCode::SUCCESS
    })
}
