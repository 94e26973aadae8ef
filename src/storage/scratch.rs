//! Private temporary directories: `<temp>/<prefix>-<pid>-<n>`, one per
//! cache or set of copies, removed by their owner when it stops. A process
//! killed (SIGKILL, OOM, a crash) cannot remove its own, and a replica's
//! copies are as large as its snapshots, so each new one first removes
//! those whose process is gone.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// A fresh private directory's path for `prefix`, after removing the
/// directories of `prefix` that processes no longer running left.
pub fn private_dir(prefix: &str) -> PathBuf {
    let temp = std::env::temp_dir();
    remove_orphans(&temp, prefix);
    static DIRS: AtomicU64 = AtomicU64::new(0);
    let n = DIRS.fetch_add(1, Ordering::Relaxed);
    temp.join(format!("{prefix}-{}-{n}", std::process::id()))
}

/// Removes `<dir>/<prefix>-<pid>-<n>` for every `pid` that is not a running
/// process.
fn remove_orphans(dir: &std::path::Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix)?.strip_prefix('-'))
            .and_then(|rest| rest.split('-').next()?.parse::<u32>().ok())
        else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            match std::fs::remove_dir_all(entry.path()) {
                Ok(()) => {
                    tracing::info!(dir = %entry.path().display(), "removed what a process no longer running left")
                }
                Err(e) => {
                    tracing::warn!(dir = %entry.path().display(), error = %e, "cannot remove what a process no longer running left")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_dead_process_left_is_removed_and_a_live_ones_is_not() {
        let temp = tempfile::tempdir().unwrap();
        // No process has pid 4,000,000,000; this one runs.
        let dead = temp.path().join("scratch-test-4000000000-0");
        let alive = temp
            .path()
            .join(format!("scratch-test-{}-0", std::process::id()));
        let other = temp.path().join("scratch-tester-4000000000-0");
        for dir in [&dead, &alive, &other] {
            std::fs::create_dir_all(dir.join("inside")).unwrap();
        }
        remove_orphans(temp.path(), "scratch-test");
        assert!(!dead.exists(), "a dead process's directory is removed");
        assert!(alive.exists(), "a live process's directory stays");
        assert!(other.exists(), "another prefix is not touched");
    }
}
