//! A budgeted replica restarted with the same `--cache-dir`, through the
//! real binary: it recalls what it validated and is ready without reading
//! a snapshot again, answers every key exactly as before (loading each
//! workspace from its private copy when asked), and reads again a file
//! that changed and one whose memory was corrupted. Under `--trust-key`
//! what it recalls serves only as the signature it was accepted with, and
//! only while a key trusted now accepts that signature.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::signed::{DAY, key, sign_file};
use crate::util::*;

const N: usize = 40;
const ARGS: [&str; 2] = ["--memory-budget", "256KiB"];

/// Status, `X-Snapshot-Version`, ETag and body of `/tasks?limit=3` for
/// each key.
async fn answers(bin: &Binary, keys: &BTreeMap<String, String>) -> Vec<String> {
    let mut all = Vec::new();
    for key in keys.values() {
        let resp = get_from(bin.api, "/tasks?limit=3", Some(key))
            .await
            .expect("/tasks");
        all.push(format!(
            "{} {:?} {:?} {}",
            resp.status,
            resp.header("x-snapshot-version"),
            resp.header("etag"),
            resp.text()
        ));
    }
    all
}

/// The copy's memory (`<copy>.facts`) that remembers `file`.
fn memory_of(copies: &Path, file: &str) -> std::path::PathBuf {
    std::fs::read_dir(copies)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".facts"))
        .find(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            text.contains(&format!("\"file\":\"{file}\""))
        })
        .unwrap_or_else(|| panic!("no memory of {file}"))
}

/// The lines of a JSON log whose message is `message`.
fn said<'a>(log: &'a str, message: &str) -> Vec<&'a str> {
    let needle = format!("\"message\":\"{message}");
    log.lines().filter(|l| l.contains(&needle)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_with_its_cache_dir_serves_what_it_validated_without_reading_it() {
    let dir = tempdir();
    let cache = tempdir();
    let keys = generate_fleet(dir.path(), "micro", N).await;
    let cache_arg = cache.path().display().to_string();
    let args = [
        &ARGS[..],
        &["--cache-dir", &cache_arg, "--log-format", "json"],
    ]
    .concat();

    let mut first = Binary::start(dir.path(), &args, &[]).await;
    let before = answers(&first, &keys).await;
    assert!(before.iter().all(|a| a.starts_with("200 ")), "{before:?}");
    first.signal("TERM");
    first.wait_exit(Duration::from_secs(20)).await;

    // One file changed, one memory corrupted (a byte flipped).
    let files: Vec<&String> = keys.keys().collect();
    let (changed, corrupted) = (files[3].clone(), files[7].clone());
    let path = dir.path().join(&changed);
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text.replacen("\"version\":\"", "\"version\":\"again-", 1);
    assert!(text.contains("again-"), "the generator writes a version");
    std::fs::write(&path, text).unwrap();
    age(&path);
    let memory = memory_of(&cache.path().join("copies"), &corrupted);
    let mut bytes = std::fs::read(&memory).unwrap();
    bytes[20] ^= 0x01;
    std::fs::write(&memory, bytes).unwrap();

    let second = Binary::start(dir.path(), &args, &[]).await;
    let log = second.stdout_text() + &second.stderr_text();
    let recalled = said(&log, "recalled from --cache-dir");
    assert_eq!(recalled.len(), 1, "{log}");
    assert!(
        recalled[0].contains(&format!("\"workspaces\":{}", N - 2)),
        "{}",
        recalled[0]
    );
    // Read again: exactly the changed file and the corrupted memory's.
    let mut read: Vec<&str> = said(&log, "snapshot loaded")
        .iter()
        .filter_map(|l| l.split("\"file\":\"").nth(1)?.split('"').next())
        .collect();
    read.sort_unstable();
    let mut expected = vec![changed.as_str(), corrupted.as_str()];
    expected.sort_unstable();
    assert_eq!(read, expected, "{log}");
    assert_eq!(said(&log, "a remembered snapshot cannot be used").len(), 1);

    // Every key answers as before (the changed file with its new version),
    // each recalled workspace loaded from its copy.
    let after = answers(&second, &keys).await;
    for ((file, before), after) in keys.keys().zip(&before).zip(&after) {
        if *file == changed {
            assert!(after.contains("again-"), "{after}");
        } else {
            assert_eq!(before, after, "{file}");
        }
    }
    let loads = metric_at(
        second.admin,
        "portfolio_replica_demand_loads_total{outcome=\"ok\"}",
    )
    .await;
    assert!(loads >= (N - 2) as f64, "{loads} loads on demand");
    let recalled = metric_at(second.admin, "portfolio_replica_recalled_versions_total").await;
    assert_eq!(recalled, (N - 2) as f64);
}

/// A cache directory removed whole under a running replica: each
/// workspace's next load on demand copies its file again (the same
/// version, checked), into the directory made again, with its memory, so
/// that the restart after still recalls every one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_dir_removed_under_a_running_replica_is_made_again() {
    let dir = tempdir();
    let cache = tempdir();
    let n = 12;
    let keys = generate_fleet(dir.path(), "micro", n).await;
    let cache_arg = cache.path().join("cache").display().to_string();
    // Smaller than one workspace: every other key's request is a load.
    let args = [
        "--memory-budget",
        "16KiB",
        "--cache-dir",
        &cache_arg,
        "--log-format",
        "json",
    ];
    let mut first = Binary::start(dir.path(), &args, &[]).await;
    let before = answers(&first, &keys).await;
    assert!(before.iter().all(|a| a.starts_with("200 ")), "{before:?}");
    std::fs::remove_dir_all(&cache_arg).unwrap();
    assert_eq!(answers(&first, &keys).await, before);
    let copies = Path::new(&cache_arg).join("copies");
    let count = |ending: &str| {
        std::fs::read_dir(&copies)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(ending)
            })
            .count()
    };
    assert_eq!((count(".json"), count(".facts")), (n, n));
    first.signal("TERM");
    first.wait_exit(Duration::from_secs(20)).await;

    let second = Binary::start(dir.path(), &args, &[]).await;
    let log = second.stdout_text() + &second.stderr_text();
    let recalled = said(&log, "recalled from --cache-dir");
    assert_eq!(recalled.len(), 1, "{log}");
    assert!(
        recalled[0].contains(&format!("\"workspaces\":{n}")),
        "{}",
        recalled[0]
    );
    assert_eq!(answers(&second, &keys).await, before);
}

