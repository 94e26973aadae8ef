//! `generate --workspaces N --scale micro|tiny|midsize` and `generate --text escapes`,
//! run through the real binary: a fleet is N files with N distinct
//! workspace ids and keys, listed in `keys.tsv`, each passing `check` and
//! served with its key; escape-heavy text is served as the snapshot says
//! (the served JSON decodes to the same strings as the file).

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use super::run;
use crate::util::*;

/// Runs `generate --out DIR args...`, failing unless it exits 0.
async fn generate(dir: &Path, args: &[&str]) -> CliOutput {
    let out_dir = dir.display().to_string();
    let mut all = vec!["generate", "--out", &out_dir];
    all.extend_from_slice(args);
    let out = run(&all, None, &[]).await;
    assert_eq!(out.code, Some(0), "generate {args:?}: {}", out.stderr);
    out
}

/// Reads a generated snapshot as JSON.
fn read_json(path: &Path) -> Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One line of `keys.tsv`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KeyLine {
    workspace: String,
    file: String,
    key: String,
}

/// Reads `keys.tsv` in `dir`, checking its header.
/// Each of `keys`' files in `dir` has a length in `sizes` (`about` says
/// which) and passes `check`.
async fn sized_and_valid(
    dir: &Path,
    keys: &[KeyLine],
    sizes: std::ops::RangeInclusive<u64>,
    about: &str,
) {
    for line in keys {
        let path = dir.join(&line.file);
        let bytes = std::fs::metadata(&path).expect("stat").len();
        assert!(
            sizes.contains(&bytes),
            "{}: {bytes} bytes is not {about}",
            line.file
        );
        let checked = run(&["check", &path.display().to_string()], None, &[]).await;
        assert_eq!(
            checked.code,
            Some(0),
            "check {}: {}",
            line.file,
            checked.stderr
        );
    }
}

