//! The `metrics` collection: the quarterly history of every metric of every
//! company, with corrections that tie on `reported_at`.

use std::io::{self, Write};

use super::context::WriterContext;
use super::plan::Plan;
use super::rng::Rng;
use super::timestamp::{DAY, Ts};
use super::world::{Company, World};
use crate::store::time::days_from_civil;

/// A metric a company reports, with how its values are drawn and written.
#[derive(Clone, Copy, Debug)]
enum MetricKind {
    Revenue,
    Headcount,
    Burn,
    Runway,
    Percent,
    Count,
}

/// The standard metrics, reported by most companies.
const STANDARD_METRICS: [(&str, MetricKind); 4] = [
    ("Annualized Revenue", MetricKind::Revenue),
    ("Headcount", MetricKind::Headcount),
    ("Burn Rate", MetricKind::Burn),
    ("Cash Runway", MetricKind::Runway),
];

/// Custom metrics, each reported by some companies.
const CUSTOM_METRICS: [(&str, MetricKind); 7] = [
    ("Net Revenue Retention", MetricKind::Percent),
    ("Gross Margin", MetricKind::Percent),
    ("Weekly Active Users", MetricKind::Count),
    ("Kundenzufriedenheit (NPS)", MetricKind::Percent),
    ("eNPS", MetricKind::Percent),
    ("Paying Customers", MetricKind::Count),
    ("Écart de marge", MetricKind::Percent),
];

/// Writes `metrics`, the full history of every (company, name), and returns how many reports there are.
pub(super) fn write_metrics<W: Write>(
    ctx: &mut WriterContext,
    world: &World,
    plan: &Plan,
    w: &mut W,
) -> io::Result<u64> {
    ctx.begin_collection("metrics");
    let mut count = 0;
    for (index, company) in world.companies.iter().enumerate() {
        let mut metrics: Vec<(&str, MetricKind)> = STANDARD_METRICS
            .iter()
            .copied()
            .filter(|_| index < 2 || ctx.rng.percent(88))
            .collect();
        if index < 2 || ctx.rng.percent(45) {
            let first = ctx.rng.index(CUSTOM_METRICS.len());
            metrics.push(CUSTOM_METRICS[first]);
            if ctx.rng.percent(30) {
                metrics.push(CUSTOM_METRICS[(first + 3) % CUSTOM_METRICS.len()]);
            }
        }
        for (metric_index, &(name, kind)) in metrics.iter().enumerate() {
            let force_tie = index == 0 && metric_index == 0;
            count += write_metric_history(ctx, company, plan, (name, kind), force_tie, w)?;
        }
    }
    ctx.json.end_array();
    Ok(count)
}

/// One reported value of a metric, before it is written.
struct Report {
    id: u128,
    quarter: i64,
    value: i64,
    reported: Ts,
}

/// Writes the history of one metric of one company and returns its length.
///
/// Reports cover consecutive quarters; some histories carry a correction that
/// shares the `reported_at` instant of another report, written in another
/// offset, so the id tie-break decides which one is latest.
fn write_metric_history<W: Write>(
    ctx: &mut WriterContext,
    company: &Company,
    plan: &Plan,
    metric: (&str, MetricKind),
    force_tie: bool,
    w: &mut W,
) -> io::Result<u64> {
    let rng = &mut ctx.rng;
    let reports_count = rng.in_range(plan.metric_reports) as i64;
    // Quarters are counted from 2023 Q1; the latest report covers 2026 Q3 at most.
    let last_quarter = rng.between_i64(reports_count - 1, 14);
    let mut value = initial_metric_value(rng, metric.1);
    let mut reports = Vec::with_capacity(reports_count as usize + 1);
    for quarter in last_quarter + 1 - reports_count..=last_quarter {
        let period_end = quarter_start(quarter + 1) - DAY;
        let reported = Ts::after(rng, period_end, 5 * DAY, 40 * DAY);
        reports.push(Report {
            id: rng.uuid(),
            quarter,
            value,
            reported,
        });
        value = next_metric_value(rng, metric.1, value);
    }
    if force_tie || rng.percent(12) {
        let base = rng.index(reports.len());
        let (quarter, value, reported) = {
            let base = &reports[base];
            (base.quarter, base.value, base.reported)
        };
        reports.push(Report {
            id: rng.uuid(),
            quarter,
            value: next_metric_value(rng, metric.1, value),
            reported: reported.restyled(rng),
        });
    }
    rng.shuffle(&mut reports);
    for report in &reports {
        write_metric_report(ctx, company, metric, report);
        ctx.json.end_object();
        ctx.json.end_object();
        ctx.json.flush_if_full(w)?;
    }
    Ok(reports.len() as u64)
}

