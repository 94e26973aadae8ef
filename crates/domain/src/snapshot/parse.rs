//! Parsing and validation in one streaming pass: bytes in, each record
//! checked and handed to the store's [`Builder`] as soon as it is parsed, a
//! [`SnapshotHeader`] out, or one [`SnapshotError`] that names file, collection,
//! record id and field.
//!
//! A record's parsed form lives only while the builder renders it, so the
//! memory of a load is the file's bytes plus what the builder keeps, never a
//! second copy of the whole document as structs. Only when the pass fails on
//! a JSON error does [`diagnose`] spend more passes to tell a syntax error
//! from a truncated file from a wrong type, and to find the id of the record
//! at fault; a rejected file may be slow to explain, a good one is never
//! slowed down by the explaining.

use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::diagnose::{diagnose, format_version_problem};
use super::error::SnapshotError;
use super::format::{ApiKeyDoc, JsonText, WorkspaceDoc};
use super::header::{check_api_keys, check_format_version, check_version, check_workspace};
use super::records::{self, WireRecord, WithRecordType, with_record_type};
use crate::store::key::KeyHash;
use crate::store::{Builder, Collection};

/// Everything of a snapshot that is not a record.
pub struct SnapshotHeader {
    pub workspace_id: String,
    pub workspace_name: Option<String>,
    /// The exporter's version text, if it gave one.
    pub version: Option<String>,
    pub key_hashes: Vec<KeyHash>,
    /// The optional `limits` member.
    pub limits: Option<crate::store::limits::WorkspaceLimits>,
    /// What the top-level checks noticed that does not reject the file.
    pub warnings: Vec<String>,
}

/// How often a parse reports progress, in records: often enough that the
/// server's loader can pace a load on a shared core, and cheap.
pub(super) const PROGRESS_EVERY: usize = 64;

/// Parses and validates one snapshot, handing each record to `builder`.
/// `file` only names the file in errors. `progress` is told, every
/// `PROGRESS_EVERY` records, the collection being read and how many
/// records have been read in all. On an error the builder has seen part of
/// the records and must be thrown away.
pub fn parse(
    file: &str,
    bytes: &[u8],
    builder: &mut Builder,
    progress: &mut dyn FnMut(Collection, usize),
) -> Result<SnapshotHeader, SnapshotError> {
    let mut ctx = ParseContext {
        file,
        builder,
        error: None,
        progress,
        records: 0,
    };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let result = (&mut de)
        .deserialize_map(DocVisitor { ctx: &mut ctx })
        .and_then(|top| de.end().map(|()| top));
    match (result, ctx.error) {
        (Ok(top), _) => top.check(file),
        // A record failed a check. An unknown format version explains that
        // better, whatever the order of the keys in the file.
        (Err(_), Some(error)) => Err(format_version_problem(file, bytes).unwrap_or(error)),
        (Err(_), None) => Err(diagnose(file, bytes)),
    }
}

/// The non-record parts of the document, kept as they were parsed; both
/// passes read them with [`Top::read`] and check them with [`Top::check`].
#[derive(Default)]
pub(super) struct Top {
    format_version: Option<String>,
    version: Option<String>,
    workspace: Option<(Option<String>, Option<String>)>,
    api_keys: Option<Vec<Option<String>>>,
    limits: Option<String>,
}

