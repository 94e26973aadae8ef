//! A build held to the signature its version was accepted with
//! (`--trust-key`): the bytes it read, hashed as it read them, and the
//! dataset it made. Every build passes here under `--trust-key`, a scan's
//! (`serve::loader::verify` re-exports these) or a load on demand's
//! (`serve::residency`), so the rule is in one place.

use crate::storage::signatures::{Refusal, Signed, loaded_as_signed};
use portfolio_domain::store::Dataset;
use portfolio_wire::manifest::short;

/// Once loaded: whether the bytes the load read, hashed as it read them
/// from the one file it opened (`sha256`), are content `signed` names: its
/// stored bytes, or (a version rebuilt from a delta, or kept uncompressed)
/// its uncompressed content. Every load under `--trust-key` passes here,
/// whatever the path (a scan, a load on demand, a delta, the cache, a
/// restart), so that nothing it did not hash can serve. No digest (`None`)
/// is a refusal too: the load was not hashed.
pub fn read(signed: &Signed, sha256: Option<std::io::Result<String>>) -> Result<(), Refusal> {
    let read = match sha256 {
        Some(Ok(read)) => read,
        Some(Err(error)) => {
            return Err(Refusal::Mismatch(format!(
                "cannot hash what was loaded: {error}"
            )));
        }
        None => return Err(Refusal::Mismatch("what was loaded was not hashed".into())),
    };
    let statement = signed.statement();
    if read == statement.sha256 || statement.plain_sha256.as_deref() == Some(read.as_str()) {
        return Ok(());
    }
    Err(Refusal::Mismatch(format!(
        "the bytes loaded have SHA-256 {}, not the signed {}",
        short(&read),
        short(&statement.sha256)
    )))
}

/// Once loaded: whether the dataset is what its signature names.
pub fn loaded(signed: &Signed, dataset: &Dataset) -> Result<(), Refusal> {
    let keys: Vec<String> = dataset
        .key_hashes
        .iter()
        .map(portfolio_domain::store::key::to_hex)
        .collect();
    loaded_as_signed(signed, &dataset.workspace_id, &dataset.version, &keys)
}

/// The message a refused version is rejected with.
pub fn message(refusal: &Refusal) -> String {
    format!("signature refused ({}): {refusal}", refusal.kind())
}
