//! Each record's identity by its bytes: for a snapshot, every record's
//! collection, id and a 128-bit digest of its raw bytes (the first 16 bytes
//! of their SHA-256), in file order, without building a dataset.
//!
//! The streaming pass's own scanner (`stream.rs`) finds each record,
//! exactly as a load does; each record is then read only for its id (the
//! same id rule as a load, `records::check_id`) and hashed. Nothing else
//! of the record is checked (where the id comes first, the rest is not even
//! parsed): a caller that needs the file validated loads it
//! (the binary's `check` does); the header checks are the load's.
//!
//! Two records with the same digest have the same bytes (a collision of 128
//! bits of SHA-256 is not a practical risk; a 64-bit hash would be). So the
//! digests say which records two versions of a workspace share: `diff` and
//! `publish` count what changed from them, and they are what a load can use
//! to reuse, from the version it replaces, every record whose bytes did not
//! change (issue 20's later step). Bytes, not meaning: a file written again
//! with other whitespace inside its records changes every record.

use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::batches::RecordSink;
use super::format::JsonText;
use super::records::{self, RecordCheck};
use super::stream::{GaveUp, scan};
use super::{SnapshotError, Source};
use crate::store::{Builder, Collection};

/// How many bytes of a record's SHA-256 are kept: 128 bits.
pub const DIGEST_LEN: usize = 16;

/// The first [`DIGEST_LEN`] bytes of the SHA-256 of a record's bytes, as
/// the file has them (from its `{` to its `}`).
pub type RecordHash = [u8; DIGEST_LEN];

/// One record: its id and the digest of its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RecordDigest {
    pub id: u128,
    pub digest: RecordHash,
}

/// Where one record's bytes are in the (uncompressed) file, and their
/// digest: what a publish's delta copies from the version it replaces
/// (`portfolio_wire::delta`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordSpan {
    pub digest: RecordHash,
    /// The offset of the record's `{` in the file.
    pub offset: u64,
    pub len: u64,
}

/// Every record of a snapshot by its digest, in file order per collection.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Digests {
    pub workspace_id: String,
    /// The snapshot's version, derived from its content if it names none
    /// (as a load gives it).
    pub version: String,
    collections: [Vec<RecordDigest>; Collection::COUNT],
    /// Every record's span, in file order (all collections together).
    pub spans: Vec<RecordSpan>,
}

impl Digests {
    /// The records of `collection`, in file order.
    pub fn of(&self, collection: Collection) -> &[RecordDigest] {
        &self.collections[collection.index()]
    }

    /// How many records in all.
    pub fn total(&self) -> usize {
        self.collections.iter().map(Vec::len).sum()
    }

    /// Hashes one record of `collection`, whose id is `id`, into the
    /// digests; `offset` is where its `bytes` are in the file.
    fn push(&mut self, collection: Collection, id: u128, offset: u64, bytes: &[u8]) {
        let sha = Sha256::digest(bytes);
        let mut digest = [0u8; DIGEST_LEN];
        digest.copy_from_slice(&sha[..DIGEST_LEN]);
        self.collections[collection.index()].push(RecordDigest { id, digest });
        self.spans.push(RecordSpan {
            digest,
            offset,
            len: bytes.len() as u64,
        });
    }
}

/// The id of the `index`th record of `collection`, by the rule a load
/// applies to it.
fn record_id(
    file: &str,
    collection: Collection,
    index: usize,
    bytes: &[u8],
) -> Result<u128, GaveUp> {
    let parsed;
    let id_text = match leading_id(bytes) {
        Some(text) => Some(text),
        None => {
            parsed = serde_json::from_slice::<IdOnly<'_>>(bytes).map_err(|_| GaveUp)?;
            parsed.id.as_ref().map(JsonText::as_str)
        }
    };
    let check = RecordCheck {
        file,
        collection: collection.name(),
        index,
        id: id_text,
    };
    records::check_id(&check, id_text).map_err(|_| GaveUp)
}

