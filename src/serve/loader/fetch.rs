//! Step 3 of a scan, fetch: each changed entry's content onto local disk,
//! in order, on the reloader thread (a stat for a directory, a download
//! for an object store: storage IO stays sequential). Each comes back
//! ready to load, with the dataset it would replace, or with what stands
//! in the way.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant as Clock;

use std::hash::Hasher;
use std::time::{Duration, SystemTime};

use super::files::{self, Files};
use super::load::{CLAIMS_MAX_VALUE, ReadResult};
use super::verify;
use crate::storage::signatures::{Candidate, FileSigned, Listed, Refusal, Signed, Trust};
use crate::storage::{
    EntryStamp, ErrorKind, Fetch, FetchedFile, ManifestFacts, OpenFile, Remembered, SnapshotFile,
    StorageError, StorageOrigin,
};
use portfolio_domain::snapshot::{self, Loaded};
use portfolio_domain::store::key::from_hex;
use portfolio_domain::store::{Dataset, Meta};

/// An entry fetched to local disk, to be loaded.
pub struct Fetched {
    pub name: String,
    pub fingerprint: EntryStamp,
    pub local: FetchedFile,
    /// Its content, opened once: every read of the load is of this file.
    pub file: Arc<OpenFile>,
    /// When its fetch started: a load's time counts from here.
    pub started: Clock,
    /// The dataset the entry serves now: the load takes over its
    /// unchanged records.
    pub previous: Option<Arc<Dataset>>,
    /// Under `--trust-key`: its accepted signature.
    pub signed: Option<Signed>,
}

/// Why an entry was not fetched.
pub enum Unfetched {
    /// Still being written: left for a later scan rather than judged.
    Settling(String),
    /// Cannot be fetched now (storage trouble): left for the next poll.
    Failed(String, StorageError),
    /// Refused for its signature (`--trust-key`): rejected as a bad file,
    /// with what it claims where its statement vouches for that
    /// (`verify::refused_claims`). (Boxed: rare, and it would make every
    /// fetch's result as large.)
    Refused(Box<(String, EntryStamp, Refusal, Option<Dataset>)>),
}

/// Fetches each of `entries` as the iterator is advanced: the loads ask
/// for the next entry when they can take it, so a download does not wait
/// on disk long before its load.
pub fn fetch_in_order<'a>(
    origin: &'a StorageOrigin,
    files: &'a Mutex<Files>,
    entries: Vec<(String, EntryStamp)>,
    signed: &'a BTreeMap<String, Listed>,
) -> impl ExactSizeIterator<Item = Result<Fetched, Unfetched>> + 'a {
    entries
        .into_iter()
        .map(move |(name, fingerprint)| fetch(origin, files, name, fingerprint, signed))
}

/// Fetches one entry: ready to load, or what stands in the way.
fn fetch(
    origin: &StorageOrigin,
    files: &Mutex<Files>,
    name: String,
    fingerprint: EntryStamp,
    signed: &BTreeMap<String, Listed>,
) -> Result<Fetched, Unfetched> {
    let started = Clock::now();
    // What the manifest names is judged before it is downloaded.
    let listed = verify::listed(origin.trust(), &name, signed);
    if let Some(Err(refusal)) = listed {
        let claims = signed.get(&name).and_then(|listed| {
            let read = || listed_claims(&name, &fingerprint, listed);
            verify::refused_claims(origin.trust(), Candidate::Listed(listed), read)
        });
        let refused = (name, fingerprint, refusal, claims);
        return Err(Unfetched::Refused(Box::new(refused)));
    }
    let plain = match &listed {
        Some(Ok(signed)) => signed.statement().plain_sha256.as_deref(),
        _ => None,
    };
    match origin.fetch(&name, &fingerprint, plain) {
        Fetch::Ready(local) => {
            let file = match crate::serve::build::opened(&local) {
                Ok(file) => file,
                Err(error) => {
                    let error = StorageError::new(
                        ErrorKind::Other,
                        format!("cannot open {}: {error}", local.path.display()),
                    );
                    origin.loaded(&name, local, false);
                    return Err(Unfetched::Failed(name, error));
                }
            };
            let verdict = listed
                .or_else(|| verify::fetched(origin.trust(), &name, &fingerprint, &local))
                .map(|v| v.and_then(|signed| verify::rebuilt(signed, &local)));
            let signed = match verdict {
                Some(Err(refusal)) => {
                    // A directory's file: its claims read from it, believed
                    // only as far as its signed statement vouches for them.
                    let claims = local.signed.as_ref().and_then(|file_signed| {
                        let read = || {
                            let opened = SnapshotFile::opened(file, &local.path, &local.label);
                            snapshot::claims(&local.label, &opened, CLAIMS_MAX_VALUE)
                        };
                        verify::refused_claims(origin.trust(), Candidate::File(file_signed), read)
                    });
                    origin.loaded(&name, local, false);
                    let refused = (name, fingerprint, refusal, claims);
                    return Err(Unfetched::Refused(Box::new(refused)));
                }
                verdict => verdict.and_then(Result::ok),
            };
            Ok(Fetched {
                previous: files::lock(files)
                    .get(&name)
                    .and_then(|e| e.dataset().cloned()),
                name,
                fingerprint,
                local,
                file,
                started,
                signed,
            })
        }
        Fetch::Settling => Err(Unfetched::Settling(name)),
        Fetch::Failed(error) => Err(Unfetched::Failed(name, error)),
    }
}

