//! One pass per record, from its bytes to the bytes the API serves.
//!
//! Each record is walked once ([`walk`], [`object`]): every rule that
//! docs/snapshot-format.md gives a record is checked on the way, and the
//! served form is written as it goes, straight into the builder's buffer.
//! Strings, numbers and literals are copied as they stand; only what
//! today's renderer changes is converted: escapes spelled another way,
//! members the API does not serve left out, members put in the served
//! order, `null` for those omitted. The id, the ordering instant, the
//! reference and the texts the store indexes are read on the way
//! ([`Indexed`]), so the builder looks nothing up again. No typed record is
//! built and nothing is allocated per value (only the rare indexed text
//! written with escapes is decoded into a string of its own).
//!
//! The walk accepts only what serde_json and the wire types of
//! `snapshot/format.rs` accept, with the same served bytes: serde_json is
//! the reference (`tests.rs` holds the two together on generated and
//! mutated records). Whatever it does not take (a bad record, and the odd
//! good one it leaves alone: an escaped member name, an array standing for
//! an object, which serde reads by position) it declines, and the record
//! goes the way every record went before ([`super::stream`]): serde_json
//! and the checks of `records.rs`, which accept it or reject the file with
//! the message they always gave.

mod object;
#[cfg(test)]
mod tests;
mod walk;

use std::borrow::Cow;

use object::{Schema, Slots, State};
use walk::{Cursor, Str, Walk};

use super::records::client_profile_problem;
use super::stream;
use crate::store::id::{parse_id, parse_id_bytes};
use crate::store::time::Instant;
use crate::store::{Builder, Collection, Indexed, Key};

/// The walk does not take the record: the serde_json path
/// (`stream::build_parsed`) decides.
#[derive(Debug)]
pub(super) struct Declined;

/// Walks the record of `collection` in `bytes` and hands it to `builder`,
/// or leaves the builder as it was and declines.
pub(super) fn build(
    collection: Collection,
    bytes: &[u8],
    builder: &mut Builder,
) -> Result<(), Declined> {
    builder.walked(collection, |out| {
        let (indexed, end) = walk_record(collection, bytes, out)?;
        let mut rest = Cursor { bytes, pos: end };
        match rest.ws() {
            None => Ok(indexed),
            Some(_) => Err(Declined),
        }
    })
}

/// [`build`] of the record at the start of `bytes`, which may go on past
/// it (the streaming pass's window, whatever it holds): the record's
/// length, and its digest ([`stream::digest`]) handed to the builder with
/// it. A record that `bytes` holds only part of is declined.
pub(super) fn build_first(
    collection: Collection,
    bytes: &[u8],
    builder: &mut Builder,
) -> Result<usize, Declined> {
    let mut len = 0;
    builder.walked(collection, |out| {
        let (mut indexed, end) = walk_record(collection, bytes, out)?;
        indexed.digest = Some(stream::digest(&bytes[..end]));
        len = end;
        Ok(indexed)
    })?;
    Ok(len)
}

/// The served form of the record at the start of `bytes` into `out` (from
/// its end), what the builder keeps of it, and where the record ends.
fn walk_record<'a>(
    collection: Collection,
    bytes: &'a [u8],
    out: &mut Vec<u8>,
) -> Walk<(Indexed<'a>, usize)> {
    let schema = schema_of(collection);
    let mut c = Cursor::new(bytes);
    let mut slots = Slots::default();
    let parts = record(&mut c, collection, schema, out, &mut slots)?;
    let id = id_of(&c, parts.id).ok_or(Declined)?;
    let opt = |k: usize| match slots[k].state {
        State::Value => Some(text(&c, slots[k].text)),
        _ => None,
    };
    let keyed = |parent: usize, at: usize| -> Walk<Key> {
        Ok(Key {
            id,
            at: timestamp(&c, slots[at].text)?,
            parent: id_of(&c, slots[parent].text),
        })
    };
    let indexed = match collection {
        Collection::Companies => Indexed {
            texts: [opt(1), opt(9)],
            ..Indexed::of(Key {
                id,
                ..Key::default()
            })
        },
        Collection::Tasks => Indexed {
            texts: [opt(2), opt(3)],
            ..Indexed::of(keyed(5, 8)?)
        },
        Collection::Roles => Indexed::of(keyed(0, 6)?),
        Collection::Feed => Indexed {
            texts: [opt(1), None],
            ..Indexed::of(keyed(0, 4)?)
        },
        Collection::Notes => Indexed::of(keyed(0, 5)?),
        Collection::Metrics => {
            let company = parts.company.ok_or(Declined)?;
            Indexed {
                texts: [opt(0), None],
                ..Indexed::of(Key {
                    id,
                    at: timestamp(&c, slots[8].text)?,
                    parent: id_of(&c, company),
                })
            }
        }
        Collection::Meetings => Indexed::of(keyed(0, 2)?),
        Collection::MeetingNotes => {
            if text(&c, slots[1].text) != "notetool" {
                return Err(Declined);
            }
            Indexed::of(keyed(0, 5)?)
        }
    };
    Ok((indexed, c.pos))
}

