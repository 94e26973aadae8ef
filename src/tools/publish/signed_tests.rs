//! Signing with `--sign-key`: what replicas read of a publish, a rollback
//! or a refresh (the workspace's record and the root's journal) carries
//! one signature that the key's public half accepts, for the current
//! version at the record's revision; a refresh re-signs only what needs it.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use object_store::memory::InMemory;
use serde_json::{Value, json};

use super::refresh::{Outcome, refresh};
use super::*;
use portfolio_wire::manifest::Root;
use portfolio_wire::signed::{DEFAULT_VALID_FOR, Named, SecretKey, TrustedKeys};

fn signer(n: u8) -> Signer {
    Signer::new(SecretKey::from_seed([n; 32]), DEFAULT_VALID_FOR)
}

/// Asserts that key `n` signed `version` as the current version of
/// `workspace` at `revision`.
fn assert_signed(version: &Version, workspace: &str, revision: u64, n: u8) {
    let mut trusted = TrustedKeys::default();
    trusted.add(SecretKey::from_seed([n; 32]).public());
    let envelope = version.signature.as_ref().expect("a signature");
    let verified = trusted.verify(envelope).expect("a signature by the key");
    let named = Named {
        workspace,
        version: &version.version,
        sha256: &version.sha256,
        key_hashes: version.key_hashes.as_deref(),
        revision: Some(revision),
    };
    verified.statement.covers(&named).unwrap();
}

/// A fleet on a `file://` prefix in a temporary directory, published to
/// through the commands.
struct Local {
    dir: tempfile::TempDir,
    url: String,
}

impl Local {
    fn new() -> Local {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("fleet")).unwrap();
        let url = format!("file://{}/fleet/", dir.path().display());
        Local { dir, url }
    }

    /// The README's first workspace as `workspace` at `version`, with a
    /// key of its own.
    fn snapshot(&self, workspace: &str, version: &str) -> PathBuf {
        let example =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/first-workspace.json");
        let mut snap: Value = serde_json::from_slice(&std::fs::read(example).unwrap()).unwrap();
        snap["workspace"]["id"] = json!(workspace);
        snap["version"] = json!(version);
        let hash = key::to_hex(&key::hash_key(&format!("cura_{workspace}")));
        snap["api_keys"][0]["sha256"] = json!(hash);
        let path = self.dir.path().join(format!("{workspace}-{version}.json"));
        std::fs::write(&path, serde_json::to_vec(&snap).unwrap()).unwrap();
        path
    }

    /// Runs a command: whether it did, and what it wrote.
    fn run(
        &self,
        command: impl FnOnce(&str, &mut Vec<u8>, &mut Vec<u8>) -> bool,
    ) -> (bool, String, String) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let done = command(&self.url, &mut out, &mut err);
        let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
        (done, text(out), text(err))
    }

    /// `rollback WORKSPACE` to the version before, signed by `signer`.
    fn rollback(&self, workspace: &str, signer: &Signer) -> (bool, String, String) {
        self.run(|url, out, err| {
            rollback(
                workspace,
                url,
                None,
                Some(signer),
                &StorageOptions::default(),
                out,
                err,
            )
        })
    }

    fn publish(&self, file: &PathBuf, signer: Option<&Signer>) -> (bool, String, String) {
        let how = Publishing {
            keep: 10,
            dry_run: false,
            signer,
        };
        self.run(|url, out, err| {
            publish(
                std::slice::from_ref(file),
                url,
                &how,
                &StorageOptions::default(),
                out,
                err,
            )
        })
    }

    fn refresh(&self, signer: &Signer) -> (bool, String, String) {
        self.run(|url, out, err| {
            refresh_signatures(url, &[], signer, &StorageOptions::default(), out, err)
        })
    }

    /// The record of `workspace`, and the root.
    fn read(&self, workspace: &str) -> (WorkspaceRecord, Root) {
        let target = Target::open(&self.url, &StorageOptions::default(), Access::Read).unwrap();
        let fleet = target.fleet();
        let record = target.block_on(fleet.record(workspace)).unwrap().unwrap();
        let Some(Manifest::V2(root)) = target.block_on(fleet.manifest()).unwrap() else {
            panic!("a format-2 root");
        };
        (record, root)
    }

    /// Asserts that `workspace`'s current version is signed by key `n` at
    /// its record's revision, and that the root's latest change of it
    /// carries the same signature: the root's revision.
    fn assert_signed(&self, workspace: &str, n: u8) -> u64 {
        let (record, root) = self.read(workspace);
        let current = record.history.current_version().unwrap();
        assert_signed(current, workspace, record.revision, n);
        let change = root
            .changes
            .iter()
            .rev()
            .find(|c| c.workspace == workspace)
            .unwrap();
        assert_eq!(change.workspace_revision, record.revision);
        assert_eq!(change.current.signature, current.signature);
        root.revision
    }
}

