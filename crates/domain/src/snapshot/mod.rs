//! The snapshot file format (docs/snapshot-format.md): the wire types,
//! parsing and validation, and rendering records as the API serves them.
//!
//! A [`Source`] in, a [`Loaded`] dataset or one [`SnapshotError`] out. The
//! parse streams: each record is checked and handed to the store's
//! [`Builder`] as soon as it is read. It opens no file and no connection
//! (a `Source` is the caller's: the server's storage layer gives a file),
//! and a large file's records are built on the threads its caller gives
//! (`batches.rs`, [`Threads`]).

mod batches;
mod diagnose;
pub mod digests;
pub mod error;
pub mod format;
mod header;
mod onepass;
mod parse;
mod records;
pub mod render;
mod stream;
mod structure;

use std::io::Read;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::store::{Builder, Collection, Dataset, Meta, OneThread, Previous, RepeatedId, Threads};
pub use digests::{Digests, RecordDigest, RecordSpan, digests};
pub use error::{Place, SnapshotError};
pub use header::FORMAT_VERSION;
pub use parse::{SnapshotHeader, parse};

/// Whether a directory entry is a snapshot: `*.json` or `*.json.gz`, not
/// hidden. Everything else (`*.tmp`, `*.part`, editor swap files) is a
/// writer's scratch space and ignored (docs/snapshot-format.md#file-names).
pub fn is_snapshot_name(name: &str) -> bool {
    !name.starts_with('.') && (name.ends_with(".json") || name.ends_with(".json.gz"))
}

/// A dataset built from one snapshot, with what the load noticed.
pub struct Loaded {
    pub dataset: Dataset,
    pub warnings: Vec<String>,
}

/// Where a snapshot's (decompressed) bytes come from: a file, an object, a
/// buffer. It can be read more than once: the streaming pass reads it, and
/// only if that pass gives up, the whole-buffer parse reads it again to say
/// exactly what is wrong.
pub trait Source {
    /// A fresh reader of the whole content, from the start.
    fn open(&self) -> Result<Box<dyn Read + '_>, SnapshotError>;

    /// The whole content in one buffer (the error path).
    fn read_all(&self) -> Result<Vec<u8>, SnapshotError>;

    /// About how many bytes the content has, if known cheaply.
    fn size_hint(&self) -> u64;
}

impl Source for [u8] {
    fn open(&self) -> Result<Box<dyn Read + '_>, SnapshotError> {
        Ok(Box::new(self))
    }

    fn read_all(&self) -> Result<Vec<u8>, SnapshotError> {
        Ok(self.to_vec())
    }

    fn size_hint(&self) -> u64 {
        self.len() as u64
    }
}

/// Parses, validates, indexes and renders one snapshot on the calling
/// thread. `file` only names the file in errors.
pub fn load(file: &str, bytes: &[u8]) -> Result<Loaded, SnapshotError> {
    load_from(file, bytes, &OneThread, &mut |_, _| {})
}

/// Loads a snapshot from `source` in one streaming pass, holding a window of
/// its bytes rather than all of them; `progress` is told now and then which
/// collection it is reading and how many records it has read in all. A file
/// the streaming pass does not accept is read whole and parsed again, which
/// gives the first problem with its exact message.
pub fn load_from(
    file: &str,
    source: &(impl Source + ?Sized),
    threads: &dyn Threads,
    progress: &mut dyn FnMut(Collection, usize),
) -> Result<Loaded, SnapshotError> {
    load_following(file, source, None, threads, progress)
}

/// What a snapshot claims (its workspace, version and API keys) as a
/// hollow dataset, read in one streaming pass that builds nothing: a file
/// refused for memory still answers its keys (with 503, not 401), and
/// takes part in conflicts as it would loaded. Records are not checked;
/// `None` for a file the streaming pass does not accept (a load would say
/// why), or that holds a value (a record, a header member) of more than
/// `max_value` bytes: the pass holds no more than that and a chunk of the
/// file, whatever the file.
pub fn claims(file: &str, source: &(impl Source + ?Sized), max_value: usize) -> Option<Dataset> {
    let streamed = stream::scan_within(
        file,
        source.open().ok()?,
        batches::RecordSink::Digests(&mut |_, _, _, _| Ok(())),
        &mut |_, _| {},
        max_value,
    )
    .ok()?;
    let (meta, _) = meta_of(streamed.header, streamed.content_hash, || {
        derive_version_of(file, source)
    })
    .ok()?;
    Some(Dataset::hollow_of(meta))
}

