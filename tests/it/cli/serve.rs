//! The server on the command line: listen addresses checked before it
//! starts, a listener that cannot bind named with what to do, a fatal error
//! as a log line in the log format, and SIGTERM ending with a `stopped` line.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Env, run};
use crate::util::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_addresses_are_checked_on_the_command_line() {
    let shape = "expected HOST:PORT such as 127.0.0.1:8080 or 0.0.0.0:8080";
    // (args, env, exit code, what stderr contains)
    let cases: Vec<(Vec<&str>, Env, i32, String)> = vec![
        (
            vec!["--listen", "19082"],
            vec![],
            2,
            format!(
                "error: invalid value '19082' for '--listen <ADDR>': 19082 has no host: {shape} \
                 (127.0.0.1:19082 for this machine only, 0.0.0.0:19082 for every interface)"
            ),
        ),
        (
            vec!["serve"],
            vec![("PORTFOLIO_ADMIN_LISTEN", "9090")],
            2,
            format!("9090 has no host: {shape}"),
        ),
        (
            vec!["--listen", ":8080"],
            vec![],
            2,
            format!("no host before the port: {shape}"),
        ),
        (
            vec!["--admin-listen", "127.0.0.1:70000"],
            vec![],
            2,
            format!("\"70000\" is not a port (0 to 65535): {shape}"),
        ),
        (
            vec![
                "--listen",
                "127.0.0.1:18080",
                "--admin-listen",
                "127.0.0.1:18080",
            ],
            vec![],
            2,
            "error: --listen 127.0.0.1:18080 and --admin-listen 127.0.0.1:18080 (or \
             PORTFOLIO_LISTEN and PORTFOLIO_ADMIN_LISTEN) are the same address: the API and \
             the admin endpoints need different ones, e.g. --admin-listen 127.0.0.1:9090"
                .into(),
        ),
        (
            vec!["serve", "--admin-listen", "127.0.0.1:18080"],
            vec![("PORTFOLIO_LISTEN", "0.0.0.0:18080")],
            2,
            "error: --listen 0.0.0.0:18080 and --admin-listen 127.0.0.1:18080".into(),
        ),
        // A flag other servers have gets a tip naming ours, with its value.
        (
            vec!["--port", "18620"],
            vec![],
            2,
            "tip: there is no --port: give the API's address with --listen 127.0.0.1:18620".into(),
        ),
        // Sizes and rates are said in the flags' terms, the variable's too.
        (
            vec!["--memory-budget", "64"],
            vec![],
            2,
            "--memory-budget 64 (or PORTFOLIO_MEMORY_BUDGET): 64 bytes, below 1 MiB; did you \
             mean 64MiB?"
                .into(),
        ),
        (
            vec!["serve"],
            vec![("PORTFOLIO_MEMORY_BUDGET", "64")],
            2,
            "did you mean 64MiB?".into(),
        ),
        (
            vec!["--memory-limit", "1.5G"],
            vec![],
            2,
            "\"1.5G\": sizes take whole numbers; write 1536MiB instead".into(),
        ),
        // A plain rate is per second: accepted, the start goes on to the
        // missing directory.
        (
            vec!["--rate-limit", "5", "--snapshots", "/nonexistent/snapshots"],
            vec![
                ("PORTFOLIO_LISTEN", "127.0.0.1:0"),
                ("PORTFOLIO_ADMIN_LISTEN", "127.0.0.1:0"),
            ],
            1,
            "snapshot directory /nonexistent/snapshots cannot be read".into(),
        ),
        // Host names still work: the command line accepts localhost, binds,
        // and stops at the missing snapshot directory.
        (
            vec![
                "--listen",
                "localhost:0",
                "--admin-listen",
                "localhost:0",
                "--snapshots",
                "/nonexistent/snapshots",
            ],
            vec![],
            1,
            "snapshot directory /nonexistent/snapshots cannot be read".into(),
        ),
    ];
    let mut failures = Vec::new();
    for (args, env, code, says) in &cases {
        let out = run(args, None, env).await;
        if out.code != Some(*code) || !out.stderr.contains(says.as_str()) {
            failures.push(format!(
                "{args:?} {env:?}: exit {:?}, stderr {:?}; expected exit {code} and {says:?}",
                out.code, out.stderr
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_that_cannot_bind_is_named_with_what_to_do() {
    let dir = tempdir();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let port = taken.local_addr().expect("local address").to_string();
    let snapshots = dir.path().display().to_string();
    for (flag, other, what, env) in [
        ("--listen", "--admin-listen", "the API", "PORTFOLIO_LISTEN"),
        (
            "--admin-listen",
            "--listen",
            "the admin endpoints",
            "PORTFOLIO_ADMIN_LISTEN",
        ),
    ] {
        let args = ["--snapshots", &snapshots, flag, &port, other, "127.0.0.1:0"];
        let out = run(&args, None, &[]).await;
        let want = format!(
            "cannot listen on {port} for {what} ({flag}): Address already in use (os error 98); \
             another process is listening there: stop it, or choose another address with \
             {flag} ({env})"
        );
        assert!(
            out.code == Some(1) && out.stderr.contains(&want),
            "{flag} {port} taken: exit {:?}, stderr {:?}; expected exit 1 and {want:?}",
            out.code,
            out.stderr
        );
    }
    drop(taken);
}

/// Parses every line of `stderr` as a JSON log event, failing on any other line.
fn json_events(stderr: &str) -> Vec<Value> {
    stderr
        .lines()
        .map(|line| {
            let event: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("a stderr line is not JSON ({e}): {line:?}\n{stderr}"));
            assert!(
                event["level"].is_string() && event["fields"]["message"].is_string(),
                "a log line without level or message: {line}"
            );
            event
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fatal_error_is_a_log_line_in_the_log_format_and_the_last_line_says_stopped() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let port = taken.local_addr().expect("local address").to_string();
    let dir = tempdir();
    let snapshots = dir.path().display().to_string();
    // (args, what the error field says)
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["--snapshots", "/nonexistent/snapshots", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"],
            "snapshot directory /nonexistent/snapshots cannot be read: No such file or directory (os error 2)".into(),
        ),
        (
            vec!["--snapshots", &snapshots, "--listen", &port, "--admin-listen", "127.0.0.1:0"],
            format!("cannot listen on {port} for the API (--listen): Address already in use"),
        ),
    ];
    let mut failures = Vec::new();
    for (args, error) in &cases {
        let json: Vec<&str> = args
            .iter()
            .copied()
            .chain(["--log-format", "json"])
            .collect();
        let out = run(&json, None, &[]).await;
        let events = json_events(&out.stderr);
        let fatal = events.iter().find(|e| e["level"] == "ERROR");
        let fatal_ok = fatal.is_some_and(|e| {
            e["fields"]["message"] == "cannot serve"
                && e["fields"]["error"]
                    .as_str()
                    .is_some_and(|t| t.starts_with(error.as_str()))
        });
        let last = events.last();
        let stopped = last.is_some_and(|e| {
            e["level"] == "INFO"
                && e["fields"]["message"] == "stopped"
                && e["fields"]["exit_code"] == 1
        });
        if out.code != Some(1) || !fatal_ok || !stopped || !out.stdout.is_empty() {
            failures.push(format!(
                "{json:?}: exit {:?}, stderr:\n{}\nexpected exit 1, an ERROR \"cannot serve\" with \
                 error {error:?}, and last an INFO \"stopped\" with exit_code 1",
                out.code, out.stderr
            ));
        }
        // The text format: the same events, as text lines.
        let out = run(args, None, &[]).await;
        let lines: Vec<&str> = out.stderr.lines().collect();
        let text_ok = lines
            .iter()
            .any(|l| l.contains(" ERROR ") && l.contains(&format!("cannot serve error={error}")))
            && lines
                .last()
                .is_some_and(|l| l.contains(" INFO ") && l.ends_with("stopped exit_code=1"));
        if out.code != Some(1) || !text_ok {
            failures.push(format!(
                "{args:?}: exit {:?}, stderr:\n{}",
                out.code, out.stderr
            ));
        }
    }
    drop(taken);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_with_a_stopped_line_and_exit_0() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let dir = tempdir();
    write_json(dir.path(), "acme.json", &fixture("ws-acme", &[KEY], 0));
    let mut child = binary()
        .arg("--snapshots")
        .arg(dir.path())
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
        .args(["--log-format", "json"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start portfolio-replica");
    let pid = child.id();
    // Every line of stderr, as it comes.
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stderr = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut log = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let api: std::net::SocketAddr = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx.recv_timeout(left).unwrap_or_else(|_| {
            let _ = child.kill();
            panic!("no \"serving\" line within 20 s:\n{}", log.join("\n"))
        });
        log.push(line.clone());
        let event: Value = serde_json::from_str(&line).expect("a JSON log line");
        if event["fields"]["message"] == "serving" {
            break event["fields"]["listen"]
                .as_str()
                .and_then(|a| a.parse().ok())
                .expect("the serving line names the API address");
        }
    };
    loop {
        if get_from(api, "/readyz", None)
            .await
            .is_ok_and(|r| r.status == 200)
        {
            break;
        }
        assert!(Instant::now() < deadline, "not ready within 20 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let killed = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(killed.success(), "kill -TERM {pid}");
    let status = loop {
        if let Some(status) = child.try_wait().expect("poll the child") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("no exit within 20 s of SIGTERM");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    reader.join().expect("the stderr reader");
    log.extend(rx.try_iter());
    let events = json_events(&log.join("\n"));
    let last = events.last().expect("log lines");
    assert_eq!(status.code(), Some(0), "{}", log.join("\n"));
    assert_eq!(
        (
            &last["level"],
            &last["fields"]["message"],
            &last["fields"]["exit_code"]
        ),
        (&json!("INFO"), &json!("stopped"), &json!(0)),
        "the last line: {last}"
    );
}