#[test]
fn a_signed_publish_and_rollback_sign_the_current_version_at_the_new_revision() {
    let fleet = Local::new();
    let signer = signer(1);
    let v1 = fleet.snapshot("ws-a", "v1");
    let (done, out, err) = fleet.publish(&v1, Some(&signer));
    assert!(done, "{out}{err}");
    assert!(
        out.contains(&format!(
            "signed: ws-a v1 as current at revision 1 with key {}, valid until ",
            signer.id()
        )),
        "{out}"
    );
    fleet.assert_signed("ws-a", 1);

    let (done, out, err) = fleet.publish(&fleet.snapshot("ws-a", "v2"), Some(&signer));
    assert!(done, "{out}{err}");
    fleet.assert_signed("ws-a", 1);
    assert_eq!(fleet.read("ws-a").0.revision, 2);

    let (done, out, err) = fleet.rollback("ws-a", &signer);
    assert!(done, "{out}{err}");
    assert!(out.contains("as current at revision 3"), "{out}");
    let (record, _) = fleet.read("ws-a");
    assert_eq!(record.revision, 3);
    assert_eq!(record.history.current_version().unwrap().version, "v1");
    let root_revision = fleet.assert_signed("ws-a", 1);

    // Publishing the content that serves still changes nothing.
    let (done, out, _) = fleet.publish(&v1, Some(&signer));
    assert!(done && out.contains("unchanged: ws-a serves v1"), "{out}");
    let (record, root) = fleet.read("ws-a");
    assert_eq!((record.revision, root.revision), (3, root_revision));
}

#[test]
fn a_refresh_signs_what_needs_it_in_one_write_of_the_root_and_then_nothing() {
    let fleet = Local::new();
    let signer = signer(1);
    assert!(
        fleet
            .publish(&fleet.snapshot("ws-a", "a1"), Some(&signer))
            .0
    );
    assert!(fleet.publish(&fleet.snapshot("ws-b", "b1"), None).0);
    // An unsigned publish after signed ones works, and says what it means.
    let (done, _, err) = fleet.publish(&fleet.snapshot("ws-a", "a2"), None);
    assert!(done, "{err}");
    assert!(
        err.contains(
            "warning: ws-a's versions were signed before, and a2 is not signed at revision 2"
        ),
        "{err}"
    );
    let before = fleet.read("ws-a").1.revision;

    let (done, out, err) = fleet.refresh(&signer);
    assert!(done, "{out}{err}");
    assert!(
        out.contains("re-signed: ws-a a2 at revision 3 (unsigned)")
            && out.contains("re-signed: ws-b b1 at revision 2 (unsigned)")
            && out.contains(
                "signatures: 2 re-signed, 0 still fresh (over half of 7d left), 0 failed"
            ),
        "{out}"
    );
    assert_eq!(fleet.assert_signed("ws-a", 1), before + 1);
    assert_eq!(fleet.assert_signed("ws-b", 1), before + 1);

    let (done, out, err) = fleet.refresh(&signer);
    assert!(done, "{out}{err}");
    assert!(out.contains("0 re-signed, 2 still fresh"), "{out}");
    let (record, root) = fleet.read("ws-a");
    assert_eq!((record.revision, root.revision), (3, before + 1));

    // Another key's signatures are replaced by this key's.
    let (done, out, _) = fleet.refresh(&self::signer(2));
    assert!(done && out.contains("2 re-signed"), "{out}");
    assert!(
        out.contains(&format!("(signed by another key, {})", signer.id())),
        "{out}"
    );
    fleet.assert_signed("ws-b", 2);
}

