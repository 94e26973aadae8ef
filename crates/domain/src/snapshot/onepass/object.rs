//! The objects of a record as the one-pass load walks them: each wire
//! object's members in the order the API serves them (the order of
//! `wire_objects!` in `snapshot/format.rs`, which
//! `tests::schemas_render_as_the_wire_types_do` holds these to), what JSON
//! each takes, and whether the format requires it.
//!
//! An object is written as it is read. Members that come in the served
//! order, the way exporters write them, are copied straight out, with
//! `null` written in place of those skipped; an object whose members come
//! in another order is put in order once it ends, from where each value
//! was written.

use super::Declined;
use super::walk::{Cursor, Str, Walk};

/// The JSON a member takes, besides `null`.
#[derive(Clone, Copy)]
pub(super) enum Kind {
    /// A string.
    Text,
    /// A string in the form of an email address (an attendee's `email`).
    Email,
    /// An array of strings.
    Texts,
    Bool,
    /// A number within the range of a double, served as written.
    Number,
    /// An array of objects.
    Objects(&'static Schema),
    /// An object.
    Object(&'static Schema),
}

/// What the format requires of a member (docs/snapshot-format.md).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Need {
    /// Absent or `null` alike.
    Optional,
    /// Present and not `null`.
    Value,
    /// Present; `null` allowed.
    Key,
}

pub(super) struct Member {
    /// `"name":`, as the API serves the member's name (and as exporters
    /// write it, mostly).
    pub quoted: &'static [u8],
    pub kind: Kind,
    pub need: Need,
    /// Left out of the served object when absent or `null`, not `null`.
    pub omit: bool,
}

/// A wire object: its members, in served order.
pub(super) struct Schema {
    pub members: &'static [Member],
}

/// The most members an object has (a company's attributes).
pub(super) const MAX_MEMBERS: usize = 12;

/// A member's name as it is served: `"name":`.
macro_rules! q {
    ($name:literal) => {
        concat!("\"", $name, "\":")
    };
}

const fn m(quoted: &'static str, kind: Kind, need: Need) -> Member {
    Member {
        quoted: quoted.as_bytes(),
        kind,
        need,
        omit: false,
    }
}

const fn text(quoted: &'static str) -> Member {
    m(quoted, Kind::Text, Need::Optional)
}

const fn required(quoted: &'static str) -> Member {
    m(quoted, Kind::Text, Need::Value)
}

const fn omitted(quoted: &'static str, kind: Kind) -> Member {
    Member {
        quoted: quoted.as_bytes(),
        kind,
        need: Need::Optional,
        omit: true,
    }
}

pub(super) static COMPANY: Schema = Schema {
    members: &[
        text(q!("domain")),
        text(q!("name")),
        text(q!("logo_url")),
        text(q!("headline")),
        text(q!("description")),
        text(q!("professional_network")),
        text(q!("x")),
        text(q!("careers_url")),
        m(q!("domain_aliases"), Kind::Texts, Need::Optional),
        text(q!("priority")),
        m(q!("labels"), Kind::Texts, Need::Optional),
        m(
            q!("value_propositions"),
            Kind::Objects(&VALUE_PROPOSITION),
            Need::Optional,
        ),
    ],
};

pub(super) static VALUE_PROPOSITION: Schema = Schema {
    members: &[text(q!("problem")), text(q!("solution")), text(q!("icp"))],
};

pub(super) static TASK: Schema = Schema {
    members: &[
        text(q!("title")),
        text(q!("description")),
        text(q!("status")),
        text(q!("priority")),
        text(q!("source")),
        required(q!("company_id")),
        text(q!("assignee_id")),
        text(q!("due_date")),
        required(q!("created_at")),
        text(q!("updated_at")),
    ],
};

pub(super) static ROLE: Schema = Schema {
    members: &[
        required(q!("company_id")),
        text(q!("name")),
        text(q!("url")),
        text(q!("description")),
        text(q!("domain")),
        text(q!("level")),
        required(q!("opened_at")),
    ],
};

pub(super) static FEED: Schema = Schema {
    members: &[
        required(q!("company_id")),
        text(q!("type")),
        text(q!("title")),
        text(q!("content")),
        required(q!("published_at")),
        m(q!("private"), Kind::Bool, Need::Optional),
        m(q!("sources"), Kind::Objects(&FEED_SOURCE), Need::Optional),
    ],
};

pub(super) static FEED_SOURCE: Schema = Schema {
    members: &[
        text(q!("source")),
        text(q!("url")),
        text(q!("title")),
        text(q!("published_at")),
    ],
};

pub(super) static NOTE: Schema = Schema {
    members: &[
        required(q!("company_id")),
        text(q!("title")),
        text(q!("content")),
        text(q!("source")),
        text(q!("created_by")),
        required(q!("created_at")),
    ],
};

pub(super) static METRIC: Schema = Schema {
    members: &[
        text(q!("name")),
        text(q!("unit")),
        text(q!("value_text")),
        m(q!("value_numeric"), Kind::Number, Need::Optional),
        text(q!("value_currency")),
        text(q!("period_label")),
        text(q!("period_start")),
        text(q!("period_end")),
        required(q!("reported_at")),
    ],
};

pub(super) static MEETING: Schema = Schema {
    members: &[
        required(q!("company_id")),
        required(q!("title")),
        required(q!("start_time")),
        m(q!("end_time"), Kind::Text, Need::Key),
        m(q!("attendees"), Kind::Objects(&ATTENDEE), Need::Value),
        required(q!("created_at")),
        required(q!("updated_at")),
    ],
};

pub(super) static ATTENDEE: Schema = Schema {
    members: &[
        m(q!("email"), Kind::Email, Need::Value),
        m(q!("organizer"), Kind::Bool, Need::Value),
        omitted(q!("name"), Kind::Text),
    ],
};

pub(super) static MEETING_NOTE: Schema = Schema {
    members: &[
        required(q!("meeting_id")),
        required(q!("type")),
        m(q!("notes"), Kind::Text, Need::Key),
        m(q!("transcript"), Kind::Object(&TRANSCRIPT), Need::Key),
        m(q!("synced_at"), Kind::Text, Need::Key),
        required(q!("created_at")),
        required(q!("updated_at")),
    ],
};

pub(super) static TRANSCRIPT: Schema = Schema {
    members: &[m(q!("segments"), Kind::Objects(&SEGMENT), Need::Value)],
};

pub(super) static SEGMENT: Schema = Schema {
    members: &[
        required(q!("text")),
        omitted(q!("speaker"), Kind::Text),
        omitted(q!("startTime"), Kind::Number),
        omitted(q!("endTime"), Kind::Number),
    ],
};

/// What a member of an object was: absent, `null`, or a value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum State {
    #[default]
    Absent,
    Null,
    Value,
}

