//! `keygen`, the signing key file, `sign` in a directory, and when a
//! record's signature is due for renewal.

use std::path::Path;
use std::time::{Duration, SystemTime};

use super::*;
use portfolio_wire::manifest::History;
use portfolio_wire::signed::{DEFAULT_VALID_FOR, PublicKey};

/// The README's first workspace: a small snapshot that passes `check`.
fn example() -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/first-workspace.json");
    std::fs::read(path).expect("examples/first-workspace.json")
}

fn signer(n: u8) -> Signer {
    Signer::new(SecretKey::from_seed([n; 32]), DEFAULT_VALID_FOR)
}

fn trusting(key: &PublicKey) -> TrustedKeys {
    let mut keys = TrustedKeys::default();
    keys.add(key.clone());
    keys
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap()
}

#[cfg(unix)]
/// A message names each of `parts`: what a user reading it needs.
fn says(message: &str, parts: &[&str]) {
    for part in parts {
        assert!(message.contains(part), "{part:?} in {message}");
    }
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn keygen_writes_a_private_key_and_its_public_key_and_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("publisher");
    let files = keygen(&out).unwrap();
    assert_eq!(files.secret, dir.path().join("publisher.key"));
    assert_eq!(files.public, dir.path().join("publisher.pub"));
    #[cfg(unix)]
    assert_eq!(mode(&files.secret), 0o600);

    let mut warnings = Vec::new();
    let loaded = Signer::load(&files.secret, DEFAULT_VALID_FOR, &mut warnings).unwrap();
    assert_eq!(loaded.id(), files.id);
    assert!(warnings.is_empty(), "{}", text(warnings));
    let public = std::fs::read_to_string(&files.public).unwrap();
    let trusted = TrustedKeys::parse(&public, "publisher.pub").unwrap();
    assert_eq!(trusted.ids(), std::slice::from_ref(&files.id));

    // Two runs draw two keys.
    assert_ne!(keygen(&dir.path().join("other")).unwrap().id, files.id);

    // Neither file is ever written over, and nothing is left half made.
    let before = std::fs::read(&files.secret).unwrap();
    let err = keygen(&out).unwrap_err().to_string();
    assert!(err.contains("publisher.key exists already"), "{err}");
    assert_eq!(std::fs::read(&files.secret).unwrap(), before);
    std::fs::write(dir.path().join("lone.pub"), "mine").unwrap();
    let err = keygen(&dir.path().join("lone")).unwrap_err().to_string();
    assert!(err.contains("lone.pub exists already"), "{err}");
    assert!(!dir.path().join("lone.key").exists());
    let err = keygen(dir.path()).unwrap_err().to_string();
    assert!(err.contains("not a directory"), "{err}");
    let err = keygen(&dir.path().join("missing/key"))
        .unwrap_err()
        .to_string();
    says(&err, &["cannot write", "missing/key.key"]);
}

#[test]
fn a_bad_key_file_is_refused_naming_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let files = keygen(&dir.path().join("k")).unwrap();
    let load = |path: &Path| {
        Signer::load(path, DEFAULT_VALID_FOR, &mut Vec::new())
            .unwrap_err()
            .to_string()
    };
    // The public key where the secret one belongs.
    let err = load(&files.public);
    assert!(
        err.contains("k.pub (--sign-key), line 2: a public key"),
        "{err}"
    );
    let garbled = dir.path().join("garbled.key");
    std::fs::write(
        &garbled,
        "# a comment\n\nportfolio-replica-ed25519-secret abc\n",
    )
    .unwrap();
    let err = load(&garbled);
    assert!(err.contains("garbled.key (--sign-key), line 3"), "{err}");
    let err = load(&dir.path().join("absent.key"));
    says(&err, &["cannot read the signing key", "absent.key"]);
}

#[cfg(unix)]
#[test]
fn a_key_file_others_can_read_is_used_with_a_warning() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let files = keygen(&dir.path().join("k")).unwrap();
    std::fs::set_permissions(&files.secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut warnings = Vec::new();
    assert!(Signer::load(&files.secret, DEFAULT_VALID_FOR, &mut warnings).is_ok());
    let warnings = text(warnings);
    says(
        &warnings,
        &["can be read by other users (mode 0644)", "k.key"],
    );
}

