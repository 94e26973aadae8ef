//! The publisher's side of signed snapshots, through the binary: `keygen`
//! makes a key pair it never writes over; `sign` puts a signature beside
//! each directory snapshot that the public key verifies; `publish
//! --sign-key` refuses a bad key file before anything is written, and
//! `publish --refresh-signatures` (from the environment, as a cron job
//! runs it) re-signs an unsigned fleet once, then nothing
//! (docs/object-storage.md#signing).

use std::path::Path;

use portfolio_wire::manifest::{Manifest, RECORDS_DIR, WorkspaceRecord};
use portfolio_wire::signed::{Envelope, Named, SIGNATURE_SUFFIX, TrustedKeys};
use sha2::{Digest, Sha256};

use super::run;
use crate::util::*;

/// Runs `keygen --out DIR/publisher`: the secret and public key files.
async fn keygen(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let out = dir.join("publisher");
    let made = run(&["keygen", "--out", out.to_str().unwrap()], None, &[]).await;
    assert_eq!(made.code, Some(0), "{made:?}");
    (dir.join("publisher.key"), dir.join("publisher.pub"))
}

fn trusted(public: &Path) -> TrustedKeys {
    TrustedKeys::parse(&std::fs::read_to_string(public).unwrap(), "publisher.pub").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keygen_writes_a_key_pair_once_and_sign_signs_each_file_beside_it() {
    let dir = tempdir();
    let out = dir.path().join("publisher");
    let out = out.to_str().unwrap();
    let made = run(&["keygen", "--out", out], None, &[]).await;
    assert_eq!(made.code, Some(0), "{made:?}");
    let (secret, public) = (format!("{out}.key"), format!("{out}.pub"));
    let keys = trusted(Path::new(&public));
    let id = &keys.ids()[0];
    for line in [
        format!("key id {id}"),
        format!("secret key: {secret}"),
        format!("public key: {public}"),
    ] {
        assert!(made.stdout.contains(&line), "{made:?}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&secret).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let again = run(&["keygen", "--out", out], None, &[]).await;
    assert_eq!(again.code, Some(1), "{again:?}");
    assert!(
        again.stderr.contains(&format!(
            "{secret} exists already: a signing key is never written over"
        )),
        "{again:?}"
    );
    assert_eq!(trusted(Path::new(&public)).ids(), keys.ids());

    let snapshots = dir.path().join("snapshots");
    std::fs::create_dir(&snapshots).unwrap();
    let good = write_json(&snapshots, "acme.json", &fixture("ws-acme", &[KEY], 0));
    write_bytes(&snapshots, "bad.json", b"{");
    let signed = run(
        &["sign", snapshots.to_str().unwrap(), "--sign-key", &secret],
        None,
        &[],
    )
    .await;
    assert_eq!(signed.code, Some(1), "{signed:?}");
    assert!(
        signed.stdout.contains(&format!(
            "signed: {}{SIGNATURE_SUFFIX}: workspace ws-acme, version ",
            good.display()
        )) && signed.stdout.contains(&format!("key {id}, revision ")),
        "{signed:?}"
    );
    assert!(signed.stderr.contains("bad.json: not signed"), "{signed:?}");
    assert!(!snapshots.join("bad.json.sig").exists());

    let envelope =
        Envelope::parse(&std::fs::read(snapshots.join("acme.json.sig")).unwrap()).unwrap();
    let statement = keys.verify(&envelope).unwrap().statement;
    let sha256: String = Sha256::digest(std::fs::read(&good).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let named = Named {
        workspace: "ws-acme",
        version: &statement.version,
        sha256: &sha256,
        key_hashes: Some(&[key_hash(KEY)]),
        revision: None,
    };
    statement.covers(&named).unwrap();
}

/// The records and root of a `file://` fleet in `dir`.
fn fleet(dir: &Path) -> (Vec<WorkspaceRecord>, u64) {
    let mut records = Vec::new();
    for entry in std::fs::read_dir(dir.join(RECORDS_DIR)).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        records.push(WorkspaceRecord::parse(&bytes, &path.display().to_string()).unwrap());
    }
    records.sort_by(|a, b| a.workspace.cmp(&b.workspace));
    let root = std::fs::read(dir.join("manifest.json")).unwrap();
    let Manifest::V2(root) = Manifest::parse(&root).unwrap() else {
        panic!("a format-2 root");
    };
    (records, root.revision)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_is_signed_once_by_a_refresh_and_a_bad_key_publishes_nothing() {
    let dir = tempdir();
    let (secret, public) = keygen(dir.path()).await;
    let prefix = dir.path().join("fleet");
    std::fs::create_dir(&prefix).unwrap();
    let to = format!("file://{}/", prefix.display());
    let acme = write_json(dir.path(), "acme.json", &fixture("ws-acme", &[KEY], 0));
    let other = write_json(
        dir.path(),
        "other.json",
        &fixture("ws-other", &[OTHER_KEY], 1000),
    );
    let (acme, other) = (acme.to_str().unwrap(), other.to_str().unwrap());

    // The public key where the secret one belongs: refused before any
    // object, record or root is written.
    let refused = run(
        &[
            "publish",
            acme,
            "--to",
            &to,
            "--sign-key",
            public.to_str().unwrap(),
        ],
        None,
        &[],
    )
    .await;
    assert_eq!(refused.code, Some(1), "{refused:?}");
    assert!(
        refused.stderr.contains(
            "publisher.pub (--sign-key), line 2: a public key, where a signing key was expected"
        ),
        "{refused:?}"
    );
    assert_eq!(std::fs::read_dir(&prefix).unwrap().count(), 0);

    // A fleet published unsigned, then signed by the cron job's refresh,
    // its flags from the environment.
    let published = run(&["publish", acme, other, "--to", &to], None, &[]).await;
    assert_eq!(published.code, Some(0), "{published:?}");
    let (_, before) = fleet(&prefix);
    let env = [
        ("PORTFOLIO_PUBLISH_TO", to.as_str()),
        ("PORTFOLIO_SIGN_KEY", secret.to_str().unwrap()),
    ];
    let refresh = run(&["publish", "--refresh-signatures"], None, &env).await;
    assert_eq!(refresh.code, Some(0), "{refresh:?}");
    assert!(
        refresh
            .stdout
            .contains("signatures: 2 re-signed, 0 still fresh (over half of 7d left), 0 failed"),
        "{refresh:?}"
    );
    let (records, after) = fleet(&prefix);
    assert_eq!(after, before + 1, "one write of the root");
    let keys = trusted(&public);
    for record in &records {
        assert_eq!(record.revision, 2, "{record:?}");
        let current = record.history.current_version().unwrap();
        let statement = keys
            .verify(current.signature.as_ref().unwrap())
            .unwrap()
            .statement;
        assert_eq!(statement.revision, 2);
        assert_eq!(statement.sha256, current.sha256);
    }

    let again = run(&["publish", "--refresh-signatures"], None, &env).await;
    assert_eq!(again.code, Some(0), "{again:?}");
    assert!(
        again.stdout.contains("0 re-signed, 2 still fresh"),
        "{again:?}"
    );
    assert_eq!(fleet(&prefix), (records, after));
}
