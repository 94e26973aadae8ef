//! Builds a [`Dataset`] while a snapshot streams past: each record is
//! rendered to JSON the moment it has been checked (in file order, so the
//! input is read front to back), and only its key and filter values are
//! kept. [`Builder::finish`] then sorts the keys, builds the list orders and
//! filter indexes, and picks the latest metric values. Pure and synchronous;
//! run it off the async runtime.

use bytes::Bytes;
use rustc_hash::FxHashMap;

use super::id::IdMap;
use super::id::format_id;
use super::rendered::{Rendered, Renderer};
use super::{Dataset, Positions, RecordCounts, TextIndex};
use crate::snapshot::SnapshotError;
use crate::snapshot::format::{
    CompanyAttrs, FeedAttrs, MeetingAttrs, MeetingNoteAttrs, MetricAttrs, NoteAttrs, RoleAttrs,
    TaskAttrs, Text,
};
use crate::snapshot::validate::repeated_id;
use crate::snapshot::{Header, Key, RecordSink};

/// Short texts (filter values, metric names) as small numbers while loading.
#[derive(Default)]
struct Interner {
    ids: FxHashMap<Box<str>, u32>,
    texts: Vec<Box<str>>,
}

impl Interner {
    fn intern(&mut self, text: Option<&Text<'_>>) -> Option<u32> {
        let text = text?.as_str();
        if let Some(&id) = self.ids.get(text) {
            return Some(id);
        }
        let id = self.texts.len() as u32;
        self.texts.push(text.into());
        self.ids.insert(text.into(), id);
        Some(id)
    }

    fn text(&self, id: u32) -> &str {
        &self.texts[id as usize]
    }
}

/// One collection while it loads: rendered records and their keys, by index.
#[derive(Default)]
struct Part {
    rendered: Renderer,
    keys: Vec<Key>,
}

impl Part {
    fn push(&mut self, key: &Key, id: &Text<'_>, attrs: &impl crate::snapshot::render::Render) {
        self.rendered.push(id, attrs);
        self.keys.push(*key);
    }
}

/// Receives the records of one snapshot (a [`RecordSink`]) and turns them
/// into a [`Dataset`].
#[derive(Default)]
pub struct Builder {
    interner: Interner,
    companies: Part,
    /// Name and priority of each company.
    company_fields: Vec<(Option<Box<str>>, Option<u32>)>,
    tasks: Part,
    /// Status and priority of each task.
    task_fields: Vec<(Option<u32>, Option<u32>)>,
    roles: Part,
    feed: Part,
    feed_types: Vec<Option<u32>>,
    notes: Part,
    metrics: Part,
    metric_names: Vec<Option<u32>>,
    meetings: Part,
    meeting_notes: Part,
}

impl RecordSink for Builder {
    fn company(&mut self, key: &Key, attrs: &CompanyAttrs<'_>, id: &Text<'_>) {
        self.companies.push(key, id, attrs);
        let priority = self.interner.intern(attrs.priority.as_ref());
        self.company_fields
            .push((attrs.name.as_ref().map(|n| n.as_str().into()), priority));
    }

    fn task(&mut self, key: &Key, attrs: &TaskAttrs<'_>, id: &Text<'_>) {
        self.tasks.push(key, id, attrs);
        let status = self.interner.intern(attrs.status.as_ref());
        let priority = self.interner.intern(attrs.priority.as_ref());
        self.task_fields.push((status, priority));
    }

    fn role(&mut self, key: &Key, attrs: &RoleAttrs<'_>, id: &Text<'_>) {
        self.roles.push(key, id, attrs);
    }

    fn feed(&mut self, key: &Key, attrs: &FeedAttrs<'_>, id: &Text<'_>) {
        self.feed.push(key, id, attrs);
        let kind = self.interner.intern(attrs.kind.as_ref());
        self.feed_types.push(kind);
    }

    fn note(&mut self, key: &Key, attrs: &NoteAttrs<'_>, id: &Text<'_>) {
        self.notes.push(key, id, attrs);
    }

