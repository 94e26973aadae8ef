//! Logs of the real binary: with `--log-format json` every stderr line is a
//! JSON event, with a debug line per API request naming its route and
//! status, an info line per reload and an error line per rejected file; no
//! key, whether valid, wrong, in a query, in a path or written plainly into
//! a snapshot's `api_keys`, ever reaches the log or `/snapshots`; every line
//! is in docs/operations.md's table, at its level and with its fields.

use std::time::Duration;

use serde_json::{Value, json};

use crate::util::*;

/// Keys made only for the logging tests, each with an unmistakable secret.
const LOG_VALID_KEY: &str = "cura_V4lidS3cretZq81";
const LOG_WRONG_KEY: &str = "cura_Wr0ngS3cretXk27";
const LOG_QUERY_KEY: &str = "cura_Qu3ryS3cretMw55";
const LOG_PATH_KEY: &str = "cura_P4thS3cretJr09";
const LOG_FILE_KEY: &str = "cura_F1leS3cretHb64";

/// Fails if any key text, or the secret part after the prefix, is in `text`.
fn assert_no_key_in(text: &str, keys: &[&str], what: &str) {
    for key in keys {
        let secret = key.strip_prefix("cura_").expect("a cura_ key");
        for needle in [*key, secret] {
            if let Some(line) = text.lines().find(|l| l.contains(needle)) {
                panic!("{what} contains {needle:?}:\n{line}");
            }
        }
    }
}

/// Parses every line of `stderr` as a JSON log event.
fn json_lines(stderr: &str) -> Vec<Value> {
    stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("a log line is not JSON ({e}): {l:?}"));
            assert!(
                v.get("level").is_some_and(Value::is_string)
                    && v.get("fields").is_some_and(Value::is_object),
                "a log line without level or fields: {l}"
            );
            v
        })
        .collect()
}

fn message(event: &Value) -> &str {
    event["fields"]["message"].as_str().unwrap_or_default()
}

/// docs/operations.md's table of log lines: each message with its level and
/// the names of its fields.
fn documented_events() -> Vec<(String, String, Vec<String>)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operations.md");
    let doc = std::fs::read_to_string(path).expect("read docs/operations.md");
    let table = doc
        .split_once("| Level | Message | Fields |")
        .expect("the table of log lines")
        .1;
    // The text of each `code span` in a cell.
    let spans = |cell: &str| -> Vec<String> {
        cell.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    };
    table
        .lines()
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let message = spans(cells[2]).into_iter().next().expect("a message");
            (cells[1].to_uppercase(), message, spans(cells[3]))
        })
        .collect()
}