#[test]
fn sign_writes_a_signature_beside_each_file_that_verifies_and_covers_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("first.json");
    std::fs::write(&plain, example()).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &example()).unwrap();
    let gzipped = dir.path().join("first-copy.json.gz");
    std::fs::write(&gzipped, gz.finish().unwrap()).unwrap();

    let signer = signer(1);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let signed = sign(
        &[plain.clone(), gzipped.clone()],
        &signer,
        &mut out,
        &mut err,
    );
    let (out, err) = (text(out), text(err));
    assert!(signed, "{out}{err}");
    assert!(
        out.contains(&format!(
            "signed: {}: workspace ws-first, version first-1, key {}, revision ",
            signature_path(&plain).display(),
            signer.id()
        )),
        "{out}"
    );
    for file in [&plain, &gzipped] {
        let sig = std::fs::read(signature_path(file)).unwrap();
        let envelope = Envelope::parse(&sig).unwrap();
        let verified = trusting(&signer.key.public()).verify(&envelope).unwrap();
        let sha256 = file_sha256(file).unwrap();
        let named = Named {
            workspace: "ws-first",
            version: "first-1",
            sha256: &sha256,
            key_hashes: None,
            revision: None,
        };
        verified.statement.covers(&named).unwrap();
        assert!(!verified.statement.expired(SystemTime::now()));
    }
    // Nothing but the signatures was added: no temporary file stays.
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "first-copy.json.gz",
            "first-copy.json.gz.sig",
            "first.json",
            "first.json.sig"
        ]
    );
}

#[test]
fn a_rejected_file_gets_no_signature_and_the_others_do() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("good.json"), example()).unwrap();
    std::fs::write(dir.path().join("bad.json"), b"{\"workspace_id\": 3}").unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    // A directory stands for its snapshot files.
    assert!(!sign(
        &[dir.path().to_owned()],
        &signer(1),
        &mut out,
        &mut err
    ));
    let err = text(err);
    assert!(
        err.contains("bad.json: not signed: it does not pass the checks"),
        "{err}"
    );
    assert!(!signature_path(&dir.path().join("bad.json")).exists());
    assert!(signature_path(&dir.path().join("good.json")).exists());
}

#[test]
fn a_new_signature_of_a_file_is_at_a_higher_revision_even_with_the_clock_set_back() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("first.json");
    std::fs::write(&file, example()).unwrap();
    let signer = signer(1);
    let revision = |now: SystemTime| {
        sign_file(&file, &signer, now, &mut Vec::new(), &mut Vec::new()).unwrap();
        previous_revision(&signature_path(&file), &signer)
    };
    let now = SystemTime::now();
    let first = revision(now);
    assert_eq!(first, since_epoch_ms(now));
    assert_eq!(revision(now - Duration::from_secs(3600)), first + 1);
    // Another key's signature is not ours to continue.
    assert_eq!(
        previous_revision(&signature_path(&file), &self::signer(2)),
        0
    );
}

/// A record of workspace `ws` at `revision` whose current version holds
/// one key.
fn record(revision: u64) -> WorkspaceRecord {
    WorkspaceRecord {
        workspace: "ws".to_owned(),
        revision,
        updated_at: String::new(),
        history: History::first(Version {
            key_hashes: Some(vec!["cd".repeat(32)]),
            ..Version::for_tests(0xab, "ws", "v1")
        }),
    }
}

#[test]
fn a_signature_is_stale_unless_ours_for_this_revision_with_half_its_validity_left() {
    let signer = signer(1);
    let now = SystemTime::now();
    let mut rec = record(4);
    assert_eq!(signer.stale(&rec, now).as_deref(), Some("unsigned"));

    let envelope = signer.sign_current(&mut rec, now).unwrap();
    assert_eq!(rec.history.versions[0].signature.as_ref(), Some(&envelope));
    assert_eq!(signer.stale(&rec, now), None);
    let almost_half = DEFAULT_VALID_FOR / 2 - Duration::from_secs(60);
    assert_eq!(signer.stale(&rec, now + almost_half), None);
    let past_half = DEFAULT_VALID_FOR / 2 + Duration::from_secs(60);
    let why = signer.stale(&rec, now + past_half).unwrap();
    assert!(why.starts_with("its signature expires at "), "{why}");
    let why = signer.stale(&rec, now + DEFAULT_VALID_FOR).unwrap();
    assert!(why.starts_with("its signature expired at "), "{why}");

    // The record moved on (a write that did not sign).
    rec.revision += 1;
    let why = signer.stale(&rec, now).unwrap();
    assert!(why.contains("revision \"4\", not \"5\""), "{why}");

    let other = self::signer(2);
    other.sign_current(&mut rec, now).unwrap();
    let why = signer.stale(&rec, now).unwrap();
    assert_eq!(why, format!("signed by another key, {}", other.id()));

    // Altered after signing.
    let mut altered = rec.clone();
    signer.sign_current(&mut altered, now).unwrap();
    let signature = altered.history.versions[0].signature.as_mut().unwrap();
    signature.payload = other
        .sign_current(&mut rec.clone(), now + Duration::from_secs(1))
        .unwrap()
        .payload;
    let why = signer.stale(&altered, now).unwrap();
    assert!(why.contains("does not verify"), "{why}");
}

#[test]
fn a_version_without_key_hashes_cannot_be_signed() {
    let mut rec = record(1);
    rec.history.versions[0].key_hashes = None;
    let err = signer(1)
        .sign_current(&mut rec, SystemTime::now())
        .unwrap_err();
    assert!(matches!(err, SignError::NoKeyHashes { .. }), "{err}");
    assert!(err.to_string().contains("publish its file again"), "{err}");
    assert!(rec.history.versions[0].signature.is_none());
}