    fn metric(&mut self, key: &Key, attrs: &MetricAttrs<'_>, id: &Text<'_>) {
        self.metrics.push(key, id, attrs);
        let name = self.interner.intern(attrs.name.as_ref());
        self.metric_names.push(name);
    }

    fn meeting(&mut self, key: &Key, attrs: &MeetingAttrs<'_>, id: &Text<'_>) {
        self.meetings.push(key, id, attrs);
    }

    fn meeting_note(&mut self, key: &Key, attrs: &MeetingNoteAttrs<'_>, id: &Text<'_>) {
        self.meeting_notes.push(key, id, attrs);
    }
}

impl Builder {
    /// Sorts, indexes and assembles the dataset; also returns the warnings
    /// (records pointing at a company or meeting the snapshot does not hold).
    /// Fails if an id repeats within a collection (`file` names the file).
    pub fn finish(
        self,
        file: &str,
        header: Header,
        version: String,
        content_hash: u64,
    ) -> Result<(Dataset, Vec<String>), SnapshotError> {
        let Builder {
            interner,
            companies,
            company_fields,
            tasks,
            task_fields,
            roles,
            feed,
            feed_types,
            notes,
            metrics,
            metric_names,
            meetings,
            meeting_notes,
        } = self;
        let ids = Ids {
            companies: index_ids(file, "companies", &companies.keys)?,
            tasks: index_ids(file, "tasks", &tasks.keys)?,
            notes: index_ids(file, "notes", &notes.keys)?,
            meetings: index_ids(file, "meetings", &meetings.keys)?,
        };
        for (name, keys) in [
            ("roles", &roles.keys),
            ("feed", &feed.keys),
            ("metrics", &metrics.keys),
            ("meeting_notes", &meeting_notes.keys),
        ] {
            index_ids(file, name, keys)?;
        }
        let mut warnings = Vec::new();
        for (name, part) in [
            ("tasks", &tasks),
            ("roles", &roles),
            ("feed", &feed),
            ("notes", &notes),
            ("metrics", &metrics),
            ("meetings", &meetings),
        ] {
            warn_dangling(&mut warnings, name, "company", &part.keys, &ids.companies);
        }
        warn_dangling(
            &mut warnings,
            "meeting_notes",
            "meeting",
            &meeting_notes.keys,
            &ids.meetings,
        );
        if header.key_hashes.is_empty() {
            warnings.push("api_keys is empty: no key can read this workspace".to_owned());
        }

        // Companies: name ascending in code-point order (byte order of UTF-8), then id.
        let mut company_order: Vec<u32> = (0..companies.keys.len() as u32).collect();
        company_order.sort_unstable_by(|&a, &b| {
            let (a, b) = (a as usize, b as usize);
            company_fields[a]
                .0
                .cmp(&company_fields[b].0)
                .then(companies.keys[a].id.cmp(&companies.keys[b].id))
        });
        let companies_by_priority = group_by(&company_order, &interner, |i| company_fields[i].1);

        // Tasks: newest first, ties by id descending; indexed by each filter.
        let task_order = newest_first(&tasks.keys);
        let tasks_by_status = group_by(&task_order, &interner, |i| task_fields[i].0);
        let tasks_by_priority = group_by(&task_order, &interner, |i| task_fields[i].1);
        let tasks_by_status_priority = group_by_pair(&task_order, &interner, |i| task_fields[i]);
        let tasks_by_company = group_by_parent(&task_order, &tasks.keys);

        let role_order = newest_first(&roles.keys);
        let roles_by_company = group_by_parent(&role_order, &roles.keys);
        let roles = roles.rendered.finish();
        let roles_body = list_body(&roles, &role_order);

        let feed_order = newest_first(&feed.keys);
        let feed_keys = feed.keys.iter().map(|k| (k.at, k.id)).collect();
        let feed_by_type = group_by(&feed_order, &interner, |i| feed_types[i]);

        let note_order = newest_first(&notes.keys);
        let notes_by_company = group_by_parent(&note_order, &notes.keys);

        let (metrics, metrics_by_company) =
            latest_metrics(metrics, &metric_names, &interner, &ids.companies);

        let mut note_order_by_meeting: Vec<u32> = (0..meeting_notes.keys.len() as u32)
            .filter(|&i| meeting_notes.keys[i as usize].parent.is_some())
            .collect();
        note_order_by_meeting.sort_unstable_by_key(|&i| {
            let k = &meeting_notes.keys[i as usize];
            (k.parent, k.at, k.id)
        });
        let meeting_notes_by_meeting = group_by_parent(&note_order_by_meeting, &meeting_notes.keys);

        let counts = RecordCounts {
            companies: companies.keys.len(),
            tasks: tasks.keys.len(),
            roles: roles.len(),
            feed: feed.keys.len(),
            notes: notes.keys.len(),
            metrics: metric_names.len(),
            meetings: meetings.keys.len(),
            meeting_notes: meeting_notes.keys.len(),
        };
        let fingerprint = fingerprint(&header.workspace_id, &version, content_hash);
        let dataset = Dataset {
            fingerprint,
            workspace_id: header.workspace_id,
            workspace_name: header.workspace_name,
            version,
            key_hashes: header.key_hashes,
            counts,
            companies: companies.rendered.finish(),
            company_order,
            company_at: ids.companies,
            companies_by_priority,
            tasks: tasks.rendered.finish(),
            task_order,
            task_at: ids.tasks,
            tasks_by_status,
            tasks_by_priority,
            tasks_by_status_priority,
            tasks_by_company,
            roles,
            roles_body,
            roles_by_company,
            feed: feed.rendered.finish(),
            feed_order,
            feed_keys,
            feed_by_type,
            notes: notes.rendered.finish(),
            note_at: ids.notes,
            notes_by_company,
            metrics,
            metrics_by_company,
            meetings: meetings.rendered.finish(),
            meeting_at: ids.meetings,
            meeting_notes: meeting_notes.rendered.finish(),
            meeting_notes_by_meeting,
        };
        Ok((dataset, warnings))
    }
}

