//! Step 5 of a scan, settle: what a batch of loads gave is applied to the
//! files' state, and conflicts between the files are decided on what they
//! hold now (`portfolio_domain::store::claims`). Plain functions of that state (no
//! IO); what they decided comes back as a [`Settled`], for the warm-up,
//! the publish and the scan's report.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use super::changed::Removed;
use super::files::{FileEntry, FileStatus, Files, log_rejected};
use super::load::ReadResult;
use portfolio_domain::store::Dataset;
use portfolio_domain::store::claims::{self, Claim, Conflict, Holders};
use portfolio_domain::store::time::utc_now;

/// What one settle decided.
#[derive(Default)]
pub struct Settled {
    /// Files that loaded and serve (they won their conflicts), with how
    /// long each read took in milliseconds: `None` for a version not read
    /// (listed from a manifest, or recalled after a restart).
    pub loaded: Vec<(String, Option<u64>)>,
    /// Files rejected: unreadable, invalid, or losing a conflict.
    pub rejected: Vec<String>,
    /// Files forgotten.
    pub removed: Vec<String>,
    /// Files whose content lost a conflict before and now wins it: to be
    /// read again in the same scan.
    pub reread: Vec<String>,
    /// Datasets that stopped serving: unloaded, replaced, or losing.
    pub retired: Vec<Arc<Dataset>>,
    /// Older versions that serve again because the newer content lost a
    /// conflict: a load may have let their gzip fragments go.
    pub restored: Vec<Arc<Dataset>>,
}

/// Applies the entries `removed`, the names found `unreadable` and what
/// each of `read` gave, then decides every conflict.
pub fn settle(
    files: &mut Files,
    removed: Removed,
    unreadable: Vec<String>,
    read: Vec<ReadResult>,
) -> Settled {
    let applied = apply(files, read);
    let resolved = resolve_conflicts(files);
    let loaded = applied
        .loaded
        .into_iter()
        .filter(|(name, _)| !resolved.lost.contains(name))
        .collect();
    let rejected = [unreadable, applied.rejected, resolved.lost].concat();
    let mut retired = removed.retired;
    retired.extend(resolved.retired);
    Settled {
        loaded,
        rejected,
        removed: removed.names,
        reread: resolved.reread,
        retired,
        restored: resolved.restored,
    }
}

/// What [`apply`] recorded.
struct AppliedLoads {
    /// Loaded, with how long each read took ([`Settled::loaded`]).
    loaded: Vec<(String, Option<u64>)>,
    rejected: Vec<String>,
}

/// Records what each read gave. A loaded file serves its new dataset
/// (logged once conflicts are resolved); a rejected one keeps serving its
/// previous one, if it had one.
fn apply(files: &mut Files, results: Vec<ReadResult>) -> AppliedLoads {
    let mut applied = AppliedLoads {
        loaded: Vec::new(),
        rejected: Vec::new(),
    };
    for ReadResult {
        name,
        fingerprint,
        bytes: _,
        result,
        elapsed,
        source,
        need: _,
        refused,
        claims,
        signed,
        refusal,
    } in results
    {
        let elapsed_ms = elapsed.as_millis() as u64;
        let entry = files
            .entry(name.clone())
            .or_insert_with(|| FileEntry::new(&name));
        let written = fingerprint.written();
        entry.read(fingerprint);
        if entry.source_error.take().is_some() {
            tracing::info!(file = %name, "downloaded after earlier failures");
        }
        match result {
            Ok(loaded) => {
                let status = FileStatus {
                    file: name.clone(),
                    workspace: Some(loaded.dataset.workspace_id.clone()),
                    version: Some(loaded.dataset.version.clone()),
                    loaded_at: Some(utc_now()),
                    // Unknown until read, for a version only listed (a
                    // recalled one's were counted when it was read).
                    records: (!loaded.dataset.is_hollow()
                        || loaded.dataset.counts != Default::default())
                    .then_some(loaded.dataset.counts),
                    records_reused: Some(loaded.dataset.reused_records),
                    warnings: loaded.warnings,
                    error: None,
                    failed_at: None,
                    serving_version: Some(loaded.dataset.version.clone()),
                    source,
                    signature: signed
                        .as_ref()
                        .map(|s| super::verify::status(s, std::time::SystemTime::now())),
                    ..FileStatus::new(&name)
                };
                let read = !loaded.dataset.is_hollow();
                entry.serve_loaded(loaded.dataset, status, written, signed);
                applied.loaded.push((name, read.then_some(elapsed_ms)));
            }
            Err(err) => {
                let message = err.to_string();
                log_rejected(&name, entry, &message);
                entry.status.fail(message);
                entry.status.refused = refusal.map(Into::into);
                // Refused for memory: read again when memory frees.
                // Meanwhile its keys get 503, unless a version serves.
                entry.reject(refused.map(|r| r.need), claims, written);
                applied.rejected.push(name);
            }
        }
    }
    applied
}

