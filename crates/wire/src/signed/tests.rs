//! Signing and verifying statements, and reading key files.

use std::time::{Duration, SystemTime};

use super::*;

fn key(n: u8) -> SecretKey {
    SecretKey::from_seed([n; 32])
}

fn trusting(keys: &[&SecretKey]) -> TrustedKeys {
    let mut trusted = TrustedKeys::default();
    for key in keys {
        trusted.add(key.public());
    }
    trusted
}

fn keys() -> Vec<String> {
    vec!["b".repeat(64), "a".repeat(64)]
}

fn statement(revision: u64) -> Statement {
    let named = Named {
        workspace: "ws-ä",
        version: "v1",
        sha256: &"0f".repeat(32),
        key_hashes: None,
        revision: None,
    };
    Statement::new(
        &named,
        &keys(),
        revision,
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
        DEFAULT_VALID_FOR,
    )
}

#[test]
fn a_signature_verifies_with_its_key_only_and_only_unaltered() {
    let (signer, other) = (key(1), key(2));
    let envelope = statement(3).sign(&signer);
    let verified = trusting(&[&signer]).verify(&envelope).unwrap();
    assert_eq!(verified.statement, statement(3));
    assert_eq!(verified.key_id, signer.id);
    // Verified through the file's text, as a replica reads it.
    let read = Envelope::parse(&envelope.to_json()).unwrap();
    assert!(trusting(&[&other, &signer]).verify(&read).is_ok());

    let refused = trusting(&[&other]).verify(&envelope).unwrap_err();
    assert_eq!(refused, Refusal::Untrusted(signer.id.clone()));
    assert_eq!(refused.kind(), "untrusted");

    // Another statement under the same signature.
    let mut forged = envelope.clone();
    forged.payload = statement(4).sign(&signer).payload;
    let refused = trusting(&[&signer]).verify(&forged).unwrap_err();
    assert_eq!(refused, Refusal::Invalid(signer.id.clone()));

    // Garbage where the signature goes, or a truncated one.
    let mut garbage = envelope.clone();
    garbage.signatures[0].sig = "AAAA".into();
    assert_eq!(
        trusting(&[&signer]).verify(&garbage).unwrap_err().kind(),
        "invalid"
    );
    let mut stripped = envelope.clone();
    stripped.signatures.clear();
    assert_eq!(
        trusting(&[&signer]).verify(&stripped),
        Err(Refusal::Unsigned)
    );
    let text = envelope.to_json();
    let refused = Envelope::parse(&text[..text.len() / 2]).unwrap_err();
    assert_eq!(refused.kind(), "malformed");
}

#[test]
fn two_signatures_pass_a_replica_that_trusts_either_key() {
    let (old, new) = (key(1), key(2));
    let mut envelope = statement(1).sign(&old);
    envelope
        .signatures
        .extend(statement(1).sign(&new).signatures);
    assert_eq!(trusting(&[&old]).verify(&envelope).unwrap().key_id, old.id);
    assert_eq!(trusting(&[&new]).verify(&envelope).unwrap().key_id, new.id);
}

#[test]
fn a_statement_covers_exactly_what_it_names() {
    let signed = statement(7);
    let sha = "0f".repeat(32);
    let keys = keys();
    let reversed: Vec<String> = keys.iter().rev().cloned().collect();
    let named = |workspace, version, sha256, key_hashes, revision| Named {
        workspace,
        version,
        sha256,
        key_hashes,
        revision,
    };
    assert!(
        signed
            .covers(&named("ws-ä", "v1", &sha, Some(&reversed), Some(7)))
            .is_ok()
    );
    assert!(
        signed
            .covers(&named("ws-ä", "v1", &sha, None, None))
            .is_ok()
    );
    let err = signed
        .covers(&named("ws-b", "v1", &sha, None, None))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the signature covers workspace \"ws-ä\", not \"ws-b\""
    );
    assert!(
        signed
            .covers(&named("ws-ä", "v2", &sha, None, None))
            .is_err()
    );
    let other = "1f".repeat(32);
    assert!(
        signed
            .covers(&named("ws-ä", "v1", &other, None, None))
            .is_err()
    );
    let moved = vec!["c".repeat(64)];
    let err = signed
        .covers(&named("ws-ä", "v1", &sha, Some(&moved), None))
        .unwrap_err();
    assert_eq!(err.kind(), "mismatch");
    assert!(err.to_string().contains("API keys"), "{err}");
    let err = signed
        .covers(&named("ws-ä", "v1", &sha, None, Some(6)))
        .unwrap_err();
    assert!(
        err.to_string().contains("revision \"7\", not \"6\""),
        "{err}"
    );
}