/// A stable hash of what identifies a dataset's content: workspace, version
/// and the snapshot's bytes (FxHash is fixed: no per-process seed, so every
/// replica computes the same value).
fn fingerprint(workspace: &str, version: &str, content_hash: u64) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = rustc_hash::FxBuildHasher.build_hasher();
    hasher.write(workspace.as_bytes());
    hasher.write_u8(0);
    hasher.write(version.as_bytes());
    hasher.write_u64(content_hash);
    hasher.finish()
}

/// Id → record index of the collections served by id.
struct Ids {
    companies: IdMap<u32>,
    tasks: IdMap<u32>,
    notes: IdMap<u32>,
    meetings: IdMap<u32>,
}

/// Id → record index; an id that repeats within the collection is an error.
fn index_ids(file: &str, collection: &str, keys: &[Key]) -> Result<IdMap<u32>, SnapshotError> {
    let mut map = IdMap::with_capacity_and_hasher(keys.len(), Default::default());
    for (i, key) in keys.iter().enumerate() {
        if let Some(first) = map.insert(key.id, i as u32) {
            return Err(repeated_id(file, collection, i, first as usize, key.id));
        }
    }
    Ok(map)
}

/// Indices ordered newest first by the key's instant, ties by id descending.
fn newest_first(keys: &[Key]) -> Positions {
    let mut order: Vec<u32> = (0..keys.len() as u32).collect();
    order.sort_unstable_by(|&a, &b| {
        let (a, b) = (&keys[a as usize], &keys[b as usize]);
        (b.at, b.id).cmp(&(a.at, a.id))
    });
    order
}

/// `{"data":[...]}` of the records in `order`, built once.
fn list_body(rendered: &Rendered, order: &[u32]) -> Bytes {
    let mut out = Vec::with_capacity(rendered.size(order) + 16);
    out.extend_from_slice(b"{\"data\":[");
    rendered.write(order, &mut out);
    out.extend_from_slice(b"]}");
    Bytes::from(out)
}

