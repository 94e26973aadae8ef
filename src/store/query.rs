//! Answers to queries, as complete JSON bodies.
//!
//! Every list page costs O(limit) whatever the offset and the data size: the
//! page is a slice of a pre-sorted list (or of a pre-built filter index) and
//! its records are copied as rendered. The feed costs O(log n + limit): a
//! binary search for the cursor, then the same copy. `hasMore` and
//! `nextCursor` look one entry ahead; nothing is counted.

use bytes::Bytes;

use super::cursor::Cursor;
use super::rendered::{Rendered, write_u64};
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

/// `{"data":[...],"pagination":{"limit":L,"offset":O,"hasMore":B}}` for the
/// page of `list` (record indices in list order) that `page` selects.
fn offset_body(records: &Rendered, list: &[u32], page: OffsetPage) -> Bytes {
    let len = list.len() as u64;
    let from = page.offset.min(len) as usize;
    let to = page.offset.saturating_add(page.limit).min(len) as usize;
    let has_more = (to as u64) < len;
    let selected = &list[from..to];
    let mut out = Vec::with_capacity(records.size(selected) + 96);
    out.extend_from_slice(b"{\"data\":[");
    records.write(selected, &mut out);
    out.extend_from_slice(b"],\"pagination\":{\"limit\":");
    write_u64(&mut out, page.limit);
    out.extend_from_slice(b",\"offset\":");
    write_u64(&mut out, page.offset);
    out.extend_from_slice(if has_more {
        b",\"hasMore\":true}}"
    } else {
        b",\"hasMore\":false}}"
    });
    Bytes::from(out)
}

/// `{"data":[...]}` for the records of `list`.
fn list_body(records: &Rendered, list: &[u32]) -> Bytes {
    let mut out = Vec::with_capacity(records.size(list) + 16);
    out.extend_from_slice(b"{\"data\":[");
    records.write(list, &mut out);
    out.extend_from_slice(b"]}");
    Bytes::from(out)
}

/// `{"data":<record>}`.
fn single_body(record: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(record.len() + 9);
    out.extend_from_slice(b"{\"data\":");
    out.extend_from_slice(record);
    out.push(b'}');
    Bytes::from(out)
}

impl Dataset {
    pub fn has_company(&self, id: u128) -> bool {
        self.companies.at.contains_key(&id)
    }

    /// `/portfolio`.
    pub fn portfolio(&self, priority: Option<&str>, page: OffsetPage) -> Bytes {
        let list = match priority {
            None => &self.companies.order,
            Some(p) => group(self.companies.by_priority.get(p)),
        };
        offset_body(&self.companies.records, list, page)
    }

    /// `/portfolio/{id}`.
    pub fn company(&self, id: u128) -> Option<Bytes> {
        let i = *self.companies.at.get(&id)?;
        Some(single_body(self.companies.records.record(i as usize)))
    }

    /// `/portfolio/{id}/tasks`; `None` if the company is unknown.
    pub fn company_tasks(&self, id: u128, page: OffsetPage) -> Option<Bytes> {
        self.has_company(id).then(|| {
            offset_body(
                &self.tasks.records,
                group(self.tasks.by_company.get(&id)),
                page,
            )
        })
    }

    /// `/portfolio/{id}/roles`; `None` if the company is unknown.
    pub fn company_roles(&self, id: u128) -> Option<Bytes> {
        self.has_company(id)
            .then(|| list_body(&self.roles.records, group(self.roles.by_company.get(&id))))
    }

    /// `/portfolio/{id}/notes`; `None` if the company is unknown.
    pub fn company_notes(&self, id: u128, page: OffsetPage) -> Option<Bytes> {
        self.has_company(id).then(|| {
            offset_body(
                &self.notes.records,
                group(self.notes.by_company.get(&id)),
                page,
            )
        })
    }

    /// `/portfolio/{id}/metrics`: the latest value of each metric, by name.
    pub fn company_metrics(&self, id: u128) -> Option<Bytes> {
        if !self.has_company(id) {
            return None;
        }
        let (from, to) = self.metrics.by_company.get(&id).copied().unwrap_or((0, 0));
        let list: Vec<u32> = (from..to).collect();
        Some(list_body(&self.metrics.records, &list))
    }

    /// `/tasks`, filtered by status and/or priority.
    pub fn tasks(&self, status: Option<&str>, priority: Option<&str>, page: OffsetPage) -> Bytes {
        let list = match (status, priority) {
            (None, None) => &self.tasks.order,
            (Some(s), None) => group(self.tasks.by_status.get(s)),
            (None, Some(p)) => group(self.tasks.by_priority.get(p)),
            (Some(s), Some(p)) => {
                group(self.tasks.by_status_priority.get(s).and_then(|m| m.get(p)))
            }
        };
        offset_body(&self.tasks.records, list, page)
    }

    /// `/tasks/{id}`.
    pub fn task(&self, id: u128) -> Option<Bytes> {
        let pos = *self.tasks.at.get(&id)?;
        Some(single_body(self.tasks.records.record(pos as usize)))
    }

    /// `/roles`: the pre-rendered body, shared.
    pub fn roles(&self) -> Bytes {
        self.roles.body.clone()
    }

    /// `/notes/{id}`.
    pub fn note(&self, id: u128) -> Option<Bytes> {
        let pos = *self.notes.at.get(&id)?;
        Some(single_body(self.notes.records.record(pos as usize)))
    }

    /// `/feed`: `{"data":[...],"pagination":{"limit":L,"nextCursor":C}}`.
    pub fn feed(&self, query: FeedQuery<'_>) -> Bytes {
        let list = match query.kind {
            None => &self.feed.order,
            Some(kind) => group(self.feed.by_type.get(kind)),
        };
        let len = list.len();
        let key = |i: usize| self.feed.keys[list[i] as usize];
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
        let selected = &list[from..to];
        let mut out = Vec::with_capacity(self.feed.records.size(selected) + 160);
        out.extend_from_slice(b"{\"data\":[");
        self.feed.records.write(selected, &mut out);
        out.extend_from_slice(b"],\"pagination\":{\"limit\":");
        write_u64(&mut out, query.limit);
        out.extend_from_slice(b",\"nextCursor\":");
        match next {
            Some(cursor) => {
                out.push(b'"');
                out.extend_from_slice(cursor.to_string().as_bytes());
                out.push(b'"');
            }
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b"}}");
        Bytes::from(out)
    }

    /// `/meetings/{id}`, with its notes attached when `include_notes`.
    pub fn meeting(&self, id: u128, include_notes: bool) -> Option<Bytes> {
        let pos = *self.meetings.at.get(&id)?;
        let record = self.meetings.records.record(pos as usize);
        if !include_notes {
            return Some(single_body(record));
        }
        let notes = group(self.meeting_notes.by_meeting.get(&id));
        // The rendered meeting ends with the `}` that closes the record;
        // `notes` goes in just before it, beside `attributes`.
        let open = &record[..record.len() - 1];
        let mut out =
            Vec::with_capacity(record.len() + self.meeting_notes.records.size(notes) + 32);
        out.extend_from_slice(b"{\"data\":");
        out.extend_from_slice(open);
        out.extend_from_slice(b",\"notes\":[");
        self.meeting_notes.records.write(notes, &mut out);
        out.extend_from_slice(b"]}}");
        Some(Bytes::from(out))
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
