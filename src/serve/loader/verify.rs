//! `--trust-key` in the scan: the verdict on each changed entry, before it
//! is downloaded where the manifest names it and before it is loaded in
//! any case (`storage::signatures` judges; this says when, and what follows).
//! A refused version is rejected like a bad file: what served keeps
//! serving, the refusal is logged, counted and shown in `/snapshots`.
//! Also: a newer signature of the content that serves (a re-signing), and
//! serving versions whose signature expired.

use std::collections::BTreeMap;
use std::time::SystemTime;

use super::files::{FileEntry, Files};
use crate::metrics::{Expiries, Metrics};
pub use crate::serve::build::signed::{loaded, message, read};
use crate::storage::signatures::{
    Candidate, Listed, Refusal, Signed, Statement, Trust, keys_digest,
};
use crate::storage::{EntryStamp, FetchedFile, Listing};
use portfolio_domain::store::Dataset;
use portfolio_domain::store::time::Instant;
use portfolio_wire::manifest::short;
use portfolio_wire::status::SignatureStatus;

/// A verdict: `None` when nothing is verified.
pub type Verdict = Option<Result<Signed, Refusal>>;

/// Before fetching: the verdict on what the manifest lists for `name`, so
/// that a refused version is never downloaded. `None` also for an entry
/// the manifest does not describe (a directory's file: judged once
/// fetched).
pub fn listed(trust: &Trust, name: &str, signed: &BTreeMap<String, Listed>) -> Verdict {
    trust.judge(Candidate::Listed(signed.get(name)?), SystemTime::now())
}

/// Once fetched: the verdict on a directory's file (its signature file
/// and its bytes), or on a version restored from the cache (judged on the
/// signature it was accepted with). Anything else is unsigned: a prefix
/// without a manifest has no signatures.
pub fn fetched(
    trust: &Trust,
    name: &str,
    fingerprint: &EntryStamp,
    local: &FetchedFile,
) -> Verdict {
    if !trust.enabled() {
        return None;
    }
    let now = SystemTime::now();
    if let Some(file) = &local.signed {
        return trust.judge(Candidate::File(file), now);
    }
    let restored = match fingerprint {
        EntryStamp::Object(object) => trust.accepted_as(name, &object.tag),
        EntryStamp::File(_) => None,
    };
    match restored {
        Some(listed) => trust.judge(Candidate::Listed(&listed), now),
        None => Some(Err(Refusal::Unsigned)),
    }
}

/// Once fetched and judged: a version rebuilt from a delta (or kept so)
/// must be the content its signature names, uncompressed.
pub fn rebuilt(signed: Signed, local: &FetchedFile) -> Result<Signed, Refusal> {
    match (&local.plain, &signed.statement().plain_sha256) {
        (Some((_, rebuilt)), Some(named)) if rebuilt != named => Err(Refusal::Mismatch(format!(
            "rebuilt from a delta as content {}, not the signed {}",
            short(rebuilt),
            short(named)
        ))),
        (Some(_), None) => Err(Refusal::Mismatch(
            "rebuilt from a delta, but the signature names no uncompressed content".to_owned(),
        )),
        _ => Ok(signed),
    }
}

/// What a version refused for its signature claims, as a refused hollow
/// dataset (`Dataset::refused`), so that its keys are told the workspace
/// is unavailable (503) rather than that they are wrong (401), and it
/// takes part in conflicts as a version refused for memory does. Only
/// where a trusted key signed its statement (a replayed or an expired one:
/// only its revision or expiry is refused), and only if what `read` gives
/// (the file's claims, or the manifest's) is that statement's workspace
/// with exactly the keys it names (`keys_sha256`): a writer of the storage
/// must not turn any key's 401 into a 503. `read` is not called otherwise.
pub fn refused_claims(
    trust: &Trust,
    claim: Candidate<'_>,
    read: impl FnOnce() -> Option<Dataset>,
) -> Option<Dataset> {
    let statement = trust.authentic(claim)?;
    vouched(&statement, read()?)
}

/// `claims` as a refused version's (`Dataset::refused`) if `statement`
/// vouches for them: its workspace, with exactly the keys it names.
pub fn vouched(statement: &Statement, claims: Dataset) -> Option<Dataset> {
    let keys: Vec<String> = claims
        .key_hashes
        .iter()
        .map(portfolio_domain::store::key::to_hex)
        .collect();
    let named =
        claims.workspace_id == statement.workspace && keys_digest(&keys) == statement.keys_sha256;
    named.then(|| claims.refused())
}

/// What `/snapshots` shows of an accepted signature.
pub fn status(signed: &Signed, now: SystemTime) -> SignatureStatus {
    let statement = signed.statement();
    SignatureStatus {
        key_id: signed.verified.key_id.clone(),
        revision: statement.revision,
        signed_at: statement.signed_at.clone(),
        expires_at: statement.expires_at.clone(),
        expired: statement.expired(now),
    }
}

