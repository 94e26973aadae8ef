//! Signed versions (docs/object-storage.md#signed-snapshots): what a
//! publisher signs and a replica checks before it loads a version.
//!
//! A [`Statement`] names everything a replica acts on: the workspace, the
//! snapshot's version, the SHA-256 of its bytes, its key hashes, a revision
//! that only grows, and an expiry. It travels in a DSSE envelope
//! ([`Envelope`], github.com/secure-systems-lab/dsse): the statement's JSON
//! as the payload, signed with Ed25519 over DSSE's pre-authentication
//! encoding, so the bytes verified are exactly the bytes parsed, whatever a
//! reader of the manifest does to its spacing. Manifest mode keeps the
//! envelope in the current version's entry; directory mode in a file
//! beside the snapshot (`<file>.sig`).
//!
//! Pure: text in, text out; the clock and the key files are the caller's.

mod keys;

use std::time::{Duration, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::Signer;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use keys::{KeyError, PublicKey, SecretKey, TrustedKeys, key_id};

use crate::delta::hex;
use crate::store::time::{Instant, utc_millis};

/// The DSSE payload type of a [`Statement`].
pub const PAYLOAD_TYPE: &str = "application/vnd.portfolio-replica.version+json";

/// How long a signature is valid by default: a week. A replica never newly
/// accepts a signature past its expiry, so this bounds how long a replayed
/// old version can fool a replica that remembers nothing (a fresh one),
/// and how long a replica can serve a frozen version unnoticed. A daily
/// `publish --refresh-signatures` re-signs what is past half its validity,
/// so every signature keeps more than three and a half days: that long to
/// notice a broken cron job (an alert fires a day before the first expiry).
pub const DEFAULT_VALID_FOR: Duration = Duration::from_secs(7 * 24 * 3600);

/// The largest signature file a replica reads.
pub const MAX_SIGNATURE_BYTES: u64 = 64 << 10;

/// At most this many signatures in one envelope: a publisher writes one,
/// two during a key rotation; more is an attack on the verifier's time.
pub const MAX_SIGNATURES: usize = 8;

/// The ending of a directory snapshot's signature file: `acme.json.sig`.
pub const SIGNATURE_SUFFIX: &str = ".sig";

/// What a signature says: this workspace may serve these bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Statement {
    pub workspace: String,
    /// The snapshot's own version (`X-Snapshot-Version`).
    pub version: String,
    /// SHA-256 of the snapshot's bytes as stored (the object, or the file),
    /// lower-case hex.
    pub sha256: String,
    /// SHA-256 over the version's API key hashes ([`keys_digest`]).
    pub keys_sha256: String,
    /// Only grows per workspace: the manifest record's revision, or in a
    /// directory the signing time in milliseconds.
    pub revision: u64,
    /// RFC 3339, UTC.
    pub signed_at: String,
    pub expires_at: String,
    /// Where the stored bytes are gzip (a manifest's object): SHA-256 of
    /// the JSON inside, which a version rebuilt from a delta must be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plain_sha256: Option<String>,
    /// A manifest's version: the workspace's own limits as its record
    /// lists them. A replica under `--trust-key` that has not read the
    /// snapshot (a memory budget) limits the workspace by these, never by
    /// the record's unsigned copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<crate::store::limits::WorkspaceLimits>,
}

/// The names a statement must match, as the manifest or the file gives them.
pub struct Named<'a> {
    pub workspace: &'a str,
    pub version: &'a str,
    pub sha256: &'a str,
    /// `None` where they are not known before the load (checked after it).
    pub key_hashes: Option<&'a [String]>,
    pub revision: Option<u64>,
}

/// One digest for a version's key hashes, whatever their order: SHA-256
/// over the sorted hex hashes, each followed by a newline. Keeps the
/// statement the same size however many keys a workspace has.
pub fn keys_digest<S: AsRef<str>>(key_hashes: &[S]) -> String {
    let mut sorted: Vec<&str> = key_hashes.iter().map(AsRef::as_ref).collect();
    sorted.sort_unstable();
    sorted.dedup();
    let mut hasher = Sha256::new();
    for hash in sorted {
        hasher.update(hash.as_bytes());
        hasher.update(b"\n");
    }
    hex(&hasher.finalize())
}