/// Record indices grouped by an interned text value (records where it is
/// `null` are in no group), each group in list order.
fn group_by(order: &[u32], interner: &Interner, value: impl Fn(usize) -> Option<u32>) -> TextIndex {
    let mut groups: FxHashMap<u32, Positions> = FxHashMap::default();
    for &i in order {
        if let Some(v) = value(i as usize) {
            groups.entry(v).or_default().push(i);
        }
    }
    groups
        .into_iter()
        .map(|(v, mut group)| {
            group.shrink_to_fit();
            (interner.text(v).into(), group)
        })
        .collect()
}

/// Record indices grouped by two values at once (status, then priority).
fn group_by_pair(
    order: &[u32],
    interner: &Interner,
    values: impl Fn(usize) -> (Option<u32>, Option<u32>),
) -> FxHashMap<Box<str>, TextIndex> {
    let mut groups: FxHashMap<u32, FxHashMap<u32, Positions>> = FxHashMap::default();
    for &i in order {
        if let (Some(a), Some(b)) = values(i as usize) {
            groups.entry(a).or_default().entry(b).or_default().push(i);
        }
    }
    groups
        .into_iter()
        .map(|(a, inner)| {
            let inner = inner
                .into_iter()
                .map(|(b, group)| (interner.text(b).into(), group))
                .collect();
            (interner.text(a).into(), inner)
        })
        .collect()
}

/// Record indices grouped by the company (or meeting) they point at.
fn group_by_parent(order: &[u32], keys: &[Key]) -> IdMap<Positions> {
    let mut groups: IdMap<Positions> = IdMap::default();
    for &i in order {
        if let Some(parent) = keys[i as usize].parent {
            groups.entry(parent).or_default().push(i);
        }
    }
    groups
}

/// For each (company, metric name), the value with the greatest
/// `reported_at` (ties: greatest id), kept grouped by company and ordered by
/// name within it; the rest of the history is dropped. Values of companies
/// the snapshot does not hold cannot be served (their company is a 404).
fn latest_metrics(
    metrics: Part,
    names: &[Option<u32>],
    interner: &Interner,
    companies: &IdMap<u32>,
) -> (Rendered, IdMap<(u32, u32)>) {
    let keys = &metrics.keys;
    let name = |i: u32| names[i as usize].map(|n| interner.text(n));
    let mut order: Vec<u32> = (0..keys.len() as u32)
        .filter(|&i| {
            keys[i as usize]
                .parent
                .is_some_and(|c| companies.contains_key(&c))
        })
        .collect();
    order.sort_unstable_by(|&a, &b| {
        let (ka, kb) = (&keys[a as usize], &keys[b as usize]);
        ka.parent
            .cmp(&kb.parent)
            .then_with(|| name(a).cmp(&name(b)))
            .then_with(|| (kb.at, kb.id).cmp(&(ka.at, ka.id)))
    });
    order.dedup_by(|later, first| {
        keys[*later as usize].parent == keys[*first as usize].parent && name(*later) == name(*first)
    });
    let mut by_company: IdMap<(u32, u32)> = IdMap::default();
    for (pos, &i) in order.iter().enumerate() {
        if let Some(company) = keys[i as usize].parent {
            let range = by_company
                .entry(company)
                .or_insert((pos as u32, pos as u32));
            range.1 = pos as u32 + 1;
        }
    }
    let all = metrics.rendered.finish();
    (all.select(&order), by_company)
}

/// Records pointing at a parent the snapshot does not hold are kept; one
/// warning per collection says how many, with the first as an example.
fn warn_dangling(
    warnings: &mut Vec<String>,
    collection: &str,
    parent: &str,
    keys: &[Key],
    parents: &IdMap<u32>,
) {
    let mut dangling = keys
        .iter()
        .filter(|k| !k.parent.is_some_and(|p| parents.contains_key(&p)));
    if let Some(first) = dangling.next() {
        let count = 1 + dangling.count();
        warnings.push(format!(
            "{collection}: {count} record(s) point at a {parent} this snapshot does not hold (first: {}); they are kept",
            format_id(first.id)
        ));
    }
}
