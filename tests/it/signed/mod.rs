//! Signed snapshots (`--trust-key`): a replica serves only what a trusted
//! publisher signed. `dir.rs` in directory mode (`.sig` files beside the
//! snapshots), `objstore.rs` against moto; each case is also run, where it
//! says so, without verification, to show that the forged version would
//! have served.

mod demand;
mod dir;
mod fleet;
mod objstore;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use portfolio_replica::storage::Trust;
use portfolio_wire::signed::{Named, SecretKey, Statement, TrustedKeys};
use sha2::{Digest, Sha256};

pub const DAY: Duration = Duration::from_secs(86_400);

/// A key made from `n`: the same key in every test that names it.
pub fn key(n: u8) -> SecretKey {
    SecretKey::from_seed([n; 32])
}

/// Verification with the public keys of `keys`, remembering in `cache`.
pub fn trusting(keys: &[&SecretKey], cache: Option<&Path>) -> Arc<Trust> {
    let mut trusted = TrustedKeys::default();
    for key in keys {
        trusted.add(key.public());
    }
    Arc::new(Trust::new(trusted, cache).expect("trust"))
}

/// Writes `<file>.sig` for the file as it is now: a statement of its
/// workspace, version and keys (from `snapshot`), its bytes' SHA-256 and
/// `revision`, signed by `key` at `at` for `valid_for`.
pub fn sign_file(
    file: &Path,
    snapshot: &serde_json::Value,
    key: &SecretKey,
    revision: u64,
    at: SystemTime,
    valid_for: Duration,
) {
    let bytes = std::fs::read(file).expect("read the snapshot");
    let sha256 = hex(&Sha256::digest(&bytes));
    let keys: Vec<String> = snapshot["api_keys"]
        .as_array()
        .expect("api_keys")
        .iter()
        .map(|k| k["sha256"].as_str().expect("sha256").to_owned())
        .collect();
    let named = Named {
        workspace: snapshot["workspace"]["id"].as_str().expect("workspace"),
        version: snapshot["version"].as_str().expect("version"),
        sha256: &sha256,
        key_hashes: None,
        revision: None,
    };
    let envelope = Statement::new(&named, &keys, revision, at, valid_for).sign(key);
    let mut sig = file.as_os_str().to_owned();
    sig.push(".sig");
    replace(Path::new(&sig), &envelope.to_json());
}

/// Writes `path` whole by a rename, as a publisher should.
pub fn replace(path: &Path, bytes: &[u8]) {
    let temporary = path.with_extension("tmp-write");
    std::fs::write(&temporary, bytes).expect("write");
    std::fs::rename(&temporary, path).expect("rename into place");
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
