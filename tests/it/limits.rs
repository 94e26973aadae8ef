//! The HTTP hardening limits and their defaults: a request head (or request
//! line) over `max_header_bytes` is refused with 431 (or 414), a stalled or
//! trickled head is cut off after the header-read timeout (slowloris), an
//! idle keep-alive connection is closed after the keep-alive timeout,
//! connections beyond the cap wait for one to close while the admin
//! listener still serves, slow readers past the keep-alive timeout cost no
//! CPU, and `--help` lists every limit with a safe default and its
//! environment variable.

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::util::*;

/// Serves the fixture with `limits` changed by `configure`.
async fn hardened(
    configure: impl FnOnce(&mut portfolio_replica::serve::server::HttpLimits),
) -> TestServer {
    let dir = tempdir();
    write_json(dir.path(), "acme.json", &fixture("ws-acme", &[KEY], 0));
    TestServer::start_in(dir, |config| configure(&mut config.limits)).await
}

/// Sends `head` on a fresh connection: its answer, or `Closed`.
async fn send_head(addr: SocketAddr, head: &[u8]) -> Answer {
    let mut conn = Conn::open(addr).await;
    // The server may close before reading everything: that is an answer too.
    let _ = conn.send(head).await;
    conn.response(IO_TIMEOUT).await
}

/// A GET of `path` whose head carries `pad` bytes in one header.
fn padded_head(path: &str, pad: usize) -> Vec<u8> {
    format!(
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {KEY}\r\nX-Pad: {}\r\nConnection: close\r\n\r\n",
        "p".repeat(pad)
    )
    .into_bytes()
}

