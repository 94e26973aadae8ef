//! `check`: exits 0 only when every file is valid, names the problem in the
//! operator's terms, and checks a directory as the server would read it,
//! conflicts and ignored names included.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use super::run;
use crate::util::*;

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

/// A dangling reference is found by the id it points at, and fixed in the
/// record that points: the warning names both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dangling_reference_names_the_missing_id_and_the_record_pointing_at_it() {
    let dir = tempdir();
    let ids = Fixture::ids(0);
    let mut snap = fixture("ws-dangling", &[KEY], 0);
    snap["tasks"][0]["attributes"]["company_id"] = json!(uuid(999));
    snap["roles"][0]["attributes"]["company_id"] = json!("acme");
    snap["meeting_notes"][0]["attributes"]["meeting_id"] = json!(uuid(998));
    let file = write_json(dir.path(), "dangling.json", &snap);
    let out = check(&[&file]).await;
    assert_eq!(out.code, Some(0), "check: {out:?}");
    let name = file.display();
    for warning in [
        format!(
            "tasks: 1 record(s) point at a company this snapshot does not hold \
             (first: task {} points at company {}); they are kept",
            ids.task,
            uuid(999)
        ),
        format!(
            "roles: 1 record(s) point at a company this snapshot does not hold \
             (first: role {} points at a company id that is not a UUID); they are kept",
            ids.role
        ),
        format!(
            "meeting_notes: 1 record(s) point at a meeting this snapshot does not hold \
             (first: meeting note {} points at meeting {}); they are kept",
            ids.meeting_note,
            uuid(998)
        ),
    ] {
        assert!(
            out.stdout
                .contains(&format!("warning: {name}: {warning}\n")),
            "{warning:?} not in check's stdout: {:?}",
            out.stdout
        );
    }
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
            "trailing_comma.json",
            [&good[..good.len() - 1], b",}"].concat(),
            format!(
                "invalid JSON: trailing comma before the `}}` at line 1 column {} \
                 (JSON allows no comma after the last member: remove it)",
                good.len() + 1
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
async fn check_shows_a_files_own_limits_and_with_trust_key_reads_its_signature() {
    let dir = tempdir();
    let snapshots = dir.path().join("snapshots");
    std::fs::create_dir(&snapshots).expect("mkdir snapshots");
    let mut limited = fixture("ws-a", &[KEY], 0);
    limited["limits"] = json!({"rate_per_second": 100, "burst": 200, "max_in_flight": 8});
    write_json(&snapshots, "a.json", &limited);
    write_json(&snapshots, "b.json", &fixture("ws-b", &[OTHER_KEY], 1000));
    write_bytes(&snapshots, "notes.txt", b"not a snapshot");
    // A signature of no snapshot the server reads: ignored, key or not.
    write_bytes(&snapshots, "gone.json.sig", b"{}");
    let d = snapshots.display();
    let key = dir.path().join("publisher");
    let made = run(&["keygen", "--out", key.to_str().unwrap()], None, &[]).await;
    assert_eq!(made.code, Some(0), "{made:?}");
    let (secret, public) = (
        dir.path().join("publisher.key"),
        dir.path().join("publisher.pub"),
    );
    let before = std::time::SystemTime::now();
    let signed = run(
        &[
            "sign",
            &d.to_string(),
            "--sign-key",
            secret.to_str().unwrap(),
        ],
        None,
        &[],
    )
    .await;
    assert_eq!(signed.code, Some(0), "{signed:?}");

    // Without --trust-key the .sig files are names the server ignores.
    let limits = "; its own limits: rate 100/s, burst 200, max in flight 8";
    let out = check(&[&snapshots]).await;
    let want = format!(
        "{d}: 2 snapshot name(s) to check; 4 other name(s) ignored, as the server ignores them \
         ({SNAPSHOT_NAMES}): a.json.sig, b.json.sig, gone.json.sig, notes.txt\n\
         ok: {d}/a.json: workspace ws-a, version {}, 8 records, 0 warning(s){limits}\n\
         ok: {d}/b.json: workspace ws-b, version {}, 8 records, 0 warning(s)\n",
        version_of("ws-a"),
        version_of("ws-b"),
    );
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (Some(0), want.as_str()),
        "{out:?}"
    );

    // With it, a snapshot's signature is read with it, and its revision,
    // a signing time in milliseconds, is shown as a time too.
    let args = [
        "check",
        &d.to_string(),
        "--trust-key",
        public.to_str().unwrap(),
    ];
    let out = run(&args, None, &[]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let head = format!(
        "{d}: 2 snapshot name(s) to check; 2 signature(s) (<name>.sig) read with them \
         (--trust-key); 2 other name(s) ignored, as the server ignores them \
         ({SNAPSHOT_NAMES}): gone.json.sig, notes.txt\n"
    );
    assert!(out.stdout.starts_with(&head), "{}", out.stdout);
    assert!(out.stdout.contains(limits), "{}", out.stdout);
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with(&format!("{d}/a.json: signed by key ")))
        .unwrap_or_else(|| panic!("no signed line for a.json:\n{}", out.stdout));
    let revision = line
        .split_once(", revision ")
        .and_then(|(_, rest)| rest.split_once(' '))
        .and_then(|(n, _)| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no revision number: {line}"));
    let at = std::time::UNIX_EPOCH + Duration::from_millis(revision);
    assert!(
        at >= before - Duration::from_secs(1) && at <= std::time::SystemTime::now(),
        "revision {revision} is not the signing time: {line}"
    );
    let time = portfolio_domain::store::time::utc_millis(at);
    assert!(
        line.contains(&format!(", revision {revision} ({time}), expires ")),
        "{line}"
    );
}
