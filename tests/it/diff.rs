//! `diff OLD NEW` and the same summary in `publish`: records added,
//! changed, removed and unchanged per collection, matched by id and
//! compared by their bytes (escape-only and non-ASCII edits included); bad
//! input said as `check` says it; `publish --dry-run` writes nothing; and
//! `diff --to` between published versions (on moto).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::util::*;

/// Runs `portfolio-replica diff args...`.
async fn diff(args: &[&OsString]) -> CliOutput {
    let mut all = vec![OsString::from("diff")];
    all.extend(args.iter().map(|a| (*a).clone()));
    cli(&all).await
}

/// A generated snapshot, one record per line: the line numbers of each
/// collection's records.
struct Lines {
    lines: Vec<String>,
}

impl Lines {
    fn read(path: &Path) -> Lines {
        let text = std::fs::read_to_string(path).expect("read the snapshot");
        Lines {
            lines: text.lines().map(str::to_owned).collect(),
        }
    }

    /// The line numbers of `collection`'s records.
    fn of(&self, collection: &str) -> Vec<usize> {
        let start = self
            .lines
            .iter()
            .position(|l| *l == format!("\"{collection}\":["))
            .unwrap_or_else(|| panic!("no {collection} in the snapshot"));
        (start + 1..self.lines.len())
            .take_while(|&i| self.lines[i].starts_with("{\"id\":"))
            .collect()
    }

    /// The id of the record on line `i`.
    fn id(&self, i: usize) -> String {
        self.lines[i][7..43].to_owned()
    }

    /// The record on line `i` without the `,` or `],` that follows it.
    fn record(&self, i: usize) -> (&str, &str) {
        let line = &self.lines[i];
        let end = line.rfind('}').expect("a record") + 1;
        line.split_at(end)
    }