/// Fails unless `answer` refuses an oversized head: one of `statuses`, or the
/// connection closed without an answer.
fn assert_refused(answer: Answer, statuses: &[u16], context: &str) {
    match answer {
        Answer::Closed => {}
        Answer::Response(r) if statuses.contains(&r.status) => {}
        Answer::Response(r) => panic!("{context}: status {} ({})", r.status, r.text()),
        Answer::TimedOut => panic!("{context}: neither answered nor closed"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_head_over_the_limit_is_431() {
    let server = hardened(|l| l.max_header_bytes = 2048).await;
    let ok = send_head(server.api, &padded_head("/tasks", 1000)).await;
    assert_eq!(ok.expect_response("a 1 KB header").status, 200);

    for pad in [3000, 7000, 20_000, 200_000] {
        let answer = send_head(server.api, &padded_head("/tasks", pad)).await;
        assert_refused(
            answer,
            &[431],
            &format!("a {pad}-byte header with a 2 KiB limit"),
        );
    }
    // Many small headers add up.
    let mut head =
        format!("GET /tasks HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {KEY}\r\n");
    for i in 0..60 {
        head.push_str(&format!("X-Header-{i:02}: {}\r\n", "v".repeat(40)));
    }
    head.push_str("Connection: close\r\n\r\n");
    assert!(head.len() > 2048);
    let answer = send_head(server.api, head.as_bytes()).await;
    assert_refused(answer, &[431], "60 headers of 50 bytes with a 2 KiB limit");

    // The server goes on serving.
    let after = send_head(server.api, &padded_head("/tasks", 10)).await;
    assert_eq!(after.expect_response("after the refusals").status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_line_over_the_limit_is_refused() {
    let server = hardened(|l| l.max_header_bytes = 2048).await;
    // Unknown query parameters are ignored, so a long one is a long URL.
    let url = |n: usize| format!("/tasks?pad={}", "u".repeat(n));
    let ok = send_head(server.api, &padded_head(&url(1000), 0)).await;
    assert_eq!(ok.expect_response("a 1 KB URL").status, 200);
    for n in [3000, 9000, 100_000] {
        let answer = send_head(server.api, &padded_head(&url(n), 0)).await;
        assert_refused(
            answer,
            &[431, 414],
            &format!("a {n}-byte URL with a 2 KiB limit"),
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_head_limit_is_16_kib() {
    let server = hardened(|_| {}).await;
    let ok = send_head(server.api, &padded_head("/tasks", 12_000)).await;
    assert_eq!(ok.expect_response("a 12 KB header").status, 200);
    let answer = send_head(server.api, &padded_head("/tasks", 20_000)).await;
    assert_refused(answer, &[431], "a 20 KB header with the default limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_or_trickled_request_head_is_cut_off_after_the_header_read_timeout() {
    let server = hardened(|l| {
        l.header_read_timeout = Duration::from_secs(1);
        l.keep_alive_timeout = Duration::from_secs(30);
    })
    .await;
    let api = server.api;

    let stalled = async {
        let mut conn = Conn::open(api).await;
        conn.send(b"GET /tasks HTTP/1.1\r\nHost: localhost\r\n")
            .await
            .expect("half a head");
        conn.closed_within(Duration::from_secs(5)).await
    };
    // Slowloris proper: a byte every 150 ms keeps the socket busy, yet the
    // head never completes.
    let trickled = async {
        let mut conn = Conn::open(api).await;
        let start = Instant::now();
        let head = b"GET /tasks HTTP/1.1\r\nHost: localhost\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        for byte in head.iter() {
            if conn.send(&[*byte]).await.is_err() {
                return Some(start.elapsed());
            }
            if conn
                .closed_within(Duration::from_millis(150))
                .await
                .is_some()
            {
                return Some(start.elapsed());
            }
            if start.elapsed() > Duration::from_secs(5) {
                return None;
            }
        }
        None
    };
    // A client that takes its time before starting its head is not cut.
    let late_starter = async {
        let mut conn = Conn::open(api).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        conn.send_get("/healthz", &[]).await;
        conn.response(IO_TIMEOUT).await
    };
    let (stalled, trickled, late) = tokio::join!(stalled, trickled, late_starter);
    for (what, took) in [("stalled", stalled), ("trickled", trickled)] {
        let took = took.unwrap_or_else(|| panic!("the {what} head was never cut off"));
        assert!(
            took >= Duration::from_millis(900),
            "the {what} head was cut after {took:?}, before the 1 s timeout"
        );
        assert!(
            took < Duration::from_millis(2500),
            "the {what} head was cut only after {took:?} with a 1 s timeout"
        );
    }
    assert_eq!(
        late.expect_response("a head begun after 1.5 s of idleness")
            .status,
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed_after_the_keep_alive_timeout() {
    let server = hardened(|l| {
        l.keep_alive_timeout = Duration::from_secs(1);
        l.header_read_timeout = Duration::from_secs(10);
    })
    .await;
    let api = server.api;

    let idle_after_request = async {
        let mut conn = Conn::open(api).await;
        conn.send_get("/healthz", &[]).await;
        let r = conn
            .response(IO_TIMEOUT)
            .await
            .expect_response("first request");
        assert_eq!(r.status, 200);
        conn.closed_within(Duration::from_secs(5)).await
    };
    let never_asked = async {
        let mut conn = Conn::open(api).await;
        conn.closed_within(Duration::from_secs(5)).await
    };
    // A busy connection: a request every 300 ms for 2.4 s, all on one connection.
    let busy = async {
        let mut conn = Conn::open(api).await;
        let start = Instant::now();
        let mut served = 0;
        while start.elapsed() < Duration::from_millis(2400) {
            conn.send_get("/tasks", &[("Authorization", &format!("Bearer {KEY}"))])
                .await;
            let r = conn
                .response(IO_TIMEOUT)
                .await
                .expect_response(&format!("request {served} on the busy connection"));
            assert_eq!(r.status, 200);
            served += 1;
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        (served, conn.closed_within(Duration::from_secs(5)).await)
    };
    let (idle, never, (served, busy_closed)) = tokio::join!(idle_after_request, never_asked, busy);
    for (what, took) in [("idle after a request", idle), ("never asked", never)] {
        let took = took.unwrap_or_else(|| panic!("the {what} connection was never closed"));
        assert!(
            took >= Duration::from_millis(900),
            "the {what} connection was closed after {took:?}, before the 1 s timeout"
        );
        assert!(
            took < Duration::from_millis(2500),
            "the {what} connection was closed only after {took:?} with a 1 s timeout"
        );
    }
    assert!(served >= 6, "only {served} requests on the busy connection");
    let took = busy_closed.expect("the busy connection, once idle, was never closed");
    assert!(
        took < Duration::from_millis(2500),
        "closed {took:?} after going idle"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_wait_until_one_closes() {
    let server = hardened(|l| l.max_connections = 2).await;
    let api = server.api;
    let mut held = Vec::new();
    for i in 0..2 {
        let mut conn = Conn::open(api).await;
        conn.send_get("/healthz", &[]).await;
        let r = conn
            .response(IO_TIMEOUT)
            .await
            .expect_response(&format!("held {i}"));
        assert_eq!(r.status, 200);
        held.push(conn);
    }
    let mut third = Conn::open(api).await;
    third.send_get("/healthz", &[]).await;
    match third.response(Duration::from_millis(700)).await {
        Answer::TimedOut => {}
        other => panic!("a third connection with a cap of 2 got {other:?}"),
    }
    // Operators can still scrape while the API is full.
    let (resp, _) = scrape(&server).await;
    assert_eq!(resp.status, 200);

    drop(held.remove(0));
    let r = third
        .response(Duration::from_secs(5))
        .await
        .expect_response("the third connection once one closed");
    assert_eq!(r.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_lists_every_limit_with_a_safe_default_and_its_env_var() {
    let out = cli(&["--help"]).await;
    assert_eq!(out.code, Some(0), "--help: {}", out.stderr);
    let help = out.stdout;
    // (flag, env var, default, smallest sane, largest sane)
    let flags: [(&str, &str, &str, f64, f64); 5] = [
        (
            "--max-connections",
            "PORTFOLIO_MAX_CONNECTIONS",
            "10000",
            1_000.0,
            1_000_000.0,
        ),
        (
            "--max-header-bytes",
            "PORTFOLIO_MAX_HEADER_BYTES",
            "16384",
            8_192.0,
            65_536.0,
        ),
        (
            "--header-read-timeout",
            "PORTFOLIO_HEADER_READ_TIMEOUT",
            "10",
            1.0,
            30.0,
        ),
        // Above a load balancer's usual 60 s idle timeout.
        (
            "--keep-alive-timeout",
            "PORTFOLIO_KEEP_ALIVE_TIMEOUT",
            "75",
            61.0,
            600.0,
        ),
        (
            "--shutdown-grace",
            "PORTFOLIO_SHUTDOWN_GRACE",
            "10",
            1.0,
            60.0,
        ),
    ];
    let block = |flag: &str| -> String {
        let lines: Vec<&str> = help.lines().collect();
        let start = lines
            .iter()
            .position(|l| l.trim_start().starts_with(flag))
            .unwrap_or_else(|| panic!("--help does not list {flag}:\n{help}"));
        let end = lines[start + 1..]
            .iter()
            .position(|l| l.trim_start().starts_with('-'))
            .map_or(lines.len(), |n| start + 1 + n);
        lines[start..end].join("\n")
    };
    for (flag, env, default, low, high) in flags {
        let text = block(flag);
        assert!(
            text.contains(&format!("[default: {default}]")),
            "{flag}: no [default: {default}] in\n{text}"
        );
        assert!(
            text.contains(&format!("[env: {env}")),
            "{flag}: no [env: {env}] in\n{text}"
        );
        let value: f64 = default.parse().expect("a number");
        assert!(
            (low..=high).contains(&value),
            "{flag}: default {default} is outside {low}..={high}"
        );
    }
    let log = block("--log-format");
    assert!(log.contains("[default: text]"), "--log-format:\n{log}");
    assert!(log.contains("json"), "--log-format lists json:\n{log}");
    assert!(
        log.contains("[env: PORTFOLIO_LOG_FORMAT"),
        "--log-format:\n{log}"
    );
}

/// CPU time (user + system) the process `pid` has used so far.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc/<pid>/stat");
    // Fields after the command name, which is in parentheses: state is the
    // first, utime the 12th and stime the 13th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("a stat line")
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    let hz = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(100);
    Duration::from_millis(ticks * 1000 / hz)
}

/// Clients that stop reading a large response hold their connection past
/// the keep-alive timeout (the response is in progress, so it is not idle);
/// waiting on them must cost the server nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_readers_past_the_keep_alive_timeout_cost_no_cpu() {
    let dir = tempdir();
    write_json(
        dir.path(),
        "big.json",
        &tasks_snapshot("ws-big", KEY, "v1", 100, in_flight_title_len()),
    );
    let bin = Binary::start(dir.path(), &["--keep-alive-timeout", "1"], &[]).await;
    let auth = format!("Bearer {KEY}");
    let mut readers = Vec::new();
    for _ in 0..20 {
        let mut conn = Conn::open_slow_reader(bin.api).await;
        conn.send_get("/tasks?limit=100", &[("Authorization", &auth)])
            .await;
        assert!(
            tokio::time::timeout(IO_TIMEOUT, conn.fill())
                .await
                .unwrap_or(false),
            "the response begins"
        );
        readers.push(conn);
    }
    // Past the keep-alive timeout, with every response stalled.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let pid = bin.pid();
    let before = cpu_time(pid);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let used = cpu_time(pid) - before;
    assert!(
        used < Duration::from_millis(150),
        "the server used {used:?} of CPU in 2 s while 20 clients sat on unread responses"
    );
    drop(readers);
}
