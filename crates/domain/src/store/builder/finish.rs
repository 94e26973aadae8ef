//! [`Builder::finish`], in named steps: check ids, note dangling
//! references, then build each collection's lists and indexes.

use std::sync::Arc;

use bytes::Bytes;

use super::index::{
    Interner, breathe, group_by, group_by_pair, group_by_parent, index_ids, newest_first, sort_by,
};
use super::reuse::KeptForReuse;
use super::{Builder, Built, BytesDigest, Key, LoadingCollection, Meta, RepeatedId, Reusable};
use crate::store::collection::{Collection, RecordCounts};
use crate::store::id::{IdMap, format_id};
use crate::store::rendered::{Rendered, Renderer};
use crate::store::threads::{Threads, join};
use crate::store::warm::Warming;
use crate::store::{
    Companies, Dataset, Feed, LatestMetrics, MeetingNotes, NewestByCompany, Parts, Positions,
    Roles, Tasks, TextIndex,
};

/// Records of a dataset smaller than this are not kept for its next
/// version to take over: loading a few hundred kilobytes takes a
/// millisecond or two, while what reuse keeps (a key and a digest a
/// record: about 80 bytes when measured, about 50 since keys are kept
/// compact) cost a replica of 2,000 workspaces of 100 KB 12% more memory
/// (1.71 times its JSON against 1.52, BENCHMARKS.md "Small changes").
const REUSED_FROM_BYTES: usize = 4 << 20;

impl Builder {
    /// Checks ids, sorts, indexes and assembles the dataset. Fails if an id
    /// repeats within a collection.
    pub fn finish(self, meta: Meta, threads: &dyn Threads) -> Result<Built, RepeatedId> {
        // Every field named, here and in `Builder::append`, on purpose: the
        // compiler then makes both take in a field added to `Builder`.
        let Builder {
            parts,
            interner,
            company_names,
            company_priorities,
            task_fields,
            feed_types,
            metric_names,
            previous: _,
            remap: _,
            next_digest: _,
            reused,
        } = self;
        // The task list is most of a large dataset: its orders are built on
        // a second thread while this one indexes ids.
        let keys = &parts[Collection::Tasks.index()].keys;
        let (task_indexes, checked) = join(
            threads,
            || task_indexes(keys, &task_fields, &interner),
            || {
                check_ids(&parts).map(|ids| {
                    let warnings = dangling_references(&parts, &ids);
                    (ids, warnings)
                })
            },
        );
        let (mut ids, mut warnings) = checked?;
        if meta.key_hashes.is_empty() {
            warnings.push("api_keys is empty: no key can read this workspace".to_owned());
        }
        let mut counts = RecordCounts::default();
        for c in Collection::ALL {
            counts[c] = parts[c.index()].keys.len();
        }
        // Free what is no longer needed before building the rest: the peak
        // of a load is here, next to the old dataset still serving. Only
        // four collections are served by id; the others' maps only checked
        // for repeats.
        for c in [
            Collection::Roles,
            Collection::Feed,
            Collection::Metrics,
            Collection::MeetingNotes,
        ] {
            ids[c.index()] = IdMap::default();
        }
        // What stays for the next version to take over (`reuse`): each
        // record's key and digest, if every record came with one.
        let reusable = parts.iter().all(|p| p.digests.len() == p.keys.len())
            && parts.iter().map(|p| p.rendered.bytes()).sum::<usize>() >= REUSED_FROM_BYTES;
        let mut keys: [Vec<Key>; Collection::COUNT] = Default::default();
        let mut digests: [Vec<BytesDigest>; Collection::COUNT] = Default::default();
        let mut rendered: [Renderer; Collection::COUNT] = Default::default();
        for (c, part) in parts.into_iter().enumerate() {
            (rendered[c], keys[c], digests[c]) = (part.rendered, part.keys, part.digests);
        }
        let mut take = |c: Collection| {
            (
                std::mem::take(&mut rendered[c.index()]),
                std::mem::take(&mut ids[c.index()]),
            )
        };
        let (tasks, task_at) = take(Collection::Tasks);
        let (companies, company_at) = take(Collection::Companies);
        let metrics = take(Collection::Metrics).0;
        let (metrics, latest) = latest_metrics(
            metrics,
            &keys[Collection::Metrics.index()],
            &metric_names,
            &interner,
            &company_at,
        );
        let (notes, note_at) = take(Collection::Notes);
        let (meetings, meeting_at) = take(Collection::Meetings);
        let k = |c: Collection| &keys[c.index()];
        let meetings = newest_by_company(meetings, k(Collection::Meetings), meeting_at);
        let dataset_parts = (
            companies_by_name(
                companies,
                k(Collection::Companies),
                company_at,
                &company_names,
                &company_priorities,
                &interner,
            ),
            Tasks {
                records: Arc::new(tasks.finish()),
                order: task_indexes.order,
                at: task_at,
                by_status: task_indexes.by_status,
                by_priority: task_indexes.by_priority,
                by_status_priority: task_indexes.by_status_priority,
                by_company: task_indexes.by_company,
            },
            roles(take(Collection::Roles).0, k(Collection::Roles)),
            feed(
                take(Collection::Feed).0,
                k(Collection::Feed),
                &feed_types,
                &interner,
            ),
            newest_by_company(notes, k(Collection::Notes), note_at),
            meeting_notes(
                take(Collection::MeetingNotes).0,
                k(Collection::MeetingNotes),
            ),
        );
        let reusable = reusable.then(|| {
            let m = Collection::Metrics.index();
            keys[m] = latest.iter().map(|&i| keys[m][i as usize]).collect();
            digests[m] = latest.iter().map(|&i| digests[m][i as usize]).collect();
            Reusable::keep(KeptForReuse {
                keys,
                digests,
                texts: interner.into_texts(),
                company_names,
                company_priorities,
                task_fields,
                feed_types,
                metric_names: latest.iter().map(|&i| metric_names[i as usize]).collect(),
            })
        });
        let (companies, tasks, roles, feed, notes, meeting_notes) = dataset_parts;
        let dataset = Dataset {
            fingerprint: fingerprint(&meta.workspace_id, &meta.version, meta.content_hash),
            workspace_id: meta.workspace_id,
            workspace_name: meta.workspace_name,
            version_bytes: Bytes::copy_from_slice(meta.version.as_bytes()),
            version: meta.version,
            key_hashes: meta.key_hashes,
            limits: meta.limits,
            counts,
            reused_records: reused,
            parts: Arc::new(Parts {
                companies,
                tasks,
                roles,
                feed,
                notes,
                metrics,
                meetings,
                meeting_notes,
                reusable,
            }),
            warming: Warming::off(),
            fragments_let_go: Default::default(),
            hollow: false,
            refused: false,
        };
        Ok(Built { dataset, warnings })
    }
}