    fn write(&self, path: &Path) {
        std::fs::write(path, self.lines.join("\n")).expect("write the snapshot");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_counts_what_changed_per_collection_and_lists_the_ids() {
    let dir = tempdir();
    let out = cli(&[
        "generate".as_ref(),
        "--out".as_ref(),
        dir.path().as_os_str(),
        "--text".as_ref(),
        "escapes".as_ref(),
    ])
    .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let old = dir.path().join("acme.json");
    let mut new = Lines::read(&old);
    let before = Lines::read(&old);

    // A company: one character of its domain spelled as a \u escape, the
    // same text to a JSON reader but other bytes.
    let company = before.of("companies")[2];
    let line = &mut new.lines[company];
    let at = line.find("\"domain\":\"").expect("a domain") + 10;
    let ch = line[at..].chars().next().unwrap();
    line.replace_range(at..at + ch.len_utf8(), &format!("\\u{:04x}", ch as u32));
    // A note: non-ASCII text added to a string attribute.
    let note = before.of("notes")[3];
    let (record, tail) = before.record(note);
    let mut value: Value = serde_json::from_str(record).unwrap();
    let attrs = value["attributes"].as_object_mut().unwrap();
    let (name, text) = attrs
        .iter()
        .find(|(k, v)| v.is_string() && !k.ends_with("_id") && !k.ends_with("_at"))
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .expect("a text attribute");
    attrs.insert(name, json!(format!("{text} — 漢字 🚀")));
    new.lines[note] = format!("{}{tail}", serde_json::to_string(&value).unwrap());
    // Two roles swap places: moved, not changed.
    let roles = before.of("roles");
    new.lines.swap(roles[1], roles[2]);
    // A meeting is added, a copy of another under a new id.
    let meeting = before.of("meetings")[1];
    let added = uuid(0xd1ff);
    let copy = format!("{{\"id\":\"{added}\"{}", &before.lines[meeting][44..]);
    // A task is removed (its line, then the meeting's, so lines stay put).
    let task = before.of("tasks")[4];
    let removed = before.id(task);
    assert!(meeting > task);
    new.lines.insert(meeting + 1, copy);
    new.lines.remove(task);
    let new_path = dir.path().join("acme-2.json.gz");
    let plain = dir.path().join("acme-2.json");
    new.write(&plain);
    std::fs::write(&new_path, gzip(&std::fs::read(&plain).unwrap())).unwrap();
    let checked = cli(&["check".as_ref(), new_path.as_os_str()]).await;
    assert_eq!(checked.code, Some(0), "{checked:?}");

    let out = diff(&[&old.clone().into(), &new_path.clone().into()]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let old_name = old.display().to_string();
    assert!(
        out.stdout.starts_with("changes from ws-acme ") && out.stdout.contains(&old_name),
        "{}",
        out.stdout
    );
    let rows = rows(&out.stdout);
    let count = |c: &str| before.of(c).len();
    let expected: Vec<(&str, [usize; 4])> = COLLECTIONS
        .iter()
        .map(|&c| {
            let counts = match c {
                "companies" | "notes" => [0, 1, 0, count(c) - 1],
                "tasks" => [0, 0, 1, count(c) - 1],
                "meetings" => [1, 0, 0, count(c)],
                _ => [0, 0, 0, count(c)],
            };
            (c, counts)
        })
        .collect();
    for (collection, counts) in &expected {
        assert_eq!(rows.get(*collection), Some(counts), "{}", out.stdout);
    }

    let out = diff(&[&old.clone().into(), &new_path.into(), &"--json".into()]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let json: Value = serde_json::from_str(&out.stdout).expect("diff --json");
    let c = &json["collections"];
    assert_eq!(
        c["companies"]["ids"]["changed"],
        json!([before.id(company)])
    );
    assert_eq!(c["notes"]["ids"]["changed"], json!([before.id(note)]));
    assert_eq!(c["tasks"]["ids"]["removed"], json!([removed]));
    assert_eq!(c["meetings"]["ids"]["added"], json!([added]));
    assert_eq!(c["roles"]["changed"], 0);
    for (collection, [added, changed, removed, unchanged]) in &expected {
        let got = &c[*collection];
        assert_eq!(
            [
                &got["added"],
                &got["changed"],
                &got["removed"],
                &got["unchanged"]
            ],
            [added, changed, removed, unchanged]
                .map(|n| json!(n))
                .each_ref(),
            "{collection}"
        );
    }
    assert_eq!(json["total"]["changed"], 2);
    assert_eq!(json["old"]["workspace"], "ws-acme");
    assert_eq!(json["new"]["records"], json["old"]["records"]);

    // A file against itself: nothing changed.
    let same = diff(&[&old.clone().into(), &old.clone().into(), &"--json".into()]).await;
    let same: Value = serde_json::from_str(&same.stdout).expect("diff --json");
    assert_eq!(
        same["total"],
        json!({"added": 0, "changed": 0, "removed": 0, "unchanged": json["old"]["records"]})
    );
}

/// The counts of each row of `diff`'s table, by collection.
fn rows(text: &str) -> std::collections::HashMap<String, [usize; 4]> {
    text.lines()
        .skip(2)
        .filter_map(|line| {
            let cells: Vec<&str> = line.split_whitespace().collect();
            let [name, a, c, r, u] = cells.as_slice() else {
                return None;
            };
            let n = |s: &str| s.parse::<usize>().ok();
            Some((name.to_string(), [n(a)?, n(c)?, n(r)?, n(u)?]))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_said_as_check_says_it() {
    let dir = tempdir();
    let good = write_json(dir.path(), "good.json", &fixture("ws-good", &[KEY], 0));
    let bad = write_bytes(dir.path(), "bad.json", b"{\"format_version\":1,");
    let mut wrong = fixture("ws-good", &[KEY], 0);
    wrong["tasks"][0]["attributes"]["created_at"] = json!("yesterday");
    let invalid = write_json(dir.path(), "invalid.json", &wrong);
    let missing = dir.path().join("missing.json");
    for file in [&bad, &invalid, &missing] {
        let checked = cli(&["check".as_ref(), file.as_os_str()]).await;
        assert_eq!(checked.code, Some(1), "{checked:?}");
        assert!(checked.stderr.starts_with("error: "), "{checked:?}");
        for pair in [[&good, file], [file, &good]] {
            let out = diff(&pair.map(|p: &PathBuf| OsString::from(p)).each_ref()).await;
            assert_eq!(out.code, Some(1), "{out:?}");
            assert_eq!(out.stderr, checked.stderr, "diff {pair:?}");
            assert_eq!(out.stdout, "", "diff {pair:?}");
        }
    }
    let both = diff(&[&bad.clone().into(), &missing.clone().into()]).await;
    assert_eq!(both.code, Some(1), "{both:?}");
    assert_eq!(both.stderr.lines().count(), 2, "{both:?}");
}

/// A small snapshot of ws-acme at `version`, its first company named `name`.
fn acme(version: &str, name: &str) -> Value {
    let mut snap = fixture("ws-acme", &[KEY], 1);
    snap["version"] = json!(version);
    snap["companies"][0]["attributes"]["name"] = json!(name);
    snap
}

/// Every object under `prefix`, with its bytes.
async fn objects(s3: &S3, prefix: &str) -> Vec<(String, Option<Vec<u8>>)> {
    let mut all = Vec::new();
    for key in s3.keys(prefix).await {
        let bytes = s3.get(&key).await;
        all.push((key, bytes));
    }
    all
}

#[tokio::test]
async fn publish_prints_the_changes_and_dry_run_writes_nothing() {
    let s3 = S3::start().await;
    let url = s3.url("m");
    let env = s3.env();
    let files = tempdir();
    let v1 = write_json(files.path(), "acme.json", &acme("v1", "Acme"));
    let v2 = write_json(files.path(), "acme-2.json", &acme("v2", "Acmé \"2\""));
    let publish = async |file: &Path, dry: bool| {
        let mut args = vec![
            OsString::from("publish"),
            file.into(),
            "--to".into(),
            url.clone().into(),
        ];
        if dry {
            args.push("--dry-run".into());
        }
        let out = cli_env(&args, &env).await;
        assert_eq!(out.code, Some(0), "{out:?}");
        out.stdout
    };
    let snap = fixture("ws-acme", &[KEY], 1);
    let records: usize = COLLECTIONS
        .iter()
        .filter_map(|c| snap[*c].as_array())
        .map(Vec::len)
        .sum();

    // Nothing published yet: every record is new, and nothing is written.
    let stdout = publish(&v1, true).await;
    let first = format!(
        "changes from nothing (ws-acme has no published version) to ws-acme v1 ({}):",
        v1.display()
    );
    assert!(stdout.contains(&first), "{stdout}");
    assert_eq!(rows(&stdout)["total"], [records, 0, 0, 0], "{stdout}");
    assert!(stdout.contains("dry run: nothing was uploaded or written"));
    assert!(!stdout.contains("uploaded:"), "{stdout}");
    assert_eq!(objects(&s3, "m").await, vec![]);

    // The first publish says the same, then publishes.
    let stdout = publish(&v1, false).await;
    assert!(stdout.contains(&first), "{stdout}");
    assert!(stdout.contains("published: ws-acme serves v1"), "{stdout}");
    let sha = s3.versions("m").await.unwrap()["workspaces"]["ws-acme"]["current"]
        .as_str()
        .unwrap()
        .to_owned();

    // A dry run against the current version: one company changed, and
    // not a byte of the bucket either.
    let before = objects(&s3, "m").await;
    let stdout = publish(&v2, true).await;
    let against = format!(
        "changes from ws-acme v1 (current, {}) to ws-acme v2 ({}):",
        &sha[..12],
        v2.display()
    );
    assert!(stdout.contains(&against), "{stdout}");
    assert_eq!(rows(&stdout)["companies"], [0, 1, 0, 0], "{stdout}");
    assert_eq!(rows(&stdout)["total"], [0, 1, 0, records - 1], "{stdout}");
    assert_eq!(objects(&s3, "m").await, before);

    // The publish prints the same summary, then publishes.
    let stdout = publish(&v2, false).await;
    assert!(stdout.contains(&against), "{stdout}");
    assert!(stdout.contains("published: ws-acme serves v2"), "{stdout}");
    assert_ne!(objects(&s3, "m").await, before);

    // The two published versions compared, by version and as current.
    let company = fixture("ws-acme", &[KEY], 1)["companies"][0]["id"].clone();
    let out = cli_env(
        &[
            "diff",
            "--to",
            &url,
            "ws-acme@v1",
            "ws-acme@current",
            "--json",
        ],
        &env,
    )
    .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let json: Value = serde_json::from_str(&out.stdout).expect("diff --json");
    assert_eq!(
        json["collections"]["companies"]["ids"]["changed"],
        json!([company])
    );
    assert_eq!(json["old"]["version"], "v1");
    assert_eq!(json["new"]["version"], "v2");
    assert_eq!(json["old"]["name"], format!("published, {}", &sha[..12]));

    // A version that is not kept, or not WORKSPACE@VERSION.
    for (spec, says) in [
        ("ws-acme@v9", "no kept version is \"v9\""),
        ("acme.json", "give a published version as WORKSPACE@VERSION"),
        ("ws-other@v1", "the manifest has no workspace \"ws-other\""),
    ] {
        let out = cli_env(&["diff", "--to", &url, "ws-acme@v1", spec], &env).await;
        assert_eq!(out.code, Some(1), "{out:?}");
        assert!(out.stderr.contains(says), "{spec}: {out:?}");
    }
}
