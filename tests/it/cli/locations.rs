//! Where `--snapshots` and `--to` point, and what is said when that is
//! wrong: a `file://` prefix must exist as a directory for a replica and for
//! the read-only commands (`versions`, `rollback`), which create nothing;
//! only `publish` creates it. A missing directory says how to get one, a
//! file given for a directory says so, and a `--to` that is no object store
//! URL is a bad command line (exit 2) said before any file is checked. A
//! `--cache-dir` that cannot be made is named, with what to do.

use std::path::Path;

use super::run;
use crate::util::*;

/// `file://` and the absolute path `dir`.
fn file_url(dir: &Path) -> String {
    format!("file://{}/", dir.display())
}

/// The arguments of a replica on free ports reading `snapshots`.
fn serve_args(snapshots: &str) -> Vec<&str> {
    vec![
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--snapshots",
        snapshots,
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_wrong_snapshot_place_stops_start_up_and_creates_nothing() {
    let root = tempdir();
    let missing = root.path().join("misspelled-prefix");
    let file = write_json(root.path(), "newbie.json", &fixture("ws-new", &[KEY], 0));
    // The file as the issue gave it, without a trailing slash.
    let (missing_url, file_url_) = (file_url(&missing), format!("file://{}", file.display()));
    let missing_dir = missing.display().to_string();
    let missing_root = format!("{missing_dir}/");
    let file_path = file.display().to_string();
    // (--snapshots, what stderr says)
    let cases = [
        (
            missing_url.clone(),
            format!(
                "{missing_url}: the directory {missing_root} does not exist (a file:// prefix is \
                 read from an existing directory; `publish --to {missing_url}` creates it)"
            ),
        ),
        (
            file_url_.clone(),
            format!(
                "{file_url_}: {file_path} is a file, not a directory: a file:// URL names the \
                 directory (the prefix) that holds the snapshots"
            ),
        ),
        (
            missing_dir.clone(),
            format!(
                "snapshot directory {missing_dir} cannot be read: No such file or directory \
                 (os error 2); give the directory of snapshot files (or an object store URL) \
                 with --snapshots (PORTFOLIO_SNAPSHOTS), or write the demo snapshots there \
                 with `portfolio-replica generate --out {missing_dir}`"
            ),
        ),
        (
            file_path.clone(),
            format!(
                "{file_path} is not a directory: --snapshots names the directory that holds \
                 the snapshot files (one per workspace), not a file"
            ),
        ),
    ];
    let mut failures = Vec::new();
    for (snapshots, says) in &cases {
        let out = run(&serve_args(snapshots), None, &[]).await;
        if out.code != Some(1) || !out.stderr.contains(says.as_str()) {
            failures.push(format!(
                "--snapshots {snapshots}: exit {:?}, stderr {:?}; expected exit 1 and {says:?}",
                out.code, out.stderr
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(!missing.exists(), "a replica created {}", missing.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_commands_create_no_prefix_and_publish_does() {
    let root = tempdir();
    let missing = root.path().join("nonexistent");
    let url = file_url(&missing);
    let says = format!(
        "error: {url}: the directory {}/ does not exist",
        missing.display()
    );
    for args in [
        vec!["versions", "--to", &url],
        vec!["versions", "--to", &url, "--json"],
        vec!["rollback", "ws-acme", "--to", &url],
    ] {
        let out = run(&args, None, &[]).await;
        assert!(
            out.code == Some(1) && out.stderr.contains(&says),
            "{args:?}: exit {:?}, stderr {:?}; expected exit 1 and {says:?}",
            out.code,
            out.stderr
        );
        assert!(!missing.exists(), "{args:?} created {}", missing.display());
    }

    let files = tempdir();
    let snap = write_json(files.path(), "acme.json", &fixture("ws-acme", &[KEY], 0));
    let snap = snap.display().to_string();
    let out = run(&["publish", &snap, "--to", &url], None, &[]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        missing.join("manifest.json").is_file(),
        "publish wrote no manifest"
    );
    let out = run(&["versions", "--to", &url], None, &[]).await;
    assert!(
        out.code == Some(0) && out.stdout.contains("ws-acme"),
        "{out:?}"
    );

    // A file given as the prefix is named as such, and stays a file.
    let file_as_prefix = file_url(Path::new(&snap));
    let out = run(&["publish", &snap, "--to", &file_as_prefix], None, &[]).await;
    assert!(
        out.code == Some(1) && out.stderr.contains("is a file, not a directory"),
        "{out:?}"
    );
    assert!(Path::new(&snap).is_file());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_to_that_is_not_an_object_store_url_is_a_bad_command_line() {
    let files = tempdir();
    let snap = write_json(files.path(), "acme.json", &fixture("ws-acme", &[KEY], 0));
    let snap = snap.display().to_string();
    let directory = "/plain/path/: --to takes the replicas' object store URL \
                     (s3://bucket/prefix/, file:///path/)";
    let scheme = "\"ftp://host/x/\": unsupported storage URL";
    // (args, what stderr says)
    let cases = [
        (vec!["publish", &snap, "--to", "/plain/path/"], directory),
        (vec!["publish", &snap, "--to", "ftp://host/x/"], scheme),
        (
            vec!["rollback", "ws-acme", "--to", "/plain/path/"],
            directory,
        ),
        (vec!["versions", "--to", "/plain/path/"], directory),
    ];
    let mut failures = Vec::new();
    for (args, says) in &cases {
        let out = run(args, None, &[]).await;
        // Exit 2 as every bad command line, and no file checked first.
        if out.code != Some(2)
            || !out.stderr.contains(says)
            || !out.stderr.contains("for '--to <URL>'")
            || !out.stdout.is_empty()
        {
            failures.push(format!(
                "{args:?}: exit {:?}, stdout {:?}, stderr {:?}; expected exit 2, no stdout and {says:?}",
                out.code, out.stdout, out.stderr
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_dir_that_cannot_be_made_is_named_with_what_to_do() {
    let root = tempdir();
    let snapshots = root.path().join("snapshots");
    std::fs::create_dir(&snapshots).expect("mkdir snapshots");
    write_json(&snapshots, "acme.json", &fixture("ws-acme", &[KEY], 0));
    // Tests run as root, whom no mode stops: a directory under a regular
    // file cannot be made by anyone.
    let blocker = root.path().join("a-file");
    std::fs::write(&blocker, b"not a directory").expect("write a file");
    let cache = blocker.join("cache");
    let cache_arg = cache.display().to_string();
    let (dir, url) = (snapshots.display().to_string(), file_url(&snapshots));
    let tip = "give --cache-dir DIR (PORTFOLIO_CACHE_DIR) with a directory on a writable disk";
    // (--snapshots, extra flags, what stderr says)
    let cases = [
        (
            dir.as_str(),
            vec!["--memory-budget", "64MiB"],
            format!(
                "cannot keep copies of the snapshots for loads on demand (--memory-budget) in \
                 {cache_arg}/copies: Not a directory (os error 20); {tip}"
            ),
        ),
        (
            url.as_str(),
            vec![],
            format!("cache directory {cache_arg}: Not a directory (os error 20); {tip}"),
        ),
    ];
    let mut failures = Vec::new();
    for (snapshots, extra, says) in &cases {
        let mut args = serve_args(snapshots);
        args.extend(["--cache-dir", &cache_arg]);
        args.extend(extra.iter().copied());
        let out = run(&args, None, &[]).await;
        if out.code != Some(1) || !out.stderr.contains(says.as_str()) {
            failures.push(format!(
                "{args:?}: exit {:?}, stderr {:?}; expected exit 1 and {says:?}",
                out.code, out.stderr
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