impl Statement {
    /// A statement for `named` at `revision`, valid from `now` for `valid_for`.
    pub fn new(
        named: &Named<'_>,
        key_hashes: &[String],
        revision: u64,
        now: SystemTime,
        valid_for: Duration,
    ) -> Statement {
        Statement {
            workspace: named.workspace.to_owned(),
            version: named.version.to_owned(),
            sha256: named.sha256.to_owned(),
            keys_sha256: keys_digest(key_hashes),
            revision,
            signed_at: utc_millis(now),
            expires_at: utc_millis(now + valid_for),
            plain_sha256: None,
            limits: None,
        }
    }

    /// When it stops being newly accepted; `None` if unreadable.
    pub fn expires(&self) -> Option<SystemTime> {
        Instant::parse_rfc3339(&self.expires_at).map(Instant::to_system_time)
    }

    pub fn expired(&self, now: SystemTime) -> bool {
        self.expires().is_none_or(|at| at <= now)
    }

    /// Whether it names exactly what `named` does; the first field that
    /// differs otherwise.
    pub fn covers(&self, named: &Named<'_>) -> Result<(), Refusal> {
        let differs = |field: &str, signed: &str, named: &str| {
            Err(Refusal::Mismatch(format!(
                "the signature covers {field} {signed:?}, not {named:?}"
            )))
        };
        if self.workspace != named.workspace {
            return differs("workspace", &self.workspace, named.workspace);
        }
        if self.sha256 != named.sha256 {
            return differs("sha256", &self.sha256, named.sha256);
        }
        if self.version != named.version {
            return differs("version", &self.version, named.version);
        }
        if let Some(keys) = named.key_hashes
            && self.keys_sha256 != keys_digest(keys)
        {
            return Err(Refusal::Mismatch(
                "the signature covers other API keys than the version holds".to_owned(),
            ));
        }
        if let Some(revision) = named.revision
            && self.revision != revision
        {
            return differs(
                "revision",
                &self.revision.to_string(),
                &revision.to_string(),
            );
        }
        Ok(())
    }

    /// Signs this with `key`.
    pub fn sign(&self, key: &SecretKey) -> Envelope {
        let payload = serde_json::to_vec(self).unwrap_or_default();
        let signature = key.signing.sign(&pae(PAYLOAD_TYPE, &payload));
        Envelope {
            payload: BASE64.encode(&payload),
            payload_type: PAYLOAD_TYPE.to_owned(),
            signatures: vec![EnvelopeSignature {
                keyid: key.id.clone(),
                sig: BASE64.encode(signature.to_bytes()),
            }],
        }
    }
}

/// A DSSE envelope.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Envelope {
    /// The statement's JSON, base64.
    pub payload: String,
    pub payload_type: String,
    pub signatures: Vec<EnvelopeSignature>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvelopeSignature {
    /// The signing key's id ([`key_id`]).
    pub keyid: String,
    /// The Ed25519 signature, base64.
    pub sig: String,
}

impl Envelope {
    /// Reads a signature file's text.
    pub fn parse(bytes: &[u8]) -> Result<Envelope, Refusal> {
        serde_json::from_slice(bytes)
            .map_err(|e| Refusal::Malformed(format!("not a signature envelope: {e}")))
    }

    pub fn to_json(&self) -> Vec<u8> {
        let mut text = serde_json::to_vec_pretty(self).unwrap_or_default();
        text.push(b'\n');
        text
    }
}

/// A statement whose signature verified, and the key that made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    pub statement: Statement,
    pub key_id: String,
}

