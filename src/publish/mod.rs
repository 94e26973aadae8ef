//! The publisher side of object storage (docs/object-storage.md): the
//! `publish`, `rollback` and `versions` commands. Replicas only read; these
//! write the immutable snapshot objects and the manifest that points at
//! them, always with a conditional write, so that publishers running at once
//! never lose each other's update.

mod fleet;
mod update;
mod upload;

use std::io::Write;
use std::path::PathBuf;
use std::time::SystemTime;

use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;

use crate::check::{self, Checked};
use crate::http_client::HttpUrl;
use crate::storage::SnapshotFile;
use crate::storage::location::{self, Access, StorageOptions};
use crate::storage::manifest::{Held, Manifest, Version, short};
use crate::store::claims::Claim;
use crate::store::key;
use update::ManifestStore;

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
    fn open(to: &str, options: &StorageOptions, access: Access) -> Result<Target, String> {
        let url = location::parse_target(to)?;
        let opened = location::open_for(access, &url, options, None)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the object store client: {e}"))?;
        Ok(Target {
            store: opened.store,
            prefix: opened.prefix,
            display: opened.display,
            locking: url.scheme() == "file",
            runtime,
        })
    }

    fn manifest(&self) -> ManifestStore<'_> {
        ManifestStore {
            store: self.store.as_ref(),
            prefix: &self.prefix,
            locking: self.locking,
        }
    }
}

/// `portfolio-replica publish FILE... --to URL`: checks every file as the
/// server would (`crate::check`, its messages), and against what the
/// manifest serves (no key of another workspace's current version); only if
/// all pass, uploads each as an immutable object and makes it current in
/// the manifest, in one manifest write. Returns whether it published.
pub fn publish(
    files: &[PathBuf],
    to: &str,
    keep: usize,
    options: &StorageOptions,
    out: &mut impl Write,
    err: &mut impl Write,
) -> bool {
    // A wrong URL is said before any file is read.
    let target = match Target::open(to, options, Access::Write) {
        Ok(target) => target,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return false;
        }
    };
    let Some(checked) = check::check(files, out, err) else {
        let _ = writeln!(
            err,
            "error: nothing published: every file must pass the checks"
        );
        return false;
    };
    let published = match target.runtime.block_on(target.manifest().read()) {
        Ok((manifest, _)) => manifest,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return false;
        }
    };
    let held = against_published(&published, &checked);
    if !held.unknown.is_empty() {
        let _ = writeln!(
            err,
            "warning: {} published workspace(s) record no key hashes (published by an older build), so their keys are not checked: {}; publish them again to record them",
            held.unknown.len(),
            held.unknown.join(", ")
        );
    }
    if let Err(e) = held.check(&claims(&checked)) {
        let _ = writeln!(err, "error: {e}\nerror: nothing published");
        return false;
    }
    let mut versions = Vec::new();
    for item in &checked {
        match upload_one(&target, item, out) {
            Ok(version) => versions.push((item.workspace.clone(), version)),
            Err(e) => {
                let _ = writeln!(err, "error: {e}; the manifest is unchanged");
                return false;
            }
        }
    }
    let updated = target
        .runtime
        .block_on(target.manifest().update(&mut |manifest| {
            // Another publisher may have written since the check above.
            against_published(manifest, &checked).check(&claims(&checked))?;
            let mut changed = false;
            for (workspace, version) in &versions {
                changed |= manifest.publish(workspace, version.clone(), keep);
            }
            Ok(changed)
        }));
    match updated {
        Ok(updated) => {
            for (workspace, version) in &versions {
                let _ = writeln!(
                    out,
                    "published: {workspace} serves {} ({}) from {}",
                    version.version,
                    short(&version.sha256),
                    version.key
                );
            }
            let _ = if updated.written {
                writeln!(
                    out,
                    "manifest {}manifest.json: revision {}{}; replicas follow on their next poll",
                    slash(&target.display),
                    updated.manifest.revision,
                    retried(updated.conflicts)
                )
            } else {
                writeln!(out, "manifest unchanged: every file was current already")
            };
            true
        }
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            false
        }
    }
}

