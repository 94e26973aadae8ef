//! `probe`: exits 0 only when the URL answers 200 in time.

use std::time::{Duration, Instant};

use super::run;
use crate::util::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_exits_0_only_when_the_url_answers_200_in_time() {
    let server = TestServer::start(&[("acme.json", fixture("ws-acme", &[KEY], 0))]).await;
    let api = server.api;
    let ready = format!("http://{api}/readyz");
    let out = run(&["probe", "--url", &ready], None, &[]).await;
    assert_eq!(
        (out.code, out.stdout.as_str(), out.stderr.as_str()),
        (
            Some(0),
            format!("ok: {ready} answered 200 OK\n").as_str(),
            ""
        ),
        "probe {ready}"
    );
    let health = format!("http://{api}/healthz");
    let out = run(&["probe"], None, &[("PORTFOLIO_PROBE_URL", &health)]).await;
    assert_eq!(out.code, Some(0), "PORTFOLIO_PROBE_URL={health}: {out:?}");

    // (args, exit code, the whole of stderr)
    // The API wants a key: 401.
    let missing = format!("http://{api}/tasks");
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("address")
    };
    let refused = format!("http://{closed}/readyz");
    // Accepts connections (the kernel's backlog) and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let silent_url = format!("http://{}/readyz", silent.local_addr().expect("address"));
    let cases: Vec<(Vec<&str>, i32, String)> = vec![
        (
            vec!["probe", "--url", &missing],
            1,
            format!("error: {missing} answered 401 Unauthorized, not 200\n"),
        ),
        (
            vec!["probe", "--url", &refused],
            1,
            format!(
                "error: {refused}: cannot connect to {closed}: Connection refused (os error 111)\n"
            ),
        ),
        (
            vec!["probe", "--url", &silent_url, "--timeout", "0.3"],
            1,
            format!("error: {silent_url}: no answer within 300ms\n"),
        ),
        (
            vec!["probe", "--url", "https://127.0.0.1:8080/readyz"],
            2,
            "error: invalid value 'https://127.0.0.1:8080/readyz' for '--url <URL>': only \
             http:// URLs, not https://: the server speaks plain HTTP (TLS ends at the load \
             balancer)\n\nFor more information, try '--help'.\n"
                .into(),
        ),
    ];
    let mut failures = Vec::new();
    for (args, code, stderr) in &cases {
        let started = Instant::now();
        let out = run(args, None, &[]).await;
        if out.code != Some(*code) || out.stderr != *stderr || !out.stdout.is_empty() {
            failures.push(format!(
                "{args:?}: exit {:?}, stdout {:?}, stderr {:?}; expected exit {code} and {stderr:?}",
                out.code, out.stdout, out.stderr
            ));
        }
        if started.elapsed() > Duration::from_secs(5) {
            failures.push(format!("{args:?} took {:?}", started.elapsed()));
        }
    }
    drop(silent);

    let help = run(&["probe", "--help"], None, &[]).await;
    for text in [
        "[default: http://127.0.0.1:8080/readyz]",
        "[env: PORTFOLIO_PROBE_URL",
        "--timeout <SECS>",
        "[default: 2]",
    ] {
        if !help.stdout.contains(text) {
            failures.push(format!("probe --help lacks {text:?}: {}", help.stdout));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