/// Id → record index of every collection; the first repeat is an error.
fn check_ids(
    parts: &[LoadingCollection; Collection::COUNT],
) -> Result<[IdMap<u32>; Collection::COUNT], RepeatedId> {
    let mut ids: [IdMap<u32>; Collection::COUNT] = Default::default();
    for c in Collection::ALL {
        let keys = &parts[c.index()].keys;
        ids[c.index()] = index_ids(keys).map_err(|(index, first)| RepeatedId {
            collection: c,
            index,
            first,
            id: keys[index].id,
        })?;
    }
    Ok(ids)
}

/// Records pointing at a parent the dataset does not hold are kept; one
/// warning per collection says how many, with the first as an example: the
/// record's id and the id it points at.
fn dangling_references(
    parts: &[LoadingCollection; Collection::COUNT],
    ids: &[IdMap<u32>; Collection::COUNT],
) -> Vec<String> {
    let mut warnings = Vec::new();
    for c in Collection::ALL {
        let Some(parent) = c.parent() else {
            continue;
        };
        let parents = &ids[parent.index()];
        let mut dangling = parts[c.index()]
            .keys
            .iter()
            .enumerate()
            .filter(|(i, k)| {
                breathe(*i);
                !k.parent.is_some_and(|p| parents.contains_key(&p))
            })
            .map(|(_, k)| k);
        if let Some(first) = dangling.next() {
            let count = 1 + dangling.count();
            // Both ids: the record's says where to look in the file, the
            // missing one says what to add (or what was mistyped).
            let target = match first.parent {
                Some(id) => format!("{} {}", parent.record_name(), format_id(id)),
                None => format!("a {} id that is not a UUID", parent.record_name()),
            };
            warnings.push(format!(
                "{}: {count} record(s) point at a {} this snapshot does not hold (first: {} {} points at {target}); they are kept",
                c.name(),
                parent.record_name(),
                c.record_name(),
                format_id(first.id),
            ));
        }
    }
    warnings
}

/// A stable hash of what identifies a dataset's content: workspace, version
/// and the content hash ([`Meta::content_hash`], which depends on the path
/// that loaded the file). No per-process seed, so every replica that loaded
/// the same file the same way computes the same value (ETags). SHA-256,
/// once per dataset, not FxHash: a publisher of one workspace must not be
/// able to craft a snapshot whose fingerprint is another workspace's, which
/// with a 64-bit fast hash is a matter of seconds (the resident cache is
/// keyed by it).
pub(in crate::store) fn fingerprint(workspace: &str, version: &str, content_hash: u64) -> u64 {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    hasher.update((workspace.len() as u64).to_le_bytes());
    hasher.update(workspace.as_bytes());
    hasher.update((version.len() as u64).to_le_bytes());
    hasher.update(version.as_bytes());
    hasher.update(content_hash.to_le_bytes());
    let digest = hasher.finalize();
    u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"))
}

