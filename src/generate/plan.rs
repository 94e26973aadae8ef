//! How big each scale's workspaces are, and who they are: the plans of
//! `small`, `medium` and `large`.

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
#[derive(Clone, Copy, Debug)]
pub(super) struct WorkspaceSpec {
    pub(super) file_stem: &'static str,
    pub(super) id: &'static str,
    pub(super) name: &'static str,
    pub(super) mail_domain: &'static str,
    pub(super) key_label: &'static str,
    pub(super) plan: Plan,
}

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

/// Returns the workspaces written for `scale`.
pub(super) fn workspaces(scale: Scale) -> Vec<WorkspaceSpec> {
    match scale {
        Scale::Small => vec![
            WorkspaceSpec {
                file_stem: "acme",
                id: "ws-acme",
                name: "Acme Ventures",
                mail_domain: "acme.vc",
                key_label: "demo",
                plan: SMALL_PLAN,
            },
            WorkspaceSpec {
                file_stem: "globex",
                id: "ws-globex",
                name: "Globex Capital",
                mail_domain: "globex.capital",
                key_label: "demo",
                plan: SMALL_PLAN,
            },
        ],
        Scale::Medium => vec![WorkspaceSpec {
            file_stem: "medium",
            id: "ws-medium",
            name: "Medium Benchmark Partners",
            mail_domain: "medium-bench.example",
            key_label: "benchmark",
            plan: MEDIUM_PLAN,
        }],
        Scale::Large => vec![WorkspaceSpec {
            file_stem: "large",
            id: "ws-large",
            name: "Large Benchmark Partners",
            mail_domain: "large-bench.example",
            key_label: "benchmark",
            plan: LARGE_PLAN,
        }],
    }
}