/// The id of a record written as exporters write it, `{"id":"<36 bytes>"`
/// first, read without parsing the rest: a JSON reader reads the same text
/// there (36 bytes with no `\` or `"` are the string as they are), and the
/// scan does not parse a whole record only to find its id.
fn leading_id(bytes: &[u8]) -> Option<&str> {
    const HEAD: &[u8] = br#"{"id":""#;
    let text = bytes.strip_prefix(HEAD)?.get(..37)?;
    let (id, close) = text.split_at(36);
    if close != b"\"" || id.iter().any(|&b| b == b'\\' || b == b'"') {
        return None;
    }
    std::str::from_utf8(id).ok()
}

/// A record read only for its id; serde_json still reads the rest through
/// (it must find where the record ends), ignoring it.
#[derive(Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
struct IdOnly<'a> {
    id: Option<JsonText<'a>>,
}

/// The digests of every record of `source`. `file` only names the file in
/// errors. A file the scan does not accept is parsed whole, as a load
/// would, for the exact first problem (the same message `check` gives).
pub fn digests(file: &str, source: &(impl Source + ?Sized)) -> Result<Digests, SnapshotError> {
    if let Some(digests) = scan_digests(file, source.open()?) {
        return finish(file, source, digests);
    }
    // The error path: the whole-buffer parse says what is wrong.
    let bytes = source.read_all()?;
    super::parse(file, &bytes, &mut Builder::default(), &mut |_, _| {})?;
    // That parse accepts the file (the stream may have failed to read it
    // once): scan the bytes read.
    match scan_digests(file, &bytes[..]) {
        Some(digests) => finish(file, source, digests),
        None => Err(SnapshotError::new(
            file,
            "the records could not be told apart by the streaming scan, though the file is valid",
        )),
    }
}

/// One streaming pass that hashes each record: `None` if it gave up.
fn scan_digests(file: &str, reader: impl std::io::Read) -> Option<(Digests, Option<String>)> {
    let mut digests = Digests::default();
    let streamed = scan(
        file,
        reader,
        RecordSink::Digests(&mut |collection, index, offset, bytes| {
            let id = record_id(file, collection, index, bytes)?;
            digests.push(collection, id, offset, bytes);
            Ok(())
        }),
        &mut |_, _| {},
    )
    .ok()?;
    digests.workspace_id = streamed.header.workspace_id;
    Some((digests, streamed.header.version))
}

