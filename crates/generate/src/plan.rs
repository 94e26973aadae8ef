//! How big each scale's workspaces are, and who they are: the plans of
//! `micro`, `tiny`, `small`, `medium` and `large`.

use super::Scale;

/// How many records of each kind one workspace holds.
#[derive(Clone, Copy, Debug)]
pub(super) struct Plan {
    pub(super) companies: usize,
    pub(super) users: usize,
    pub(super) tasks: usize,
    pub(super) roles: usize,
    pub(super) feed: usize,
    pub(super) notes: usize,
    pub(super) meetings: usize,
    /// Inclusive range of reports per (company, metric name).
    pub(super) metric_reports: (u64, u64),
    /// Inclusive range of transcript segments per meeting note.
    pub(super) segments: (u64, u64),
    /// Inclusive range of paragraphs per note.
    pub(super) note_paragraphs: (u64, u64),
    /// Length of the run of feed entries that share one instant.
    pub(super) feed_tie_run: usize,
}

/// The fixed identity of one generated workspace.
///
/// The file stem and id are owned because a fleet (`micro`, `tiny`) numbers
/// its workspaces; the rest are drawn from fixed lists.
#[derive(Clone, Debug)]
pub(super) struct WorkspaceSpec {
    pub(super) file_stem: String,
    pub(super) id: String,
    pub(super) name: &'static str,
    pub(super) mail_domain: &'static str,
    pub(super) key_label: &'static str,
    pub(super) plan: Plan,
}

/// About 10 KB: one portfolio company's records in a small firm, for
/// measurements over tens of thousands of workspaces.
const MICRO_PLAN: Plan = Plan {
    companies: 1,
    users: 2,
    tasks: 5,
    roles: 1,
    feed: 2,
    notes: 2,
    meetings: 1,
    metric_reports: (1, 1),
    segments: (3, 5),
    note_paragraphs: (1, 1),
    feed_tie_run: 2,
};

/// About 100 KB: a handful of companies with a few months of work each.
const TINY_PLAN: Plan = Plan {
    companies: 4,
    users: 4,
    tasks: 50,
    roles: 10,
    feed: 24,
    notes: 16,
    meetings: 6,
    metric_reports: (1, 3),
    segments: (6, 16),
    note_paragraphs: (1, 2),
    feed_tie_run: 8,
};

/// Each of the two demo workspaces: a few hundred kilobytes.
const SMALL_PLAN: Plan = Plan {
    companies: 12,
    users: 8,
    tasks: 180,
    roles: 26,
    feed: 90,
    notes: 72,
    meetings: 18,
    metric_reports: (3, 6),
    segments: (30, 110),
    note_paragraphs: (1, 3),
    feed_tie_run: 25,
};

/// About 100 MB: a tenth of [`LARGE_PLAN`] in every count.
const MEDIUM_PLAN: Plan = Plan {
    companies: 500,
    users: 60,
    tasks: 112_000,
    roles: 1_500,
    feed: 31_000,
    notes: 4_000,
    meetings: 320,
    metric_reports: (4, 10),
    segments: (30, 200),
    note_paragraphs: (2, 5),
    feed_tie_run: 60,
};

/// About 1 GB: enough tasks to page at offset 1,000,000 and over 300,000 feed entries.
const LARGE_PLAN: Plan = Plan {
    companies: 5_000,
    users: 400,
    tasks: 1_120_000,
    roles: 15_000,
    feed: 310_000,
    notes: 40_000,
    meetings: 3_200,
    metric_reports: (4, 10),
    segments: (30, 200),
    note_paragraphs: (2, 5),
    feed_tie_run: 120,
};

/// The firms a fleet's workspaces are named after, in turn, with the mail
/// domain of their team: names are not served, so a few suffice.
const FLEET_FIRMS: &[(&str, &str)] = &[
    ("Northwind Ventures", "northwind.vc"),
    ("Bluepeak Capital", "bluepeak.capital"),
    ("Lindqvist & Öberg Partners", "lindqvist-oberg.se"),
    ("Harbor Lane Investments", "harborlane.example"),
    ("Saffron Seed Fund", "saffron.fund"),
];

/// Returns workspace `index` (from 0) of a fleet of `micro` or `tiny`
/// workspaces: file `SCALE-NNNNNN.json`, id `ws-SCALE-NNNNNN`.
fn fleet_workspace(scale: &str, plan: Plan, index: u64) -> WorkspaceSpec {
    let (name, mail_domain) = FLEET_FIRMS[index as usize % FLEET_FIRMS.len()];
    let file_stem = format!("{scale}-{index:06}");
    WorkspaceSpec {
        id: format!("ws-{file_stem}"),
        file_stem,
        name,
        mail_domain,
        key_label: "fleet",
        plan,
    }
}

/// Returns the workspaces written for `scale`; `count` is how many a fleet
/// scale (`micro`, `tiny`) writes, and is ignored by the others.
pub(super) fn workspaces(scale: Scale, count: u64) -> Vec<WorkspaceSpec> {
    match scale {
        Scale::Micro => (0..count)
            .map(|i| fleet_workspace("micro", MICRO_PLAN, i))
            .collect(),
        Scale::Tiny => (0..count)
            .map(|i| fleet_workspace("tiny", TINY_PLAN, i))
            .collect(),
        Scale::Small => vec![
            WorkspaceSpec {
                file_stem: "acme".into(),
                id: "ws-acme".into(),
                name: "Acme Ventures",
                mail_domain: "acme.vc",
                key_label: "demo",
                plan: SMALL_PLAN,
            },
            WorkspaceSpec {
                file_stem: "globex".into(),
                id: "ws-globex".into(),
                name: "Globex Capital",
                mail_domain: "globex.capital",
                key_label: "demo",
                plan: SMALL_PLAN,
            },
        ],
        Scale::Medium => vec![WorkspaceSpec {
            file_stem: "medium".into(),
            id: "ws-medium".into(),
            name: "Medium Benchmark Partners",
            mail_domain: "medium-bench.example",
            key_label: "benchmark",
            plan: MEDIUM_PLAN,
        }],
        Scale::Large => vec![WorkspaceSpec {
            file_stem: "large".into(),
            id: "ws-large".into(),
            name: "Large Benchmark Partners",
            mail_domain: "large-bench.example",
            key_label: "benchmark",
            plan: LARGE_PLAN,
        }],
    }
}