/// [`load_from`] for the next version of a workspace that `previous`
/// serves: every record whose bytes it already holds is taken over instead
/// of being parsed, checked and rendered again (`store::Previous`). The
/// dataset is the same as a fresh load's.
pub fn load_following(
    file: &str,
    source: &(impl Source + ?Sized),
    previous: Option<Arc<Previous>>,
    threads: &dyn Threads,
    progress: &mut dyn FnMut(Collection, usize),
) -> Result<Loaded, SnapshotError> {
    let mut builder = Builder::following(previous);
    let streamed = stream::parse_stream(
        file,
        source.open()?,
        source.size_hint(),
        &mut builder,
        threads,
        progress,
    );
    let Ok(streamed) = streamed else {
        drop(builder);
        let bytes = source.read_all()?;
        return load_buffer(file, &bytes, threads, progress);
    };
    let (meta, warnings) = meta_of(streamed.header, streamed.content_hash, || {
        derive_version_of(file, source)
    })?;
    finish(file, builder, meta, warnings, threads)
}

/// The dataset's [`Meta`] from its snapshot's header and content hash, and
/// the header's warnings; `derive` gives the version where the snapshot
/// names none.
fn meta_of(
    header: SnapshotHeader,
    content_hash: u64,
    derive: impl FnOnce() -> Result<String, SnapshotError>,
) -> Result<(Meta, Vec<String>), SnapshotError> {
    let version = match header.version {
        Some(version) => version,
        None => derive()?,
    };
    let meta = Meta {
        version,
        workspace_id: header.workspace_id,
        workspace_name: header.workspace_name,
        key_hashes: header.key_hashes,
        limits: header.limits,
        content_hash,
    };
    Ok((meta, header.warnings))
}

/// The content's derived version, read again as a stream.
fn derive_version_of(file: &str, source: &(impl Source + ?Sized)) -> Result<String, SnapshotError> {
    let mut reader = source.open()?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // The error path says what went wrong.
            Err(_) => {
                return Err(source.read_all().err().unwrap_or_else(|| {
                    SnapshotError::new(file, "the content could not be read twice alike")
                }));
            }
        }
    }
    Ok(version_text(&hasher.finalize()))
}

/// Finishes the dataset; the header's warnings come after the builder's.
fn finish(
    file: &str,
    builder: Builder,
    meta: Meta,
    header_warnings: Vec<String>,
    threads: &dyn Threads,
) -> Result<Loaded, SnapshotError> {
    let mut built = builder
        .finish(meta, threads)
        .map_err(|err| repeated_id(file, &err))?;
    built.warnings.extend(header_warnings);
    Ok(Loaded {
        dataset: built.dataset,
        warnings: built.warnings,
    })
}

/// The whole-buffer parse: every problem found with its exact message.
fn load_buffer(
    file: &str,
    bytes: &[u8],
    threads: &dyn Threads,
    progress: &mut dyn FnMut(Collection, usize),
) -> Result<Loaded, SnapshotError> {
    let mut builder = Builder::default();
    let header = parse(file, bytes, &mut builder, progress)?;
    let (meta, warnings) = meta_of(header, content_hash(bytes), || Ok(derive_version(bytes)))?;
    finish(file, builder, meta, warnings, threads)
}

/// A fast hash of the snapshot's bytes, for ETags. FxHash has no
/// per-process seed, so replicas agree.
fn content_hash(bytes: &[u8]) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = rustc_hash::FxBuildHasher.build_hasher();
    hasher.write(bytes);
    hasher.finish()
}

/// The version of a snapshot that names none: its content's SHA-256.
fn derive_version(bytes: &[u8]) -> String {
    version_text(&Sha256::digest(bytes))
}

fn version_text(digest: &[u8]) -> String {
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The rejection of a record whose id an earlier record of its collection has.
fn repeated_id(file: &str, err: &RepeatedId) -> SnapshotError {
    SnapshotError::at(
        file,
        Place {
            collection: err.collection.name().to_owned(),
            index: Some(err.index),
            id: Some(crate::store::id::format_id(err.id)),
            field: Some("id".to_owned()),
        },
        err.to_string(),
    )
}