/// The attributes' schema of each collection.
fn schema_of(collection: Collection) -> &'static Schema {
    match collection {
        Collection::Companies => &object::COMPANY,
        Collection::Tasks => &object::TASK,
        Collection::Roles => &object::ROLE,
        Collection::Feed => &object::FEED,
        Collection::Notes => &object::NOTE,
        Collection::Metrics => &object::METRIC,
        Collection::Meetings => &object::MEETING,
        Collection::MeetingNotes => &object::MEETING_NOTE,
    }
}

/// A record's own members, besides its attributes.
struct RecordParts {
    id: Str,
    /// A metric's `company_id`, beside its attributes.
    company: Option<Str>,
}

/// `{"id", "attributes"}` (and a metric's `company_id`) in any order,
/// served as `{"id":<id>,"attributes":<attributes>}`.
fn record(
    c: &mut Cursor<'_>,
    collection: Collection,
    schema: &Schema,
    out: &mut Vec<u8>,
    slots: &mut Slots,
) -> Walk<RecordParts> {
    let start = out.len();
    out.extend_from_slice(b"{\"id\":");
    let (mut id, mut company) = (None, None);
    // Where the attributes were written, if they came before the id.
    let mut attributes: Option<Option<usize>> = None;
    c.eat(b'{')?;
    if c.peek()? != b'}' {
        loop {
            if c.peek()? != b'"' {
                return Err(Declined);
            }
            let key = c.string::<false>()?;
            if key.escaped {
                return Err(Declined);
            }
            c.eat(b':')?;
            match &c.bytes[key.start..key.end] {
                b"id" if id.is_none() => {
                    // `null`, or any other kind: not an id (the message is
                    // the record's own path's).
                    if c.peek()? != b'"' {
                        return Err(Declined);
                    }
                    let s = c.string::<true>()?;
                    if attributes.is_none() {
                        c.put_text(s, out);
                    }
                    id = Some(s);
                }
                b"attributes" if attributes.is_none() => {
                    let before_id = id.is_none();
                    let at = match before_id {
                        true => out.len(),
                        false => {
                            out.extend_from_slice(b",\"attributes\":");
                            out.len()
                        }
                    };
                    match c.peek()? {
                        b'n' => {
                            c.literal(b"null")?;
                            object::absent(schema, out, slots)?;
                        }
                        b'{' => object::object(c, schema, out, slots)?,
                        _ => return Err(Declined),
                    }
                    attributes = Some(before_id.then_some(at));
                }
                b"company_id" if collection == Collection::Metrics && company.is_none() => {
                    if c.peek()? != b'"' {
                        return Err(Declined);
                    }
                    company = Some(c.string::<true>()?);
                }
                b"id" | b"attributes" => return Err(Declined),
                b"company_id" if collection == Collection::Metrics => return Err(Declined),
                _ => c.skip()?,
            }
            match c.peek()? {
                b',' => c.pos += 1,
                b'}' => {
                    c.pos += 1;
                    break;
                }
                _ => return Err(Declined),
            }
        }
    } else {
        c.pos += 1;
    }
    let id = id.ok_or(Declined)?;
    match attributes {
        // Absent: `{}`.
        None => {
            out.extend_from_slice(b",\"attributes\":");
            object::absent(schema, out, slots)?;
        }
        // Written before the id: the id and the name go in front of them.
        Some(Some(at)) => {
            let moved = out.len();
            c.put_text(id, out);
            out.extend_from_slice(b",\"attributes\":");
            out[at..].rotate_left(moved - at);
        }
        Some(None) => {}
    }
    out.push(b'}');
    debug_assert!(out[start] == b'{');
    Ok(RecordParts { id, company })
}

/// The text of a string the walk checked: borrowed where it has no
/// escape, else decoded (by serde_json, as the record's own path would).
fn text<'a>(c: &Cursor<'a>, s: Str) -> Cow<'a, str> {
    let content = &c.bytes[s.start..s.end];
    if !s.escaped {
        // Checked as UTF-8 by the walk, so this cannot fail; a short
        // check again (ids, instants), not a lossy conversion.
        return Cow::Borrowed(std::str::from_utf8(content).unwrap_or_default());
    }
    let quoted = &c.bytes[s.start - 1..=s.end];
    Cow::Owned(serde_json::from_slice::<String>(quoted).unwrap_or_default())
}

/// An id (or a reference), read where it lies unless it has escapes.
fn id_of(c: &Cursor<'_>, s: Str) -> Option<u128> {
    match s.escaped {
        false => parse_id_bytes(&c.bytes[s.start..s.end]),
        true => parse_id(&text(c, s)),
    }
}

/// An ordering timestamp: RFC 3339 in the profile clients parse.
fn timestamp(c: &Cursor<'_>, s: Str) -> Walk<Instant> {
    let decoded;
    let b = match s.escaped {
        false => &c.bytes[s.start..s.end],
        true => {
            decoded = text(c, s);
            decoded.as_bytes()
        }
    };
    let instant = Instant::parse_rfc3339_bytes(b).ok_or(Declined)?;
    match client_profile_problem(b) {
        Some(_) => Err(Declined),
        None => Ok(instant),
    }
}
