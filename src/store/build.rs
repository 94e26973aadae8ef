//! Builds a [`Dataset`] from a validated snapshot: sorts each list once,
//! renders each served record once, and indexes what requests filter and
//! look up by. Pure and synchronous; run it off the async runtime.

use rustc_hash::FxHashMap;

use super::rendered::{Rendered, Renderer};
use super::{Dataset, Positions, RecordCounts, TextIndex};
use crate::snapshot::format::{Record, Text};
use crate::snapshot::id::IdMap;
use crate::snapshot::render::Render;
use crate::snapshot::{Key, Validated};

/// Turns a validated snapshot into a dataset that serves under `version`.
pub fn build(v: &Validated<'_>, version: String) -> Dataset {
    let doc = &v.doc;
    let companies = doc.companies.as_deref().unwrap_or_default();
    let tasks = doc.tasks.as_deref().unwrap_or_default();
    let roles = doc.roles.as_deref().unwrap_or_default();
    let feed = doc.feed.as_deref().unwrap_or_default();
    let notes = doc.notes.as_deref().unwrap_or_default();
    let metrics = doc.metrics.as_deref().unwrap_or_default();
    let meetings = doc.meetings.as_deref().unwrap_or_default();
    let meeting_notes = doc.meeting_notes.as_deref().unwrap_or_default();

    // Companies: name ascending in code-point order (byte order of UTF-8), then id.
    let company_name = |i: usize| attrs(&companies[i]).name.as_ref().map(Text::as_str);
    let mut order: Vec<u32> = (0..companies.len() as u32).collect();
    order.sort_unstable_by(|&a, &b| {
        let (a, b) = (a as usize, b as usize);
        company_name(a)
            .cmp(&company_name(b))
            .then(v.companies[a].id.cmp(&v.companies[b].id))
    });
    let company_list = render(companies, &order);
    let company_at = positions_by_id(&order, &v.companies);
    let companies_by_priority = group_by_text(&order, |i| {
        attrs(&companies[i]).priority.as_ref().map(Text::as_str)
    });

    // Tasks: newest first, ties by id descending; indexed by each filter.
    let order = newest_first(&v.tasks);
    let task_list = render(tasks, &order);
    let task_at = positions_by_id(&order, &v.tasks);
    let status = |i: usize| attrs(&tasks[i]).status.as_ref().map(Text::as_str);
    let priority = |i: usize| attrs(&tasks[i]).priority.as_ref().map(Text::as_str);
    let tasks_by_status = group_by_text(&order, status);
    let tasks_by_priority = group_by_text(&order, priority);
    let tasks_by_status_priority = group_by_pair(&order, status, priority);
    let tasks_by_company = group_by_parent(&order, &v.tasks);

    let order = newest_first(&v.roles);
    let role_list = render(roles, &order);
    let roles_by_company = group_by_parent(&order, &v.roles);

    let order = newest_first(&v.feed);
    let feed_list = render(feed, &order);
    let feed_keys = order
        .iter()
        .map(|&i| (v.feed[i as usize].at, v.feed[i as usize].id))
        .collect();
    let feed_by_type = group_by_text(&order, |i| attrs(&feed[i]).kind.as_ref().map(Text::as_str));

    let order = newest_first(&v.notes);
    let note_list = render(notes, &order);
    let note_at = positions_by_id(&order, &v.notes);
    let notes_by_company = group_by_parent(&order, &v.notes);

    let (metric_list, metrics_by_company) = latest_metrics(v, metrics, &company_at);

    let order: Vec<u32> = (0..meetings.len() as u32).collect();
    let meeting_list = render(meetings, &order);
    let meeting_at = positions_by_id(&order, &v.meetings);
    let (meeting_note_list, meeting_notes_by_meeting) = group_meeting_notes(v, meeting_notes);

    Dataset {
        workspace_id: v.workspace_id.clone(),
        workspace_name: v.workspace_name.clone(),
        version,
        key_hashes: v.key_hashes.clone(),
        counts: RecordCounts {
            companies: companies.len(),
            tasks: tasks.len(),
            roles: roles.len(),
            feed: feed.len(),
            notes: notes.len(),
            metrics: metrics.len(),
            meetings: meetings.len(),
            meeting_notes: meeting_notes.len(),
        },
        companies: company_list,
        company_at,
        companies_by_priority,
        tasks: task_list,
        task_at,
        tasks_by_status,
        tasks_by_priority,
        tasks_by_status_priority,
        tasks_by_company,
        roles: role_list,
        roles_by_company,
        feed: feed_list,
        feed_keys,
        feed_by_type,
        notes: note_list,
        note_at,
        notes_by_company,
        metrics: metric_list,
        metrics_by_company,
        meetings: meeting_list,
        meeting_at,
        meeting_notes: meeting_note_list,
        meeting_notes_by_meeting,
    }
}

/// A record's attributes; validation filled in absent ones.
fn attrs<'r, A>(record: &'r Record<'_, A>) -> &'r A {
    record
        .attributes
        .as_ref()
        .expect("validation fills in absent attributes")
}

/// The record's id as written (validation guarantees it has one).
fn id_of<'r, 'a>(id: &'r Option<Text<'a>>) -> &'r Text<'a> {
    const NONE: &Text<'static> = &Text(std::borrow::Cow::Borrowed(""));
    id.as_ref().unwrap_or(NONE)
}

/// Indices ordered newest first by the key's instant, ties by id descending.
fn newest_first(keys: &[Key]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..keys.len() as u32).collect();
    order.sort_unstable_by(|&a, &b| {
        let (a, b) = (&keys[a as usize], &keys[b as usize]);
        (b.at, b.id).cmp(&(a.at, a.id))
    });
    order
}