/// Entries whose content has not changed but whose manifest signature may
/// have (a publisher re-signed it, or someone stripped or replaced its
/// signature), judged without reloading what serves:
/// - content that was refused is judged again, and read again once its
///   verdict turns (it was signed since): returned, to be read;
/// - for the content that serves, a new signature accepted is remembered;
///   one refused is shown and counted once, and the version keeps serving
///   on the signature it was accepted with.
///
/// An idle scan stops before settling unless this says it changed a
/// state that conflicts are decided on ([`Resigned::changed`]).
pub fn resigned(
    files: &mut Files,
    present: &Listing,
    trust: &Trust,
    metrics: &Metrics,
) -> Resigned {
    let mut resigned = Resigned::default();
    if !trust.enabled() {
        return resigned;
    }
    let reread = &mut resigned.reread;
    let mut accepted = Vec::new();
    for (name, listed) in &present.signed {
        let Some(entry) = files.get_mut(name) else {
            continue;
        };
        let unchanged = match (entry.fingerprint(), present.entries.get(name)) {
            (Some(had), Some(Ok(listed))) => had == listed,
            _ => false,
        };
        if !unchanged {
            continue;
        }
        if entry.status.refused.is_some() {
            match trust.judge(Candidate::Listed(listed), SystemTime::now()) {
                Some(Ok(_)) => {
                    entry.read_again();
                    reread.push(name.clone());
                }
                Some(Err(refusal)) => resigned.changed |= refuse(name, entry, &refusal, metrics),
                None => {}
            }
            continue;
        }
        let (Some(dataset), Some(signed)) = (entry.dataset(), &entry.signed) else {
            continue;
        };
        // The same signature of the same claims: nothing to judge. (The
        // same signature of other claims, e.g. keys or a revision edited in
        // the record, is judged, and refused.)
        let same = listed.envelope.as_ref() == Some(&signed.envelope)
            && signed.statement().covers(&listed.named()).is_ok();
        if same {
            continue;
        }
        let verdict = trust
            .judge(Candidate::Listed(listed), SystemTime::now())
            .unwrap_or(Err(Refusal::Unsigned))
            .and_then(|signed| loaded(&signed, dataset).map(|()| signed));
        match verdict {
            Ok(signed) => {
                tracing::info!(
                    file = %name,
                    revision = signed.statement().revision,
                    expires_at = %signed.statement().expires_at,
                    key_id = %signed.verified.key_id,
                    "serving version re-signed"
                );
                entry.status.signature = Some(status(&signed, SystemTime::now()));
                entry.expiry_logged = false;
                if entry.status.refused.is_some() {
                    entry.status.error = None;
                    entry.status.failed_at = None;
                    entry.status.refused = None;
                }
                entry.signed = Some(signed.clone());
                accepted.push(signed);
            }
            Err(refusal) => resigned.changed |= refuse(name, entry, &refusal, metrics),
        }
    }
    // A serving version re-signed may have had its refusal cleared: its
    // claim counts as current again.
    resigned.changed |= !accepted.is_empty();
    trust.published(&accepted);
    resigned
}

/// What [`resigned`] found.
#[derive(Default)]
pub struct Resigned {
    /// Refused content whose verdict turned: to be read again.
    pub reread: Vec<String>,
    /// An entry's error or signature changed: a refusal shown (its claim
    /// then counts as an older version's in conflicts) or a signature
    /// accepted (to remember on disk). The scan then settles.
    pub changed: bool,
}

/// Shows, logs and counts a refusal of `entry`'s newest content, once for
/// the same reason; whether it was new.
fn refuse(name: &str, entry: &mut FileEntry, refusal: &Refusal, metrics: &Metrics) -> bool {
    let message = message(refusal);
    if entry.status.error.as_ref() == Some(&message) {
        return false;
    }
    super::files::log_rejected(name, entry, &message);
    metrics.signature_refused(refusal.kind());
    entry.status.fail(message);
    entry.status.refused = Some(refusal.kind().into());
    true
}

/// Logs, once each, the serving versions whose signature has expired since
/// the last look, and counts them for `/metrics`.
pub fn expiries(files: &mut Files, now: SystemTime) -> Expiries {
    let mut expiries = Expiries::default();
    for (name, entry) in files.iter_mut() {
        let Some(signed) = entry.signed.as_ref().filter(|_| entry.dataset().is_some()) else {
            continue;
        };
        let statement = signed.statement();
        if let Some(at) = Instant::parse_rfc3339(&statement.expires_at) {
            let secs = at
                .to_system_time()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            expiries.earliest = Some(expiries.earliest.map_or(secs, |e: f64| e.min(secs)));
        }
        if !statement.expired(now) {
            continue;
        }
        expiries.expired += 1;
        if let Some(status) = &mut entry.status.signature {
            status.expired = true;
        }
        if !entry.expiry_logged {
            entry.expiry_logged = true;
            tracing::warn!(
                file = %name,
                workspace = %statement.workspace,
                version = %statement.version,
                revision = statement.revision,
                expired_at = %statement.expires_at,
                "the serving version's signature has expired; it keeps serving, but no newer signed version has arrived (re-sign with publish --refresh-signatures, or look for withheld updates)"
            );
        }
    }
    expiries
}
