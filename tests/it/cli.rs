//! The command line: `hash-key` prints the SHA-256 that a snapshot lists
//! (and refuses keys that could never authenticate), `check` exits 0 or 1, and `generate --scale small` writes snapshots that
//! `check` accepts and the server serves with the demo keys (docs/operations.md#subcommands).

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::*;

/// What a run is given on stdin: `None` for nothing (`/dev/null`).
type Stdin<'a> = Option<&'a [u8]>;

/// Variables added to a run's environment.
type Env<'a> = Vec<(&'a str, &'a str)>;

/// Runs `portfolio-replica args...` with `stdin` as its input (none: empty)
/// and `env` added to an environment without `PORTFOLIO_*` and `RUST_LOG`.
async fn run(args: &[&str], stdin: Option<&[u8]>, env: &[(&str, &str)]) -> CliOutput {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let stdin = stdin.map(<[u8]>::to_vec);
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    tokio::task::spawn_blocking(move || run_blocking(&args, stdin, &env))
        .await
        .expect("the command-line runner panicked")
}

fn run_blocking(args: &[String], stdin: Option<Vec<u8>>, env: &[(String, String)]) -> CliOutput {
    use std::io::{Read, Write};
    use std::process::{Command, Stdio};
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_portfolio-replica"));
    for (k, _) in std::env::vars_os() {
        if k.to_str()
            .is_some_and(|k| k.starts_with("PORTFOLIO_") || k == "RUST_LOG")
        {
            cmd.env_remove(k);
        }
    }
    let mut child = cmd
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start portfolio-replica");
    if let Some(bytes) = stdin {
        let mut pipe = child.stdin.take().expect("stdin");
        std::thread::spawn(move || {
            let _ = pipe.write_all(&bytes);
        });
    }
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let out_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for portfolio-replica") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("portfolio-replica {args:?} did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    CliOutput {
        code: status.code(),
        stdout: String::from_utf8_lossy(&out_reader.join().expect("stdout reader")).into_owned(),
        stderr: String::from_utf8_lossy(&err_reader.join().expect("stderr reader")).into_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hash_key_prints_the_sha256_of_the_whole_key() {
    let mut failures = Vec::new();
    // (what, args, stdin, the key hashed)
    let cases: Vec<(&str, Vec<&str>, Stdin, &str)> = vec![
        (
            "argument",
            vec!["hash-key", "cura_demo_acme_key"],
            None,
            "cura_demo_acme_key",
        ),
        ("argument", vec!["hash-key", "cura_a_b"], None, "cura_a_b"),
        (
            "stdin, no argument",
            vec!["hash-key"],
            Some(b"cura_test_key\n"),
            "cura_test_key",
        ),
        (
            "stdin, no newline",
            vec!["hash-key"],
            Some(b"cura_test_key"),
            "cura_test_key",
        ),
        (
            "stdin, CRLF",
            vec!["hash-key"],
            Some(b"cura_test_key\r\n"),
            "cura_test_key",
        ),
        (
            "stdin via -",
            vec!["hash-key", "-"],
            Some(b"cura_s3cret\n"),
            "cura_s3cret",
        ),
        (
            "--key-prefix",
            vec!["hash-key", "--key-prefix", "acme", "acme_k"],
            None,
            "acme_k",
        ),
    ];
    for (what, args, stdin, key) in cases {
        let out = run(&args, stdin, &[]).await;
        let want = key_hash(key);
        if out.code != Some(0) || out.stdout != format!("{want}\n") {
            failures.push(format!(
                "hash-key ({what}) {args:?}: exit {:?}, stdout {:?}, stderr {:?}, expected {want}",
                out.code, out.stdout, out.stderr
            ));
        }
    }
    let env = run(
        &["hash-key", "acme_k"],
        None,
        &[("PORTFOLIO_KEY_PREFIX", "acme")],
    )
    .await;
    if env.code != Some(0) || env.stdout.trim() != key_hash("acme_k") {
        failures.push(format!(
            "PORTFOLIO_KEY_PREFIX=acme hash-key acme_k: {env:?}"
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hash_key_refuses_keys_that_can_never_authenticate() {
    let no_prefix = "error: the key does not start with \"cura_\": keys are <prefix>_<secret> \
                     and the prefix is \"cura\" (--key-prefix or PORTFOLIO_KEY_PREFIX, as given to the server)\n";
    let not_ascii = "error: the key holds characters other than printable ASCII";
    // (args, stdin, env, what stderr starts with)
    let cases: Vec<(Vec<&str>, Stdin, Env, &str)> = vec![
        (vec!["hash-key", "x"], None, vec![], no_prefix),
        (vec!["hash-key", "s3cret"], None, vec![], no_prefix),
        (vec!["hash-key"], Some(b"other_s3cret\n"), vec![], no_prefix),
        (
            vec!["hash-key", "cura_"],
            None,
            vec![],
            "error: the key has nothing after \"cura_\": a key is cura_<secret> with a non-empty secret\n",
        ),
        (
            vec!["hash-key", "--key-prefix", "acme", "cura_s3cret"],
            None,
            vec![],
            "error: the key does not start with \"acme_\"",
        ),
        (
            vec!["hash-key", "cura_s3cret"],
            None,
            vec![("PORTFOLIO_KEY_PREFIX", "acme")],
            "error: the key does not start with \"acme_\"",
        ),
        (
            vec!["hash-key"],
            Some(b""),
            vec![],
            "error: no key given: pass it as the argument, or on stdin",
        ),
        (vec!["hash-key"], None, vec![], "error: no key given"),
        (
            vec!["hash-key", "-"],
            Some(b"cura_s3cret\n\n"),
            vec![],
            not_ascii,
        ),
        (
            vec!["hash-key", "cura_\u{fc}n\u{ef}code_\u{1f511}"],
            None,
            vec![],
            not_ascii,
        ),
        (
            vec!["hash-key"],
            Some(b"cura_s3cret \n"),
            vec![],
            "error: the key starts or ends with a space or tab",
        ),
    ];
    let mut failures = Vec::new();
    for (args, stdin, env, says) in &cases {
        let out = run(args, *stdin, env).await;
        if out.code != Some(2) || !out.stdout.is_empty() || !out.stderr.starts_with(says) {
            failures.push(format!(
                "hash-key {args:?} stdin {:?} env {env:?}: exit {:?}, stdout {:?}, stderr {:?}; \
                 expected exit 2 and stderr starting {says:?}",
                stdin.map(String::from_utf8_lossy),
                out.code,
                out.stdout,
                out.stderr
            ));
        }
        if out.stderr.contains("s3cret") {
            failures.push(format!(
                "hash-key {args:?}: the key is quoted back: {:?}",
                out.stderr
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_exits_0_only_when_every_file_is_valid() {
    let dir = tempdir();
    let good = write_json(dir.path(), "good.json", &fixture("ws-good", &[KEY], 0));
    let other = write_json(
        dir.path(),
        "other.json",
        &fixture("ws-other", &[OTHER_KEY], 1000),
    );
    let bad = write_bytes(dir.path(), "bad.json", b"{");
    let missing = dir.path().join("missing.json");
    // Each case is the files given to `check` and the exit code it must give.
    let cases: Vec<(Vec<&std::path::Path>, i32)> = vec![
        (vec![&good], 0),
        (vec![&good, &other], 0),
        (vec![&bad], 1),
        (vec![&good, &bad], 1),
        (vec![&bad, &good], 1),
        (vec![&missing], 1),
        (vec![&good, &missing], 1),
    ];
    let mut failures = Vec::new();
    for (files, code) in &cases {
        let mut args = vec![OsString::from("check")];
        args.extend(files.iter().map(|f| f.as_os_str().to_os_string()));
        let out = cli(&args).await;
        if out.code != Some(*code) {
            failures.push(format!(
                "check {files:?}: exit {:?}, expected {code}; stderr {:?}",
                out.code, out.stderr
            ));
        }
        if *code == 1 {
            let named = files
                .iter()
                .filter(|f| ***f == bad || ***f == missing)
                .all(|f| {
                    out.stderr
                        .contains(f.file_name().and_then(OsStr::to_str).unwrap_or_default())
                });
            if !named {
                failures.push(format!(
                    "check {files:?}: stderr does not name the failing file: {:?}",
                    out.stderr
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Fails listing every record of `body["data"]` (one record or a list) that
/// is not exactly `{ id, attributes }`.
fn assert_records(body: &Value, context: &str) {
    let records: Vec<&Value> = match &body["data"] {
        Value::Array(list) => list.iter().collect(),
        one => vec![one],
    };
    for r in records {
        assert_keys(r, &["id", "attributes"], context);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_snapshots_pass_check_and_are_served() {
    let dir = tempdir();
    let out = cli(&[
        OsStr::new("generate"),
        OsStr::new("--out"),
        dir.path().as_os_str(),
        OsStr::new("--scale"),
        OsStr::new("small"),
        OsStr::new("--seed"),
        OsStr::new("42"),
    ])
    .await;
    assert_eq!(out.code, Some(0), "generate: {}", out.stderr);
    let acme = dir.path().join("acme.json");
    let globex = dir.path().join("globex.json");
    assert!(
        acme.is_file() && globex.is_file(),
        "generate writes acme.json and globex.json"
    );
    let checked = cli(&[OsStr::new("check"), acme.as_os_str(), globex.as_os_str()]).await;
    assert_eq!(
        checked.code,
        Some(0),
        "check of the generated files: {}",
        checked.stderr
    );

    let acme_snap: Value = serde_json::from_slice(&std::fs::read(&acme).expect("read acme.json"))
        .expect("acme.json is JSON");
    let hashes: Vec<&Value> = acme_snap["api_keys"]
        .as_array()
        .expect("api_keys")
        .iter()
        .map(|k| &k["sha256"])
        .collect();
    assert!(
        hashes.contains(&&json!(key_hash("cura_demo_acme_key"))),
        "acme.json lists the demo key's hash"
    );

    let server = TestServer::start_in(dir, |_| {}).await;
    for (key, file) in [
        ("cura_demo_acme_key", &acme),
        ("cura_demo_globex_key", &globex),
    ] {
        let snap: Value =
            serde_json::from_slice(&std::fs::read(file).expect("read a generated file"))
                .expect("a generated file is JSON");
        let mut want: Vec<String> = snap["companies"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| c["id"].as_str().expect("a company id").to_string())
            .collect();
        want.sort();
        assert!(!want.is_empty(), "{key}: the generated portfolio is empty");
        // The key's portfolio, paged to its end, is exactly the companies of its file.
        let mut got = Vec::new();
        for page in 0.. {
            assert!(
                page * 100 <= want.len(),
                "{key}: /portfolio pages past the file's companies"
            );
            let resp = server
                .get(
                    &format!("/portfolio?limit=100&offset={}", page * 100),
                    Some(key),
                )
                .await;
            let body = resp.assert_ok(key);
            assert_records(&body, "/portfolio");
            got.extend(resp.ids());
            if body["pagination"]["hasMore"] != json!(true) {
                break;
            }
        }
        got.sort();
        assert_eq!(
            got, want,
            "{key}: /portfolio and the file's companies differ"
        );
        let c = &want[0];
        for path in [
            format!("/portfolio/{c}"),
            format!("/portfolio/{c}/tasks"),
            format!("/portfolio/{c}/roles"),
            format!("/portfolio/{c}/notes"),
            format!("/portfolio/{c}/metrics"),
            "/tasks".to_string(),
            "/roles".to_string(),
            "/feed".to_string(),
        ] {
            let body = server.get_ok(&path, key).await;
            assert_records(&body, &format!("{key} {path}"));
        }
    }

    // Every meeting of the generated acme workspace is served with its notes.
    let version = acme_snap["version"].as_str();
    for m in acme_snap["meetings"]
        .as_array()
        .into_iter()
        .flatten()
        .take(5)
    {
        let id = m["id"].as_str().expect("a meeting id");
        let resp = server
            .get(
                &format!("/meetings/{id}?include=notes"),
                Some("cura_demo_acme_key"),
            )
            .await;
        let body = resp.assert_ok(&format!("meeting {id}"));
        assert_keys(
            &body["data"],
            &["id", "attributes", "notes"],
            "a generated meeting",
        );
        if let Some(version) = version {
            assert_eq!(resp.header("x-snapshot-version"), Some(version));
        }
    }
}

/// Runs `check` on `paths` with a clean environment.
async fn check(paths: &[&std::path::Path]) -> CliOutput {
    let mut args = vec!["check".to_owned()];
    args.extend(paths.iter().map(|p| p.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(&args, None, &[]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_hash_listed_twice_is_a_warning_of_check_and_of_the_server() {
    let dir = tempdir();
    let mut snap = fixture("ws-twice", &[KEY, OTHER_KEY], 0);
    // The first key again, spelled in upper case: the same hash.
    snap["api_keys"]
        .as_array_mut()
        .expect("api_keys")
        .push(json!({"sha256": key_hash(KEY).to_uppercase(), "label": "again"}));
    let file = write_json(dir.path(), "twice.json", &snap);
    let warning = "api_keys: 1 entry repeats a hash listed before it (first: api_keys[2], \
                   the same as api_keys[0]); a hash counts once: was another key meant?";

    let out = check(&[&file]).await;
    assert_eq!(out.code, Some(0), "check: {out:?}");
    let name = file.display();
    assert!(
        out.stdout.contains(&format!(
            "ok: {name}: workspace ws-twice, version {}, 8 records, 1 warning(s)\n",
            version_of("ws-twice")
        )) && out
            .stdout
            .contains(&format!("warning: {name}: {warning}\n")),
        "check's stdout: {:?}",
        out.stdout
    );

    let server = TestServer::start_in(dir, |_| {}).await;
    let status = server
        .snapshot_status("twice.json")
        .await
        .expect("twice.json in /snapshots");
    assert_eq!(status["warnings"], json!([warning]), "{status}");
    server.get_ok("/tasks", KEY).await;
    server.get_ok("/tasks", OTHER_KEY).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_names_the_problem_in_the_operators_terms() {
    let dir = tempdir();
    let good = serde_json::to_vec(&fixture("ws-good", &[KEY], 0)).expect("serialize");
    let with_format = |value: Value| {
        let mut snap = fixture("ws-good", &[KEY], 0);
        snap["format_version"] = value;
        serde_json::to_vec(&snap).expect("serialize")
    };
    let mut workspace_string = fixture("ws-good", &[KEY], 0);
    workspace_string["workspace"] = json!("ws-good");
    let mut attributes_array = fixture("ws-good", &[KEY], 0);
    attributes_array["tasks"][0]["attributes"] = json!(["a title"]);
    let object =
        r#"a snapshot is a JSON object {"format_version": 1, "workspace": {"id": ...}, ...}"#;
    // (file name, content, the whole of stderr after "error: <path>: ")
    let cases: Vec<(&str, Vec<u8>, String)> = vec![
        (
            "bom.json",
            [b"\xEF\xBB\xBF".as_slice(), &good].concat(),
            "the file starts with a UTF-8 byte order mark (EF BB BF); save it without a BOM".into(),
        ),
        (
            "array.json",
            b"[]".to_vec(),
            format!("{object}, not an array"),
        ),
        (
            "array_of_one.json",
            [b"[".as_slice(), &good, b"]"].concat(),
            format!("{object}, not an array"),
        ),
        (
            "string.json",
            b"\"ws\"".to_vec(),
            format!("{object}, not a string"),
        ),
        (
            "format_string.json",
            with_format(json!("1")),
            r#"format_version: must be the number 1, not the string "1""#.into(),
        ),
        (
            "format_float.json",
            with_format(json!(1.0)),
            "format_version: must be written 1, not 1.0".into(),
        ),
        (
            "format_two.json",
            with_format(json!(2)),
            "format_version: 2 is not a known format version (this server reads 1)".into(),
        ),
        (
            "workspace_string.json",
            serde_json::to_vec(&workspace_string).expect("serialize"),
            r#"workspace: expected an object, found the string "ws-good""#.into(),
        ),
        (
            "attributes_array.json",
            serde_json::to_vec(&attributes_array).expect("serialize"),
            format!(
                "tasks[0] (id {}): attributes: expected an object, found an array",
                uuid(2)
            ),
        ),
        (
            "twice.json",
            [br#"{"workspace":{"id":"w"},"#.as_slice(), &good[1..]].concat(),
            r#"top level: duplicate key "workspace": a key may appear only once in an object"#
                .into(),
        ),
    ];
    let mut failures = Vec::new();
    for (name, bytes, want) in &cases {
        let path = write_bytes(dir.path(), name, bytes);
        let out = check(&[&path]).await;
        let prefix = format!("error: {}: {want}", path.display());
        // The position, where serde_json gives one, follows in parentheses.
        let rest = out.stderr.strip_prefix(&prefix);
        let fits =
            rest.is_some_and(|r| r == "\n" || (r.starts_with(" (line ") && r.ends_with(")\n")));
        if out.code != Some(1) || !fits {
            failures.push(format!(
                "check {name}: exit {:?}, stderr {:?}; expected exit 1 and {prefix:?}",
                out.code, out.stderr
            ));
        }
        for rust in [
            "struct",
            "sequence",
            "SnapshotDoc",
            "expected value",
            "floating point",
            "integer `",
        ] {
            if out.stderr.contains(rust) {
                failures.push(format!("check {name}: {rust:?} in {:?}", out.stderr));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

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

const SNAPSHOT_NAMES: &str = "only *.json and *.json.gz that do not start with '.'";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_of_a_directory_checks_what_the_server_would_read() {
    let dir = tempdir();
    write_json(dir.path(), "b.json", &fixture("ws-b", &[OTHER_KEY], 1000));
    write_json(dir.path(), "a.json", &fixture("ws-a", &[KEY], 0));
    // Names the server ignores, with contents it would reject.
    write_bytes(dir.path(), ".hidden.json", b"{");
    write_bytes(dir.path(), "a.json.tmp", b"[]");
    write_bytes(dir.path(), "notes.txt", b"not a snapshot");
    std::fs::create_dir(dir.path().join("sub")).expect("mkdir sub");
    let d = dir.path().display();

    let out = check(&[dir.path()]).await;
    let want = format!(
        "{d}: 2 snapshot name(s) to check; 4 other name(s) ignored, as the server ignores them \
         ({SNAPSHOT_NAMES}): .hidden.json, a.json.tmp, notes.txt, sub\n\
         ok: {d}/a.json: workspace ws-a, version {}, 8 records, 0 warning(s)\n\
         ok: {d}/b.json: workspace ws-b, version {}, 8 records, 0 warning(s)\n",
        version_of("ws-a"),
        version_of("ws-b"),
    );
    assert_eq!(
        (out.code, out.stdout.as_str(), out.stderr.as_str()),
        (Some(0), want.as_str(), ""),
        "check DIR"
    );

    // A name that looks like a snapshot but is a directory is rejected, as
    // by the server; an empty directory is a warning.
    std::fs::create_dir(dir.path().join("c.json")).expect("mkdir c.json");
    let out = check(&[dir.path()]).await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(
        out.stderr,
        format!("error: {d}/c.json: cannot read the file: not a regular file\n")
    );
    let empty = tempdir();
    let out = check(&[empty.path()]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout.contains(&format!(
            "warning: {}: no snapshot files: the server would serve no workspace from it\n",
            empty.path().display()
        )),
        "{out:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_of_a_directory_rejects_what_the_server_rejects_for_conflicts() {
    let dir = tempdir();
    write_json(dir.path(), "a.json", &fixture("ws-a", &[KEY], 0));
    // Its own workspace, but KEY opens ws-a already.
    write_json(
        dir.path(),
        "b.json",
        &fixture("ws-b", &[OTHER_KEY, KEY], 1000),
    );
    // ws-a again.
    write_json(
        dir.path(),
        "c.json",
        &fixture("ws-a", &["cura_c_key"], 2000),
    );
    write_json(
        dir.path(),
        "d.json",
        &fixture("ws-d", &["cura_d_key"], 3000),
    );
    let d = dir.path().display();

    let out = check(&[dir.path()]).await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(
        out.stderr,
        format!(
            "error: {d}/b.json: an api_keys entry of {d}/b.json is already a key of workspace \
             \"ws-a\" in {d}/a.json; one key must not open two workspaces, so {d}/b.json is rejected\n\
             error: {d}/c.json: workspace \"ws-a\" is already named by {d}/a.json; {d}/c.json \
             names it too and is rejected\n"
        )
    );
    for ok in ["a.json", "d.json"] {
        assert!(
            out.stdout.contains(&format!("ok: {d}/{ok}: ")),
            "{ok}: {:?}",
            out.stdout
        );
    }
    // Files given one by one are checked together too.
    let files: Vec<PathBuf> = ["a.json", "b.json"]
        .iter()
        .map(|n| dir.path().join(n))
        .collect();
    let out = check(&[&files[0], &files[1]]).await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr
            .contains("is already a key of workspace \"ws-a\""),
        "{out:?}"
    );

    // The server agrees: the same two files are rejected, the others serve.
    let server = TestServer::start_in(dir, |_| {}).await;
    for (name, rejected) in [
        ("a.json", false),
        ("b.json", true),
        ("c.json", true),
        ("d.json", false),
    ] {
        let status = server.snapshot_status(name).await.expect(name);
        assert_eq!(status["error"].is_string(), rejected, "{name}: {status}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_of_a_name_the_server_ignores_says_so_and_still_checks_it() {
    let dir = tempdir();
    let tmp = write_json(dir.path(), "acme.json.tmp", &fixture("ws-acme", &[KEY], 0));
    let hidden = write_bytes(dir.path(), ".acme.json", b"{");
    let out = check(&[&tmp]).await;
    let t = tmp.display();
    assert_eq!(
        (out.code, out.stdout.as_str(), out.stderr.as_str()),
        (
            Some(0),
            format!(
                "warning: {t}: the server ignores this name ({SNAPSHOT_NAMES})\n\
                 ok: {t}: workspace ws-acme, version {}, 8 records, 0 warning(s)\n",
                version_of("ws-acme")
            )
            .as_str(),
            ""
        ),
        "check acme.json.tmp"
    );
    let out = check(&[&hidden]).await;
    let h = hidden.display();
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(
        out.stdout,
        format!("warning: {h}: the server ignores this name ({SNAPSHOT_NAMES})\n")
    );
    assert!(
        out.stderr
            .starts_with(&format!("error: {h}: file is truncated")),
        "{out:?}"
    );
}

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
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_portfolio-replica"));
    for (k, _) in std::env::vars_os() {
        if k.to_str()
            .is_some_and(|k| k.starts_with("PORTFOLIO_") || k == "RUST_LOG")
        {
            cmd.env_remove(k);
        }
    }
    let mut child = cmd
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
