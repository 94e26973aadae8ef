//! The verdicts of `--trust-key`, and what is remembered across restarts.

use std::time::{Duration, SystemTime};

use portfolio_wire::signed::SecretKey;

use super::*;

const DAY: Duration = Duration::from_secs(86_400);

fn key() -> SecretKey {
    SecretKey::from_seed([7; 32])
}

fn trusting(dir: Option<&Path>) -> Trust {
    let mut keys = TrustedKeys::default();
    keys.add(key().public());
    Trust::new(keys, dir).unwrap()
}

/// The manifest's entry for `sha` at `revision`, signed at `at`.
fn listed(sha: &str, revision: u64, at: SystemTime) -> Listed {
    let keys = vec!["ab".repeat(32)];
    let named = Named {
        workspace: "ws",
        version: "v",
        sha256: sha,
        key_hashes: None,
        revision: None,
    };
    let statement = Statement::new(&named, &keys, revision, at, 7 * DAY);
    Listed {
        envelope: Some(statement.sign(&key())),
        workspace: "ws".into(),
        version: "v".into(),
        sha256: sha.into(),
        key_hashes: Some(keys),
        revision: Some(revision),
    }
}

fn verdict(trust: &Trust, listed: &Listed, now: SystemTime) -> Result<Signed, Refusal> {
    trust
        .judge(Candidate::Listed(listed), now)
        .expect("verifying")
}

#[test]
fn nothing_is_judged_without_keys() {
    let now = SystemTime::now();
    assert!(
        Trust::off()
            .judge(Candidate::Listed(&listed("a", 1, now)), now)
            .is_none()
    );
}

#[test]
fn older_revisions_and_other_content_at_one_revision_are_replays() {
    let now = SystemTime::now();
    let trust = trusting(None);
    let second = verdict(&trust, &listed("b", 2, now), now).unwrap();
    trust.published([&second]);
    let refused = verdict(&trust, &listed("a", 1, now), now).unwrap_err();
    assert_eq!(refused.kind(), "replayed");
    assert!(
        refused.to_string().contains("older than revision 2"),
        "{refused}"
    );
    let refused = verdict(&trust, &listed("c", 2, now), now).unwrap_err();
    assert!(refused.to_string().contains("other content"), "{refused}");
    // A rollback: a new revision of old content.
    assert!(verdict(&trust, &listed("a", 3, now), now).is_ok());
}

#[test]
fn an_expired_signature_is_never_newly_accepted_but_keeps_what_serves() {
    let signed_at = SystemTime::now() - 8 * DAY;
    let now = SystemTime::now();
    let trust = trusting(None);
    let refused = verdict(&trust, &listed("a", 1, signed_at), now).unwrap_err();
    assert_eq!(refused.kind(), "expired");
    // Accepted while valid, then expired: still the version accepted.
    let accepted = verdict(&trust, &listed("a", 1, signed_at), signed_at).unwrap();
    trust.published([&accepted]);
    assert!(verdict(&trust, &listed("a", 1, signed_at), now).is_ok());
}

#[test]
fn unsigned_and_altered_candidates_are_refused() {
    let now = SystemTime::now();
    let trust = trusting(None);
    let mut unsigned = listed("a", 1, now);
    unsigned.envelope = None;
    assert_eq!(
        verdict(&trust, &unsigned, now).unwrap_err(),
        Refusal::Unsigned
    );
    let mut moved = listed("a", 1, now);
    moved.key_hashes = Some(vec!["cd".repeat(32)]);
    assert_eq!(verdict(&trust, &moved, now).unwrap_err().kind(), "mismatch");
    let mut forged = listed("a", 1, now);
    forged.sha256 = "f".into();
    assert_eq!(
        verdict(&trust, &forged, now).unwrap_err().kind(),
        "mismatch"
    );
    let mut renumbered = listed("a", 1, now);
    renumbered.revision = Some(5);
    assert_eq!(
        verdict(&trust, &renumbered, now).unwrap_err().kind(),
        "mismatch"
    );
}

#[test]
fn what_was_accepted_is_remembered_in_the_cache_dir() {
    let dir = tempfile::tempdir().unwrap();
    let now = SystemTime::now();
    let trust = trusting(Some(dir.path()));
    assert!(trust.remembers());
    let accepted = verdict(&trust, &listed("b", 2, now), now).unwrap();
    trust.published([&accepted]);
    trust.persist();
    drop(trust);

    let restarted = trusting(Some(dir.path()));
    let refused = verdict(&restarted, &listed("a", 1, now), now).unwrap_err();
    assert_eq!(refused.kind(), "replayed");
    // What a restart restores from the cache, storage unreachable.
    let restored = restarted.accepted_as("ws", "b").unwrap();
    assert_eq!(restored.revision, Some(2));
    assert!(verdict(&restarted, &restored, now + 30 * DAY).is_ok());
    assert!(restarted.accepted_as("ws", "a").is_none());

    // A torn entry beside it is not remembered; the good one still is.
    std::fs::write(dir.path().join(ACCEPTED_DIR).join("x.json"), b"{").unwrap();
    let restarted = Trust::new(TrustedKeys::default(), Some(dir.path())).unwrap();
    assert!(restarted.accepted_as("ws", "b").is_some());
}