#[test]
fn a_rollback_to_a_version_that_cannot_be_signed_writes_nothing() {
    let fleet = Local::new();
    let signer = signer(1);
    assert!(fleet.publish(&fleet.snapshot("ws-a", "v1"), None).0);
    assert!(fleet.publish(&fleet.snapshot("ws-a", "v2"), None).0);
    // v1 as an older build recorded it: without its key hashes.
    let target = Target::open(&fleet.url, &StorageOptions::default(), Access::Read).unwrap();
    let mut record = fleet.read("ws-a").0;
    record.history.versions[1].key_hashes = None;
    record.revision += 1;
    assert!(target.block_on(target.fleet().replace(&record)).unwrap());

    let (done, _, err) = fleet.rollback("ws-a", &signer);
    assert!(!done);
    assert!(err.contains("records no key hashes"), "{err}");
    assert_eq!(fleet.read("ws-a").0, record);
}

/// A version of `workspace` made by hand, with one key hash unless
/// `keyless` (as an older build recorded it).
fn version(workspace: &str, n: u8, keyless: bool) -> Version {
    Version {
        key_hashes: (!keyless).then(|| vec![format!("{n:02x}").repeat(32)]),
        ..Version::for_tests(n, workspace, &format!("v{n}"))
    }
}

/// What each record's refresh did: `fresh`, `re-signed` or the error.
fn outcomes(results: Vec<Result<Outcome, PublishError>>) -> Vec<String> {
    results
        .into_iter()
        .map(|r| match r {
            Ok(Outcome::Fresh) => "fresh".to_owned(),
            Ok(Outcome::Resigned {
                record, conflicts, ..
            }) => format!("re-signed at {} after {conflicts}", record.revision),
            Err(e) => e.to_string(),
        })
        .collect()
}

#[tokio::test]
async fn refresh_renews_at_half_life_retries_a_record_that_moved_and_reports_what_it_cannot_sign() {
    let store = InMemory::new();
    let prefix = ObjectPath::from("fleet");
    let fleet = FleetObjects {
        objects: Conditional {
            store: &store,
            prefix: &prefix,
            locking: false,
        },
    };
    let signer = signer(1);
    for (workspace, n, keyless) in [("ws-a", 1, false), ("ws-b", 2, false), ("ws-c", 3, true)] {
        let signed = (!keyless).then_some(&signer);
        fleet
            .publish(workspace, &version(workspace, n, keyless), 10, signed)
            .await
            .unwrap();
    }
    let now = SystemTime::now();
    let records = fleet.records(&[]).await.unwrap();
    assert_eq!(
        outcomes(refresh(&fleet, &records, &signer, now).await),
        [
            "fresh",
            "fresh",
            "ws-c's version v3 records no key hashes (it was published by an older build), so no signature can name its keys; publish its file again to sign it"
        ]
    );

    // ws-b moves on (unsigned) after the refresh read it: the refresh
    // reads it again and signs what serves now.
    fleet
        .publish("ws-b", &version("ws-b", 4, false), 10, None)
        .await
        .unwrap();
    let late = DEFAULT_VALID_FOR / 2 + Duration::from_secs(60);
    assert_eq!(
        outcomes(refresh(&fleet, &records[..2], &signer, now + late).await),
        ["re-signed at 2 after 0", "re-signed at 3 after 1"]
    );
    let b = fleet.record("ws-b").await.unwrap().unwrap();
    let current = b.history.current_version().unwrap();
    assert_eq!(current.version, "v4");
    assert_signed(current, "ws-b", 3, 1);
    // Half the validity is left again.
    let records = fleet.records(&["ws-a".to_owned()]).await.unwrap();
    assert_eq!(
        outcomes(refresh(&fleet, &records, &signer, now + late).await),
        ["fresh"]
    );
}