/// Every line of the program's own in `events` is in operations.md's table,
/// at its level and with exactly its fields; returns the messages seen.
fn assert_documented(events: &[Value]) -> Vec<String> {
    let documented = documented_events();
    let mut seen = Vec::new();
    for event in events {
        if !event["target"]
            .as_str()
            .is_some_and(|t| t.starts_with("portfolio_replica"))
        {
            continue;
        }
        let message = message(event);
        let Some((level, _, fields)) = documented.iter().find(|(_, m, _)| m == message) else {
            panic!("a log line docs/operations.md does not list: {event}");
        };
        let mut logged: Vec<&str> = event["fields"]
            .as_object()
            .map(|f| f.keys().map(String::as_str).collect())
            .unwrap_or_default();
        logged.retain(|k| *k != "message");
        logged.sort_unstable();
        let mut listed: Vec<&str> = fields.iter().map(String::as_str).collect();
        listed.sort_unstable();
        assert_eq!(
            (event["level"].as_str().unwrap_or_default(), logged),
            (level.as_str(), listed),
            "level and fields of {message:?} differ from docs/operations.md: {event}"
        );
        seen.push(message.to_owned());
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_log_line_is_documented_with_its_fields() {
    let dir = tempdir();
    let mut v1 = fixture("ws-acme", &[KEY], 0);
    v1["version"] = json!("v1");
    // A dangling reference, for a warning line.
    v1["tasks"][0]["attributes"]["company_id"] = json!(uuid(999));
    write_json(dir.path(), "acme.json", &v1);
    write_json(
        dir.path(),
        "other.json",
        &fixture("ws-other", &[OTHER_KEY], 100),
    );
    let mut bin = Binary::start(
        dir.path(),
        &["--log-format", "json"],
        &[("RUST_LOG", "debug")],
    )
    .await;
    let (api, admin) = (bin.api, bin.admin);
    get_from(api, "/tasks", Some(KEY)).await.expect("request");

    // A rejected replacement: v1 keeps serving (the case); a
    // removed file unloads its workspace; SIGHUP rescans.
    std::fs::write(dir.path().join("acme.json.tmp"), b"{\"format_version\": 1,").expect("write");
    std::fs::rename(
        dir.path().join("acme.json.tmp"),
        dir.path().join("acme.json"),
    )
    .expect("rename");
    std::fs::remove_file(dir.path().join("other.json")).expect("remove");
    eventually("acme.json rejected and other.json gone", async || {
        let body = get_from(admin, "/snapshots", None).await?.json();
        let files = body["files"].as_array().cloned().unwrap_or_default();
        match files.as_slice() {
            [acme] if acme["error"].is_string() => Ok(()),
            _ => Err(format!("{body}")),
        }
    })
    .await;
    bin.signal("HUP");
    eventually("the SIGHUP line", async || {
        let log = bin.stderr_text();
        match log.contains("SIGHUP: rescanning") {
            true => Ok(()),
            false => Err(log),
        }
    })
    .await;
    bin.signal("TERM");
    assert_eq!(bin.wait_exit(Duration::from_secs(10)).await.code(), Some(0));

    let seen = assert_documented(&json_lines(&bin.stderr_text()));
    for message in [
        LIMITS_LINE,
        "serving",
        "first scan finished",
        "snapshot loaded",
        "snapshot warning",
        "request",
        "snapshot rejected; the previous version keeps serving",
        "snapshot file removed; its workspace is unloaded",
        "SIGHUP: rescanning the snapshot directory",
        "shutting down: /readyz is 503, no new connections, finishing in-flight requests",
        "stopped",
    ] {
        assert!(
            seen.iter().any(|m| m == message),
            "no {message:?} line in {seen:?}"
        );
    }
}

/// The start-up line of the limits in force.
const LIMITS_LINE: &str =
    "limits in force (a snapshot's own limits hold for its workspace, member by member)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limits_in_force_are_one_line_at_start_saying_where_they_come_from() {
    let dir = tempdir();
    write_json(dir.path(), "acme.json", &fixture("ws-acme", &[KEY], 0));
    let keys = tempdir();
    let out = keys.path().join("fleet");
    let made = cli(&["keygen", "--out", out.to_str().unwrap()]).await;
    assert_eq!(made.code, Some(0), "{made:?}");
    let public = keys.path().join("fleet.pub").display().to_string();
    let limits_of = |stderr: &str| -> Vec<Value> {
        json_lines(stderr)
            .into_iter()
            .filter(|e| message(e) == LIMITS_LINE)
            .map(|e| e["fields"].clone())
            .collect()
    };
    let flags = [
        "--log-format",
        "json",
        "--memory-budget",
        "64MiB",
        "--memory-limit",
        "1GiB",
        "--rate-limit",
        "5",
        "--rate-burst",
        "10",
        "--max-in-flight",
        "3",
        "--trust-key",
        &public,
    ];
    let bin = Binary::start(dir.path(), &flags, &[]).await;
    let said = limits_of(&bin.stderr_text());
    drop(bin);
    assert_eq!(
        said,
        vec![json!({
            "message": LIMITS_LINE,
            "memory_budget": "64 MiB",
            "memory_limit": "1024 MiB",
            "memory_limit_from": "--memory-limit",
            "rate_limit": "5/s",
            "rate_burst": "10",
            "max_in_flight": "3",
            "trusted_key_count": 1,
        })],
        "with every flag"
    );
    // With none: each limit off, the memory limit the cgroup's if any.
    let bin = Binary::start(dir.path(), &["--log-format", "json"], &[]).await;
    let said = limits_of(&bin.stderr_text());
    drop(bin);
    let [line] = said.as_slice() else {
        panic!("not one limits line: {said:?}");
    };
    for (field, value) in [
        ("memory_budget", json!("none")),
        ("rate_limit", json!("none")),
        ("rate_burst", json!("none")),
        ("max_in_flight", json!("none")),
        ("trusted_key_count", json!(0)),
    ] {
        assert_eq!(line[field], value, "{field}: {line}");
    }
    let from = match line["memory_limit"].as_str() {
        Some("none") => "none",
        _ => "cgroup",
    };
    assert_eq!(line["memory_limit_from"], from, "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_have_a_line_per_request_and_reload_and_never_a_key() {
    let dir = tempdir();
    let mut v1 = fixture("ws-acme", &[LOG_VALID_KEY], 0);
    v1["version"] = json!("v1");
    write_json(dir.path(), "acme.json", &v1);
    let mut bin = Binary::start(
        dir.path(),
        &["--log-format", "json"],
        &[("RUST_LOG", "debug")],
    )
    .await;
    let (api, admin) = (bin.api, bin.admin);

    // (path, key, expected route label, expected status)
    let requests: Vec<(String, Option<&str>, &str, u16)> = vec![
        ("/tasks".into(), Some(LOG_VALID_KEY), "/tasks", 200),
        ("/tasks".into(), Some(LOG_WRONG_KEY), "/tasks", 401),
        (
            format!("/feed?key={LOG_QUERY_KEY}&api_key={LOG_QUERY_KEY}"),
            None,
            "/feed",
            401,
        ),
        (
            format!("/portfolio?key={LOG_QUERY_KEY}"),
            Some(LOG_VALID_KEY),
            "/portfolio",
            200,
        ),
        (
            format!("/notes/{LOG_PATH_KEY}"),
            Some(LOG_VALID_KEY),
            "/notes/{id}",
            400,
        ),
        ("/tasks?limit=1".into(), Some(LOG_VALID_KEY), "/tasks", 200),
    ];
    for (path, key, _, status) in &requests {
        let resp = get_from(api, path, *key).await.expect("request");
        assert_eq!(resp.status, *status, "GET {path}: {}", resp.text());
    }

    // A reload, then a rejected file whose api_keys entry holds a plain key
    // where its hash belongs (an operator's mistake).
    let mut v2 = v1.clone();
    v2["version"] = json!("v2");
    replace_json(dir.path(), "acme.json", &v2);
    eventually("v2 is served", async || {
        let resp = get_from(api, "/tasks", Some(LOG_VALID_KEY)).await?;
        match resp.header("x-snapshot-version") {
            Some("v2") => Ok(()),
            other => Err(format!("version {other:?}")),
        }
    })
    .await;
    let mut bad = fixture("ws-bad", &[], 500);
    bad["api_keys"] = json!([{ "sha256": LOG_FILE_KEY, "label": "oops" }]);
    replace_json(dir.path(), "bad.json", &bad);
    eventually("bad.json is rejected", async || {
        let resp = get_from(admin, "/snapshots", None).await?;
        let body = resp.json();
        let rejected = body["files"].as_array().is_some_and(|files| {
            files.iter().any(|f| {
                f["file"].as_str().is_some_and(|n| n.ends_with("bad.json"))
                    && f["error"].is_string()
            })
        });
        if rejected {
            Ok(())
        } else {
            Err(format!("{body}"))
        }
    })
    .await;

    bin.signal("TERM");
    let status = bin.wait_exit(Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(0), "exit after SIGTERM");

    let stderr = bin.stderr_text();
    let stdout = bin.stdout_text();
    let keys = [
        LOG_VALID_KEY,
        LOG_WRONG_KEY,
        LOG_QUERY_KEY,
        LOG_PATH_KEY,
        LOG_FILE_KEY,
    ];
    assert_no_key_in(&stderr, &keys, "stderr");
    assert_no_key_in(&stdout, &keys, "stdout");
    let events = json_lines(&stderr);
    let seen = assert_documented(&events);
    assert!(
        seen.iter()
            .any(|m| m == "snapshot rejected; it serves nothing"),
        "{seen:?}"
    );

    // One debug line per API request, naming route and status only.
    let mut logged: Vec<(String, u64)> = events
        .iter()
        .filter(|e| message(e) == "request")
        .filter(|e| {
            let route = e["fields"]["route"].as_str().unwrap_or_default();
            route != "/readyz" && route != "/healthz"
        })
        .map(|e| {
            assert_eq!(e["level"], "DEBUG", "request line: {e}");
            assert_eq!(e["fields"]["method"], "GET", "request line: {e}");
            assert!(e["fields"]["elapsed_us"].is_u64(), "request line: {e}");
            (
                e["fields"]["route"].as_str().unwrap_or_default().to_owned(),
                e["fields"]["status"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    // The wait for v2 made more /tasks requests: count only the 401s and the
    // non-/tasks routes exactly, and at least our 200s.
    let tasks_200 = logged
        .iter()
        .filter(|(r, s)| r == "/tasks" && *s == 200)
        .count();
    assert!(
        tasks_200 >= 2,
        "{tasks_200} logged /tasks 200s, expected at least 2"
    );
    logged.retain(|(r, s)| !(r == "/tasks" && *s == 200));
    logged.sort();
    let mut want: Vec<(String, u64)> = requests
        .iter()
        .filter(|(_, _, r, s)| !(*r == "/tasks" && *s == 200))
        .map(|(_, _, r, s)| (r.to_string(), u64::from(*s)))
        .collect();
    want.sort();
    assert_eq!(logged, want, "the request lines besides /tasks 200");

    // One info line for the reload, one error for the rejected file.
    assert!(
        events.iter().any(|e| e["level"] == "INFO"
            && message(e) == "snapshot loaded"
            && e["fields"]["version"] == "v2"
            && e["fields"]["workspace"] == "ws-acme"),
        "no INFO line for the reload of acme.json to v2:\n{stderr}"
    );
    assert!(
        events
            .iter()
            .any(|e| (e["level"] == "ERROR" || e["level"] == "WARN")
                && e["fields"]["file"]
                    .as_str()
                    .is_some_and(|f| f.ends_with("bad.json"))),
        "no error line for the rejected bad.json:\n{stderr}"
    );
}

/// An operator who writes plain keys into `api_keys` (a list of key strings
/// instead of `{sha256}` objects) gets the file rejected; the rejection must
/// not copy the keys into the log or into `/snapshots`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_key_in_a_rejected_snapshot_is_not_logged_or_reported() {
    const AS_STRING_LIST: &str = "cura_L1stS3cretUu30";
    const AS_STRING: &str = "cura_Str1ngS3cretPp72";
    let dir = tempdir();
    write_json(dir.path(), "acme.json", &fixture("ws-acme", &[KEY], 0));
    let mut list = fixture("ws-list", &[], 100);
    list["api_keys"] = json!([AS_STRING_LIST]);
    write_json(dir.path(), "list.json", &list);
    let mut string = fixture("ws-string", &[], 200);
    string["api_keys"] = json!(AS_STRING);
    write_json(dir.path(), "string.json", &string);

    let mut bin = Binary::start(dir.path(), &["--log-format", "json"], &[]).await;
    let snapshots = get_from(bin.admin, "/snapshots", None)
        .await
        .expect("/snapshots");
    let body = snapshots.json();
    for name in ["list.json", "string.json"] {
        let rejected = body["files"].as_array().is_some_and(|files| {
            files.iter().any(|f| {
                f["file"].as_str().is_some_and(|n| n.ends_with(name)) && f["error"].is_string()
            })
        });
        assert!(rejected, "{name} is not reported rejected: {body}");
    }
    bin.signal("TERM");
    bin.wait_exit(Duration::from_secs(10)).await;
    let keys = [AS_STRING_LIST, AS_STRING];
    let stderr = bin.stderr_text();
    json_lines(&stderr);
    assert_no_key_in(&stderr, &keys, "the log");
    assert_no_key_in(&snapshots.text(), &keys, "GET /snapshots");
}
