//! Graceful shutdown of the real binary: on SIGTERM it refuses new
//! connections on both listeners, answers an open connection's pending
//! request (`/readyz` is 503 while it drains), closes idle keep-alive
//! connections, finishes the in-flight response whole and exits 0 within
//! the grace period; a request head that never completes delays the exit
//! by at most the grace period (`--shutdown-grace` or its environment
//! variable), on SIGTERM as on SIGINT.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use crate::util::*;

/// Whether a new connection to `addr` is refused (or at least not served).
async fn refuses(addr: SocketAddr) -> bool {
    match tokio::time::timeout(Duration::from_millis(500), TcpStream::connect(addr)).await {
        Ok(Err(_)) => true,
        Ok(Ok(_)) | Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_finishes_the_in_flight_response_and_exits_0() {
    let dir = tempdir();
    write_json(
        dir.path(),
        "big.json",
        &tasks_snapshot("ws-big", KEY, "v1", 100, in_flight_title_len()),
    );
    let mut bin = Binary::start(dir.path(), &[], &[]).await;
    let auth = format!("Bearer {KEY}");

    // A keep-alive connection that has been served and sits idle.
    let mut idle = Conn::open(bin.api).await;
    idle.send_get("/healthz", &[]).await;
    assert_eq!(
        idle.response(IO_TIMEOUT)
            .await
            .expect_response("idle")
            .status,
        200
    );
    // A connection that has sent part of its next request head.
    let mut partial = Conn::open(bin.api).await;
    partial
        .send(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .expect("send half a head");
    // The in-flight request: a large answer to a client that reads slowly.
    let mut slow = Conn::open_slow_reader(bin.api).await;
    slow.send_get("/tasks?limit=100", &[("Authorization", &auth)])
        .await;
    // Wait for the first bytes: the request is being answered.
    tokio::time::timeout(IO_TIMEOUT, slow.fill())
        .await
        .expect("the response begins");

    bin.signal("TERM");
    let sigterm = Instant::now();

    // New connections are refused once the signal is handled, on both
    // listeners (each stops on its own task: the second may take a moment
    // more on a busy machine).
    for (addr, listener) in [(bin.api, "API"), (bin.admin, "admin")] {
        eventually(
            &format!("new {listener} connections are refused"),
            async || {
                if refuses(addr).await {
                    Ok(())
                } else {
                    Err(format!("a new {listener} connection was accepted"))
                }
            },
        )
        .await;
    }
    assert!(
        bin.exited().is_none(),
        "the process exited with a response still in flight:\n{}",
        bin.stderr_text()
    );

    // The already-open connection with half a head is answered: /readyz is
    // 503 while the replica drains.
    partial.send(b"\r\n").await.expect("finish the head");
    let readyz = partial
        .response(IO_TIMEOUT)
        .await
        .expect_response("/readyz on an open connection after SIGTERM");
    assert_eq!(
        readyz.status,
        503,
        "/readyz while draining: {}",
        readyz.text()
    );
    assert!(
        partial
            .closed_within(Duration::from_secs(5))
            .await
            .is_some(),
        "the connection stays open after its answer during shutdown"
    );

    // The idle keep-alive connection is closed (it cannot be asked again);
    // if a request slips in before that, it is told 503, never 200.
    let _ = idle
        .send(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await;
    match idle.response(Duration::from_secs(5)).await {
        Answer::Closed => {}
        Answer::Response(r) => assert_eq!(r.status, 503, "idle connection after SIGTERM"),
        Answer::TimedOut => {
            panic!("the idle keep-alive connection was neither closed nor answered")
        }
    }

    // The in-flight response completes, whole.
    let resp = slow
        .response(IO_TIMEOUT)
        .await
        .expect_response("the in-flight /tasks?limit=100");
    assert_eq!(resp.status, 200);
    let body = resp.json();
    assert_eq!(
        body["data"].as_array().map(Vec::len),
        Some(100),
        "the in-flight response is complete"
    );

    let status = bin.wait_exit(Duration::from_secs(10)).await;
    assert_eq!(
        status.code(),
        Some(0),
        "exit status after SIGTERM: {status}"
    );
    assert!(
        sigterm.elapsed() < Duration::from_secs(10),
        "the exit took {:?}, beyond the 10 s grace period",
        sigterm.elapsed()
    );
}

/// SIGTERM with a client that never finishes its request head: the process
/// waits out the grace period (here 1 s), then exits 0 anyway.
async fn a_stalled_head_delays_exit_by_at_most_the_grace(signal: &str, grace_by_env: bool) {
    let dir = tempdir();
    write_json(dir.path(), "acme.json", &fixture("ws-acme", &[KEY], 0));
    let (args, env): (&[&str], &[(&str, &str)]) = if grace_by_env {
        (&[], &[("PORTFOLIO_SHUTDOWN_GRACE", "1")])
    } else {
        (&["--shutdown-grace", "1"], &[])
    };
    let mut bin = Binary::start(dir.path(), args, env).await;
    let stalled = Conn::open(bin.api).await;
    stalled
        .send(b"GET /tasks HTTP/1.1\r\nHost: localhost\r\nAuthori")
        .await
        .expect("send half a head");
    // Let the server read those bytes, so the connection is busy, not idle.
    tokio::time::sleep(Duration::from_millis(100)).await;

    bin.signal(signal);
    let sent = Instant::now();
    let status = bin.wait_exit(Duration::from_secs(5)).await;
    let took = sent.elapsed();
    assert_eq!(
        status.code(),
        Some(0),
        "exit status after SIG{signal}: {status}"
    );
    assert!(
        took < Duration::from_secs(3),
        "exit took {took:?} with a 1 s grace period"
    );
    assert!(
        took >= Duration::from_millis(800),
        "exit took only {took:?}: the grace period was not given to the open connection"
    );
    drop(stalled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_a_stalled_request_head_exits_0_after_the_grace_flag() {
    a_stalled_head_delays_exit_by_at_most_the_grace("TERM", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_with_a_stalled_request_head_exits_0_after_the_grace_env_var() {
    a_stalled_head_delays_exit_by_at_most_the_grace("INT", true).await;
}

/// A memory budget's private copies and downloads live in directories of
/// their own (mode 0700) that a clean SIGTERM removes: a restart needs no
/// room for the last run's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_removes_the_private_copies_of_a_budget() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir();
    write_json(dir.path(), "acme.json", &fixture("ws-acme", &[KEY], 20));
    let temp = tempdir();
    let temp_path = temp.path().to_str().unwrap().to_owned();
    let mut bin = Binary::start(
        dir.path(),
        &["--memory-budget", "16MiB"],
        &[("TMPDIR", &temp_path)],
    )
    .await;
    let answer = get_from(bin.api, "/tasks", Some(KEY)).await.unwrap();
    assert_eq!(answer.status, 200);
    let private: Vec<_> = std::fs::read_dir(temp.path())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("portfolio-replica-")
        })
        .collect();
    assert!(
        !private.is_empty(),
        "no private directory under {temp_path}"
    );
    for entry in &private {
        let mode = entry.metadata().unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{} is {mode:o}", entry.path().display());
    }
    bin.signal("TERM");
    let status = bin.wait_exit(Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(0), "{status}");
    let left: Vec<_> = std::fs::read_dir(temp.path())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left after SIGTERM: {left:?}");
}