fn read_keys(dir: &Path) -> Vec<KeyLine> {
    let text = std::fs::read_to_string(dir.join("keys.tsv")).expect("keys.tsv beside the files");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("workspace\tfile\tkey"), "{text}");
    lines
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            assert_eq!(fields.len(), 3, "keys.tsv line {line:?}");
            KeyLine {
                workspace: fields[0].to_owned(),
                file: fields[1].to_owned(),
                key: fields[2].to_owned(),
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_is_n_workspaces_with_their_own_ids_and_keys_each_passing_check() {
    const N: usize = 6;
    let dir = tempdir();
    let out = generate(
        dir.path(),
        &["--scale", "micro", "--workspaces", "6", "--seed", "9"],
    )
    .await;
    let keys = read_keys(dir.path());
    assert_eq!(keys.len(), N, "{keys:?}");
    assert_eq!(
        out.stdout.lines().count(),
        N,
        "one line per file:\n{}",
        out.stdout
    );
    let distinct = |field: fn(&KeyLine) -> &str| -> usize {
        keys.iter().map(field).collect::<BTreeSet<_>>().len()
    };
    assert_eq!(distinct(|k| &k.workspace), N, "workspace ids: {keys:?}");
    assert_eq!(distinct(|k| &k.file), N, "files: {keys:?}");
    assert_eq!(distinct(|k| &k.key), N, "keys: {keys:?}");

    let mut paths = Vec::new();
    for line in &keys {
        let path = dir.path().join(&line.file);
        let snap = read_json(&path);
        assert_eq!(
            snap["workspace"]["id"],
            line.workspace.as_str(),
            "{}",
            line.file
        );
        let hashes: Vec<&Value> = snap["api_keys"]
            .as_array()
            .expect("api_keys")
            .iter()
            .map(|k| &k["sha256"])
            .collect();
        assert_eq!(hashes, [&Value::from(key_hash(&line.key))], "{}", line.file);
        assert!(out.stdout.contains(&line.key), "stdout prints {}", line.key);
        let bytes = std::fs::metadata(&path).expect("stat").len();
        assert!(
            (4_000..=30_000).contains(&bytes),
            "{}: {bytes} bytes is not about 10 KB",
            line.file
        );
        paths.push(path.display().to_string());
    }
    let mut check_args = vec!["check"];
    check_args.extend(paths.iter().map(String::as_str));
    let checked = run(&check_args, None, &[]).await;
    assert_eq!(checked.code, Some(0), "check: {}", checked.stderr);
    assert_eq!(
        checked.stdout.matches("ok: ").count(),
        N,
        "{}",
        checked.stdout
    );

    // The same seed writes the same fleet.
    let again = tempdir();
    generate(
        again.path(),
        &["--scale", "micro", "--workspaces", "6", "--seed", "9"],
    )
    .await;
    assert_eq!(read_keys(again.path()), keys);
    for line in &keys {
        assert_eq!(
            std::fs::read(again.path().join(&line.file)).expect("read"),
            std::fs::read(dir.path().join(&line.file)).expect("read"),
            "{}",
            line.file
        );
    }

    // The server reads the directory (keys.tsv is not a snapshot name) and
    // each key sees its own workspace's companies.
    let server = TestServer::start_in(dir, |_| {}).await;
    for line in &keys {
        let snap = read_json(&server.dir().join(&line.file));
        let mut want: Vec<String> = snap["companies"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| c["id"].as_str().expect("a company id").to_owned())
            .collect();
        want.sort();
        let resp = server.get("/portfolio?limit=100", Some(&line.key)).await;
        resp.assert_ok(&line.workspace);
        let mut got = resp.ids();
        got.sort();
        assert_eq!(got, want, "{}", line.workspace);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiny_workspaces_are_about_100_kb_and_workspaces_needs_a_fleet_scale() {
    let dir = tempdir();
    generate(dir.path(), &["--scale", "tiny", "--workspaces", "2"]).await;
    let keys = read_keys(dir.path());
    assert_eq!(keys.len(), 2, "{keys:?}");
    sized_and_valid(dir.path(), &keys, 50_000..=200_000, "about 100 KB").await;

    // The other scales have fixed workspaces: a usage error, nothing written.
    let other = tempdir();
    let out_dir = other.path().join("out").display().to_string();
    for scale in ["small", "medium", "large"] {
        let out = run(
            &[
                "generate",
                "--out",
                &out_dir,
                "--scale",
                scale,
                "--workspaces",
                "3",
            ],
            None,
            &[],
        )
        .await;
        assert_eq!(out.code, Some(2), "--scale {scale} --workspaces 3: {out:?}");
        // In generate's terms, with its usage, not the server's.
        let says = format!(
            "error: --workspaces needs --scale micro, tiny or midsize, not --scale {scale}: the \
             other scales have fixed workspaces\n\nUsage: portfolio-replica generate "
        );
        assert!(
            out.stderr.contains(&says) && !out.stderr.contains("<COMMAND>"),
            "{}",
            out.stderr
        );
    }
    // Without its number: generate's error, not the top-level usage.
    for args in [
        &["--workspaces"][..],
        &["--scale", "tiny", "--workspaces", "0"],
    ] {
        let mut all = vec!["generate", "--out", &out_dir];
        all.extend_from_slice(args);
        let out = run(&all, None, &[]).await;
        assert!(
            out.code == Some(2)
                && out.stderr.contains("for '--workspaces <N>'")
                && !out.stderr.contains("<COMMAND>"),
            "{all:?}: {out:?}"
        );
    }
    assert!(!other.path().join("out").exists(), "nothing is written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn midsize_workspaces_are_about_5_mb_and_sit_beside_a_tiny_fleet() {
    // The heavy few of a sizing fleet (scripts/sizing-check.sh): written
    // into the directory of a tiny fleet, their files, ids and keys are
    // their own, and the server serves both.
    let dir = tempdir();
    generate(dir.path(), &["--scale", "midsize", "--workspaces", "2"]).await;
    let heavy = read_keys(dir.path());
    assert_eq!(heavy.len(), 2, "{heavy:?}");
    for line in &heavy {
        assert!(line.file.starts_with("midsize-"), "{line:?}");
    }
    sized_and_valid(dir.path(), &heavy, 4_000_000..=6_500_000, "about 5 MB").await;
    let tiny = tempdir();
    generate(tiny.path(), &["--scale", "tiny", "--workspaces", "2"]).await;
    let small = read_keys(tiny.path());
    for line in &small {
        std::fs::copy(tiny.path().join(&line.file), dir.path().join(&line.file)).expect("copy");
    }
    let server = TestServer::start_in(dir, |_| {}).await;
    for line in heavy.iter().chain(&small) {
        server
            .get("/portfolio?limit=1", Some(&line.key))
            .await
            .assert_ok(&line.workspace);
    }
}

/// Strings in the attributes of `record`, recursively, with their paths.
fn strings<'v>(value: &'v Value, path: String, out: &mut Vec<(String, &'v str)>) {
    match value {
        Value::String(text) => out.push((path, text)),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                strings(item, format!("{path}[{i}]"), out);
            }
        }
        Value::Object(members) => {
            for (name, item) in members {
                strings(item, format!("{path}.{name}"), out);
            }
        }
        _ => {}
    }
}

/// Fails unless every attribute the snapshot gives `record` is served with
/// the same value (strings compared after decoding, as a client sees them).
fn assert_served_as_written(served: &Value, record: &Value, context: &str) {
    let attributes = record["attributes"].as_object().expect("attributes");
    for (name, want) in attributes {
        assert_eq!(
            &served["attributes"][name], want,
            "{context}: attribute {name} is not served as the snapshot writes it"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_heavy_text_is_served_as_the_snapshot_decodes() {
    let dir = tempdir();
    generate(dir.path(), &["--text", "escapes"]).await;
    let path = dir.path().join("acme.json");
    let raw = std::fs::read_to_string(&path).expect("read acme.json");
    // The file spells characters every way JSON allows.
    for spelling in [
        r#"\""#,
        r"\\",
        r"\u0000",
        r"\u001f",
        r"\ud83d\ude80",
        r"\u00e4",
        "漢字",
        "🚀",
        "\u{308}",
    ] {
        assert!(raw.contains(spelling), "acme.json has no {spelling:?}");
    }
    let checked = run(&["check", &path.display().to_string()], None, &[]).await;
    assert_eq!(checked.code, Some(0), "check: {}", checked.stderr);

    let snap = read_json(&path);
    let mut texts = Vec::new();
    strings(&snap["tasks"], "tasks".into(), &mut texts);
    let decoded: String = texts.iter().map(|(_, t)| *t).collect();
    for want in ['"', '\\', '\0', '\u{7}', 'Ü', '漢', '🚀', '\u{301}'] {
        assert!(decoded.contains(want), "no {want:?} in the tasks' text");
    }

    let server = TestServer::start_in(dir, |_| {}).await;
    let key = "cura_demo_acme_key";
    let records = |name: &str| snap[name].as_array().cloned().unwrap_or_default();
    for (collection, path) in [
        ("companies", "/portfolio"),
        ("tasks", "/tasks"),
        ("notes", "/notes"),
    ] {
        for record in records(collection) {
            let id = record["id"].as_str().expect("an id");
            let body = server.get_ok(&format!("{path}/{id}"), key).await;
            assert_served_as_written(&body["data"], &record, &format!("{path}/{id}"));
        }
    }
    // Feed entries through the feed's pages, meeting notes through their meetings.
    let feed: Vec<Value> = records("feed");
    let mut served_feed = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/feed?limit=50&cursor={}", enc(c)),
            None => "/feed?limit=50".to_owned(),
        };
        let body = server.get_ok(&path, key).await;
        served_feed.extend(body["data"].as_array().cloned().unwrap_or_default());
        match body["pagination"]["nextCursor"].as_str() {
            Some(next) if served_feed.len() < feed.len() => cursor = Some(next.to_owned()),
            _ => break,
        }
    }
    assert_eq!(served_feed.len(), feed.len(), "the feed, paged to its end");
    for record in &feed {
        let served = served_feed
            .iter()
            .find(|s| s["id"] == record["id"])
            .unwrap_or_else(|| panic!("feed entry {} is served", record["id"]));
        assert_served_as_written(served, record, "a feed entry");
    }
    let notes = records("meeting_notes");
    for meeting in records("meetings") {
        let id = meeting["id"].as_str().expect("a meeting id");
        let body = server
            .get_ok(&format!("/meetings/{id}?include=notes"), key)
            .await;
        assert_served_as_written(&body["data"], &meeting, &format!("meeting {id}"));
        for served in body["data"]["notes"].as_array().into_iter().flatten() {
            let record = notes
                .iter()
                .find(|n| n["id"] == served["id"])
                .expect("a served meeting note is in the snapshot");
            assert_served_as_written(served, record, &format!("a note of meeting {id}"));
        }
    }
}
