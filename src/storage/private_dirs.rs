//! Private temporary directories: `<temp>/<prefix>-<pid>-<random>`, made
//! by `tempfile` (mode 0700, a name no other user can guess or take
//! first), one per cache or set of copies, removed by their owner when it
//! stops, and by [`remove_all`] when the process ends (a clean SIGTERM
//! ends the process without dropping every owner). A process killed
//! (SIGKILL, OOM, a crash) cannot remove its own, and a replica's copies
//! are as large as its snapshots, so each new one first removes those
//! whose process is gone.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The private directories this process made and has not removed.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn live() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// A fresh private directory for `prefix`, made (mode 0700), after removing
/// the directories of `prefix` that processes no longer running left.
pub fn private_dir(prefix: &str) -> std::io::Result<PathBuf> {
    let temp = std::env::temp_dir();
    remove_orphans(&temp, prefix);
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix(&format!("{prefix}-{}-", std::process::id()))
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(&temp)?
        .keep();
    live().push(dir.clone());
    Ok(dir)
}

/// Removes the private directory `dir` (its owner stops).
pub fn remove(dir: &Path) {
    live().retain(|d| d != dir);
    let _ = std::fs::remove_dir_all(dir);
}

/// Re-creates `dir` if something removed it under a running server (a
/// temporary directory cleaner), private again.
pub fn ensure(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Removes every private directory this process made and still has: the
/// binary calls it as the process ends (several servers may run in one
/// process, e.g. in tests, each removing its own when it is dropped).
pub fn remove_all() {
    for dir in std::mem::take(&mut *live()) {
        let _ = std::fs::remove_dir_all(dir);
    }
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

    #[test]
    fn a_private_dir_is_private_unguessable_and_removed_by_its_owner() {
        use std::os::unix::fs::PermissionsExt;
        let (a, b) = (
            private_dir("scratch-private").unwrap(),
            private_dir("scratch-private").unwrap(),
        );
        assert_ne!(a, b);
        let mode = std::fs::metadata(&a).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{mode:o}");
        let name = a.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with(&format!("scratch-private-{}-", std::process::id())));
        // (Not remove_all: other tests of this process have theirs.)
        remove(&a);
        remove(&b);
        assert!(!a.exists() && !b.exists());
        assert!(!live().contains(&a));
    }
}
