//! Answers to queries: each endpoint's body as a [`Body`], written on demand
//! as plain JSON or as gzip.
//!
//! Every list page costs O(limit) whatever the offset and the data size: the
//! page is a slice of a pre-sorted list (or of a pre-built filter index) and
//! its records are copied as rendered, or as precompressed. The feed costs
//! O(log n + limit): a binary search for the cursor, then the same copy.
//! `hasMore` and `nextCursor` look one entry ahead; nothing is counted.

use std::io::Write;

use bytes::Bytes;
use gzip_fragments::{GzipPage, Packed};

use super::cursor::Cursor;
use super::rendered::Rendered;
use super::warm::chains;
use super::{Dataset, Positions};

/// `limit` and `offset` of an offset-paginated list, already validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetPage {
    pub limit: u64,
    pub offset: u64,
}

/// A `/feed` request, already validated.
#[derive(Clone, Copy, Debug)]
pub struct FeedQuery<'q> {
    pub limit: u64,
    pub cursor: Option<Cursor>,
    pub kind: Option<&'q str>,
}

const EMPTY: &[u32] = &[];

fn group(positions: Option<&Positions>) -> &[u32] {
    positions.map_or(EMPTY, Vec::as_slice)
}

/// An answer's body, not yet written: `head`, then maybe one record, `mid`,
/// then maybe a comma-separated list of records, then `tail`. Every JSON
/// body of the API has this shape, `{"data":[` … `]}` and all; `/roles` is
/// built once at load and shared.
pub struct Body<'d> {
    shape: Shape<'d>,
}

// A body lives on the stack for one request: boxing the larger variant
// would cost an allocation per request to save a few hundred bytes there.
#[allow(clippy::large_enum_variant)]
enum Shape<'d> {
    Shared {
        plain: Bytes,
        gzip: Option<Bytes>,
    },
    Parts {
        head: &'static [u8],
        /// A record, and whether it is left open (without its closing brace).
        record: Option<(&'d Rendered, u32, bool)>,
        mid: &'static [u8],
        /// Records, and the chain order they are a stretch of, if any.
        list: Option<(&'d Rendered, &'d [u32], Option<usize>)>,
        tail: StackText,
    },
}

/// A short text made per request (the pagination), kept on the stack.
pub(crate) struct StackText {
    buf: [u8; 192],
    len: usize,
}

impl StackText {
    fn new(text: &[u8]) -> StackText {
        let mut t = StackText {
            buf: [0; 192],
            len: 0,
        };
        t.push(text);
        t
    }

    fn push(&mut self, text: &[u8]) {
        self.buf[self.len..self.len + text.len()].copy_from_slice(text);
        self.len += text.len();
    }

    fn push_u64(&mut self, n: u64) {
        let mut rest = &mut self.buf[self.len..];
        let before = rest.len();
        // 20 digits at most, and there is room for them.
        let _ = write!(rest, "{n}");
        self.len += before - rest.len();
    }

    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl<'d> Body<'d> {
    fn shared(plain: Bytes, gzip: Option<Bytes>) -> Body<'d> {
        Body {
            shape: Shape::Shared { plain, gzip },
        }
    }

