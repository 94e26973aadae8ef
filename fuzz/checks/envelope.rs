//! Any bytes as a signature file (`<snapshot>.sig`, or a manifest's
//! envelope): reading and verifying it never panics, a refusal has a kind,
//! only an envelope the trusted key really signed verifies, and an envelope
//! that parses reads back the same from its own text. Shared by the
//! `envelope` fuzz target and the seed replay in `cargo test`.

use portfolio_wire::signed::{Envelope, SecretKey, TrustedKeys};

/// The key the seeds were signed with (`SecretKey::from_seed([7; 32])`).
pub fn trusted() -> TrustedKeys {
    let mut keys = TrustedKeys::default();
    keys.add(SecretKey::from_seed([7; 32]).public());
    keys
}

pub fn check(data: &[u8]) {
    let envelope = match Envelope::parse(data) {
        Ok(envelope) => envelope,
        Err(refusal) => {
            assert_eq!(refusal.kind(), "malformed", "{refusal}");
            return;
        }
    };
    let again = Envelope::parse(&envelope.to_json()).expect("its own text parses");
    assert_eq!(again, envelope);
    match trusted().verify(&envelope) {
        Ok(verified) => {
            // Verified means signed by that key over exactly this payload.
            assert_eq!(verified.key_id, trusted().ids()[0]);
            let _ = verified.statement.expired(std::time::SystemTime::now());
        }
        Err(refusal) => assert!(!refusal.kind().is_empty()),
    }
}
