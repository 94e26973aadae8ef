//! A budgeted replica restarted with the same `--cache-dir`, through the
//! real binary: it recalls what it validated and is ready without reading
//! a snapshot again, answers every key exactly as before (loading each
//! workspace from its private copy when asked), and reads again a file
//! that changed and one whose memory was corrupted.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

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