#[test]
fn expiry_is_read_from_the_statement() {
    let signed = statement(1);
    let signed_at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    assert_eq!(signed.expires(), Some(signed_at + DEFAULT_VALID_FOR));
    assert!(!signed.expired(signed_at));
    assert!(signed.expired(signed_at + DEFAULT_VALID_FOR));
    let unreadable = Statement {
        expires_at: "soon".into(),
        ..signed
    };
    assert!(unreadable.expired(signed_at));
}

#[test]
fn key_files_round_trip_and_bad_ones_say_which_line() {
    let secret = key(9);
    let read = SecretKey::parse(&secret.to_text(), "k").unwrap();
    assert_eq!(read.id, secret.id);
    assert_eq!(secret.id.len(), 16);
    let public = secret.public().to_text();
    let both = format!("{public}\n# the next key\n{}", key(8).public().to_text());
    let trusted = TrustedKeys::parse(&both, "keys.pub").unwrap();
    assert_eq!(trusted.ids().len(), 2);
    assert!(trusted.ids().contains(&secret.id));

    let err = TrustedKeys::parse(&secret.to_text(), "k.key").unwrap_err();
    assert_eq!(
        err.to_string(),
        "k.key, line 2: a secret key, where a public key was expected (give the .pub file)"
    );
    // A secret key file's text is never repeated in a message.
    let err = SecretKey::parse("portfolio-replica-ed25519-secret c2VjcmV0", "k").unwrap_err();
    assert!(!err.to_string().contains("c2VjcmV0"), "{err}");
    let err = TrustedKeys::parse("# nothing\n\n", "empty.pub").unwrap_err();
    assert!(
        err.to_string().starts_with("empty.pub holds no key"),
        "{err}"
    );
    let err = TrustedKeys::parse("ssh-ed25519 AAAA me@host", "id.pub").unwrap_err();
    assert!(
        err.to_string()
            .contains("line 1: expected `portfolio-replica-ed25519"),
        "{err}"
    );
    // The identity point: every signature "verifies" under it.
    let weak = format!(
        "portfolio-replica-ed25519 {}",
        BASE64.encode({
            let mut b = [0u8; 32];
            b[0] = 1;
            b
        })
    );
    let err = TrustedKeys::parse(&weak, "w.pub").unwrap_err();
    assert!(err.to_string().contains("weak"), "{err}");
}

/// An envelope stuffed with signatures costs one verification per trusted
/// key: the first signature naming a key is the one tried, and an
/// envelope of more than `MAX_SIGNATURES` is refused unread.
#[test]
fn each_trusted_key_is_tried_once_and_signatures_are_capped() {
    let signer = key(1);
    let good = statement(1).sign(&signer);
    let mut stuffed = good.clone();
    stuffed.signatures[0].sig = "AAAA".into();
    stuffed.signatures.extend(good.signatures.clone());
    assert_eq!(
        trusting(&[&signer]).verify(&stuffed),
        Err(Refusal::Invalid(signer.id.clone())),
        "a second signature naming a key tried already is not tried"
    );
    let mut many = good.clone();
    for n in 0..MAX_SIGNATURES {
        many.signatures
            .extend(statement(1).sign(&key(10 + n as u8)).signatures);
    }
    let refused = trusting(&[&signer]).verify(&many).unwrap_err();
    assert_eq!(refused.kind(), "malformed");
    assert!(refused.to_string().contains("more than"), "{refused}");
    many.signatures.truncate(MAX_SIGNATURES);
    assert!(trusting(&[&signer]).verify(&many).is_ok());
}