/// Why a version is not accepted. Each kind is a bounded metric label.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("not signed, and --trust-key requires a signature")]
    Unsigned,
    #[error("unreadable signature: {0}")]
    Malformed(String),
    #[error("signed by key {0}, which is not trusted (--trust-key)")]
    Untrusted(String),
    #[error("the signature by key {0} does not verify: the signed statement was altered")]
    Invalid(String),
    #[error("{0}")]
    Mismatch(String),
    #[error("{0}")]
    Replayed(String),
    #[error("the signature expired at {0}; an expired signature is never newly accepted")]
    Expired(String),
}

impl Refusal {
    /// The metric label and `/snapshots` kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Refusal::Unsigned => "unsigned",
            Refusal::Malformed(_) => "malformed",
            Refusal::Untrusted(_) => "untrusted",
            Refusal::Invalid(_) => "invalid",
            Refusal::Mismatch(_) => "mismatch",
            Refusal::Replayed(_) => "replayed",
            Refusal::Expired(_) => "expired",
        }
    }

    /// Every kind, for metrics made up front.
    pub const KINDS: [&'static str; 7] = [
        "unsigned",
        "malformed",
        "untrusted",
        "invalid",
        "mismatch",
        "replayed",
        "expired",
    ];
}

impl TrustedKeys {
    /// The statement `envelope` carries, if a trusted key signed it. Only
    /// the signatures of trusted keys are tried, each trusted key once (the
    /// first signature naming it): an envelope stuffed with signatures
    /// naming a trusted key costs one verification per trusted key, not
    /// one per signature. One that verifies is enough (two keys sign
    /// during a rotation). An envelope of more than [`MAX_SIGNATURES`]
    /// signatures is refused unread. Verification is strict
    /// (`verify_strict`: no malleable or weak-key signatures).
    pub fn verify(&self, envelope: &Envelope) -> Result<Verified, Refusal> {
        if envelope.signatures.len() > MAX_SIGNATURES {
            return Err(Refusal::Malformed(format!(
                "{} signatures, more than the {MAX_SIGNATURES} an envelope may carry",
                envelope.signatures.len()
            )));
        }
        if envelope.payload_type != PAYLOAD_TYPE {
            return Err(Refusal::Malformed(format!(
                "payload type {:?}, not {PAYLOAD_TYPE}",
                envelope.payload_type
            )));
        }
        let payload = BASE64
            .decode(&envelope.payload)
            .map_err(|e| Refusal::Malformed(format!("the payload is not base64: {e}")))?;
        let message = pae(&envelope.payload_type, &payload);
        let mut failed = None;
        let mut tried: Vec<&str> = Vec::new();
        for signature in &envelope.signatures {
            let Some(key) = self.get(&signature.keyid) else {
                continue;
            };
            if tried.contains(&signature.keyid.as_str()) {
                continue;
            }
            tried.push(&signature.keyid);
            let bytes = BASE64.decode(&signature.sig).ok();
            let sig = bytes
                .as_deref()
                .and_then(|b| <&[u8; 64]>::try_from(b).ok())
                .map(ed25519_dalek::Signature::from_bytes);
            match sig.map(|sig| key.verify_strict(&message, &sig)) {
                Some(Ok(())) => {
                    let statement = serde_json::from_slice(&payload).map_err(|e| {
                        Refusal::Malformed(format!("the signed statement is not readable: {e}"))
                    })?;
                    return Ok(Verified {
                        statement,
                        key_id: signature.keyid.clone(),
                    });
                }
                _ => failed = Some(signature.keyid.clone()),
            }
        }
        match (failed, envelope.signatures.first()) {
            (Some(id), _) => Err(Refusal::Invalid(id)),
            (None, Some(other)) => Err(Refusal::Untrusted(other.keyid.clone())),
            (None, None) => Err(Refusal::Unsigned),
        }
    }
}

/// DSSE's pre-authentication encoding: what is signed, so that a payload
/// can never be taken for another type's.
fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {payload_type} {} ",
        payload_type.len(),
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

#[cfg(test)]
mod tests;
