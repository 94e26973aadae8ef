//! The command line's HTTP client, through the real binary: `probe` and
//! `versions --replica` take `http://HOST:PORT[/PATH]` or `HOST:PORT[/PATH]`,
//! refuse other schemes as a bad command line, tell a refused connection
//! from an answer, and `versions` names the API port given for the admin
//! one (docs/operations.md#probe, docs/object-storage.md).

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::json;

use crate::util::*;

/// A loopback address nothing listens on: connections to it are refused.
fn closed_port() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address")
}

/// A run of the binary and what it must give: (args, exit code, the whole
/// of stdout, the whole of stderr).
type Case = (Vec<String>, i32, String, String);

/// Runs each case and fails with all those that did not give exactly that.
async fn check(cases: &[Case]) {
    let mut failures = Vec::new();
    for (args, code, stdout, stderr) in cases {
        let out = cli(args).await;
        if out.code != Some(*code) || out.stdout != *stdout || out.stderr != *stderr {
            failures.push(format!(
                "{args:?}: exit {:?}, stdout {:?}, stderr {:?}; expected exit {code}, \
                 stdout {stdout:?}, stderr {stderr:?}",
                out.code, out.stdout, out.stderr
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn args(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_takes_an_address_with_or_without_http_and_refuses_other_schemes() {
    let server = TestServer::start(&[("acme.json", fixture("ws-acme", &[KEY], 0))]).await;
    let api = server.api;
    let closed = closed_port();
    let (with_scheme, without) = (format!("http://{api}/readyz"), format!("{api}/readyz"));
    let refused = format!("http://{closed}/healthz");
    let usage = |url: &str, why: &str| {
        format!(
            "error: invalid value '{url}' for '--url <URL>': {why}\n\n\
             For more information, try '--help'.\n"
        )
    };
    check(&[
        (
            args(&["probe", "--url", &with_scheme]),
            0,
            format!("ok: {with_scheme} answered 200 OK\n"),
            String::new(),
        ),
        (
            args(&["probe", "--url", &without]),
            0,
            format!("ok: {without} answered 200 OK\n"),
            String::new(),
        ),
        (
            args(&["probe", "--url", &refused]),
            1,
            String::new(),
            format!(
                "error: {refused}: cannot connect to {closed}: Connection refused (os error 111)\n"
            ),
        ),
        (
            args(&["probe", "--url", "ftp://127.0.0.1:21/readyz"]),
            2,
            String::new(),
            usage(
                "ftp://127.0.0.1:21/readyz",
                "\"ftp://127.0.0.1:21/readyz\": only http:// URLs, not ftp://: give \
                 http://HOST[:PORT][/PATH] or HOST:PORT[/PATH]",
            ),
        ),
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_reads_replicas_by_admin_address_and_names_the_api_port_given_by_mistake() {
    // A fleet of one on a file:// prefix: manifest mode without an S3 server.
    let root = tempdir();
    let url = format!("file://{}/fleet/", root.path().display());
    let files = tempdir();
    let mut snap = fixture("ws-acme", &[KEY], 1);
    snap["version"] = json!("v1");
    let v1 = write_json(files.path(), "acme.json", &snap);
    let out = cli(&["publish", v1.to_str().expect("a UTF-8 path"), "--to", &url]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let server = TestServer::start_in(tempdir(), |c| {
        c.snapshots = portfolio_replica::storage::Location::parse(&url).expect("a file:// URL");
        c.poll_interval = Some(Duration::from_millis(100));
    })
    .await;
    server.wait_version("/portfolio", KEY, "v1").await;
    let (admin, api, closed) = (server.admin, server.api, closed_port());

    // Both forms of the admin address read the replica.
    let with_scheme = format!("http://{admin}");
    let out = cli(&[
        "versions",
        "--to",
        &url,
        "--replica",
        &with_scheme,
        "--replica",
        &admin.to_string(),
    ])
    .await;
    assert_eq!((out.code, out.stderr.as_str()), (Some(0), ""), "{out:?}");
    for replica in [with_scheme, admin.to_string()] {
        let line = format!("\n  {replica}  ws-acme  v1 (current)  workspace revision 1  stale ");
        assert!(out.stdout.contains(&line), "{line:?} in {}", out.stdout);
    }

    // The API port answers 401 to a request without a key: said as such,
    // and a refused connection as unreachable. The report is printed whole
    // and the exit code says a replica could not be read.
    let out = cli(&[
        "versions",
        "--to",
        &url,
        "--replica",
        &api.to_string(),
        "--replica",
        &closed.to_string(),
        "--replica",
        &admin.to_string(),
    ])
    .await;
    assert_eq!(out.code, Some(1), "{out:?}");
    let replicas = out
        .stdout
        .split_once("\nreplicas:\n")
        .map_or("", |(_, after)| after);
    let lines: Vec<&str> = replicas.lines().collect();
    assert_eq!(
        lines.get(..2),
        Some(
            &[
                format!(
                    "  {api}  WRONG ADDRESS: the replica answered 401: is this the admin \
                     address (--admin-listen), not the API port?"
                )
                .as_str(),
                format!(
                    "  {closed}  UNREACHABLE: cannot connect to {closed}: Connection refused \
                     (os error 111)"
                )
                .as_str(),
            ][..]
        ),
        "{}",
        out.stdout
    );
    assert!(
        lines
            .get(2)
            .is_some_and(|l| l.starts_with(&format!("  {admin}  ws-acme  v1 (current)"))),
        "{}",
        out.stdout
    );

    // Other schemes are a bad command line, before storage is read.
    let usage = |value: &str, why: &str| {
        format!(
            "error: invalid value '{value}' for '--replica <HOST:PORT>': {why}\n\n\
             For more information, try '--help'.\n"
        )
    };
    let tls = format!("https://{admin}");
    let bogus = format!("gopher://{admin}");
    check(&[
        (
            args(&["versions", "--to", &url, "--replica", &tls]),
            2,
            String::new(),
            usage(
                &tls,
                "only http:// URLs, not https://: the server speaks plain HTTP \
                 (TLS ends at the load balancer)",
            ),
        ),
        (
            args(&["versions", "--to", &url, "--replica", &bogus]),
            2,
            String::new(),
            usage(
                &bogus,
                &format!(
                    "\"{bogus}\": only http:// URLs, not gopher://: give \
                     http://HOST[:PORT][/PATH] or HOST:PORT[/PATH]"
                ),
            ),
        ),
    ])
    .await;
}