/// Renders `records` in `order`, reserving roughly what they will take.
fn render<A: Render>(records: &[Record<'_, A>], order: &[u32]) -> Rendered {
    let mut out = Renderer::with_capacity(order.len(), order.len() * 256);
    for &i in order {
        let record = &records[i as usize];
        out.push(id_of(&record.id), attrs(record));
    }
    out.finish()
}

/// Id → position in the list whose order is `order`.
fn positions_by_id(order: &[u32], keys: &[Key]) -> IdMap<u32> {
    let mut map = IdMap::default();
    map.reserve(order.len());
    for (pos, &i) in order.iter().enumerate() {
        map.insert(keys[i as usize].id, pos as u32);
    }
    map
}

/// Positions grouped by a text attribute (records where it is `null` are in
/// no group), each group in list order.
fn group_by_text<'t>(order: &[u32], value: impl Fn(usize) -> Option<&'t str>) -> TextIndex {
    let mut groups: FxHashMap<&'t str, Positions> = FxHashMap::default();
    for (pos, &i) in order.iter().enumerate() {
        if let Some(text) = value(i as usize) {
            groups.entry(text).or_default().push(pos as u32);
        }
    }
    owned_keys(groups)
}

/// Positions grouped by two text attributes at once (status and priority).
fn group_by_pair<'t>(
    order: &[u32],
    first: impl Fn(usize) -> Option<&'t str>,
    second: impl Fn(usize) -> Option<&'t str>,
) -> FxHashMap<Box<str>, TextIndex> {
    let mut groups: FxHashMap<&'t str, FxHashMap<&'t str, Positions>> = FxHashMap::default();
    for (pos, &i) in order.iter().enumerate() {
        if let (Some(a), Some(b)) = (first(i as usize), second(i as usize)) {
            groups
                .entry(a)
                .or_default()
                .entry(b)
                .or_default()
                .push(pos as u32);
        }
    }
    groups
        .into_iter()
        .map(|(k, inner)| (k.into(), owned_keys(inner)))
        .collect()
}

fn owned_keys(groups: FxHashMap<&str, Positions>) -> TextIndex {
    groups
        .into_iter()
        .map(|(k, mut v)| {
            v.shrink_to_fit();
            (k.into(), v)
        })
        .collect()
}

/// Positions grouped by the company (or meeting) a record points at.
fn group_by_parent(order: &[u32], keys: &[Key]) -> IdMap<Positions> {
    let mut groups: IdMap<Positions> = IdMap::default();
    for (pos, &i) in order.iter().enumerate() {
        if let Some(parent) = keys[i as usize].parent {
            groups.entry(parent).or_default().push(pos as u32);
        }
    }
    groups
}

/// For each (company, metric name), the value with the greatest
/// `reported_at` (ties: greatest id); rendered grouped by company and ordered
/// by name within it. Values of companies the snapshot does not hold cannot
/// be served (their company 404s) and are not rendered.
fn latest_metrics(
    v: &Validated<'_>,
    metrics: &[crate::snapshot::format::MetricRecord<'_>],
    companies: &IdMap<u32>,
) -> (Rendered, IdMap<(u32, u32)>) {
    let name = |i: usize| {
        metrics[i]
            .attributes
            .as_ref()
            .and_then(|a| a.name.as_ref())
            .map(Text::as_str)
    };
    let mut order: Vec<u32> = (0..metrics.len() as u32)
        .filter(|&i| {
            v.metrics[i as usize]
                .parent
                .is_some_and(|c| companies.contains_key(&c))
        })
        .collect();
    order.sort_unstable_by(|&a, &b| {
        let (ka, kb) = (&v.metrics[a as usize], &v.metrics[b as usize]);
        ka.parent
            .cmp(&kb.parent)
            .then_with(|| name(a as usize).cmp(&name(b as usize)))
            .then_with(|| (kb.at, kb.id).cmp(&(ka.at, ka.id)))
    });
    order.dedup_by(|later, first| {
        let (l, f) = (*later as usize, *first as usize);
        v.metrics[l].parent == v.metrics[f].parent && name(l) == name(f)
    });
    let mut out = Renderer::with_capacity(order.len(), order.len() * 256);
    let mut by_company: IdMap<(u32, u32)> = IdMap::default();
    let empty = Default::default();
    for (pos, &i) in order.iter().enumerate() {
        let record = &metrics[i as usize];
        out.push(
            id_of(&record.id),
            record.attributes.as_ref().unwrap_or(&empty),
        );
        if let Some(company) = v.metrics[i as usize].parent {
            let range = by_company
                .entry(company)
                .or_insert((pos as u32, pos as u32));
            range.1 = pos as u32 + 1;
        }
    }
    (out.finish(), by_company)
}

/// Meeting notes grouped by meeting, `created_at` then id ascending within.
fn group_meeting_notes(
    v: &Validated<'_>,
    notes: &[Record<'_, crate::snapshot::format::MeetingNoteAttrs<'_>>],
) -> (Rendered, IdMap<(u32, u32)>) {
    let mut order: Vec<u32> = (0..notes.len() as u32)
        .filter(|&i| v.meeting_notes[i as usize].parent.is_some())
        .collect();
    order.sort_unstable_by_key(|&i| {
        let k = &v.meeting_notes[i as usize];
        (k.parent, k.at, k.id)
    });
    let rendered = render(notes, &order);
    let mut by_meeting: IdMap<(u32, u32)> = IdMap::default();
    for (pos, &i) in order.iter().enumerate() {
        if let Some(meeting) = v.meeting_notes[i as usize].parent {
            let range = by_meeting
                .entry(meeting)
                .or_insert((pos as u32, pos as u32));
            range.1 = pos as u32 + 1;
        }
    }
    (rendered, by_meeting)
}
