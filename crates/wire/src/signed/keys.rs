//! Key files: a publisher's secret key and the public keys replicas trust.
//!
//! Both are lines of text, like OpenSSH's: `#` comments and blank lines
//! are skipped, and each key is one line of a tag and the key in base64.
//!
//! ```text
//! # portfolio-replica public key, key id 3f2a9c0d1b4e5f60
//! portfolio-replica-ed25519 mJ4v…(44 characters)= 3f2a9c0d1b4e5f60
//! ```
//!
//! A public key file may hold several keys (a rotation trusts two); a
//! secret key file holds one. A key's id is the first 8 bytes of the
//! SHA-256 of its public key, in hex: short enough to read in a log line,
//! long enough that two keys of one fleet never share it by chance.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::{SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};

const PUBLIC_TAG: &str = "portfolio-replica-ed25519";
const SECRET_TAG: &str = "portfolio-replica-ed25519-secret";

/// Why a key file cannot be used; `what` names the file.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{what}, line {line}: {why}")]
    Line {
        what: String,
        line: usize,
        why: String,
    },
    #[error("{what} holds no key (expected a line `{PUBLIC_TAG} <base64>`)")]
    Empty { what: String },
    #[error("{what} holds {count} secret keys; a signing key file holds one")]
    Several { what: String, count: usize },
}

/// The id of a public key: hex of the first 8 bytes of its SHA-256.
pub fn key_id(public: &[u8; 32]) -> String {
    super::hex(&Sha256::digest(public)[..8])
}

/// A publisher's signing key.
pub struct SecretKey {
    pub(super) signing: SigningKey,
    pub id: String,
}

/// Shows the id only: the key itself never reaches a log.
impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretKey({})", self.id)
    }
}

impl SecretKey {
    /// The key made from 32 random bytes (the caller's: this crate reads
    /// no randomness).
    pub fn from_seed(seed: [u8; 32]) -> SecretKey {
        let signing = SigningKey::from_bytes(&seed);
        let id = key_id(signing.verifying_key().as_bytes());
        SecretKey { signing, id }
    }

    pub fn public(&self) -> PublicKey {
        PublicKey {
            key: self.signing.verifying_key(),
            id: self.id.clone(),
        }
    }

    /// The secret key file's text.
    pub fn to_text(&self) -> String {
        format!(
            "# portfolio-replica signing key, key id {}. Keep it secret: whoever holds it decides what replicas that trust it serve.\n{SECRET_TAG} {}\n",
            self.id,
            BASE64.encode(self.signing.to_bytes())
        )
    }

    /// Reads a secret key file's text.
    pub fn parse(text: &str, what: &str) -> Result<SecretKey, KeyError> {
        let keys = lines(text, what, SECRET_TAG, "a signing key")?;
        match keys.as_slice() {
            [(_, bytes)] => Ok(SecretKey::from_seed(*bytes)),
            [] => Err(KeyError::Empty {
                what: what.to_owned(),
            }),
            _ => Err(KeyError::Several {
                what: what.to_owned(),
                count: keys.len(),
            }),
        }
    }
}

/// A public key a replica may trust.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicKey {
    pub(super) key: VerifyingKey,
    pub id: String,
}

impl PublicKey {
    /// The public key file's text.
    pub fn to_text(&self) -> String {
        format!(
            "# portfolio-replica public key, key id {0}\n{PUBLIC_TAG} {1} {0}\n",
            self.id,
            BASE64.encode(self.key.as_bytes())
        )
    }
}

/// The keys a replica trusts, by id.
#[derive(Clone, Debug, Default)]
pub struct TrustedKeys(BTreeMap<String, VerifyingKey>);

impl TrustedKeys {
    /// Reads a public key file's text: one key or more.
    pub fn parse(text: &str, what: &str) -> Result<TrustedKeys, KeyError> {
        let mut keys = TrustedKeys::default();
        for (line, bytes) in lines(text, what, PUBLIC_TAG, "a public key")? {
            let key = VerifyingKey::from_bytes(&bytes).map_err(|_| KeyError::Line {
                what: what.to_owned(),
                line,
                why: "not a valid Ed25519 public key".to_owned(),
            })?;
            if key.is_weak() {
                return Err(KeyError::Line {
                    what: what.to_owned(),
                    line,
                    why: "a weak Ed25519 key (of small order), which anyone can sign for"
                        .to_owned(),
                });
            }
            keys.add(PublicKey {
                id: key_id(key.as_bytes()),
                key,
            });
        }
        if keys.0.is_empty() {
            return Err(KeyError::Empty {
                what: what.to_owned(),
            });
        }
        Ok(keys)
    }

    pub fn add(&mut self, key: PublicKey) {
        self.0.insert(key.id, key.key);
    }

    /// Every key of `other` trusted too.
    pub fn extend(&mut self, other: TrustedKeys) {
        self.0.extend(other.0);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The ids trusted, in order.
    pub fn ids(&self) -> Vec<String> {
        self.0.keys().cloned().collect()
    }

    pub(super) fn get(&self, id: &str) -> Option<&VerifyingKey> {
        self.0.get(id)
    }
}

/// The keys of the lines tagged `tag`, with their line numbers.
fn lines(
    text: &str,
    what: &str,
    tag: &str,
    kind: &str,
) -> Result<Vec<(usize, [u8; 32])>, KeyError> {
    let mut keys = Vec::new();
    for (at, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let error = |why: String| KeyError::Line {
            what: what.to_owned(),
            line: at + 1,
            why,
        };
        let mut words = line.split_whitespace();
        let found = words.next().unwrap_or_default();
        if found != tag {
            let why = match found {
                SECRET_TAG => {
                    format!("a secret key, where {kind} was expected (give the .pub file)")
                }
                PUBLIC_TAG => format!("a public key, where {kind} was expected"),
                _ => format!("expected `{tag} <base64>`, found {:?}", clip(line)),
            };
            return Err(error(why));
        }
        let encoded = words.next().unwrap_or_default();
        let bytes = BASE64
            .decode(encoded)
            .ok()
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            // The text is not repeated: it may be part of a secret key.
            .ok_or_else(|| {
                error(format!(
                    "{kind} is 32 bytes in base64; this is {} characters that are not",
                    encoded.len()
                ))
            })?;
        keys.push((at + 1, bytes));
    }
    Ok(keys)
}

/// At most 40 characters of `text`, for a message.
fn clip(text: &str) -> String {
    match text.char_indices().nth(40) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}
