//! How big each scale's workspaces are, and who they are: the plans of
//! `micro`, `tiny`, `small`, `midsize`, `medium` and `large`.

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
/// The file stem and id are owned because a fleet (`micro`, `tiny`, `midsize`) numbers
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

impl Plan {
    /// A plan from one row of the table in [`plan`]: its values in the order of
    /// the fields, so that the scales line up in columns.
    #[allow(clippy::too_many_arguments)]
    fn row(
        companies: usize,
        users: usize,
        tasks: usize,
        roles: usize,
        feed: usize,
        notes: usize,
        meetings: usize,
        metric_reports: (u64, u64),
        segments: (u64, u64),
        note_paragraphs: (u64, u64),
        feed_tie_run: usize,
    ) -> Plan {
        Plan {
            companies,
            users,
            tasks,
            roles,
            feed,
            notes,
            meetings,
            metric_reports,
            segments,
            note_paragraphs,
            feed_tie_run,
        }
    }
}

/// Returns how many records each workspace of `scale` holds.
///
/// A row a scale, so that the scales compare column by column:
/// - micro, about 10 KB: one portfolio company's records in a small firm,
///   for measurements over tens of thousands of workspaces;
/// - tiny, about 100 KB: a handful of companies with a few months of work each;
/// - small: each of the two demo workspaces, a few hundred kilobytes;
/// - midsize, about 5 MB: a twentieth of `medium`, the heavy workspaces of a
///   fleet (a few of them beside many `tiny` ones, to size a budget);
/// - medium, about 100 MB: a tenth of `large` in every count of records (not
///   its team, 60 people against 400, nor its run of tied feed entries);
/// - large, about 1 GB: enough tasks to page at offset 1,000,000 and over
///   300,000 feed entries.
#[rustfmt::skip]
fn plan(scale: Scale) -> Plan {
    match scale {
        //                    companies users tasks      roles   feed     notes   meetings metric_reports segments   note_paragraphs feed_tie_run
        Scale::Micro  => Plan::row(1,     2,    5,         1,      2,       2,      1,       (1, 1),        (3, 5),    (1, 1),         2),
        Scale::Tiny   => Plan::row(4,     4,    50,        10,     24,      16,     6,       (1, 3),        (6, 16),   (1, 2),         8),
        Scale::Small  => Plan::row(12,    8,    180,       26,     90,      72,     18,      (3, 6),        (30, 110), (1, 3),         25),
        Scale::Midsize => Plan::row(25,   20,   5_600,     75,     1_550,   200,    16,      (4, 10),       (30, 200), (2, 5),         30),
        Scale::Medium => Plan::row(500,   60,   112_000,   1_500,  31_000,  4_000,  320,     (4, 10),       (30, 200), (2, 5),         60),
        Scale::Large  => Plan::row(5_000, 400,  1_120_000, 15_000, 310_000, 40_000, 3_200,   (4, 10),       (30, 200), (2, 5),         120),
    }
}

/// The firms a fleet's workspaces are named after, in turn, with the mail
/// domain of their team: names are not served, so a few suffice.
const FLEET_FIRMS: &[(&str, &str)] = &[
    ("Northwind Ventures", "northwind.vc"),
    ("Bluepeak Capital", "bluepeak.capital"),
    ("Lindqvist & Öberg Partners", "lindqvist-oberg.se"),
    ("Harbor Lane Investments", "harborlane.example"),
    ("Saffron Seed Fund", "saffron.fund"),
];

/// Returns the workspace of the firm `(name, mail_domain)` whose file is
/// `FILE_STEM.json` and whose id is `ws-FILE_STEM`.
fn workspace(
    file_stem: &str,
    (name, mail_domain): (&'static str, &'static str),
    key_label: &'static str,
    plan: Plan,
) -> WorkspaceSpec {
    WorkspaceSpec {
        file_stem: file_stem.to_owned(),
        id: format!("ws-{file_stem}"),
        name,
        mail_domain,
        key_label,
        plan,
    }
}

/// Returns workspace `index` (from 0) of a fleet of `micro`, `tiny` or
/// `midsize` workspaces: file `SCALE-NNNNNN.json`, id `ws-SCALE-NNNNNN`.
fn fleet_workspace(scale: &str, plan: Plan, index: u64) -> WorkspaceSpec {
    let firm = FLEET_FIRMS[index as usize % FLEET_FIRMS.len()];
    workspace(&format!("{scale}-{index:06}"), firm, "fleet", plan)
}

/// Returns the workspaces written for `scale`; `count` is how many a fleet
/// scale (`micro`, `tiny`, `midsize`) writes, and is ignored by the others.
pub(super) fn workspaces(scale: Scale, count: u64) -> Vec<WorkspaceSpec> {
    let plan = plan(scale);
    match scale {
        Scale::Micro => (0..count)
            .map(|i| fleet_workspace("micro", plan, i))
            .collect(),
        Scale::Tiny => (0..count)
            .map(|i| fleet_workspace("tiny", plan, i))
            .collect(),
        Scale::Midsize => (0..count)
            .map(|i| fleet_workspace("midsize", plan, i))
            .collect(),
        Scale::Small => vec![
            workspace("acme", ("Acme Ventures", "acme.vc"), "demo", plan),
            workspace("globex", ("Globex Capital", "globex.capital"), "demo", plan),
        ],
        Scale::Medium => vec![workspace(
            "medium",
            ("Medium Benchmark Partners", "medium-bench.example"),
            "benchmark",
            plan,
        )],
        Scale::Large => vec![workspace(
            "large",
            ("Large Benchmark Partners", "large-bench.example"),
            "benchmark",
            plan,
        )],
    }
}