/// Under a memory budget: the entries of `entries` whose current version
/// the manifest describes (`claims`) are not fetched. Each becomes, as if
/// read, a hollow dataset of what it claims, which a request loads
/// (`resident.rs`, `demand.rs`). Returns the entries still to fetch, and
/// those.
///
/// Under `--trust-key`, only a version whose signature is accepted (and
/// covers the claimed keys) is taken from its claims; any other is fetched,
/// and there refused.
pub fn listed(
    entries: Vec<(String, EntryStamp)>,
    claims: &BTreeMap<String, ManifestFacts>,
    origin: &StorageOrigin,
    signed: &BTreeMap<String, Listed>,
) -> (Vec<(String, EntryStamp)>, Vec<ReadResult>) {
    let mut to_fetch = Vec::new();
    let mut listed = Vec::new();
    for (name, fingerprint) in entries {
        let verdict = verify::listed(origin.trust(), &name, signed);
        let accepted = match verdict {
            None => Some(None),
            Some(Ok(signed)) => Some(Some(signed)),
            Some(Err(_)) => None,
        };
        let hollow = accepted.and_then(|signed| {
            // Under --trust-key, the limits are the signed ones: the
            // record's own copy is not covered by the signature.
            let claims = claims.get(&name)?;
            let limits = match &signed {
                Some(signed) => signed.statement().limits,
                None => claims.limits,
            };
            let dataset = hollow(&name, &fingerprint, claims, limits)?;
            Some((dataset, signed))
        });
        match hollow {
            Some((dataset, signed)) => {
                listed.push(read_hollow(name, fingerprint, dataset, Vec::new(), signed));
            }
            None => to_fetch.push((name, fingerprint)),
        }
    }
    (to_fetch, listed)
}

/// Under a memory budget, at the first scan after a restart with
/// `--cache-dir`: the entries of `entries` whose file still holds what a
/// private copy validated before (`recalled`) are not fetched. Each
/// becomes, as if read, the hollow dataset of what was remembered, whose
/// records a request loads from that copy. Returns the entries still to
/// fetch, and those.
///
/// Under `--trust-key`, only a version whose remembered envelope the keys
/// trusted now accept again, for what was remembered of it, is recalled
/// (its `.sig` unchanged: the stamp covers it); any other is fetched, and
/// verified there. Its copy is hashed against that signature when a
/// request loads it.
pub fn recalled(
    entries: Vec<(String, EntryStamp)>,
    recalled: &BTreeMap<String, Remembered>,
    trust: &Trust,
) -> (Vec<(String, EntryStamp)>, Vec<ReadResult>) {
    let mut to_fetch = Vec::new();
    let mut hollow = Vec::new();
    for (name, stamp) in entries {
        let memory = recalled.get(&name).filter(|memory| memory.holds(&stamp));
        match memory.and_then(|memory| recall(memory, trust)) {
            Some((dataset, warnings, signed)) => {
                hollow.push(read_hollow(name, stamp, dataset, warnings, signed));
            }
            None => to_fetch.push((name, stamp)),
        }
    }
    (to_fetch, hollow)
}