#[test]
fn a_files_signature_is_read_beside_it_and_covers_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ws.json");
    std::fs::write(&file, b"{}").unwrap();
    let read = read_file_signature(&file).unwrap();
    assert_eq!(read.envelope.unwrap_err(), Refusal::Unsigned);
    let sha256 = portfolio_domain::store::key::to_hex(&Sha256::digest(b"{}").into());
    assert_eq!(read.sha256.as_deref(), Some(sha256.as_str()));

    let named = Named {
        workspace: "ws",
        version: "v",
        sha256: &sha256,
        key_hashes: None,
        revision: None,
    };
    let now = SystemTime::now();
    let envelope = Statement::new(&named, &[], 1, now, DAY).sign(&key());
    std::fs::write(dir.path().join("ws.json.sig"), envelope.to_json()).unwrap();
    let trust = trusting(None);
    let read = read_file_signature(&file).unwrap();
    assert!(trust.judge(Candidate::File(&read), now).unwrap().is_ok());

    std::fs::write(&file, b"{ }").unwrap();
    let read = read_file_signature(&file).unwrap();
    let refused = trust
        .judge(Candidate::File(&read), now)
        .unwrap()
        .unwrap_err();
    assert_eq!(refused.kind(), "mismatch");
    std::fs::write(dir.path().join("ws.json.sig"), b"garbage").unwrap();
    let read = read_file_signature(&file).unwrap();
    assert_eq!(read.envelope.unwrap_err().kind(), "malformed");
}

/// A FIFO named like a signature is refused at once, not waited on.
#[test]
fn a_fifo_named_like_a_signature_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ws.json");
    std::fs::write(&file, b"{}").unwrap();
    let sig = dir.path().join("ws.json.sig");
    let path = std::ffi::CString::new(sig.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string; mkfifo only creates a file.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    let refused = read_signature(&file).unwrap_err();
    assert_eq!(refused.kind(), "malformed", "{refused}");
    assert!(
        refused.to_string().contains("not a regular file"),
        "{refused}"
    );
}

/// A torn or empty entry of what was accepted does not stop the start: it
/// is not remembered (and said so), and the others still are.
#[test]
fn a_torn_entry_of_what_was_accepted_is_forgotten_not_fatal() {
    let cache = tempfile::tempdir().unwrap();
    let trust = trusting(Some(cache.path()));
    let signed = |workspace: &str| {
        let named = Named {
            workspace,
            version: "v",
            sha256: &"ab".repeat(32),
            key_hashes: None,
            revision: Some(3),
        };
        let envelope = Statement::new(&named, &[], 3, SystemTime::now(), DAY).sign(&key());
        let listed = Listed {
            envelope: Some(envelope),
            workspace: workspace.into(),
            version: "v".into(),
            sha256: "ab".repeat(32),
            key_hashes: None,
            revision: Some(3),
        };
        trust
            .judge(Candidate::Listed(&listed), SystemTime::now())
            .unwrap()
            .unwrap()
    };
    let (kept, torn) = (signed("ws-kept"), signed("ws-torn"));
    trust.published([&kept]);
    trust.persist();
    trust.published([&torn]);
    trust.persist();
    // The second batch torn by a crash: the first is still remembered.
    let dir = cache.path().join(ACCEPTED_DIR);
    let mut journal: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    journal.sort();
    assert_eq!(journal.len(), 2, "one file per batch: {journal:?}");
    std::fs::write(&journal[1], b"[{\"workspace\":").unwrap();
    let again = trusting(Some(cache.path()));
    assert!(again.accepted_as("ws-kept", &"ab".repeat(32)).is_some());
    assert!(again.accepted_as("ws-torn", &"ab".repeat(32)).is_none());
    // And the start compacted what it read into one file.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    let once_more = trusting(Some(cache.path()));
    assert!(once_more.accepted_as("ws-kept", &"ab".repeat(32)).is_some());
}

/// One file per batch, compacted into one every 64 batches: the journal
/// does not grow with the scans.
#[test]
fn the_journal_of_what_was_accepted_is_compacted() {
    let cache = tempfile::tempdir().unwrap();
    let trust = trusting(Some(cache.path()));
    let now = SystemTime::now();
    for revision in 1..=70 {
        let accepted = verdict(&trust, &listed("a", revision, now), now).unwrap();
        trust.published([&accepted]);
        trust.persist();
    }
    let files = std::fs::read_dir(cache.path().join(ACCEPTED_DIR))
        .unwrap()
        .count();
    assert!(files <= 8, "{files} files after 70 batches");
    let restarted = trusting(Some(cache.path()));
    let refused = verdict(&restarted, &listed("b", 69, now), now).unwrap_err();
    assert_eq!(refused.kind(), "replayed");
}