/// What the manifest's other workspaces hold, for the checked files.
fn against_published(manifest: &Manifest, checked: &[Checked]) -> Held {
    let replaced: Vec<&str> = checked.iter().map(|c| c.workspace.as_str()).collect();
    Held::of(manifest, &replaced)
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

/// Gzips (if needed), hashes and uploads one checked file.
fn upload_one(target: &Target, item: &Checked, out: &mut impl Write) -> Result<Version, String> {
    let is_gzip = SnapshotFile::new(&item.path).is_gzip();
    let prepared = upload::prepare(&item.path, is_gzip)
        .map_err(|e| format!("{}: cannot prepare the upload: {e}", item.path.display()))?;
    let relative = ObjectPath::from_iter([
        "objects",
        item.workspace.as_str(),
        &format!("{}.json.gz", prepared.sha256),
    ]);
    let key = ObjectPath::from_iter(target.prefix.parts().chain(relative.parts()));
    let sent = target
        .runtime
        .block_on(upload::upload(target.store.as_ref(), &key, &prepared))?;
    let _ = writeln!(
        out,
        "{}: {key} ({} bytes)",
        if sent { "uploaded" } else { "already there" },
        prepared.size
    );
    Ok(Version {
        sha256: prepared.sha256.clone(),
        key: relative.to_string(),
        size: prepared.size,
        version: item.version.clone(),
        published_at: crate::store::time::utc_now(),
        file: item
            .path
            .file_name()
            .map_or_else(|| item.name.clone(), |n| n.to_string_lossy().into_owned()),
        records: item.records,
        key_hashes: Some(item.key_hashes.iter().map(key::to_hex).collect()),
    })
}

/// `portfolio-replica rollback WORKSPACE --to URL [--version V]`.
pub fn rollback(
    workspace: &str,
    to: &str,
    version: Option<&str>,
    options: &StorageOptions,
    out: &mut impl Write,
    err: &mut impl Write,
) -> bool {
    let target = match Target::open(to, options, Access::Read) {
        Ok(target) => target,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return false;
        }
    };
    let mut moved = None;
    let mut unknown = false;
    let updated = target
        .runtime
        .block_on(target.manifest().update(&mut |manifest| {
            let (from, to) = manifest.rollback(workspace, version)?;
            // The version brought back must not take a key that another
            // workspace's current version holds (the replicas would
            // have to refuse one of them).
            let keys = to.key_hashes();
            let name = format!("{workspace} {} ({})", to.version, short(&to.sha256));
            Held::of(manifest, &[workspace]).check(&[Claim {
                name: &name,
                written: to.written(),
                workspace,
                keys: keys.as_deref().unwrap_or_default(),
            }])?;
            unknown = keys.is_none();
            moved = Some((from, to));
            Ok(true)
        }));
    if unknown {
        let _ = writeln!(
            err,
            "warning: that version records no key hashes (published by an older build), so its keys were not checked against the other workspaces"
        );
    }
    match (updated, moved) {
        (Ok(updated), Some((from, to))) => {
            let _ = writeln!(
                out,
                "rolled back: {workspace} serves {} ({}) instead of {} ({}); manifest revision {}{}; replicas follow on their next poll",
                to.version,
                short(&to.sha256),
                from.version,
                short(&from.sha256),
                updated.manifest.revision,
                retried(updated.conflicts)
            );
            true
        }
        (Ok(_), None) => false,
        (Err(e), _) => {
            let _ = writeln!(err, "error: {e}");
            false
        }
    }
}

/// `portfolio-replica versions --to URL [--replica HOST:PORT]...`: every
/// workspace with its kept versions, the current one marked, sizes and
/// publish times; and, for each replica's admin address given, what it
/// serves against that. False if the manifest, or a replica, cannot be read.
pub fn versions(
    to: &str,
    json: bool,
    replicas: &[HttpUrl],
    options: &StorageOptions,
    out: &mut impl Write,
    err: &mut impl Write,
) -> bool {
    let target = match Target::open(to, options, Access::Read) {
        Ok(target) => target,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return false;
        }
    };
    let manifest = match target.runtime.block_on(target.manifest().read()) {
        Ok((manifest, Some(_))) => manifest,
        Ok((_, None)) => {
            let _ = writeln!(
                err,
                "error: {}manifest.json does not exist: nothing was published there with `portfolio-replica publish`",
                slash(&target.display)
            );
            return false;
        }
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return false;
        }
    };
    if json {
        let _ = out.write_all(&manifest.to_json());
        return true;
    }
    let _ = write!(out, "{}", render_versions(&manifest, &target.display));
    if replicas.is_empty() {
        return true;
    }
    let (report, all_read) = fleet::report(&manifest, replicas);
    let _ = write!(out, "{report}");
    all_read
}

/// The `versions` table.
fn render_versions(manifest: &Manifest, display: &str) -> String {
    let mut text = format!(
        "{}manifest.json: revision {}, updated {}, {} workspace(s)\n",
        slash(display),
        manifest.revision,
        manifest.updated_at,
        manifest.workspaces.len()
    );
    for (name, workspace) in &manifest.workspaces {
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

fn retried(conflicts: u32) -> String {
    match conflicts {
        0 => String::new(),
        n => format!(" (written after {n} concurrent update(s) by other publishers)"),
    }
}