impl Top {
    /// Reads the value of the top-level `key`, which names no collection,
    /// from `value`: a key of the header into its place; any other is
    /// skipped (but must be JSON). Whether `key` is the header's.
    pub(super) fn read<'de, D: Deserializer<'de>>(
        &mut self,
        key: &str,
        value: D,
    ) -> Result<bool, D::Error> {
        let owned = |text: JsonText<'_>| text.as_str().to_owned();
        match key {
            "format_version" => {
                self.format_version = Some(<&RawValue>::deserialize(value)?.get().to_owned());
            }
            "version" => self.version = Option::<JsonText<'de>>::deserialize(value)?.map(owned),
            "workspace" => {
                let workspace = Option::<WorkspaceDoc<'de>>::deserialize(value)?;
                self.workspace = workspace.map(|w| (w.id.map(owned), w.name.map(owned)));
            }
            "limits" => {
                self.limits = Some(<&RawValue>::deserialize(value)?.get().to_owned());
            }
            "api_keys" => {
                let keys = Option::<Vec<ApiKeyDoc<'de>>>::deserialize(value)?;
                self.api_keys =
                    keys.map(|keys| keys.into_iter().map(|k| k.sha256.map(owned)).collect());
            }
            _ => {
                IgnoredAny::deserialize(value)?;
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The header's checks, after every record passed, in the documented
    /// order (docs/snapshot-format.md#order-of-reporting).
    pub(super) fn check(self, file: &str) -> Result<SnapshotHeader, SnapshotError> {
        check_format_version(file, self.format_version.as_deref())?;
        let (workspace_id, workspace_name) = check_workspace(file, self.workspace.as_ref())?;
        let version = check_version(file, self.version.as_deref())?;
        let (key_hashes, keys_warning) =
            check_api_keys(file, self.api_keys.as_deref().unwrap_or_default())?;
        let limits = self
            .limits
            .map(|json| crate::store::limits::WorkspaceLimits::parse(&json))
            .transpose()
            .map_err(|why| SnapshotError::new(file, why))?;
        Ok(SnapshotHeader {
            workspace_id,
            workspace_name,
            version,
            key_hashes,
            limits,
            warnings: keys_warning.into_iter().collect(),
        })
    }
}

/// The value of a top-level key that names no collection, as a serde seed
/// ([`Top::read`]): whether the key is the header's.
pub(super) struct TopValue<'t, 'k> {
    pub top: &'t mut Top,
    pub key: &'k str,
}

impl<'de> DeserializeSeed<'de> for TopValue<'_, '_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        self.top.read(self.key, deserializer)
    }
}

struct ParseContext<'f, 'b> {
    file: &'f str,
    builder: &'b mut Builder,
    /// The check that stopped the parse, if one did.
    error: Option<SnapshotError>,
    progress: &'b mut dyn FnMut(Collection, usize),
    /// Records read so far, in all collections.
    records: usize,
}

struct DocVisitor<'c, 'f, 'b> {
    ctx: &'c mut ParseContext<'f, 'b>,
}

impl<'de> Visitor<'de> for DocVisitor<'_, '_, '_> {
    type Value = Top;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a snapshot object")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Top, M::Error> {
        let ctx = self.ctx;
        let mut top = Top::default();
        let mut seen: Vec<JsonText<'de>> = Vec::new();
        while let Some(key) = map.next_key::<JsonText<'de>>()? {
            first_time(&seen, &key)?;
            match Collection::from_name(key.as_str()) {
                Some(collection) => {
                    let value = CollectionValue {
                        map: &mut map,
                        ctx: &mut *ctx,
                    };
                    with_record_type(collection, value)?;
                }
                None => {
                    let key = key.as_str();
                    map.next_value_seed(TopValue { top: &mut top, key })?;
                }
            }
            seen.push(key);
        }
        Ok(top)
    }
}

/// An error if `key` is in `seen`, in the words serde's derive uses for a
/// struct's field given twice (the diagnosis turns them into the
/// operator's).
pub(super) fn first_time<E: de::Error>(seen: &[JsonText<'_>], key: &JsonText<'_>) -> Result<(), E> {
    if seen.contains(key) {
        return Err(E::custom(format_args!(
            "duplicate field `{}`",
            key.as_str()
        )));
    }
    Ok(())
}

/// Reads the value of a collection's key as an array of its records, each
/// checked and built as soon as it is read.
struct CollectionValue<'m, 'c, 'f, 'b, M> {
    map: &'m mut M,
    ctx: &'c mut ParseContext<'f, 'b>,
}

impl<'de, M: MapAccess<'de>> WithRecordType<'de> for CollectionValue<'_, '_, '_, '_, M> {
    type Output = Result<(), M::Error>;

    fn with<P: WireRecord<'de>>(self, collection: Collection) -> Self::Output {
        self.map.next_value_seed(CollectionSeed::<P> {
            ctx: self.ctx,
            collection,
            record: PhantomData,
        })
    }
}

/// The records of one collection, as a serde seed.
struct CollectionSeed<'c, 'f, 'b, P> {
    ctx: &'c mut ParseContext<'f, 'b>,
    collection: Collection,
    record: PhantomData<fn() -> P>,
}

impl<'de, P: WireRecord<'de>> DeserializeSeed<'de> for CollectionSeed<'_, '_, '_, P> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de, P: WireRecord<'de>> Visitor<'de> for CollectionSeed<'_, '_, '_, P> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "an array of {} records", self.collection.name())
    }

    /// An absent or `null` collection is empty.
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let ctx = self.ctx;
        let mut index = 0;
        while let Some(parsed) = seq.next_element::<P>()? {
            let outcome = records::build(ctx.file, self.collection, index, &parsed, ctx.builder);
            if let Err(error) = outcome {
                ctx.error = Some(error);
                return Err(de::Error::custom("record rejected"));
            }
            index += 1;
            ctx.records += 1;
            if ctx.records.is_multiple_of(PROGRESS_EVERY) {
                (ctx.progress)(self.collection, ctx.records);
            }
        }
        Ok(())
    }
}
