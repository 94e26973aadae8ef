//! The publisher side of object storage (docs/object-storage.md): the
//! `publish` (and `publish --refresh-signatures`), `rollback`, `versions`,
//! `migrate` and `diff --to` commands. Replicas only read; these write the immutable snapshot objects, each workspace's
//! record, the key claims and the root's journal (`state`), always with
//! conditional writes (`update`), so that publishers running at once never
//! lose each other's update.

mod changes;
mod deltas;
mod error;
mod fleet;
mod refresh;
mod state;
mod update;
mod upload;

use std::io::Write;
use std::path::PathBuf;
use std::time::SystemTime;

use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;

use crate::storage::SnapshotFile;
use crate::storage::location::{self, Access, StorageOptions};
use crate::tools::check::{self, Checked};
use crate::tools::http_client::HttpUrl;
use crate::tools::sign::Signer;
pub use changes::diff_versions;
use error::PublishError;
use portfolio_domain::store::claims::{Claim, Holders};
use portfolio_domain::store::key;
use portfolio_wire::manifest::{History, Manifest, Version, WorkspaceRecord, short};
pub use refresh::refresh_signatures;
use state::{Announced, FleetObjects};
use update::Conditional;

/// An object store prefix to publish to.
struct Target {
    store: std::sync::Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    display: String,
    locking: bool,
    runtime: tokio::runtime::Runtime,
}

impl Target {
    /// Opens `to` for `access`: only `publish` writes, so only it creates
    /// a `file://` prefix's directory.
    fn open(to: &str, options: &StorageOptions, access: Access) -> Result<Target, PublishError> {
        let url = location::parse_target(to)?;
        let opened = location::open_for(access, &url, options, None)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(PublishError::Runtime)?;
        Ok(Target {
            store: opened.store,
            prefix: opened.prefix,
            display: opened.display,
            locking: url.scheme() == "file",
            runtime,
        })
    }

    /// Every command's first step: opens `to` as `opening` says and runs
    /// `command` on it and its fleet's objects; if it cannot, writes the
    /// `error:` line saying why and returns false.
    fn run<E: Write>(
        to: &str,
        options: &StorageOptions,
        opening: Opening,
        err: &mut E,
        command: impl FnOnce(&Target, &FleetObjects<'_>, &mut E) -> bool,
    ) -> bool {
        let access = match opening {
            Opening::Read | Opening::Records => Access::Read,
            Opening::Write => Access::Write,
        };
        let target = match Target::open(to, options, access) {
            Ok(target) => target,
            Err(e) => return fail(err, e),
        };
        let fleet = target.fleet();
        if opening == Opening::Records
            && let Err(e) = target.block_on(fleet.writable())
        {
            return fail(err, e);
        }
        command(&target, &fleet, err)
    }

    fn fleet(&self) -> FleetObjects<'_> {
        FleetObjects {
            objects: Conditional {
                store: self.store.as_ref(),
                prefix: &self.prefix,
                locking: self.locking,
            },
        }
    }

    fn block_on<T>(&self, future: impl std::future::Future<Output = T>) -> T {
        self.runtime.block_on(future)
    }
}

/// How a command opens its target.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Opening {
    /// As it is ([`Access::Read`]: a `file://` prefix's directory must
    /// exist): `diff`, `versions`, `migrate`, `publish --dry-run`.
    Read,
    /// For `publish` ([`Access::Write`]: a `file://` prefix's directory is
    /// made if need be).
    Write,
    /// As `Read`, for a command that writes records (`rollback`, `publish
    /// --refresh-signatures`): its manifest must be one this build writes.
    Records,
}

/// Writes `error: {e}` and returns false: every command's way out.
fn fail(err: &mut impl Write, e: impl std::fmt::Display) -> bool {
    let _ = writeln!(err, "error: {e}");
    false
}

/// How `publish` publishes, besides where and what.
pub struct Publishing<'s> {
    /// Versions of each workspace a record keeps.
    pub keep: usize,
    /// Check and summarize only.
    pub dry_run: bool,
    /// Sign each version made current (`--sign-key`).
    pub signer: Option<&'s Signer>,
}