/// Companies: name ascending in code-point order (byte order of UTF-8),
/// then id; indexed by priority.
fn companies_by_name(
    rendered: Renderer,
    keys: &[Key],
    at: IdMap<u32>,
    names: &[Option<Box<str>>],
    priorities: &[Option<u32>],
    interner: &Interner,
) -> Companies {
    let mut order: Positions = (0..keys.len() as u32).collect();
    sort_by(&mut order, |&a, &b| {
        let (a, b) = (a as usize, b as usize);
        names[a].cmp(&names[b]).then(keys[a].id.cmp(&keys[b].id))
    });
    let by_priority = group_by(&order, interner, |i| priorities[i]);
    Companies {
        records: Arc::new(rendered.finish()),
        order,
        at,
        by_priority,
    }
}

/// Tasks: newest first, ties by id descending; indexed by each filter, by
/// both at once, and by company.
fn task_indexes(
    keys: &[Key],
    fields: &[(Option<u32>, Option<u32>)],
    interner: &Interner,
) -> TaskIndexes {
    let order = newest_first(keys);
    TaskIndexes {
        by_status: group_by(&order, interner, |i| fields[i].0),
        by_priority: group_by(&order, interner, |i| fields[i].1),
        by_status_priority: group_by_pair(&order, interner, |i| fields[i]),
        by_company: group_by_parent(&order, keys),
        order,
    }
}

/// The list orders of the tasks, built apart from their records.
struct TaskIndexes {
    order: Positions,
    by_status: TextIndex,
    by_priority: TextIndex,
    by_status_priority: rustc_hash::FxHashMap<Box<str>, TextIndex>,
    by_company: IdMap<Positions>,
}

/// Roles: newest `opened_at` first; `/roles` is built once as a whole body.
fn roles(rendered: Renderer, keys: &[Key]) -> Roles {
    let order = newest_first(keys);
    let by_company = group_by_parent(&order, keys);
    let records = Arc::new(rendered.finish());
    let body = list_body(&records, &order);
    Roles {
        records,
        body,
        gzip: Arc::default(),
        by_company,
    }
}

/// `{"data":[...]}` of the records in `order`, built once.
fn list_body(rendered: &Rendered, order: &[u32]) -> Bytes {
    let mut out = Vec::with_capacity(rendered.size(order) + 16);
    out.extend_from_slice(b"{\"data\":[");
    rendered.write(order, &mut out);
    out.extend_from_slice(b"]}");
    Bytes::from(out)
}

/// The feed: newest `published_at` first, with each entry's (instant, id)
/// for the cursor's binary search; indexed by type.
fn feed(rendered: Renderer, keys: &[Key], types: &[Option<u32>], interner: &Interner) -> Feed {
    let order = newest_first(keys);
    let records = Arc::new(rendered.finish());
    Feed {
        keys: keys.iter().map(|k| (k.at, k.id)).collect(),
        by_type: group_by(&order, interner, |i| types[i]),
        records,
        order,
    }
}

/// Notes or meetings: by id, and newest first per company.
fn newest_by_company(rendered: Renderer, keys: &[Key], at: IdMap<u32>) -> NewestByCompany {
    let order = newest_first(keys);
    NewestByCompany {
        by_company: group_by_parent(&order, keys),
        records: Arc::new(rendered.finish()),
        at,
    }
}

/// Meeting notes: `created_at` then id ascending within each meeting.
fn meeting_notes(rendered: Renderer, keys: &[Key]) -> MeetingNotes {
    let mut order: Positions = (0..keys.len() as u32)
        .filter(|&i| keys[i as usize].parent.is_some())
        .collect();
    sort_by(&mut order, |&a, &b| {
        let (a, b) = (&keys[a as usize], &keys[b as usize]);
        (a.parent, a.at, a.id).cmp(&(b.parent, b.at, b.id))
    });
    MeetingNotes {
        by_meeting: group_by_parent(&order, keys),
        records: Arc::new(rendered.finish()),
    }
}

/// For each (company, metric name), the value with the greatest
/// `reported_at` (ties: greatest id), kept grouped by company and ordered by
/// name within it; the rest of the history is dropped. Values of companies
/// the dataset does not hold cannot be served (their company is a 404).
/// Also gives the record index of each value kept.
fn latest_metrics(
    rendered: Renderer,
    keys: &[Key],
    names: &[Option<u32>],
    interner: &Interner,
    companies: &IdMap<u32>,
) -> (LatestMetrics, Positions) {
    let name = |i: u32| names[i as usize].map(|n| interner.text(n));
    let mut order: Positions = (0..keys.len() as u32)
        .filter(|&i| {
            keys[i as usize]
                .parent
                .is_some_and(|c| companies.contains_key(&c))
        })
        .collect();
    sort_by(&mut order, |&a, &b| {
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
    let metrics = LatestMetrics {
        records: Arc::new(rendered.finish().select(&order)),
        all: (0..order.len() as u32).collect(),
        by_company,
    };
    (metrics, order)
}