/// Under `--trust-key`: a file re-signed is verified again, a copy whose
/// bytes were changed in the cache is hashed on its load on demand,
/// refused, and copied again from its signed file; and a restart that no
/// longer trusts the key that signed them serves none of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_under_trust_key_serves_only_what_a_key_trusted_now_signed() {
    let dir = tempdir();
    let cache = tempdir();
    let keys = generate_fleet(dir.path(), "micro", 8).await;
    let files: Vec<&String> = keys.keys().collect();
    let sign = |file: &str, revision| {
        let path = dir.path().join(file);
        let value: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let at = std::time::SystemTime::now();
        sign_file(&path, &value, &key(1), revision, at, DAY);
    };
    for file in &files {
        sign(file, 1);
    }
    let pubs = tempdir();
    let trusted = pubs.path().join("fleet.pub");
    std::fs::write(&trusted, key(1).public().to_text()).unwrap();
    let other = pubs.path().join("other.pub");
    std::fs::write(&other, key(2).public().to_text()).unwrap();
    let args = |trust: &Path| {
        let mut args: Vec<String> = ARGS.iter().map(|a| a.to_string()).collect();
        for arg in ["--cache-dir", &cache.path().display().to_string()] {
            args.push(arg.to_owned());
        }
        for arg in ["--log-format", "json", "--trust-key"] {
            args.push(arg.to_owned());
        }
        args.push(trust.display().to_string());
        args
    };
    let start = async |trust: &Path| {
        let args = args(trust);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Binary::start(dir.path(), &args, &[]).await
    };

    let mut first = start(&trusted).await;
    let before = answers(&first, &keys).await;
    assert!(before.iter().all(|a| a.starts_with("200 ")), "{before:?}");
    first.signal("TERM");
    first.wait_exit(Duration::from_secs(20)).await;

    // One re-signed (the same bytes, a later revision); one copy's bytes
    // changed in the cache, its length and memory as they were.
    let (resigned, tampered) = (files[1].clone(), files[2].clone());
    sign(&resigned, 2);
    let memory = memory_of(&cache.path().join("copies"), &tampered);
    let copy = memory.with_extension("");
    let mut bytes = std::fs::read(&copy).unwrap();
    let at = String::from_utf8_lossy(&bytes)
        .find("\"title\":\"")
        .unwrap()
        + 9;
    assert!(
        bytes[at].is_ascii_alphanumeric(),
        "a title starts with a letter"
    );
    bytes[at] = if bytes[at] == b'X' { b'Y' } else { b'X' };
    std::fs::write(&copy, bytes).unwrap();

    let mut second = start(&trusted).await;
    let log = second.stdout_text() + &second.stderr_text();
    let recalled = said(&log, "recalled from --cache-dir");
    assert_eq!(recalled.len(), 1, "{log}");
    assert!(recalled[0].contains("\"workspaces\":7"), "{}", recalled[0]);
    let read: Vec<&str> = said(&log, "snapshot loaded")
        .iter()
        .filter_map(|l| l.split("\"file\":\"").nth(1)?.split('"').next())
        .collect();
    assert_eq!(read, [resigned.as_str()], "{log}");
    // Every key as before: the tampered copy never served, the file it
    // was copied from loaded in its place (hashed against the signature).
    let after = answers(&second, &keys).await;
    assert_eq!(before, after);
    let log = second.stdout_text() + &second.stderr_text();
    let again = said(
        &log,
        "a private copy of a snapshot cannot stand for its version",
    );
    assert_eq!(again.len(), 1, "{log}");
    assert!(again[0].contains("mismatch"), "{}", again[0]);
    let remade = metric_at(
        second.admin,
        "portfolio_replica_private_copies_remade_total",
    )
    .await;
    assert_eq!(remade, 1.0);
    second.signal("TERM");
    second.wait_exit(Duration::from_secs(20)).await;

    // Key 1 no longer trusted: nothing it signed serves, recalled or not,
    // and what its statements claim (the keys) is not believed either.
    let third = start(&other).await;
    let log = third.stdout_text() + &third.stderr_text();
    assert!(said(&log, "recalled from --cache-dir").is_empty(), "{log}");
    for answer in answers(&third, &keys).await {
        assert!(answer.starts_with("401 "), "{answer}");
    }
}

/// Makes `path` older than the directory's settle time, as a file written
/// a while ago.
fn age(path: &Path) {
    let old = std::time::SystemTime::now() - Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(old)
        .unwrap();
}
