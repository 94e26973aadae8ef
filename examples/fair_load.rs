//! A load generator for fair sharing (issue 31, `scripts/fair-bench.sh`):
//! one noisy workspace driven as fast as `--noisy-connections` connections
//! go (a runaway loop, closed loop), and quiet workspaces each sending
//! `--quiet-rate` requests per second on their own connection (open loop:
//! a request is due every 1/rate s whatever the answers take; its latency
//! counts from when it was due). Prints, as one JSON line: the quiet
//! requests' p50/p99/max latency and status counts, and the noisy
//! workspace's answered rate by status. Either side may be left out
//! (`--noisy` or `--quiet` not given), to run each in its own process.
//! Loopback only.
//!
//!   fair_load --addr 127.0.0.1:8080 --path /portfolio [--noisy-path P] --noisy KEY
//!             --quiet KEY,KEY,... [--noisy-connections 64]
//!             [--quiet-rate 20] [--seconds 10] [--obey-retry-after]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

/// The quiet requests' latencies and statuses.
type Quiet = (Vec<Duration>, BTreeMap<u16, u64>);

struct Args {
    addr: String,
    path: String,
    /// The noisy workspace's path, by default `path`.
    noisy_path: Option<String>,
    noisy: Option<String>,
    quiet: Vec<String>,
    noisy_connections: usize,
    quiet_rate: f64,
    seconds: f64,
    obey_retry_after: bool,
}

fn args() -> Args {
    let mut args = Args {
        addr: "127.0.0.1:8080".into(),
        path: "/portfolio".into(),
        noisy_path: None,
        noisy: None,
        quiet: Vec::new(),
        noisy_connections: 64,
        quiet_rate: 20.0,
        seconds: 10.0,
        obey_retry_after: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--addr" => args.addr = value(),
            "--path" => args.path = value(),
            "--noisy-path" => args.noisy_path = Some(value()),
            "--noisy" => args.noisy = Some(value()),
            "--quiet" => args.quiet = value().split(',').map(str::to_owned).collect(),
            "--noisy-connections" => args.noisy_connections = value().parse().unwrap(),
            "--quiet-rate" => args.quiet_rate = value().parse().unwrap(),
            "--seconds" => args.seconds = value().parse().unwrap(),
            "--obey-retry-after" => args.obey_retry_after = true,
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(
        args.addr.starts_with("127.") || args.addr.starts_with("localhost"),
        "loopback only"
    );
    args
}

/// One keep-alive connection sending GETs with one key.
struct Conn {
    stream: TcpStream,
    request: Vec<u8>,
    buf: Vec<u8>,
}

impl Conn {
    async fn open(addr: &str, path: &str, key: &str) -> Conn {
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\r\n");
        Conn {
            stream: TcpStream::connect(addr).await.expect("connect"),
            request: request.into_bytes(),
            buf: Vec::with_capacity(1 << 16),
        }
    }

    /// One request: its status and `Retry-After`, if any.
    async fn get(&mut self) -> (u16, Option<u64>) {
        self.stream.write_all(&self.request).await.expect("write");
        self.buf.clear();
        let head_end = loop {
            let mut chunk = [0u8; 16 << 10];
            let n = self.stream.read(&mut chunk).await.expect("read");
            assert!(n > 0, "connection closed");
            self.buf.extend_from_slice(&chunk[..n]);
            if let Some(at) = find(&self.buf, b"\r\n\r\n") {
                break at + 4;
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..head_end]).to_ascii_lowercase();
        let status: u16 = head[9..12].parse().expect("status");
        let header = |name: &str| {
            head.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        let length = header("content-length:").unwrap_or(0) as usize;
        while self.buf.len() < head_end + length {
            let mut chunk = [0u8; 64 << 10];
            let n = self.stream.read(&mut chunk).await.expect("read");
            assert!(n > 0, "connection closed");
            self.buf.extend_from_slice(&chunk[..n]);
        }
        (status, header("retry-after:"))
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = Arc::new(args());
    let stop = Arc::new(AtomicBool::new(false));
    let noisy: Arc<Mutex<BTreeMap<u16, u64>>> = Arc::default();
    let quiet: Arc<Mutex<Quiet>> = Arc::default();
    let mut tasks = Vec::new();
    if let Some(key) = args.noisy.clone() {
        for _ in 0..args.noisy_connections {
            let (args, stop, noisy, key) = (args.clone(), stop.clone(), noisy.clone(), key.clone());
            tasks.push(tokio::spawn(async move {
                let path = args.noisy_path.as_deref().unwrap_or(&args.path);
                let mut conn = Conn::open(&args.addr, path, &key).await;
                let mut counts: BTreeMap<u16, u64> = BTreeMap::new();
                while !stop.load(Ordering::Relaxed) {
                    let (status, retry) = conn.get().await;
                    *counts.entry(status).or_default() += 1;
                    if let (true, Some(seconds)) = (args.obey_retry_after, retry) {
                        tokio::time::sleep(Duration::from_secs(seconds)).await;
                    }
                }
                let mut all = noisy.lock().await;
                for (status, n) in counts {
                    *all.entry(status).or_default() += n;
                }
            }));
        }
    }
    for key in args.quiet.clone() {
        let (args, stop, quiet) = (args.clone(), stop.clone(), quiet.clone());
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::open(&args.addr, &args.path, &key).await;
            let every = Duration::from_secs_f64(1.0 / args.quiet_rate);
            let mut due = Instant::now();
            let (mut latencies, mut counts) = (Vec::new(), BTreeMap::<u16, u64>::new());
            while !stop.load(Ordering::Relaxed) {
                tokio::time::sleep_until(due.into()).await;
                let (status, _) = conn.get().await;
                latencies.push(due.elapsed());
                *counts.entry(status).or_default() += 1;
                due += every;
            }
            let mut all = quiet.lock().await;
            all.0.extend(latencies);
            for (status, n) in counts {
                *all.1.entry(status).or_default() += n;
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs_f64(args.seconds)).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        let _ = task.await;
    }
    let (mut latencies, quiet_counts) = std::mem::take(&mut *quiet.lock().await);
    latencies.sort();
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1e3)
    };
    let noisy = noisy.lock().await.clone();
    let per_second = |counts: &BTreeMap<u16, u64>, status: u16| {
        counts.get(&status).copied().unwrap_or(0) as f64 / args.seconds
    };
    let report = serde_json::json!({
        "quiet_p50_ms": pct(0.50),
        "quiet_p99_ms": pct(0.99),
        "quiet_max_ms": latencies.last().map_or(0.0, |d| d.as_secs_f64() * 1e3),
        "quiet": quiet_counts,
        "noisy": noisy,
        "noisy_200_per_s": per_second(&noisy, 200),
        "noisy_429_per_s": per_second(&noisy, 429),
    });
    println!("{report}");
}
