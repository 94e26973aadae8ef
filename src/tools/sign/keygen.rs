//! `portfolio-replica keygen --out PATH`: a new signing key, as PATH.key
//! (the secret, readable by its owner only) and PATH.pub (the public key
//! that replicas trust).

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use portfolio_wire::signed::SecretKey;

/// Why no key was made; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum KeygenError {
    #[error(
        "{} exists already: a signing key is never written over (replicas may trust it); choose another --out, or move it away first",
        .0.display()
    )]
    Exists(PathBuf),
    #[error(
        "--out {}: give the key files' path without their ending, such as keys/publisher (for keys/publisher.key and keys/publisher.pub), not a directory",
        .0.display()
    )]
    Directory(PathBuf),
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot draw a random key from the operating system: {0}")]
    Random(getrandom::Error),
}

/// The two files `keygen --out out` writes.
#[derive(Debug)]
pub struct KeyFiles {
    pub id: String,
    pub secret: PathBuf,
    pub public: PathBuf,
}

/// Makes a key from the operating system's randomness and writes it to
/// `out`.key (created, never replaced, mode 0600) and `out`.pub.
pub fn keygen(out: &Path) -> Result<KeyFiles, KeygenError> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(KeygenError::Random)?;
    write_key(&SecretKey::from_seed(seed), out)
}

/// Writes `key` as `keygen` does.
pub(super) fn write_key(key: &SecretKey, out: &Path) -> Result<KeyFiles, KeygenError> {
    // `keys/` would make the hidden `keys/.key`.
    if out.is_dir()
        || out
            .as_os_str()
            .to_string_lossy()
            .ends_with(std::path::MAIN_SEPARATOR)
    {
        return Err(KeygenError::Directory(out.to_owned()));
    }
    let with = |ending: &str| {
        let mut path = OsString::from(out.as_os_str());
        path.push(ending);
        PathBuf::from(path)
    };
    let (secret, public) = (with(".key"), with(".pub"));
    // Both checked first, so that a .pub in the way does not leave a new
    // .key behind; creating the .key exclusively below is what decides.
    for path in [&secret, &public] {
        if path.symlink_metadata().is_ok() {
            return Err(KeygenError::Exists(path.clone()));
        }
    }
    write_new(&secret, key.to_text().as_bytes(), 0o600)?;
    if let Err(e) = write_new(&public, key.public().to_text().as_bytes(), 0o644) {
        // A secret key without its public key would only be confusing.
        let _ = std::fs::remove_file(&secret);
        return Err(e);
    }
    Ok(KeyFiles {
        id: key.id.clone(),
        secret,
        public,
    })
}

/// Creates `path` (refusing one that exists) with `mode`, and writes and
/// syncs `bytes`: the key is on disk before `keygen` says it is.
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), KeygenError> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
    #[cfg(not(unix))]
    let _ = mode;
    let failed = |source| KeygenError::Write {
        path: path.to_owned(),
        source,
    };
    let mut file: File = options.open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => KeygenError::Exists(path.to_owned()),
        _ => failed(e),
    })?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| {
            // Created here, so removed here: no half-written key stays.
            let _ = std::fs::remove_file(path);
            failed(e)
        })
}