/// Returns the first day (as seconds) of quarter `quarter`, counted from 2023 Q1.
fn quarter_start(quarter: i64) -> i64 {
    let year = 2023 + quarter.div_euclid(4);
    let month = 1 + 3 * quarter.rem_euclid(4);
    days_from_civil(year, month, 1) * DAY
}

/// Writes one metric report record (left open for the caller to close).
fn write_metric_report(
    ctx: &mut WriterContext,
    company: &Company,
    metric: (&str, MetricKind),
    report: &Report,
) {
    let (name, kind) = metric;
    ctx.json.begin_record();
    ctx.uuid_field("id", report.id);
    ctx.uuid_field("company_id", company.id);
    ctx.json.key("attributes");
    ctx.json.begin_object();
    ctx.str_field("name", name);
    let (unit, currency) = match kind {
        MetricKind::Revenue | MetricKind::Burn => ("currency", Some(company.currency)),
        MetricKind::Runway => ("months", None),
        _ => ("number", None),
    };
    ctx.str_field("unit", unit);
    ctx.str_field(
        "value_text",
        &metric_text(kind, report.value, company.currency),
    );
    ctx.json.key("value_numeric");
    ctx.json.hundredths(report.value);
    ctx.json.key("value_currency");
    ctx.json.opt_string(currency);
    let year = 2023 + report.quarter.div_euclid(4);
    let label = format!("Q{} {year}", 1 + report.quarter.rem_euclid(4));
    ctx.str_field("period_label", &label);
    ctx.json.key("period_start");
    ctx.json.date(quarter_start(report.quarter));
    ctx.json.key("period_end");
    ctx.json.date(quarter_start(report.quarter + 1) - DAY);
    ctx.ts_field("reported_at", report.reported);
}

/// Returns a plausible first value of a metric, in hundredths.
fn initial_metric_value(rng: &mut Rng, kind: MetricKind) -> i64 {
    let whole = match kind {
        MetricKind::Revenue => rng.between_i64(2, 500) * 100_000,
        MetricKind::Headcount => rng.between_i64(4, 400),
        MetricKind::Burn => rng.between_i64(5, 300) * 10_000,
        MetricKind::Runway => return rng.between_i64(60, 360) * 10,
        MetricKind::Percent => rng.between_i64(-10, 130),
        MetricKind::Count => rng.between_i64(50, 200_000),
    };
    whole * 100
}

/// Returns the value reported after `value`: mostly growth, sometimes a dip.
fn next_metric_value(rng: &mut Rng, kind: MetricKind, value: i64) -> i64 {
    let change = rng.between_i64(-8, 25);
    match kind {
        MetricKind::Runway => (value + rng.between_i64(-30, 20) * 10).max(10),
        MetricKind::Percent => value + rng.between_i64(-5, 5) * 100,
        MetricKind::Headcount | MetricKind::Count => {
            (value / 100 + value / 100 * change / 100).max(1) * 100
        }
        _ => (value / 100_000 * (100 + change) / 100).max(1) * 100_000,
    }
}

/// Returns the display text of a metric value given in hundredths.
fn metric_text(kind: MetricKind, value: i64, currency: &str) -> String {
    let symbol = if currency == "EUR" { "€" } else { "$" };
    let whole = value / 100;
    match kind {
        MetricKind::Revenue => money_text(symbol, whole),
        MetricKind::Burn => format!("{} / month", money_text(symbol, whole)),
        MetricKind::Runway => format!("{}.{} months", value / 100, value % 100 / 10),
        MetricKind::Percent => format!("{whole}%"),
        MetricKind::Headcount | MetricKind::Count => group_thousands(whole),
    }
}

/// Returns an amount such as `$4.2M` or `€850K`.
fn money_text(symbol: &str, amount: i64) -> String {
    if amount >= 1_000_000 {
        format!(
            "{symbol}{}.{}M",
            amount / 1_000_000,
            amount % 1_000_000 / 100_000
        )
    } else {
        format!("{symbol}{}K", amount / 1_000)
    }
}

/// Returns an integer with comma thousands separators.
fn group_thousands(value: i64) -> String {
    let digits = value.unsigned_abs().to_string();
    let lead = match digits.len() % 3 {
        0 => 3,
        rest => rest,
    };
    let mut text = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if value < 0 {
        text.push('-');
    }
    text.push_str(&digits[..lead]);
    for group in digits.as_bytes()[lead..].chunks(3) {
        text.push(',');
        text.extend(group.iter().map(|&digit| char::from(digit)));
    }
    text
}
