//! The two text formats `/metrics` is served in: prometheus-client writes
//! OpenMetrics 1.0 (with `# EOF`), and the classic Prometheus text format
//! 0.0.4 is derived from that text by [`classic_from_openmetrics`]: the
//! crate has no classic encoder, and the two differ only in family names,
//! types and trailers, which a line-by-line rewrite covers.

/// The text formats `/metrics` is served in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0.0 text: counters typed under their family name,
    /// `info`, ending with `# EOF`. What Prometheus asks for first.
    OpenMetrics,
    /// The classic Prometheus text format 0.0.4: no `info` type, counters
    /// typed under their `_total` series, no `# EOF`. For everyone else.
    Classic,
}

impl Format {
    /// The `Content-Type` of an exposition in this format.
    pub const fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Classic => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// Rewrites an OpenMetrics text, as prometheus-client writes it, into the
/// classic text format 0.0.4, line by line:
///
/// - a counter family `x` is described as `x_total` (its one series), an
///   `info` family `x` as the gauge `x_info`, a `stateset` as a gauge, an
///   `unknown` one as `untyped`; `gauge`, `histogram` and `summary` stay;
/// - `# UNIT` and `# EOF` lines are dropped, and so are `_created` series
///   (classic text has no place for them);
/// - exemplars (` # {...} v`) are cut off the samples; a sample timestamp,
///   in seconds in OpenMetrics, becomes milliseconds.
///
/// Label sets, values and HELP texts are the same in both formats.
/// (prometheus-client writes HELP verbatim, so help texts must not hold a
/// backslash or a line break: ours are plain sentences.)
pub(super) fn classic_from_openmetrics(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    // The HELP line waiting for its TYPE line: the name it is written under
    // depends on the type, and prometheus-client writes HELP first.
    let mut help: Option<(&str, &str)> = None;
    // The family of the samples that follow: its name and OpenMetrics type.
    let mut family = ("", "unknown");
    for line in openmetrics.lines() {
        if let Some(comment) = line.strip_prefix("# ") {
            let (keyword, rest) = comment.split_once(' ').unwrap_or((comment, ""));
            let (name, text) = rest.split_once(' ').unwrap_or((rest, ""));
            match keyword {
                "HELP" => {
                    flush_help(&mut out, help.take());
                    help = Some((name, text));
                }
                "TYPE" => {
                    family = (name, text);
                    let (classic_name, classic_type) = classic_family(name, text);
                    match help.take() {
                        Some((help_name, help_text)) if help_name == name => {
                            push_line(&mut out, &["# HELP ", &classic_name, " ", help_text]);
                        }
                        other => flush_help(&mut out, other),
                    }
                    push_line(&mut out, &["# TYPE ", &classic_name, " ", classic_type]);
                }
                "UNIT" | "EOF" => {}
                _ => push_line(&mut out, &[line]),
            }
            continue;
        }
        flush_help(&mut out, help.take());
        if line.is_empty() {
            continue;
        }
        classic_sample(&mut out, line, family);
    }
    flush_help(&mut out, help);
    out
}

/// The classic name and type of an OpenMetrics family.
fn classic_family(name: &str, openmetrics_type: &str) -> (String, &'static str) {
    match openmetrics_type {
        "counter" => (format!("{name}_total"), "counter"),
        "info" => (format!("{name}_info"), "gauge"),
        "gauge" | "stateset" => (name.to_owned(), "gauge"),
        "histogram" => (name.to_owned(), "histogram"),
        "summary" => (name.to_owned(), "summary"),
        _ => (name.to_owned(), "untyped"),
    }
}

fn flush_help(out: &mut String, help: Option<(&str, &str)>) {
    if let Some((name, text)) = help {
        push_line(out, &["# HELP ", name, " ", text]);
    }
}

/// The same exposition with each family's series in a stable order: by
/// their label sets, compared as text without `le`. prometheus-client
/// writes a family's series in the order of its hash map, which differs
/// from process to process and from scrape to scrape as series come and go;
/// sorted, two scrapes (and two replicas) can be compared line by line.
///
/// The sort is stable and `le` is not part of its key, so the lines of one
/// series (a histogram's `_sum`, `_count` and buckets, a counter's `_total`
/// and `_created`) stay together and in the order they were written.
pub(super) fn sorted_series(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut run: Vec<(Vec<&str>, &str)> = Vec::new();
    let flush = |out: &mut String, run: &mut Vec<(Vec<&str>, &str)>| {
        run.sort_by(|a, b| a.0.cmp(&b.0));
        for (_, line) in run.drain(..) {
            push_line(out, &[line]);
        }
    };
    for line in openmetrics.lines() {
        if line.starts_with('#') || line.is_empty() {
            flush(&mut out, &mut run);
            push_line(&mut out, &[line]);
        } else {
            run.push((labels_but_le(line), line));
        }
    }
    flush(&mut out, &mut run);
    out
}

/// The `name="value"` pairs of a sample's label set, in the order written,
/// without `le`.
fn labels_but_le(line: &str) -> Vec<&str> {
    let series = &line[..series_end(line)];
    let Some(open) = series.find('{') else {
        return Vec::new();
    };
    let labels = series[open + 1..]
        .strip_suffix('}')
        .unwrap_or(&series[open + 1..]);
    let mut pairs = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, b) in labels.bytes().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            b',' if !quoted => {
                pairs.push(&labels[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    pairs.push(&labels[start..]);
    pairs.retain(|pair| !pair.is_empty() && !pair.starts_with("le="));
    pairs
}

fn push_line(out: &mut String, parts: &[&str]) {
    for part in parts {
        out.push_str(part);
    }
    out.push('\n');
}

/// Writes one sample line of the family `(name, type)` in classic form.
fn classic_sample(out: &mut String, line: &str, (family, family_type): (&str, &str)) {
    let series_end = series_end(line);
    let (series, rest) = line.split_at(series_end);
    let sample_name = &series[..series.find('{').unwrap_or(series.len())];
    if matches!(family_type, "counter" | "histogram" | "summary")
        && sample_name.strip_prefix(family) == Some("_created")
    {
        return;
    }
    // After the label set nothing is quoted: ` value [timestamp] [# exemplar]`.
    let rest = rest.split_once(" # ").map_or(rest, |(before, _)| before);
    let mut fields = rest.split_ascii_whitespace();
    out.push_str(series);
    if let Some(value) = fields.next() {
        out.push(' ');
        out.push_str(value);
    }
    if let Some(timestamp) = fields.next() {
        out.push(' ');
        match timestamp.parse::<f64>() {
            Ok(seconds) if seconds.is_finite() => {
                out.push_str(&((seconds * 1000.0).round() as i64).to_string());
            }
            _ => out.push_str(timestamp),
        }
    }
    out.push('\n');
}

/// Where a sample's name and label set end: the first space outside a
/// quoted label value.
fn series_end(line: &str) -> usize {
    let mut quoted = false;
    let mut escaped = false;
    for (i, b) in line.bytes().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            b' ' if !quoted => return i,
            _ => {}
        }
    }
    line.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_from_openmetrics_rewrites_what_classic_text_cannot_hold() {
        let openmetrics = concat!(
            "# HELP jobs Jobs done.\n",
            "# TYPE jobs counter\n",
            "jobs_total{queue=\"a b # {c}\"} 3 # {trace=\"x\"} 1.0 1700000000.5\n",
            "jobs_created{queue=\"a b # {c}\"} 1700000000.25\n",
            "# HELP wait_seconds Waiting.\n",
            "# TYPE wait_seconds histogram\n",
            "# UNIT wait_seconds seconds\n",
            "wait_seconds_sum 0.5 1700000000.125\n",
            "wait_seconds_count 2\n",
            "wait_seconds_bucket{le=\"1e-5\"} 1 # {trace=\"y\"} 0.000001\n",
            "wait_seconds_bucket{le=\"+Inf\"} 2\n",
            "wait_seconds_created 1700000000\n",
            "# HELP build Build information.\n",
            "# TYPE build info\n",
            "build_info{version=\"1.2\\\"3\\\\\"} 1\n",
            "# TYPE mystery unknown\n",
            "mystery NaN\n",
            "# HELP lonely A HELP without a TYPE.\n",
            "lonely -Inf\n",
            "# EOF\n",
        );
        let classic = concat!(
            "# HELP jobs_total Jobs done.\n",
            "# TYPE jobs_total counter\n",
            "jobs_total{queue=\"a b # {c}\"} 3\n",
            "# HELP wait_seconds Waiting.\n",
            "# TYPE wait_seconds histogram\n",
            "wait_seconds_sum 0.5 1700000000125\n",
            "wait_seconds_count 2\n",
            "wait_seconds_bucket{le=\"1e-5\"} 1\n",
            "wait_seconds_bucket{le=\"+Inf\"} 2\n",
            "# HELP build_info Build information.\n",
            "# TYPE build_info gauge\n",
            "build_info{version=\"1.2\\\"3\\\\\"} 1\n",
            "# TYPE mystery untyped\n",
            "mystery NaN\n",
            "# HELP lonely A HELP without a TYPE.\n",
            "lonely -Inf\n",
        );
        assert_eq!(classic_from_openmetrics(openmetrics), classic);
        assert_eq!(classic_from_openmetrics("# EOF\n"), "");
    }

    #[test]
    fn series_are_sorted_by_labels_within_their_family_and_keep_their_own_lines_together() {
        let written = concat!(
            "# HELP wait_seconds Waiting.\n",
            "# TYPE wait_seconds histogram\n",
            "wait_seconds_sum{route=\"/tasks\"} 0.5\n",
            "wait_seconds_count{route=\"/tasks\"} 2\n",
            "wait_seconds_bucket{le=\"0.1\",route=\"/tasks\"} 1\n",
            "wait_seconds_bucket{le=\"+Inf\",route=\"/tasks\"} 2\n",
            "wait_seconds_sum{route=\"/feed\"} 0.25\n",
            "wait_seconds_count{route=\"/feed\"} 1\n",
            "wait_seconds_bucket{le=\"0.1\",route=\"/feed\"} 0\n",
            "wait_seconds_bucket{le=\"+Inf\",route=\"/feed\"} 1\n",
            "# HELP loads Loads.\n",
            "# TYPE loads counter\n",
            "loads_total{file=\"z,\\\"a.json\"} 1\n",
            "loads_created{file=\"z,\\\"a.json\"} 17.5\n",
            "loads_total{file=\"b.json\"} 2\n",
            "loads_created{file=\"b.json\"} 16.5\n",
            "# EOF\n",
        );
        let sorted = concat!(
            "# HELP wait_seconds Waiting.\n",
            "# TYPE wait_seconds histogram\n",
            "wait_seconds_sum{route=\"/feed\"} 0.25\n",
            "wait_seconds_count{route=\"/feed\"} 1\n",
            "wait_seconds_bucket{le=\"0.1\",route=\"/feed\"} 0\n",
            "wait_seconds_bucket{le=\"+Inf\",route=\"/feed\"} 1\n",
            "wait_seconds_sum{route=\"/tasks\"} 0.5\n",
            "wait_seconds_count{route=\"/tasks\"} 2\n",
            "wait_seconds_bucket{le=\"0.1\",route=\"/tasks\"} 1\n",
            "wait_seconds_bucket{le=\"+Inf\",route=\"/tasks\"} 2\n",
            "# HELP loads Loads.\n",
            "# TYPE loads counter\n",
            "loads_total{file=\"b.json\"} 2\n",
            "loads_created{file=\"b.json\"} 16.5\n",
            "loads_total{file=\"z,\\\"a.json\"} 1\n",
            "loads_created{file=\"z,\\\"a.json\"} 17.5\n",
            "# EOF\n",
        );
        assert_eq!(sorted_series(written), sorted);
        assert_eq!(sorted_series(sorted), sorted);
    }

    #[test]
    fn content_types_name_the_formats() {
        assert_eq!(
            Format::OpenMetrics.content_type(),
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        );
        assert_eq!(
            Format::Classic.content_type(),
            "text/plain; version=0.0.4; charset=utf-8"
        );
    }
}