/// What `memory` recalls: its hollow dataset, warnings, and under
/// `--trust-key` the signature accepted again for it; `None` if it cannot
/// stand in for a read.
fn recall(memory: &Remembered, trust: &Trust) -> Option<(Dataset, Vec<String>, Option<Signed>)> {
    let dataset = memory.hollow()?;
    let signed = if trust.enabled() {
        let file = FileSigned {
            envelope: Ok(memory.envelope()?.clone()),
            sha256: None,
        };
        let signed = trust
            .judge(Candidate::File(&file), SystemTime::now())?
            .ok()?;
        verify::loaded(&signed, &dataset).ok()?;
        Some(signed)
    } else {
        None
    };
    Some((dataset, memory.warnings.clone(), signed))
}

/// A hollow dataset taken as what reading `name` at `stamp` gave.
fn read_hollow(
    name: String,
    stamp: EntryStamp,
    dataset: Dataset,
    warnings: Vec<String>,
    signed: Option<Signed>,
) -> ReadResult {
    ReadResult {
        bytes: match &stamp {
            EntryStamp::Object(object) => object.size,
            EntryStamp::File(file) => file.len,
        },
        name,
        fingerprint: stamp,
        result: Ok(Loaded { dataset, warnings }),
        elapsed: Duration::ZERO,
        source: None,
        need: 0,
        refused: None,
        claims: None,
        signed,
        refusal: None,
    }
}

/// What a manifest lists of the workspace `name` at `fingerprint` (its
/// version and key hashes) as a hollow dataset; `None` where it lists no
/// key hashes.
fn listed_claims(name: &str, fingerprint: &EntryStamp, listed: &Listed) -> Option<Dataset> {
    let claims = ManifestFacts {
        version: listed.version.clone(),
        key_hashes: listed.key_hashes.clone()?,
        limits: None,
    };
    hollow(name, fingerprint, &claims, None)
}