/// What [`resolve_conflicts`] decided.
#[derive(Default)]
struct Resolved {
    /// Loaded files whose content lost: rejected now.
    lost: Vec<String>,
    reread: Vec<String>,
    retired: Vec<Arc<Dataset>>,
    restored: Vec<Arc<Dataset>>,
}

/// Two files must not serve the same workspace, nor the same key for two
/// workspaces ([`claims`]: the older content wins, then the first name).
/// The rule is decided on what the files hold now, never on what this
/// process loaded first, so that every replica agrees:
/// - first every file's current content claims: a loaded one, or one that
///   lost a conflict before (its claim remembered, its dataset dropped).
///   A loaded loser is rejected, naming both files; a remembered one that
///   now wins is read again at once ([`Settled::reread`]);
/// - then the older versions that still serve (a file whose newer content
///   was rejected, or lost just now), each only if it asks for nothing a
///   current content holds: one that does is unloaded.
fn resolve_conflicts(files: &mut Files) -> Resolved {
    let mut resolved = Resolved::default();
    let mut held = Holders::default();
    let (lost, reread) = {
        let current: Vec<(Claim, bool)> = files
            .iter()
            .filter_map(|(name, e)| match (e.dataset(), e.lost()) {
                (Some(dataset), _) if e.status.error.is_none() => {
                    Some((claim(name, dataset, e.written), true))
                }
                (_, Some(lost)) => Some((
                    Claim {
                        name,
                        written: lost.written,
                        workspace: &lost.workspace,
                        keys: &lost.keys,
                    },
                    false,
                )),
                _ => None,
            })
            .collect();
        let claims: Vec<Claim> = current.iter().map(|(c, _)| *c).collect();
        let verdicts = claims::resolve(&claims, &mut held);
        let mut lost = Vec::new();
        let mut reread = Vec::new();
        for ((claim, loaded), verdict) in current.iter().zip(verdicts) {
            match (verdict, loaded) {
                (Err(conflict), true) => lost.push((claim.name.to_owned(), conflict)),
                (Ok(()), false) => reread.push(claim.name.to_owned()),
                _ => {}
            }
        }
        (lost, reread)
    };

    // The older versions: those that served before this step, and those of
    // the files that lost just now.
    let mut older: Vec<(String, Arc<Dataset>, SystemTime)> = files
        .iter()
        .filter(|(_, e)| e.status.error.is_some())
        .filter_map(|(n, e)| Some((n.clone(), Arc::clone(e.dataset()?), e.written)))
        .collect();
    for (name, _) in &lost {
        if let Some(replaced) = files[name].previous() {
            older.push((
                name.clone(),
                Arc::clone(&replaced.dataset),
                replaced.written,
            ));
        }
    }
    let claims: Vec<Claim> = older.iter().map(|(n, d, w)| claim(n, d, *w)).collect();
    let mut kept: HashMap<String, Result<(), Conflict>> = older
        .iter()
        .map(|(name, _, _)| name.clone())
        .zip(claims::resolve(&claims, &mut held))
        .collect();
    drop(claims);

    for (name, conflict) in lost {
        let entry = files.get_mut(&name).expect("a file that claimed");
        let message = format!("{name}: {conflict}");
        let (rejected, previous) = entry.lose();
        resolved.retired.push(rejected);
        match previous {
            Some(replaced) if kept.remove(&name).is_some_and(|k| k.is_ok()) => {
                resolved.restored.push(Arc::clone(&replaced.dataset));
                entry.restore(replaced);
            }
            previous => {
                if let Some(replaced) = previous {
                    resolved.retired.push(replaced.dataset);
                }
                entry.unserve();
            }
        }
        log_rejected(&name, entry, &message);
        entry.status.fail(message);
        resolved.lost.push(name);
    }
    for (name, verdict) in kept {
        let Err(conflict) = verdict else { continue };
        let entry = files.get_mut(&name).expect("a file that claimed");
        let dataset = entry.unload_for_conflict();
        tracing::error!(
            file = %name,
            workspace = %dataset.workspace_id,
            version = %dataset.version,
            error = %conflict,
            "the older version this file served is unloaded: another file's current content holds what it asks for"
        );
        resolved.retired.push(dataset);
        entry.status.fail(format!("{name}: {conflict}"));
    }
    for name in reread {
        if let Some(entry) = files.get_mut(&name) {
            entry.read_again();
            resolved.reread.push(name);
        }
    }
    for entry in files.values_mut() {
        if let Some(replaced) = entry.settled() {
            resolved.retired.push(replaced.dataset);
        }
    }
    resolved
}

/// What a file's content claims.
fn claim<'a>(name: &'a str, dataset: &'a Dataset, written: SystemTime) -> Claim<'a> {
    Claim {
        name,
        written,
        workspace: &dataset.workspace_id,
        keys: &dataset.key_hashes,
    }
}