/// One member of a walked object: its state, its string (for a text
/// member: what the checks and indexes read), and where its served value
/// was written (to put the object in order).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Slot {
    pub state: State,
    pub text: Str,
    written: (usize, usize),
}

/// The slots of an object's members, by their place in its [`Schema`].
pub(super) type Slots = [Slot; MAX_MEMBERS];

/// Writes `"name":`, after a comma unless it is the object's first.
#[inline]
fn name(out: &mut Vec<u8>, first: &mut bool, member: &Member) {
    if !*first {
        out.push(b',');
    }
    *first = false;
    out.extend_from_slice(member.quoted);
}

impl Member {
    /// The member's name, unquoted.
    fn name(&self) -> &[u8] {
        &self.quoted[1..self.quoted.len() - 2]
    }
}

/// Writes `members` as they are served when absent: `null`, or nothing
/// for those left out.
#[inline]
fn absent_members(out: &mut Vec<u8>, first: &mut bool, members: &[Member]) {
    for member in members.iter().filter(|m| !m.omit) {
        name(out, first, member);
        out.extend_from_slice(b"null");
    }
}

/// The object at the cursor (its `{`), of `schema`, written as served;
/// each member's slot filled. Declined where serde_json would not read it
/// as its wire type, or the format's requirements fail.
pub(super) fn object(
    c: &mut Cursor<'_>,
    schema: &Schema,
    out: &mut Vec<u8>,
    slots: &mut Slots,
) -> Walk<()> {
    let members = schema.members;
    c.pos += 1;
    out.push(b'{');
    let start = out.len();
    let mut first = true;
    // Members before `next` are written; `ordered` while they came in order.
    let (mut next, mut ordered) = (0, true);
    if c.peek()? == b'}' {
        c.pos += 1;
    } else {
        loop {
            // The member exporters write next, in served order and as the
            // API serves its name: those bytes need no reading.
            let expected = members.get(next).filter(|m| {
                ordered && c.ws() == Some(b'"') && c.bytes[c.pos..].starts_with(m.quoted)
            });
            let found = match expected {
                Some(m) => {
                    c.pos += m.quoted.len();
                    Some(next)
                }
                None => {
                    if c.peek()? != b'"' {
                        return Err(Declined);
                    }
                    let key = c.string::<false>()?;
                    // serde_json would match the key's decoded text: left to it.
                    if key.escaped {
                        return Err(Declined);
                    }
                    c.eat(b':')?;
                    let key = &c.bytes[key.start..key.end];
                    members.iter().position(|m| m.name() == key)
                }
            };
            match found {
                None => c.skip()?,
                // A member given twice: serde's derive refuses it.
                Some(k) if slots[k].state != State::Absent => return Err(Declined),
                Some(k) => {
                    if k < next {
                        ordered = false;
                    } else if ordered {
                        absent_members(out, &mut first, &members[next..k]);
                        next = k + 1;
                    }
                    value(c, &members[k], out, &mut first, &mut slots[k])?;
                }
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
    }
    if ordered {
        absent_members(out, &mut first, &members[next..]);
    } else {
        put_in_order(out, start, members, slots);
    }
    out.push(b'}');
    check_needs(members, slots)
}

/// An object absent or `null`: served with every member absent, and
/// checked so.
pub(super) fn absent(schema: &Schema, out: &mut Vec<u8>, slots: &Slots) -> Walk<()> {
    out.push(b'{');
    absent_members(out, &mut true, schema.members);
    out.push(b'}');
    check_needs(schema.members, slots)
}

fn check_needs(members: &[Member], slots: &Slots) -> Walk<()> {
    let unmet = members.iter().zip(slots).any(|(m, s)| match m.need {
        Need::Optional => false,
        Need::Value => s.state != State::Value,
        Need::Key => s.state == State::Absent,
    });
    if unmet { Err(Declined) } else { Ok(()) }
}

/// Rewrites the members written from `start` in served order, from the
/// values written there.
fn put_in_order(out: &mut Vec<u8>, start: usize, members: &[Member], slots: &Slots) {
    let end = out.len();
    let mut first = true;
    for (member, slot) in members.iter().zip(slots) {
        match slot.state {
            State::Value => {
                name(out, &mut first, member);
                out.extend_from_within(slot.written.0..slot.written.1);
            }
            _ if member.omit => {}
            _ => {
                name(out, &mut first, member);
                out.extend_from_slice(b"null");
            }
        }
    }
    out.copy_within(end.., start);
    out.truncate(out.len() - (end - start));
}

/// One member's value, written as served (after its name, unless it is
/// left out), and its slot filled.
fn value(
    c: &mut Cursor<'_>,
    member: &Member,
    out: &mut Vec<u8>,
    first: &mut bool,
    slot: &mut Slot,
) -> Walk<()> {
    let at = c.peek()?;
    if at == b'n' {
        c.literal(b"null")?;
        slot.state = State::Null;
        if !member.omit {
            name(out, first, member);
            out.extend_from_slice(b"null");
        }
        return Ok(());
    }
    name(out, first, member);
    let written = out.len();
    match (member.kind, at) {
        (Kind::Text, b'"') => {
            slot.text = c.string::<true>()?;
            c.put_text(slot.text, out);
        }
        (Kind::Email, b'"') => {
            slot.text = c.string::<true>()?;
            if !crate::snapshot::records::looks_like_email(&super::text(c, slot.text)) {
                return Err(Declined);
            }
            c.put_text(slot.text, out);
        }
        (Kind::Bool, b't') => {
            c.literal(b"true")?;
            out.extend_from_slice(b"true");
        }
        (Kind::Bool, b'f') => {
            c.literal(b"false")?;
            out.extend_from_slice(b"false");
        }
        (Kind::Number, b'-' | b'0'..=b'9') => {
            let (from, to) = c.number()?;
            let raw = &c.bytes[from..to];
            // Served as written, so it must be a number every client reads:
            // `1e400` would be Infinity in JavaScript (as `Number` refuses).
            let finite = std::str::from_utf8(raw)
                .ok()
                .and_then(|t| t.parse::<f64>().ok())
                .is_some_and(f64::is_finite);
            if !finite {
                return Err(Declined);
            }
            out.extend_from_slice(raw);
        }
        (Kind::Texts, b'[') => array(c, out, |c, out| {
            if c.peek()? != b'"' {
                return Err(Declined);
            }
            let s = c.string::<true>()?;
            c.put_text(s, out);
            Ok(())
        })?,
        (Kind::Objects(schema), b'[') => array(c, out, |c, out| {
            if c.peek()? != b'{' {
                return Err(Declined);
            }
            object(c, schema, out, &mut Slots::default())
        })?,
        (Kind::Object(schema), b'{') => object(c, schema, out, &mut Slots::default())?,
        _ => return Err(Declined),
    }
    slot.state = State::Value;
    slot.written = (written, out.len());
    Ok(())
}

/// The array at the cursor (its `[`), each element read and written by
/// `element`, commas between.
fn array(
    c: &mut Cursor<'_>,
    out: &mut Vec<u8>,
    mut element: impl FnMut(&mut Cursor<'_>, &mut Vec<u8>) -> Walk<()>,
) -> Walk<()> {
    c.pos += 1;
    out.push(b'[');
    if c.peek()? == b']' {
        c.pos += 1;
        out.push(b']');
        return Ok(());
    }
    loop {
        element(c, out)?;
        match c.peek()? {
            b',' => {
                c.pos += 1;
                out.push(b',');
            }
            b']' => {
                c.pos += 1;
                out.push(b']');
                return Ok(());
            }
            _ => return Err(Declined),
        }
    }
}