/// What `claims` say of the workspace `name` at `fingerprint`, as a
/// hollow dataset limited by `limits`; `None` if a key hash is not one.
fn hollow(
    name: &str,
    fingerprint: &EntryStamp,
    claims: &ManifestFacts,
    limits: Option<portfolio_domain::store::limits::WorkspaceLimits>,
) -> Option<Dataset> {
    let key_hashes = claims
        .key_hashes
        .iter()
        .map(|hex| from_hex(hex))
        .collect::<Option<Vec<_>>>()?;
    // The object's identity stands for its content until it is read.
    let mut hasher = rustc_hash::FxHasher::default();
    if let EntryStamp::Object(object) = fingerprint {
        hasher.write(object.tag.as_bytes());
    }
    Some(Dataset::hollow_of(Meta {
        workspace_id: name.to_owned(),
        workspace_name: None,
        version: claims.version.clone(),
        key_hashes,
        limits,
        content_hash: hasher.finish(),
    }))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::storage::signatures::{Named, Statement, Trust, TrustedKeys};
    use crate::storage::{Directory, ObjectVersion};
    use portfolio_domain::store::limits::WorkspaceLimits;
    use portfolio_wire::signed::SecretKey;

    fn limits(rate: u32) -> Option<WorkspaceLimits> {
        Some(WorkspaceLimits {
            rate_per_second: Some(rate),
            ..WorkspaceLimits::default()
        })
    }

    /// Under --trust-key a workspace listed from a manifest is limited by
    /// the limits its accepted statement names; the record's own copy,
    /// which no signature covers, is ignored. Without it, the copy is all
    /// there is.
    #[test]
    fn a_listed_workspace_is_limited_by_its_signed_limits_not_the_records_copy() {
        let key = SecretKey::from_seed([3; 32]);
        let key_hash = "ab".repeat(32);
        let named = Named {
            workspace: "ws",
            version: "v1",
            sha256: &"cd".repeat(32),
            key_hashes: Some(std::slice::from_ref(&key_hash)),
            revision: Some(2),
        };
        let day = Duration::from_secs(86_400);
        let mut statement = Statement::new(
            &named,
            std::slice::from_ref(&key_hash),
            2,
            SystemTime::now(),
            day,
        );
        statement.limits = limits(5);
        let listed = Listed {
            envelope: Some(statement.sign(&key)),
            workspace: "ws".into(),
            version: "v1".into(),
            sha256: "cd".repeat(32),
            key_hashes: Some(vec![key_hash.clone()]),
            revision: Some(2),
        };
        // The record's copy, edited by whoever can write the bucket.
        let claims = ManifestFacts {
            version: "v1".into(),
            key_hashes: vec![key_hash],
            limits: limits(1_000_000),
        };
        let fingerprint = EntryStamp::Object(ObjectVersion {
            key: "p/objects/ws.json.gz".into(),
            tag: "cd".repeat(32),
            size: 10,
            written: None,
        });
        let entries = vec![("ws".to_owned(), fingerprint)];
        let signed = BTreeMap::from([("ws".to_owned(), listed)]);
        let claims = BTreeMap::from([("ws".to_owned(), claims)]);
        let dir = tempfile::tempdir().unwrap();
        let limited_by = |trust: Option<Arc<Trust>>| {
            let mut origin = StorageOrigin::new(Directory::open(dir.path()).unwrap());
            if let Some(trust) = trust {
                origin = origin.trusting(trust);
            }
            let (to_fetch, read) = super::listed(entries.clone(), &claims, &origin, &signed);
            assert!(to_fetch.is_empty());
            read[0].result.as_ref().unwrap().dataset.limits
        };
        let mut keys = TrustedKeys::default();
        keys.add(key.public());
        let trust = Arc::new(Trust::new(keys, None).unwrap());
        assert_eq!(limited_by(Some(trust)), limits(5));
        assert_eq!(limited_by(None), limits(1_000_000));
    }

    /// A manifest's version refused as replayed (a revision below one
    /// accepted) still says which keys are its workspace's, since its
    /// statement is authentic: they answer 503. Key hashes the manifest
    /// lists beyond what the statement names are not believed, nor is an
    /// entry signed by a key this replica does not trust.
    #[test]
    fn a_replayed_listed_version_claims_only_the_keys_its_statement_names() {
        let signer = SecretKey::from_seed([4; 32]);
        let key_hash = "ab".repeat(32);
        let day = Duration::from_secs(86_400);
        let listed_at = |revision: u64, keys: Vec<String>, by: &SecretKey| {
            let sha256 = format!("{revision:064x}");
            let named = Named {
                workspace: "ws",
                version: "v1",
                sha256: &sha256,
                key_hashes: None,
                revision: Some(revision),
            };
            let statement = Statement::new(
                &named,
                std::slice::from_ref(&key_hash),
                revision,
                SystemTime::now(),
                day,
            );
            Listed {
                envelope: Some(statement.sign(by)),
                workspace: "ws".into(),
                version: "v1".into(),
                sha256,
                key_hashes: Some(keys),
                revision: Some(revision),
            }
        };
        let mut keys = TrustedKeys::default();
        keys.add(signer.public());
        let trust = Arc::new(Trust::new(keys, None).unwrap());
        let newer = listed_at(3, vec![key_hash.clone()], &signer);
        let accepted = trust
            .judge(Candidate::Listed(&newer), SystemTime::now())
            .unwrap();
        trust.published([&accepted.unwrap()]);

        let dir = tempfile::tempdir().unwrap();
        let origin = StorageOrigin::new(Directory::open(dir.path()).unwrap()).trusting(trust);
        let files = Mutex::new(Files::new());
        let fingerprint = EntryStamp::Object(ObjectVersion {
            key: "p/objects/ws.json.gz".into(),
            tag: "cd".repeat(32),
            size: 10,
            written: None,
        });
        let claimed = |listed: Listed| {
            let signed = BTreeMap::from([("ws".to_owned(), listed)]);
            match super::fetch(&origin, &files, "ws".into(), fingerprint.clone(), &signed) {
                Err(Unfetched::Refused(refused)) => {
                    let (_, _, refusal, claims) = *refused;
                    (refusal.kind(), claims)
                }
                _ => panic!("refused"),
            }
        };
        let (kind, claims) = claimed(listed_at(2, vec![key_hash.clone()], &signer));
        assert_eq!(kind, "replayed");
        let claims = claims.expect("claims");
        assert!(claims.is_refused());
        assert_eq!(claims.workspace_id, "ws");
        assert_eq!(claims.key_hashes, [from_hex(&key_hash).unwrap()]);
        let more = vec![key_hash.clone(), "ef".repeat(32)];
        // (Refused as a mismatch first: the manifest names other keys.)
        assert!(claimed(listed_at(2, more, &signer)).1.is_none());
        let stranger = SecretKey::from_seed([5; 32]);
        let signed = BTreeMap::from([(
            "ws".to_owned(),
            listed_at(2, vec![key_hash.clone()], &stranger),
        )]);
        match super::fetch(&origin, &files, "ws".into(), fingerprint.clone(), &signed) {
            Err(Unfetched::Refused(refused)) => assert!(refused.3.is_none()),
            _ => panic!("refused"),
        }
    }
}