/// `portfolio-replica publish FILE... --to URL`: checks every file as the
/// server would (`crate::tools::check`, its messages), and against the keys other
/// workspaces hold; only if all pass, uploads each as an immutable object,
/// makes it current in its workspace's record (signed, with a signer), and
/// announces the changes in one write of the root. Before uploading, prints
/// what each file changes against its workspace's current version
/// (`changes.rs`); `dry_run` stops there, having written nothing. Returns
/// whether it published.
pub fn publish(
    files: &[PathBuf],
    to: &str,
    how: &Publishing<'_>,
    options: &StorageOptions,
    out: &mut impl Write,
    err: &mut impl Write,
) -> bool {
    let Publishing {
        keep,
        dry_run,
        signer,
    } = *how;
    // A wrong URL is said before any file is read.
    let opening = if dry_run {
        Opening::Read
    } else {
        Opening::Write
    };
    Target::run(to, options, opening, err, |target, fleet, err| {
        let Some(checked) = check::check(files, out, err) else {
            return fail(err, "nothing published: every file must pass the checks");
        };
        // Two of the files sharing a key: refused before anything is written.
        let mut holders = Holders::default();
        for claim in claims(&checked) {
            if let Err(e) = holders.take(&claim) {
                return fail(err, format!("{e}\nerror: nothing published"));
            }
        }
        if let Err(e) = target.block_on(fleet.writable()) {
            return fail(err, e);
        }
        let made = changes::print_summaries(target, &checked, !dry_run, out, err);
        if dry_run {
            let _ = writeln!(out, "dry run: nothing was uploaded or written");
            return true;
        }
        // Each step runs for all files at once (a publish of thousands of
        // workspaces is a migration's worth of requests), and is reported in
        // the files' order.
        let items: Vec<_> = checked.iter().zip(made).collect();
        let uploads = target.block_on(each(&items, |(item, made)| {
            upload_one(target, item, made.as_ref())
        }));
        let mut versions = Vec::new();
        for (item, upload) in checked.iter().zip(uploads) {
            match upload {
                Ok((version, lines)) => {
                    for line in lines {
                        let _ = writeln!(out, "{line}");
                    }
                    versions.push((item, version));
                }
                Err(e) => return fail(err, format!("{e}; nothing was made current")),
            }
        }
        let claims = target.block_on(each(&versions, |(item, version)| {
            fleet.claim(&item.workspace, version, &item.name)
        }));
        let created: Vec<ObjectPath> = claims.iter().flatten().flatten().cloned().collect();
        if let Some(Err(e)) = claims.into_iter().find(Result::is_err) {
            target.block_on(fleet.release(&created));
            return fail(err, format!("{e}\nerror: nothing published"));
        }
        let records = target.block_on(each(&versions, |(item, version)| {
            fleet.publish(&item.workspace, version, keep, signer)
        }));
        let mut changes: Vec<Announced> = Vec::new();
        let mut failed = None;
        let mut dropped = Vec::new();
        for ((item, version), record) in versions.iter().zip(records) {
            match record {
                Ok((updated, deltas)) if updated.written => {
                    dropped.extend(deltas);
                    let record = updated.value;
                    let _ = writeln!(
                        out,
                        "published: {} serves {} ({}) from {}; its record is at revision {}{}",
                        item.workspace,
                        version.version,
                        short(&version.sha256),
                        version.key,
                        record.revision,
                        retried(updated.conflicts)
                    );
                    say_signature(&record, signer, out, err);
                    // As the record has it (its signature, a delta it kept):
                    // replicas read the version from the root's journal too.
                    let current = record.history.current_version().unwrap_or(version);
                    changes.push((item.workspace.clone(), record.revision, current.clone()));
                }
                Ok(_) => {
                    let _ = writeln!(
                        out,
                        "unchanged: {} serves {} ({}) already",
                        item.workspace,
                        version.version,
                        short(&version.sha256)
                    );
                }
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        if let Some(e) = failed {
            // What was made current is announced, so that replicas follow it
            // now rather than at their next reading of the records.
            let announced = announce(target, &changes, out, err);
            return fail(
                err,
                format!(
                    "{e}; the workspaces listed above as published are current{}; run the same publish again",
                    if announced {
                        String::new()
                    } else {
                        format!(
                            " (replicas find them within {})",
                            humantime(crate::storage::RESYNC_EVERY)
                        )
                    }
                ),
            );
        }
        let announced = announce(target, &changes, out, err);
        // `--keep` drops versions with their deltas: the full objects stay
        // (a lifecycle rule's to delete), the deltas go now.
        if announced && !dropped.is_empty() {
            for problem in target.block_on(deltas::delete(target, &dropped)) {
                let _ = writeln!(err, "warning: {problem}");
            }
            let _ = writeln!(
                out,
                "deleted {} delta(s) of versions no longer kept",
                dropped.len()
            );
        }
        announced
    })
}

/// Announces `changes` in the root, saying so.
fn announce(
    target: &Target,
    changes: &[Announced],
    out: &mut impl Write,
    err: &mut impl Write,
) -> bool {
    if changes.is_empty() {
        let _ = writeln!(out, "manifest unchanged: every file was current already");
        return true;
    }
    match target.block_on(target.fleet().announce(changes)) {
        Ok(updated) => {
            let _ = writeln!(
                out,
                "manifest {}manifest.json: revision {}{}; replicas follow on their next poll",
                slash(&target.display),
                updated.value,
                retried(updated.conflicts)
            );
            true
        }
        Err(e) => fail(
            err,
            format!(
                "{e}; the records are written, and replicas find them within {} at the latest",
                humantime(crate::storage::RESYNC_EVERY)
            ),
        ),
    }
}

/// Says how `record`, just written, is signed: a line on `out` when
/// `signer` signed it; a warning on `err` when nothing did though the
/// workspace's versions were signed before, as replicas that check
/// signatures will then refuse it.
fn say_signature(
    record: &WorkspaceRecord,
    signer: Option<&Signer>,
    out: &mut impl Write,
    err: &mut impl Write,
) {
    let Some(current) = record.history.current_version() else {
        return;
    };
    match signer {
        Some(signer) => {
            let _ = writeln!(
                out,
                "signed: {} {} as current at revision {} with key {}, valid until {}",
                record.workspace,
                current.version,
                record.revision,
                signer.id(),
                signer.expiry(current).unwrap_or_else(|| "?".to_owned())
            );
        }
        None if record
            .history
            .versions
            .iter()
            .any(|v| v.signature.is_some()) =>
        {
            let _ = writeln!(
                err,
                "warning: {}'s versions were signed before, and {} is not signed at revision {} \
                 (no --sign-key): replicas that check signatures refuse it until it is \
                 (publish --refresh-signatures)",
                record.workspace, current.version, record.revision
            );
        }
        None => {}
    }
}

/// What the checked files ask for: their workspaces and keys.
fn claims(checked: &[Checked]) -> Vec<Claim<'_>> {
    checked
        .iter()
        .map(|c| Claim {
            name: &c.name,
            written: SystemTime::now(),
            workspace: &c.workspace,
            keys: &c.key_hashes,
        })
        .collect()
}

/// How many files a publish works on at once.
const CONCURRENT: usize = 16;

/// `step` for each of `items`, up to [`CONCURRENT`] at once, the results in
/// the items' order.
async fn each<'i, I, T, F>(items: &'i [I], step: impl Fn(&'i I) -> F) -> Vec<T>
where
    F: std::future::Future<Output = T>,
{
    use futures_util::StreamExt;
    futures_util::stream::iter(items)
        .map(step)
        .buffered(CONCURRENT)
        .collect()
        .await
}

/// Gzips (if needed), hashes and uploads one checked file, and its delta
/// (`made`) if it pays: its version, and the lines that say what was sent.
async fn upload_one(
    target: &Target,
    item: &Checked,
    made: Option<&Result<deltas::Made, PublishError>>,
) -> Result<(Version, Vec<String>), PublishError> {
    let is_gzip = SnapshotFile::new(&item.path).is_gzip();
    let prepared =
        upload::prepare(&item.path, is_gzip).map_err(|source| PublishError::Prepare {
            path: item.path.clone(),
            source,
        })?;
    let relative = ObjectPath::from_iter([
        "objects",
        item.workspace.as_str(),
        &format!("{}.json.gz", prepared.sha256),
    ]);
    let key = ObjectPath::from_iter(target.prefix.parts().chain(relative.parts()));
    let sent = upload::upload(target.store.as_ref(), &key, &prepared).await?;
    let line = format!(
        "{}: {key} ({} bytes)",
        if sent { "uploaded" } else { "already there" },
        prepared.size
    );
    let version = Version {
        sha256: prepared.sha256.clone(),
        key: relative.to_string(),
        size: prepared.size,
        version: item.version.clone(),
        published_at: portfolio_domain::store::time::utc_now(),
        file: item
            .path
            .file_name()
            .map_or_else(|| item.name.clone(), |n| n.to_string_lossy().into_owned()),
        records: item.records,
        key_hashes: Some(item.key_hashes.iter().map(key::to_hex).collect()),
        delta: None,
        signature: None,
        plain_sha256: Some(prepared.plain_sha256.clone()),
        limits: item.limits,
    };
    let mut lines = vec![line];
    let mut version = version;
    match made {
        // The content that serves already: nothing to send.
        Some(Ok(made)) if made.base == version.sha256 => {}
        Some(Ok(made)) => {
            let (delta, line) = deltas::send(target, &item.workspace, made, prepared.size).await?;
            version.delta = delta;
            lines.push(line);
        }
        Some(Err(e)) => lines.push(format!("no delta: {}: {e}", item.workspace)),
        None => {}
    }
    Ok((version, lines))
}

/// `portfolio-replica rollback WORKSPACE --to URL [--version V]`: with a
/// signer, the version brought back is signed anew, as current at the
/// record's new revision.
pub fn rollback(
    workspace: &str,
    to: &str,
    version: Option<&str>,
    signer: Option<&Signer>,
    options: &StorageOptions,
    out: &mut impl Write,
    err: &mut impl Write,
) -> bool {
    Target::run(to, options, Opening::Records, err, |target, fleet, err| {
        let mut conflicts = 0;
        let (from, to, record) = loop {
            let record = match target.block_on(fleet.record(workspace)) {
                Ok(Some(record)) => record,
                Ok(None) => {
                    return fail(
                        err,
                        format!(
                            "the manifest has no workspace {workspace:?} (see `portfolio-replica versions`)"
                        ),
                    );
                }
                Err(e) => return fail(err, e),
            };
            let mut moved = record.clone();
            let (from, mut to) = match moved.history.rollback(workspace, version) {
                Ok(pair) => pair,
                Err(e) => return fail(err, e),
            };
            moved.revision += 1;
            moved.updated_at = portfolio_domain::store::time::utc_now();
            if let Some(signer) = signer {
                match signer.sign_current(&mut moved, SystemTime::now()) {
                    Ok(signature) => to.signature = Some(signature),
                    Err(e) => return fail(err, e),
                }
            }
            if to.key_hashes.is_none() {
                let _ = writeln!(
                    err,
                    "warning: that version records no key hashes (published by an older build), so its keys were not checked against the other workspaces"
                );
            }
            // The version brought back must not take a key that another
            // workspace's current version holds (the replicas would have to
            // refuse one of them).
            let name = format!("{workspace} {} ({})", to.version, short(&to.sha256));
            if let Err(e) = target.block_on(fleet.claim(workspace, &to, &name)) {
                return fail(err, e);
            }
            match target.block_on(fleet.replace(&moved)) {
                Ok(true) => break (from, to, moved),
                Ok(false) => conflicts += 1,
                Err(e) => return fail(err, e),
            }
            if conflicts >= 30 {
                return fail(
                    err,
                    format!("{workspace}'s record kept changing; try again"),
                );
            }
        };
        let _ = writeln!(
            out,
            "rolled back: {workspace} serves {} ({}) instead of {} ({}); its record is at revision {}{}",
            to.version,
            short(&to.sha256),
            from.version,
            short(&from.sha256),
            record.revision,
            retried(conflicts)
        );
        say_signature(&record, signer, out, err);
        announce(
            target,
            &[(workspace.to_owned(), record.revision, to)],
            out,
            err,
        )
    })
}

/// `portfolio-replica versions --to URL [--workspace W]... [--replica
/// HOST:PORT]...`: each workspace with its kept versions, the current one
/// marked, sizes and publish times (all workspaces, or those named); and,
/// for each replica's admin address given, what it serves against that.
/// False if the manifest, or a replica, cannot be read.
pub fn versions(
    to: &str,
    json: bool,
    only: &[String],
    replicas: &[HttpUrl],
    options: &StorageOptions,
    out: &mut impl Write,
    err: &mut impl Write,
) -> bool {
    Target::run(to, options, Opening::Read, err, |target, fleet, err| {
        let (head, workspaces) = match target.block_on(read_all(fleet, only)) {
            Ok(Some(read)) => read,
            Ok(None) => {
                return fail(
                    err,
                    format!(
                        "{}manifest.json does not exist: nothing was published there with `portfolio-replica publish`",
                        slash(&target.display)
                    ),
                );
            }
            Err(e) => return fail(err, e),
        };
        if let Some(missing) = only.iter().find(|w| !workspaces.contains_key(*w)) {
            let missing = PublishError::NoWorkspace {
                workspace: missing.clone(),
            };
            return fail(err, missing);
        }
        if json {
            let mut text = serde_json::to_vec_pretty(&serde_json::json!({
                "manifest": head,
                "workspaces": workspaces,
            }))
            .unwrap_or_default();
            text.push(b'\n');
            let _ = out.write_all(&text);
            return true;
        }
        let _ = write!(
            out,
            "{}",
            render_versions(&head, &workspaces, &target.display)
        );
        if replicas.is_empty() {
            return true;
        }
        let (report, all_read) = fleet::report(&workspaces, only, replicas);
        let _ = write!(out, "{report}");
        all_read
    })
}

/// `portfolio-replica migrate --to URL`: turns a format-1 manifest into
/// format 2.
pub fn migrate(
    to: &str,
    options: &StorageOptions,
    out: &mut impl Write,
    err: &mut impl Write,
) -> bool {
    Target::run(
        to,
        options,
        Opening::Read,
        err,
        |target, fleet, err| match target.block_on(fleet.migrate()) {
            Ok(n) => {
                let _ = writeln!(
                    out,
                    "migrated: {}manifest.json is in format 2, with {n} workspace record(s); replicas read the records on their next poll",
                    slash(&target.display)
                );
                true
            }
            Err(e) => fail(err, e),
        },
    )
}

/// What `versions` shows: the manifest's head (format, revision, when),
/// and the workspaces' histories.
type Workspaces = std::collections::BTreeMap<String, History>;

async fn read_all(
    fleet: &FleetObjects<'_>,
    only: &[String],
) -> Result<Option<(serde_json::Value, Workspaces)>, PublishError> {
    let Some(manifest) = fleet.manifest().await? else {
        return Ok(None);
    };
    Ok(Some(match manifest {
        Manifest::V1(old) => {
            let head = serde_json::json!({
                "manifest_version": old.manifest_version,
                "revision": old.revision,
                "updated_at": old.updated_at,
            });
            let mut workspaces = old.workspaces;
            if !only.is_empty() {
                workspaces.retain(|name, _| only.contains(name));
            }
            (head, workspaces)
        }
        Manifest::V2(root) => {
            let head = serde_json::json!({
                "manifest_version": root.manifest_version,
                "revision": root.revision,
                "updated_at": root.updated_at,
            });
            let records: Vec<WorkspaceRecord> = fleet.records(only).await?;
            let workspaces = records
                .into_iter()
                .map(|r| (r.workspace, r.history))
                .collect();
            (head, workspaces)
        }
    }))
}

/// The `versions` table.
fn render_versions(head: &serde_json::Value, workspaces: &Workspaces, display: &str) -> String {
    let mut text = format!(
        "{}manifest.json: format {}, revision {}, updated {}, {} workspace(s)\n",
        slash(display),
        head["manifest_version"],
        head["revision"],
        head["updated_at"].as_str().unwrap_or("?"),
        workspaces.len()
    );
    for (name, workspace) in workspaces {
        text.push_str(&format!("\n{name}\n"));
        for v in &workspace.versions {
            let mark = if v.sha256 == workspace.current {
                "*"
            } else {
                " "
            };
            text.push_str(&format!(
                "  {mark} {:<40} {}  {:>10}  {} records  published {} from {}\n",
                v.version,
                short(&v.sha256),
                human_size(v.size),
                v.records,
                v.published_at,
                v.file
            ));
        }
    }
    text.push_str(
        "\n(* serves now; `portfolio-replica rollback WORKSPACE --to URL [--version V]` moves it)\n",
    );
    text
}

fn human_size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / f64::from(1u32 << 30)),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / f64::from(1u32 << 20)),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

fn slash(display: &str) -> String {
    if display.ends_with('/') {
        display.to_owned()
    } else {
        format!("{display}/")
    }
}

fn humantime(d: std::time::Duration) -> String {
    format!("{} minutes", d.as_secs().div_ceil(60))
}

fn retried(conflicts: u32) -> String {
    match conflicts {
        0 => String::new(),
        n => format!(" (written after {n} concurrent update(s) by other publishers)"),
    }
}

#[cfg(test)]
mod signed_tests;