    /// `{"data":[<records><tail>`, the tail closing the array (`]}`, or
    /// `],"pagination":...}`); `list` is a stretch of chain order `chain`,
    /// if given.
    fn list(
        records: &'d Rendered,
        list: &'d [u32],
        chain: Option<usize>,
        tail: StackText,
    ) -> Body<'d> {
        Body {
            shape: Shape::Parts {
                head: b"{\"data\":[",
                record: None,
                mid: b"",
                list: Some((records, list, chain)),
                tail,
            },
        }
    }

    /// `{"data":<record>}`.
    fn single(records: &'d Rendered, i: u32) -> Body<'d> {
        Body {
            shape: Shape::Parts {
                head: b"{\"data\":",
                record: Some((records, i, false)),
                mid: b"}",
                list: None,
                tail: StackText::new(b""),
            },
        }
    }

    /// The length of the plain JSON.
    pub fn len(&self) -> usize {
        match &self.shape {
            Shape::Shared { plain, .. } => plain.len(),
            // Every part named, here, in `write` and in `write_gzip`, on
            // purpose: the compiler then makes each of them take in a part
            // added to `Shape::Parts`.
            Shape::Parts {
                head,
                record,
                mid,
                list,
                tail,
            } => {
                let record =
                    record.map_or(0, |(r, i, open)| r.len_of(i as usize) - usize::from(open));
                let list = list.map_or(0, |(r, l, chain)| r.size_in(l, chain));
                head.len() + record + mid.len() + list + tail.len
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The plain JSON.
    pub fn identity(&self) -> Bytes {
        self.shared_plain().unwrap_or_else(|| {
            let mut out = Vec::with_capacity(self.len());
            self.write(&mut out);
            Bytes::from(out)
        })
    }

    /// The plain JSON of a body built once and shared (`/roles`): a
    /// reference, no copy.
    pub fn shared_plain(&self) -> Option<Bytes> {
        match &self.shape {
            Shape::Shared { plain, .. } => Some(plain.clone()),
            Shape::Parts { .. } => None,
        }
    }

    /// Appends the plain JSON to `out` (`len()` bytes: reserve them first).
    pub fn write(&self, out: &mut Vec<u8>) {
        match &self.shape {
            Shape::Shared { plain, .. } => out.extend_from_slice(plain),
            // Every part named, here, in `len` and in `write_gzip`, on
            // purpose: the compiler then makes each of them take in a part
            // added to `Shape::Parts`.
            Shape::Parts {
                head,
                record,
                mid,
                list,
                tail,
            } => {
                out.extend_from_slice(head);
                if let Some((r, i, open)) = *record {
                    let bytes = r.record(i as usize);
                    out.extend_from_slice(&bytes[..bytes.len() - usize::from(open)]);
                }
                out.extend_from_slice(mid);
                if let Some((r, l, _)) = list {
                    r.write(l, out);
                }
                out.extend_from_slice(tail.as_bytes());
            }
        }
    }

    /// The gzip form, assembled from precompressed records; `None` if the
    /// records were not precompressed.
    pub fn gzip(&self) -> Option<Bytes> {
        if let Some(gzip) = self.shared_gzip() {
            return Some(gzip);
        }
        let mut out = Vec::new();
        self.write_gzip(&mut out).then(|| Bytes::from(out))
    }

    /// The gzip form of a body built once and shared (`/roles`), if made.
    pub fn shared_gzip(&self) -> Option<Bytes> {
        match &self.shape {
            Shape::Shared { gzip, .. } => gzip.clone(),
            Shape::Parts { .. } => None,
        }
    }

    /// Writes the gzip form, assembled from precompressed records, into
    /// `out` (cleared first; a kept buffer is reused). False, and `out`
    /// untouched, if the records were not precompressed, if assembling the
    /// page does not pay (see `assembly_pays`), or if the body is a
    /// shared one (see [`Body::shared_gzip`]).
    pub fn write_gzip(&self, out: &mut Vec<u8>) -> bool {
        // Every part named, here, in `len` and in `write`, on
        // purpose: the compiler then makes each of them take in a part
        // added to `Shape::Parts`.
        let Shape::Parts {
            head,
            record,
            mid,
            list,
            tail,
        } = &self.shape
        else {
            return false;
        };
        // Held for the answer: the fragments cannot be let go under it.
        let guards = (
            record.map(|(r, _, _)| r.packed()),
            list.map(|(r, _, _)| r.packed()),
        );
        let record = match (*record, &guards.0) {
            (Some((r, i, open)), Some(g)) => match g.as_deref() {
                Some(packed) => Some((r, packed, i, open)),
                None => return false,
            },
            _ => None,
        };
        let list = match (*list, &guards.1) {
            (Some((r, l, chain)), Some(g)) => match g.as_deref() {
                Some(packed) => Some((r, packed, l, chain)),
                None => return false,
            },
            _ => None,
        };
        // The code of the page's first records writes its first text.
        let Some(first) = record.map(|r| r.1).or(list.map(|l| l.1)) else {
            return false;
        };
        if let Some((_, packed, l, chain)) = list
            && !assembly_pays(packed, l, chain)
        {
            return false;
        }
        // Filtered pages come to about 0.6 of the plain size.
        let mut page = GzipPage::in_buffer(std::mem::take(out), self.len() * 5 / 8);
        page.text(first, head);
        if let Some((r, packed, i, open)) = record {
            let bytes = r.record(i as usize);
            let kept = bytes.len() - packed.trim();
            let end = bytes.len() - usize::from(open);
            if kept <= end {
                page.record(packed, i as usize, &bytes[..kept]);
                // What the packing cut off, unless the page leaves it off too.
                if kept < end {
                    page.text(first, &bytes[kept..end]);
                }
            } else {
                // Left open where the packing kept it whole (a meeting
                // with its notes): its solo fragment but the brace it ends
                // on (literals if the packing cannot leave it off).
                page.open_record(packed, i as usize, bytes);
            }
        }
        page.text(first, mid);
        if let Some((r, packed, l, chain)) = list {
            page.list(packed, l, chain, |i| r.record(i));
        }
        page.text(first, tail.as_bytes());
        *out = page.finish();
        true
    }
}

/// Whether a page of `list` (a stretch of chain order `chain`, if given)
/// is better assembled from `packed` than compressed per request. Records
/// that follow no chain predecessor on the page go as their solo
/// fragments, or as literals where the packing made none; literals are
/// cheap to write but about twice the size of gzip -1, so a page that
/// would be more than an eighth literals (a list in an order that has no
/// chain, such as tasks filtered by status alone) is compressed per request.
fn assembly_pays(packed: &Packed, list: &[u32], chain: Option<usize>) -> bool {
    if packed.has_solo() || chain.is_some_and(|c| packed.stretch(c, list).is_some()) {
        return true;
    }
    let literals = list.len() - packed.chained_in(list);
    literals <= 1 + list.len() / 8
}

/// `],"pagination":{"limit":L,"offset":O,"hasMore":B}}`
fn offset_tail(page: OffsetPage, has_more: bool) -> StackText {
    let mut t = StackText::new(b"],\"pagination\":{\"limit\":");
    t.push_u64(page.limit);
    t.push(b",\"offset\":");
    t.push_u64(page.offset);
    t.push(if has_more {
        b",\"hasMore\":true}}"
    } else {
        b",\"hasMore\":false}}"
    });
    t
}

/// The page of `list` (record indices in list order, a stretch of chain
/// order `chain` if given) that `page` selects.
fn offset_body<'d>(
    records: &'d Rendered,
    list: &'d [u32],
    chain: Option<usize>,
    page: OffsetPage,
) -> Body<'d> {
    let len = list.len() as u64;
    let from = page.offset.min(len) as usize;
    let to = page.offset.saturating_add(page.limit).min(len) as usize;
    let has_more = (to as u64) < len;
    Body::list(records, &list[from..to], chain, offset_tail(page, has_more))
}

/// `{"data":[...]}` for the records of `list` (a stretch of chain order
/// `chain`).
fn list_body<'d>(records: &'d Rendered, list: &'d [u32], chain: usize) -> Body<'d> {
    Body::list(records, list, Some(chain), StackText::new(b"]}"))
}

impl Dataset {
    pub fn has_company(&self, id: u128) -> bool {
        self.parts.companies.at.contains_key(&id)
    }

    /// `/portfolio`.
    pub fn portfolio_body(&self, priority: Option<&str>, page: OffsetPage) -> Body<'_> {
        let (list, chain) = match priority {
            None => (&self.parts.companies.order[..], chains::COMPANIES_BY_NAME),
            Some(p) => (
                group(self.parts.companies.by_priority.get(p)),
                chains::COMPANIES_BY_PRIORITY,
            ),
        };
        offset_body(&self.parts.companies.records, list, Some(chain), page)
    }

    /// `/portfolio/{id}`.
    pub fn company_body(&self, id: u128) -> Option<Body<'_>> {
        let i = *self.parts.companies.at.get(&id)?;
        Some(Body::single(&self.parts.companies.records, i))
    }

    /// `/portfolio/{id}/tasks`; `None` if the company is unknown.
    pub fn company_tasks_body(&self, id: u128, page: OffsetPage) -> Option<Body<'_>> {
        self.has_company(id).then(|| {
            offset_body(
                &self.parts.tasks.records,
                group(self.parts.tasks.by_company.get(&id)),
                None,
                page,
            )
        })
    }

    /// `/portfolio/{id}/roles`; `None` if the company is unknown.
    pub fn company_roles_body(&self, id: u128) -> Option<Body<'_>> {
        self.has_company(id).then(|| {
            let roles = group(self.parts.roles.by_company.get(&id));
            list_body(&self.parts.roles.records, roles, chains::BY_PARENT)
        })
    }

    /// `/portfolio/{id}/notes`; `None` if the company is unknown.
    pub fn company_notes_body(&self, id: u128, page: OffsetPage) -> Option<Body<'_>> {
        self.has_company(id).then(|| {
            offset_body(
                &self.parts.notes.records,
                group(self.parts.notes.by_company.get(&id)),
                Some(chains::BY_PARENT),
                page,
            )
        })
    }

    /// `/portfolio/{id}/meetings` (an extension of the spec); `None` if the
    /// company is unknown. Each meeting as `/meetings/{id}` serves it
    /// without `include`.
    pub fn company_meetings_body(&self, id: u128, page: OffsetPage) -> Option<Body<'_>> {
        self.has_company(id).then(|| {
            offset_body(
                &self.parts.meetings.records,
                group(self.parts.meetings.by_company.get(&id)),
                Some(chains::BY_PARENT),
                page,
            )
        })
    }

    /// `/portfolio/{id}/metrics`: the latest value of each metric, by name.
    pub fn company_metrics_body(&self, id: u128) -> Option<Body<'_>> {
        if !self.has_company(id) {
            return None;
        }
        let (from, to) = self
            .parts
            .metrics
            .by_company
            .get(&id)
            .copied()
            .unwrap_or((0, 0));
        let list = &self.parts.metrics.all[from as usize..to as usize];
        Some(list_body(
            &self.parts.metrics.records,
            list,
            chains::BY_PARENT,
        ))
    }

    /// `/tasks`, filtered by status and/or priority.
    pub fn tasks_body(
        &self,
        status: Option<&str>,
        priority: Option<&str>,
        page: OffsetPage,
    ) -> Body<'_> {
        let (list, chain) = match (status, priority) {
            (None, None) => (&self.parts.tasks.order[..], Some(chains::TASKS_BY_DATE)),
            (Some(s), None) => (group(self.parts.tasks.by_status.get(s)), None),
            (None, Some(p)) => (group(self.parts.tasks.by_priority.get(p)), None),
            (Some(s), Some(p)) => (
                group(
                    self.parts
                        .tasks
                        .by_status_priority
                        .get(s)
                        .and_then(|m| m.get(p)),
                ),
                None,
            ),
        };
        offset_body(&self.parts.tasks.records, list, chain, page)
    }

    /// `/tasks/{id}`.
    pub fn task_body(&self, id: u128) -> Option<Body<'_>> {
        let pos = *self.parts.tasks.at.get(&id)?;
        Some(Body::single(&self.parts.tasks.records, pos))
    }

    /// `/roles`: the body built at load, shared.
    pub fn roles_body(&self) -> Body<'_> {
        Body::shared(
            self.parts.roles.body.clone(),
            self.parts.roles.gzip.get().cloned(),
        )
    }

    /// `/notes/{id}`.
    pub fn note_body(&self, id: u128) -> Option<Body<'_>> {
        let pos = *self.parts.notes.at.get(&id)?;
        Some(Body::single(&self.parts.notes.records, pos))
    }

    /// `/feed`: `{"data":[...],"pagination":{"limit":L,"nextCursor":C}}`.
    pub fn feed_body(&self, query: FeedQuery<'_>) -> Body<'_> {
        let (list, chain) = match query.kind {
            None => (&self.parts.feed.order[..], Some(chains::FEED_BY_DATE)),
            Some(kind) => (group(self.parts.feed.by_type.get(kind)), None),
        };
        let len = list.len();
        let key = |i: usize| self.parts.feed.keys[list[i] as usize];
        let from = match query.cursor {
            None => 0,
            Some(cursor) => partition_point(len, |i| cursor.is_before(key(i))),
        };
        let to = from.saturating_add(query.limit as usize).min(len);
        let next = (to < len && to > from).then(|| {
            let (last, next) = (key(to - 1), key(to));
            if next.0 < last.0 {
                Cursor::Before(last.0)
            } else {
                Cursor::After {
                    at: last.0,
                    id: last.1,
                }
            }
        });
        let mut tail = StackText::new(b"],\"pagination\":{\"limit\":");
        tail.push_u64(query.limit);
        tail.push(b",\"nextCursor\":");
        match next {
            Some(cursor) => {
                tail.push(b"\"");
                let mut rest = &mut tail.buf[tail.len..];
                let before = rest.len();
                // A cursor is an instant and an id: well under 100 bytes.
                let _ = write!(rest, "{cursor}");
                tail.len += before - rest.len();
                tail.push(b"\"");
            }
            None => tail.push(b"null"),
        }
        tail.push(b"}}");
        Body::list(&self.parts.feed.records, &list[from..to], chain, tail)
    }

    /// `/meetings/{id}`, with its notes attached when `include_notes`.
    pub fn meeting_body(&self, id: u128, include_notes: bool) -> Option<Body<'_>> {
        let pos = *self.parts.meetings.at.get(&id)?;
        if !include_notes {
            return Some(Body::single(&self.parts.meetings.records, pos));
        }
        // The rendered meeting ends with the `}` that closes the record;
        // `notes` goes in just before it, beside `attributes`.
        Some(Body {
            shape: Shape::Parts {
                head: b"{\"data\":",
                record: Some((&self.parts.meetings.records, pos, true)),
                mid: b",\"notes\":[",
                // Precompressed solo: no chain order.
                list: Some((
                    &self.parts.meeting_notes.records,
                    group(self.parts.meeting_notes.by_meeting.get(&id)),
                    None,
                )),
                tail: StackText::new(b"]}}"),
            },
        })
    }

    // The plain JSON of each endpoint, as tests and benches read it.

    pub fn portfolio(&self, priority: Option<&str>, page: OffsetPage) -> Bytes {
        self.portfolio_body(priority, page).identity()
    }

    pub fn company(&self, id: u128) -> Option<Bytes> {
        self.company_body(id).map(|b| b.identity())
    }

    pub fn company_tasks(&self, id: u128, page: OffsetPage) -> Option<Bytes> {
        self.company_tasks_body(id, page).map(|b| b.identity())
    }

    pub fn company_roles(&self, id: u128) -> Option<Bytes> {
        self.company_roles_body(id).map(|b| b.identity())
    }

    pub fn company_notes(&self, id: u128, page: OffsetPage) -> Option<Bytes> {
        self.company_notes_body(id, page).map(|b| b.identity())
    }

    pub fn company_meetings(&self, id: u128, page: OffsetPage) -> Option<Bytes> {
        self.company_meetings_body(id, page).map(|b| b.identity())
    }

    pub fn company_metrics(&self, id: u128) -> Option<Bytes> {
        self.company_metrics_body(id).map(|b| b.identity())
    }

    pub fn tasks(&self, status: Option<&str>, priority: Option<&str>, page: OffsetPage) -> Bytes {
        self.tasks_body(status, priority, page).identity()
    }

    pub fn task(&self, id: u128) -> Option<Bytes> {
        self.task_body(id).map(|b| b.identity())
    }

    pub fn roles(&self) -> Bytes {
        self.parts.roles.body.clone()
    }

    pub fn note(&self, id: u128) -> Option<Bytes> {
        self.note_body(id).map(|b| b.identity())
    }

    pub fn feed(&self, query: FeedQuery<'_>) -> Bytes {
        self.feed_body(query).identity()
    }

    pub fn meeting(&self, id: u128, include_notes: bool) -> Option<Bytes> {
        self.meeting_body(id, include_notes).map(|b| b.identity())
    }
}

/// The first index in `0..len` for which `before` is false; `before` must
/// hold for a prefix of the range.
fn partition_point(len: usize, before: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before(mid) { lo = mid + 1 } else { hi = mid }
    }
    lo
}
