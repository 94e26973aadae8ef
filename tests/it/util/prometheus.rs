//! The Prometheus text exposition of the admin listener's `/metrics`:
//! scraping it, parsing every sample (failing on a line that is not one) and
//! looking a sample up by name and exact labels.

use std::collections::BTreeMap;

use super::{Response, TestServer};

/// One sample of the Prometheus text exposition.
#[derive(Debug)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Parses every sample of `text`, failing on a line that is not one.
pub fn samples(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fail = |why: &str| -> ! { panic!("bad /metrics line ({why}): {line:?}") };
        let (name, labels, rest) = match line.find('{') {
            Some(open) => {
                let close = line.rfind('}').unwrap_or_else(|| fail("no }"));
                (
                    &line[..open],
                    parse_labels(&line[open + 1..close]),
                    &line[close + 1..],
                )
            }
            None => {
                let sp = line.find(' ').unwrap_or_else(|| fail("no value"));
                (&line[..sp], BTreeMap::new(), &line[sp..])
            }
        };
        let value_text = rest
            .split_whitespace()
            .next()
            .unwrap_or_else(|| fail("no value"));
        let value = match value_text {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            t => t.parse().unwrap_or_else(|_| fail("value")),
        };
        assert!(
            !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':'),
            "bad metric name in {line:?}"
        );
        out.push(Sample {
            name: name.to_owned(),
            labels,
            value,
        });
    }
    out
}

/// Parses the labels between the braces of a sample.
fn parse_labels(text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut rest = text;
    while !rest.is_empty() {
        let eq = rest.find("=\"").expect("label=\"value\"");
        let key = rest[..eq].trim_start_matches(',').trim().to_owned();
        let mut value = String::new();
        let mut chars = rest[eq + 2..].char_indices();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => break,
                },
                '"' => {
                    end = Some(eq + 2 + i + 1);
                    break;
                }
                c => value.push(c),
            }
        }
        labels.insert(key, value);
        rest = &rest[end.expect("closing quote")..];
        rest = rest.trim_start_matches(',');
    }
    labels
}

/// The value of the sample `name` whose labels are exactly `labels`.
pub fn value_of(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let want: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    samples
        .iter()
        .find(|s| s.name == name && s.labels == want)
        .map(|s| s.value)
}

/// Sends `GET /metrics` to the admin port: the answer, which must be a 200, and its samples.
pub async fn scrape(server: &TestServer) -> (Response, Vec<Sample>) {
    let resp = server.admin_get("/metrics").await;
    assert_eq!(resp.status, 200, "GET /metrics: {}", resp.text());
    let parsed = samples(&resp.text());
    (resp, parsed)
}