fn finish(
    file: &str,
    source: &(impl Source + ?Sized),
    (mut digests, version): (Digests, Option<String>),
) -> Result<Digests, SnapshotError> {
    digests.version = match version {
        Some(version) => version,
        None => super::derive_version_of(file, source)?,
    };
    Ok(digests)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "0190a3a4-1111-7abc-8def-000000000001";
    const B: &str = "0190a3a4-1111-7abc-8def-000000000002";
    const C: &str = "0190a3a4-1111-7abc-8def-000000000003";

    fn company(id: &str, name: &str) -> String {
        format!(r#"{{"id":"{id}","attributes":{{"name":{name},"domain":"acme.test"}}}}"#)
    }

    fn snapshot(companies: &[String]) -> String {
        format!(
            r#"{{"format_version":1,"version":"v1","workspace":{{"id":"ws-1"}},"api_keys":[],"companies":[{}]}}"#,
            companies.join(",")
        )
    }

    fn of(text: &str) -> Digests {
        digests("test.json", text.as_bytes()).unwrap_or_else(|e| panic!("{e}"))
    }

    fn companies(d: &Digests) -> Vec<RecordDigest> {
        d.of(Collection::Companies).to_vec()
    }

    #[test]
    fn the_same_bytes_give_the_same_digest_and_the_header_is_read() {
        let text = snapshot(&[company(A, r#""Acme""#), company(B, r#""Beta""#)]);
        let (one, two) = (of(&text), of(&text));
        assert_eq!(one, two);
        assert_eq!(one.workspace_id, "ws-1");
        assert_eq!(one.version, "v1");
        assert_eq!(one.total(), 2);
        let ids: Vec<u128> = companies(&one).iter().map(|r| r.id).collect();
        assert_eq!(
            ids,
            [A, B]
                .map(|t| crate::store::id::parse_id(t).unwrap())
                .to_vec()
        );
        assert_ne!(companies(&one)[0].digest, companies(&one)[1].digest);
        // The digest is of the record's own bytes, wherever it sits.
        let alone = of(&snapshot(&[company(A, r#""Acme""#)]));
        assert_eq!(companies(&alone)[0], companies(&one)[0]);
    }

    #[test]
    fn a_change_of_escapes_or_non_ascii_text_changes_the_digest() {
        // The same text to a JSON reader, other bytes: a change all the same.
        let names = [
            r#""Acme""#,
            r#""\u0041cme""#,
            r#""Acmé""#,
            r#""Acm\u00e9""#,
            r#""Ac\"me""#,
            r#""Ac\\me""#,
            r#""Acme 😀""#,
            r#""Acme \ud83d\ude00""#,
            r#""日本""#,
        ];
        let digests: Vec<RecordHash> = names
            .iter()
            .map(|name| companies(&of(&snapshot(&[company(A, name)])))[0].digest)
            .collect();
        for (i, a) in digests.iter().enumerate() {
            for (j, b) in digests.iter().enumerate().skip(i + 1) {
                assert_ne!(a, b, "{} and {}", names[i], names[j]);
            }
        }
    }

    #[test]
    fn reordered_records_keep_their_digests_in_their_new_order() {
        let records = [
            company(A, r#""Acme""#),
            company(B, r#""Beta \"β\"""#),
            company(C, r#""Gamma""#),
        ];
        let before = companies(&of(&snapshot(&records)));
        let after = companies(&of(&snapshot(&[
            records[2].clone(),
            records[0].clone(),
            records[1].clone(),
        ])));
        assert_eq!(after, vec![before[2], before[0], before[1]]);
    }

    #[test]
    fn an_id_is_read_wherever_and_however_the_record_writes_it() {
        let first = company(A, r#""Acme""#);
        let later = format!(r#"{{"attributes":{{"name":"Acme"}},"id":"{A}"}}"#);
        let escaped = company(&A.replacen('0', r"\u0030", 1), r#""Acme""#);
        let spaced = first.replacen(r#""id":"#, r#""id" : "#, 1);
        let id = crate::store::id::parse_id(A).unwrap();
        for record in [first, later, escaped, spaced] {
            let got = companies(&of(&snapshot(std::slice::from_ref(&record))));
            assert_eq!(got[0].id, id, "{record}");
        }
    }

    #[test]
    fn each_span_is_where_the_record_is_in_the_file() {
        let text = snapshot(&[company(A, r#""Acme""#), company(B, r#""Beta""#)]);
        let digests = of(&text);
        assert_eq!(digests.spans.len(), 2);
        for (span, record) in digests.spans.iter().zip(companies(&digests)) {
            let (start, end) = (span.offset as usize, (span.offset + span.len) as usize);
            assert_eq!(
                &Sha256::digest(&text.as_bytes()[start..end])[..DIGEST_LEN],
                span.digest
            );
            assert_eq!(span.digest, record.digest);
        }
        // Past the scan's window too.
        let many: Vec<String> = (0..40_000)
            .map(|n| company(&format!("0190a3a4-1111-7abc-8def-{n:012}"), r#""Acme""#))
            .collect();
        let text = snapshot(&many);
        let last = *of(&text).spans.last().unwrap();
        let at = last.offset as usize;
        assert_eq!(&text[at..at + last.len as usize], many.last().unwrap());
    }

    #[test]
    fn a_version_is_derived_when_the_file_names_none() {
        let text = snapshot(&[company(A, r#""Acme""#)]).replace(r#""version":"v1","#, "");
        assert!(of(&text).version.starts_with("sha256:"));
    }

    #[test]
    fn bad_files_give_the_messages_of_a_load() {
        let bad_id = snapshot(&[company("not-a-uuid", r#""Acme""#)]);
        let truncated = &snapshot(&[company(A, r#""Acme""#)])[..60];
        let bad_field = snapshot(&[company(A, "12")]);
        for text in [bad_id.as_str(), truncated, bad_field.as_str()] {
            let expected = crate::snapshot::load("test.json", text.as_bytes())
                .err()
                .map(|e| e.to_string());
            // A bad field passes the scan (it reads ids only), and is the
            // load's to reject.
            let got = digests("test.json", text.as_bytes())
                .err()
                .map(|e| e.to_string());
            if text == bad_field {
                assert!(got.is_none() && expected.is_some());
            } else {
                assert_eq!(got, expected);
                assert!(got.is_some());
            }
        }
    }
}
