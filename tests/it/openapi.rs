//! The OpenAPI document, `src/api/openapi.json`, kept true to the server.
//!
//! One test checks that `GET /openapi.json` serves exactly that file, without
//! a key. The other sends a broad set of real requests to every documented
//! path (pages, filters, cursors, `include=notes`, conditional and compressed
//! requests, and every kind of error, while the server is starting and once it
//! is ready) over realistic data (the `generate` snapshots plus a workspace of
//! edge cases: omitted and `null` attributes, meetings with and without
//! notes, attendees without names, segments without optional fields) and
//! checks each answer against the document: its status must be documented
//! for that path, its headers and body must match what the document declares
//! (`$ref`s resolved, formats checked, defaults echoed), the declared
//! parameter schemas must predict exactly which requests are 400, and by the
//! end every documented path and status must have been seen.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use portfolio_replica::generate::{Scale, generate};
use serde_json::{Value, json};

use crate::util::*;

/// The document, as the server embeds it.
const DOC: &str = include_str!("../../src/api/openapi.json");

const WS: &str = "ws-openapi";
/// Company with only a name.
const BARE_COMPANY: u64 = 1;
/// Company with every attribute set (one explicitly `null`).
const FULL_COMPANY: u64 = 2;
/// Company record without `attributes`.
const EMPTY_COMPANY: u64 = 3;
/// Company whose attributes are explicit `null`s and empty lists.
const NULL_COMPANY: u64 = 4;
/// A company and a meeting that the snapshot does not hold.
const LOST: u64 = 999;
const TASK: u64 = 10;
const ROLE: u64 = 30;
const FEED: u64 = 40;
const NOTE: u64 = 70;
const METRIC: u64 = 80;
/// A meeting with notes.
const MEETING: u64 = 90;
/// A meeting without notes, attendees or end time.
const QUIET_MEETING: u64 = 91;
/// A meeting of an unknown company, its id written in upper case.
const UPPER_MEETING: u64 = 0xabc;
const MEETING_NOTE: u64 = 100;

/// Ids that match the pattern but name no record.
const UNKNOWN_IDS: &[&str] = &[
    "00000000-0000-0000-0000-000000000000",
    "ffffffff-ffff-ffff-ffff-ffffffffffff",
    "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f",
    "6F1C2D3E-4B5A-1C6D-BE7F-0A1B2C3D4E5F",
    "6f1c2d3e-4b5a-8c6d-9e7f-0a1b2c3d4e5f",
];

/// Ids that do not match the pattern.
const MALFORMED_IDS: &[&str] = &[
    "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF",
    "6f1c2d3e-4b5a-0c6d-8e7f-0a1b2c3d4e5f",
    "6f1c2d3e-4b5a-9c6d-8e7f-0a1b2c3d4e5f",
    "6f1c2d3e-4b5a-4c6d-ce7f-0a1b2c3d4e5f",
    "6f1c2d3e-4b5a-4c6d-7e7f-0a1b2c3d4e5f",
    "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5",
    "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f0",
    "6f1c2d3e4b5a4c6d8e7f0a1b2c3d4e5f",
    "6f1c2d3g-4b5a-4c6d-8e7f-0a1b2c3d4e5f",
    "not-a-uuid",
    "1",
];

/// Cursor texts, some well formed and some not; the document decides which.
const CURSORS: &[&str] = &[
    "2026-05-01T00:00:00.000Z",
    "2026-05-01T02:00:00+02:00",
    "2026-05-01T02:00:00 02:00",
    "2026-04-30T19:00:00.123456789-05:00",
    "2026-05-01t00:00:00z",
    "2026-03-01T10:00:00.000Z~00000000-0000-4000-8000-00000000002f",
    "2026-03-01T10:00:00Z~6F1C2D3E-4B5A-4C6D-8E7F-0A1B2C3D4E5F",
    "2026-05-01",
    "2026-05-01T00:00:00",
    "2026-05-01T00:00:00.Z",
    "2026-05-01T00:00:00.000Z~",
    "2026-05-01T00:00:00.000Z~xyz",
    "~6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f",
    "abc",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_document_is_the_file_and_needs_no_key() {
    let server = TestServer::start(&[("edge.json", edge_snapshot())]).await;
    for key in [None, Some("cura_not_a_key")] {
        let resp = server.get("/openapi.json", key).await;
        let context = format!("GET /openapi.json with key {key:?}");
        assert_eq!(resp.status, 200, "{context}: {}", resp.text());
        assert_eq!(
            resp.header("content-type"),
            Some("application/json"),
            "{context}: content-type"
        );
        assert!(
            resp.body == DOC.as_bytes(),
            "{context}: the served document is not src/api/openapi.json ({} bytes served, {} in the file)",
            resp.body.len(),
            DOC.len()
        );
    }
    let doc: Value = serde_json::from_str(DOC).expect("the document is JSON");
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["version"], "1.0.0");
    assert_eq!(doc["info"]["title"], "Portfolio API (portfolio-replica)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_matches_the_document() {
    let started = Instant::now();
    let doc: Value = serde_json::from_str(DOC).expect("src/api/openapi.json is JSON");
    let mut c = Checker::new(&doc);

    // The generated demo workspaces, and the edge cases in a file that keeps
    // growing (whitespace) until told to finish, so the server stays starting.
    let dir = tempdir();
    let generated = generate(dir.path(), Scale::Small, 42).expect("generate snapshots");
    let edge = edge_snapshot();
    let writer = SlowWriter::start(
        &dir.path().join("edge.json"),
        &edge,
        Duration::from_secs(60),
    );
    let mut server = TestServer::spawn_in(dir, |_| {}).await;

    // While starting: every path once, with and without a key.
    let templates: Vec<String> = doc["paths"]
        .as_object()
        .expect("paths")
        .keys()
        .cloned()
        .collect();
    for template in &templates {
        let path = edge_path(template);
        let expect = match template.as_str() {
            "/healthz" | "/openapi.json" => 200,
            _ => 503,
        };
        c.run(&server, Case::new(&path, Some(KEY), expect)).await;
        c.run(&server, Case::new(&path, None, expect)).await;
        if template.contains("{id}") {
            let malformed = template.replace("{id}", "nope");
            c.run(&server, Case::new(&malformed, Some(KEY), expect))
                .await;
        }
    }
    writer.finish();
    server.wait_ready().await;
    c.ready = true;

    for path in ["/healthz", "/readyz", "/openapi.json"] {
        c.run(&server, Case::new(path, None, 200)).await;
        c.run(&server, Case::new(&format!("{path}?limit=0"), None, 200))
            .await;
    }

    // Every API operation: auth, conditional requests, every id and every
    // query value the document's parameter schemas have an opinion on.
    let query_names = c.query_parameter_names();
    let foreign = read_snapshot(&generated[0].path);
    let foreign_id = foreign["companies"][0]["id"]
        .as_str()
        .expect("an id")
        .to_owned();
    for template in &templates {
        if c.secured(template) {
            check_operation(&mut c, &server, template, &query_names, &foreign_id).await;
        }
    }

    // Real traffic over every workspace: every page of every list, filters,
    // cursors, records by id, meetings with and without notes.
    let mut workspaces = vec![(KEY.to_owned(), edge)];
    for file in &generated {
        workspaces.push((file.api_key.clone(), read_snapshot(&file.path)));
    }
    for (key, snap) in &workspaces {
        traffic(&mut c, &server, key, snap).await;
    }

    // Explicit cases the generated ones do not reach.
    let full = uuid(FULL_COMPANY);
    for (path, expect) in [
        // Percent-encoded parameter names are the same parameters.
        ("/feed?filter%5Btype%5D=product-update".to_owned(), 200),
        ("/feed?filter%5Btype%5D=a&filter[type]=b".to_owned(), 400),
        (format!("/portfolio/{full}/tasks?limit=1&limit=2"), 400),
        // A sub-resource of an unknown company.
        (format!("/portfolio/{}/metrics", uuid(LOST)), 404),
        // The meeting whose id the snapshot wrote in upper case.
        (
            format!("/meetings/{}?include=notes", uuid(UPPER_MEETING)),
            200,
        ),
    ] {
        c.run(&server, Case::new(&path, Some(KEY), expect)).await;
    }
    // Cursors of the documented syntax naming impossible instants are 400,
    // as the parameter's description says; no pattern can tell.
    for cursor in ["2026-02-30T00:00:00Z", "2026-05-01T24:00:00Z"] {
        let path = format!("/feed?cursor={}", enc(cursor));
        c.run(&server, Case::new(&path, Some(KEY), 400).lenient())
            .await;
    }

    // Compressed answers are the same documents.
    let mut compressed = 0;
    for path in ["/tasks?limit=100", "/roles", "/feed?limit=50"] {
        for key in [KEY, generated[0].api_key.as_str()] {
            let case = Case::new(path, Some(key), 200).header("Accept-Encoding", "gzip");
            let (resp, _) = c.run(&server, case).await;
            if resp.header("content-encoding") == Some("gzip") {
                compressed += 1;
            }
        }
    }
    assert!(compressed > 0, "no answer was gzip-compressed");

    c.assert_everything_seen();
    c.assert_no_failures();
    eprintln!(
        "openapi: {} requests checked against the document in {:?}",
        c.requests,
        started.elapsed()
    );
}

// ---------------------------------------------------------------------------
// Requests.
// ---------------------------------------------------------------------------

/// One request and the status it must get.
struct Case {
    path: String,
    /// Sent as `Authorization: Bearer <key>`.
    key: Option<String>,
    headers: Vec<(String, String)>,
    expect: u16,
    /// Whether the document's parameter schemas must predict a 400 exactly;
    /// off where the server rejects a value that no schema can describe.
    exact: bool,
}

impl Case {
    fn new(path: &str, key: Option<&str>, expect: u16) -> Case {
        Case {
            path: path.to_owned(),
            key: key.map(str::to_owned),
            headers: Vec::new(),
            expect,
            exact: true,
        }
    }

    fn header(mut self, name: &str, value: &str) -> Case {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    fn lenient(mut self) -> Case {
        self.exact = false;
        self
    }
}

/// Sends requests and checks every answer against the document.
struct Checker<'d> {
    doc: &'d Value,
    validators: HashMap<String, jsonschema::Validator>,
    /// `(path template, status)` of every answer.
    seen: BTreeSet<(String, u16)>,
    failures: Vec<String>,
    requests: usize,
    /// Once the server is ready, 400s are predicted from the parameters.
    ready: bool,
}

impl<'d> Checker<'d> {
    fn new(doc: &'d Value) -> Checker<'d> {
        Checker {
            doc,
            validators: HashMap::new(),
            seen: BTreeSet::new(),
            failures: Vec::new(),
            requests: 0,
            ready: false,
        }
    }

    /// Sends `case`, checks the answer, and returns it with its JSON body.
    async fn run(&mut self, server: &TestServer, case: Case) -> (Response, Option<Value>) {
        self.requests += 1;
        let auth = case.key.as_ref().map(|k| format!("Bearer {k}"));
        let mut headers: Vec<(&str, &str)> = case
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        if let Some(auth) = &auth {
            headers.push(("Authorization", auth));
        }
        let resp = server.request("GET", &case.path, &headers).await;
        let what = format!(
            "GET {} (key {:?}, headers {:?})",
            case.path, case.key, case.headers
        );
        let (problems, body) = self.check(&case, &resp);
        for problem in problems {
            self.failures
                .push(format!("{what} -> {}: {problem}", resp.status));
        }
        (resp, body)
    }

    /// Every way the answer disagrees with the case or the document.
    fn check(&mut self, case: &Case, resp: &Response) -> (Vec<String>, Option<Value>) {
        let doc = self.doc;
        let mut problems = Vec::new();
        let (path, query) = case
            .path
            .split_once('?')
            .unwrap_or((case.path.as_str(), ""));
        let Some((template, path_params)) = self.template(path) else {
            problems.push("the path matches no documented path".to_owned());
            return (problems, None);
        };
        let op = &doc["paths"][&template]["get"];
        self.seen.insert((template.clone(), resp.status));
        if resp.status != case.expect {
            problems.push(format!(
                "status {} instead of {}: {}",
                resp.status,
                case.expect,
                resp.text()
            ));
        }
        if self.ready && case.exact && ![401, 503].contains(&resp.status) {
            match (
                self.invalid_parameter(&template, &path_params, query),
                resp.status,
            ) {
                (Some(reason), status) if status != 400 => problems.push(format!(
                    "the document says the request is invalid ({reason}), yet it got {status}"
                )),
                (None, 400) => problems.push(format!(
                    "400 although every parameter is valid by the document: {}",
                    resp.text()
                )),
                _ => {}
            }
        }
        let status = resp.status.to_string();
        let Some(declared) = op["responses"].get(&status) else {
            problems.push(format!(
                "status {status} is not documented for GET {template}: {}",
                resp.text()
            ));
            return (problems, None);
        };
        let declared = resolve(doc, declared);
        if let Some(headers) = declared.get("headers").and_then(Value::as_object) {
            for (name, header) in headers {
                let header = resolve(doc, header);
                match resp.header(name) {
                    None if header["required"] == true => {
                        problems.push(format!("the required header {name} is missing"))
                    }
                    None => {}
                    Some(value) => {
                        let schema = resolve(doc, &header["schema"]);
                        let value = if schema["type"] == "integer" {
                            value
                                .parse::<i64>()
                                .map(Value::from)
                                .unwrap_or_else(|_| json!(value))
                        } else {
                            json!(value)
                        };
                        if let Err(e) = self.validate(&header["schema"], &value) {
                            problems.push(format!("header {name}: {e}"));
                        }
                    }
                }
            }
        }
        let Some(content) = declared.get("content").and_then(Value::as_object) else {
            if !resp.body.is_empty() {
                problems.push(format!(
                    "a body where the document declares none: {}",
                    resp.text()
                ));
            }
            return (problems, None);
        };
        let content_type = resp.header("content-type").unwrap_or_default();
        let Some(media) = content.get(content_type) else {
            problems.push(format!(
                "content-type {content_type:?} is not among the documented {:?}",
                content.keys().collect::<Vec<_>>()
            ));
            return (problems, None);
        };
        let bytes = match resp.header("content-encoding") {
            Some("gzip") => match try_gunzip(&resp.body) {
                Ok(out) => out,
                Err(e) => {
                    problems.push(format!("the gzip body does not decode: {e}"));
                    return (problems, None);
                }
            },
            _ => resp.body.clone(),
        };
        let body: Value = match serde_json::from_slice(&bytes) {
            Ok(body) => body,
            Err(e) => {
                problems.push(format!("the body is not JSON ({e}): {}", resp.text()));
                return (problems, None);
            }
        };
        if let Err(e) = self.validate(&media["schema"], &body) {
            problems.push(format!("the body does not match the schema: {e}"));
        }
        if resp.status == 200 {
            problems.extend(self.pagination_problem(&template, query, &body));
        }
        (problems, Some(body))
    }

    /// The documented path that `path` is an instance of, with its path parameters.
    fn template(&self, path: &str) -> Option<(String, Vec<(String, String)>)> {
        let segments: Vec<&str> = path.split('/').collect();
        self.doc["paths"].as_object()?.keys().find_map(|template| {
            let parts: Vec<&str> = template.split('/').collect();
            if parts.len() != segments.len() {
                return None;
            }
            let mut params = Vec::new();
            for (part, segment) in parts.iter().zip(&segments) {
                match part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                    Some(name) if !segment.is_empty() => {
                        params.push((name.to_owned(), (*segment).to_owned()))
                    }
                    _ if part == segment => {}
                    _ => return None,
                }
            }
            Some((template.clone(), params))
        })
    }

    /// The parameters of `GET template`, `$ref`s resolved.
    fn parameters(&self, template: &str) -> Vec<&'d Value> {
        let doc = self.doc;
        let item = &doc["paths"][template];
        [&item["parameters"], &item["get"]["parameters"]]
            .into_iter()
            .filter_map(Value::as_array)
            .flatten()
            .map(|p| resolve(doc, p))
            .collect()
    }

    /// The query parameters of `GET template`, `$ref`s resolved.
    fn query_parameters(&self, template: &str) -> Vec<&'d Value> {
        self.parameters(template)
            .into_iter()
            .filter(|p| p["in"] == "query")
            .collect()
    }

    /// The name of every query parameter of any operation.
    fn query_parameter_names(&self) -> BTreeSet<String> {
        let templates: Vec<&String> = self.doc["paths"]
            .as_object()
            .expect("paths")
            .keys()
            .collect();
        templates
            .into_iter()
            .flat_map(|t| self.query_parameters(t))
            .filter_map(|p| p["name"].as_str().map(str::to_owned))
            .collect()
    }

    /// Whether `GET template` needs a key.
    fn secured(&self, template: &str) -> bool {
        let op = &self.doc["paths"][template]["get"];
        let security = op.get("security").unwrap_or(&self.doc["security"]);
        security.as_array().is_some_and(|s| !s.is_empty())
    }

    /// Why the document says the request's parameters are invalid, if it does.
    fn invalid_parameter(
        &mut self,
        template: &str,
        path_params: &[(String, String)],
        query: &str,
    ) -> Option<String> {
        let pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect();
        for param in self.parameters(template) {
            let name = param["name"].as_str().unwrap_or_default();
            let values: Vec<&str> = match param["in"].as_str() {
                Some("path") => path_params
                    .iter()
                    .filter(|(n, _)| n == name)
                    .map(|(_, v)| v.as_str())
                    .collect(),
                Some("query") => pairs
                    .iter()
                    .filter(|(n, _)| n == name)
                    .map(|(_, v)| v.as_str())
                    .collect(),
                _ => continue,
            };
            if values.len() > 1 {
                return Some(format!("{name} is given {} times", values.len()));
            }
            if let Some(value) = values.first()
                && !self.value_is_valid(&param["schema"], value)
            {
                return Some(format!("{name}={value:?} does not match its schema"));
            }
        }
        None
    }

    /// Whether the text of a path or query value is valid for `schema`:
    /// integers are plain decimal digits, then bounded by the schema.
    fn value_is_valid(&mut self, schema: &Value, text: &str) -> bool {
        let value = if resolve(self.doc, schema)["type"] == "integer" {
            if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
                return false;
            }
            let digits = text.trim_start_matches('0');
            let digits = if digits.is_empty() { "0" } else { digits };
            serde_json::from_str(digits).expect("digits are a JSON number")
        } else {
            json!(text)
        };
        self.validate(schema, &value).is_ok()
    }

    /// Validates `instance` against `schema`, a schema object of the document.
    fn validate(&mut self, schema: &Value, instance: &Value) -> Result<(), String> {
        let cache_key = schema.to_string();
        if !self.validators.contains_key(&cache_key) {
            // `$ref`s point into the document's components; carry them along.
            let mut root = schema.clone();
            root.as_object_mut()
                .expect("a schema object")
                .entry("components")
                .or_insert_with(|| self.doc["components"].clone());
            let validator = jsonschema::options()
                .with_draft(jsonschema::Draft::Draft202012)
                .should_validate_formats(true)
                .build(&root)
                .unwrap_or_else(|e| panic!("schema {schema} does not compile: {e}"));
            self.validators.insert(cache_key.clone(), validator);
        }
        let errors: Vec<String> = self.validators[&cache_key]
            .iter_errors(instance)
            .take(5)
            .map(|e| format!("{e} (at {:?})", e.instance_path().as_str()))
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    /// Whether `pagination` echoes the `limit` and `offset` in effect: the
    /// ones given, or the document's defaults.
    fn pagination_problem(&self, template: &str, query: &str, body: &Value) -> Option<String> {
        let pagination = body.get("pagination")?;
        for param in self.query_parameters(template) {
            let name = param["name"].as_str().unwrap_or_default();
            let Some(echoed) = pagination.get(name) else {
                continue;
            };
            let given = form_urlencoded::parse(query.as_bytes())
                .find(|(n, _)| n == name)
                .and_then(|(_, v)| v.parse::<u64>().ok());
            let schema = resolve(self.doc, &param["schema"]);
            let expected = match given {
                Some(n) => json!(n),
                None => schema["default"].clone(),
            };
            if *echoed != expected {
                return Some(format!(
                    "pagination.{name} is {echoed}, not {expected} (given {given:?}, documented default {})",
                    schema["default"]
                ));
            }
        }
        None
    }

    /// Fails unless every documented status of every path has been answered.
    fn assert_everything_seen(&mut self) {
        let doc = self.doc;
        for (template, item) in doc["paths"].as_object().expect("paths") {
            for status in item["get"]["responses"]
                .as_object()
                .expect("responses")
                .keys()
            {
                let status: u16 = status.parse().expect("a numeric status");
                if !self.seen.contains(&(template.clone(), status)) {
                    self.failures.push(format!(
                        "GET {template}: the documented status {status} was never answered"
                    ));
                }
            }
        }
    }

    fn assert_no_failures(&self) {
        assert!(
            self.failures.is_empty(),
            "{} of {} answers disagree with src/api/openapi.json; the first ones:\n{}",
            self.failures.len(),
            self.requests,
            self.failures[..self.failures.len().min(40)].join("\n")
        );
    }
}

/// Follows `$ref`s within the document.
fn resolve<'a>(doc: &'a Value, mut value: &'a Value) -> &'a Value {
    for _ in 0..16 {
        let Some(target) = value.get("$ref").and_then(Value::as_str) else {
            return value;
        };
        let pointer = target
            .strip_prefix('#')
            .unwrap_or_else(|| panic!("{target} is not a local reference"));
        value = doc
            .pointer(pointer)
            .unwrap_or_else(|| panic!("{target} points at nothing"));
    }
    panic!("a cycle of $refs at {value}")
}

// ---------------------------------------------------------------------------
// What is sent.
// ---------------------------------------------------------------------------

/// A path of `template` that answers 200 in the edge workspace.
fn edge_path(template: &str) -> String {
    let id = match template.split('/').nth(1) {
        Some("portfolio") => uuid(FULL_COMPANY),
        Some("tasks") => uuid(TASK + 1),
        Some("notes") => uuid(NOTE + 1),
        Some("meetings") => uuid(MEETING),
        _ => String::new(),
    };
    template.replace("{id}", &id)
}

/// Checks one secured operation of the edge workspace: keys, conditional
/// requests, ids, and every query value its parameter schemas judge.
async fn check_operation(
    c: &mut Checker<'_>,
    server: &TestServer,
    template: &str,
    query_names: &BTreeSet<String>,
    foreign_id: &str,
) {
    let base = edge_path(template);

    // The key.
    let (resp, _) = c.run(server, Case::new(&base, Some(KEY), 200)).await;
    for (auth, expect) in [
        (None, 401),
        (Some(format!("bearer {KEY}")), 200),
        (Some(format!("BEARER  {KEY} ")), 200),
        (Some("Bearer cura_not_a_key".to_owned()), 401),
        (Some("Bearer cura_".to_owned()), 401),
        (
            Some(format!("Bearer {}", KEY.replacen("cura", "other", 1))),
            401,
        ),
        (Some(format!("Basic {KEY}")), 401),
        (Some(KEY.to_owned()), 401),
    ] {
        let case = Case::new(&base, None, expect);
        let case = match &auth {
            Some(value) => case.header("Authorization", value),
            None => case,
        };
        c.run(server, case).await;
    }

    // Conditional requests.
    let etag = resp.header("etag").unwrap_or("\"none\"").to_owned();
    for (value, expect) in [
        (etag.clone(), 304),
        (format!("W/{etag}"), 304),
        (format!("\"other\", {etag}"), 304),
        ("*".to_owned(), 304),
        ("\"other\"".to_owned(), 200),
    ] {
        c.run(
            server,
            Case::new(&base, Some(KEY), expect).header("If-None-Match", &value),
        )
        .await;
    }

    // Ids: the order of checks is key, then id, then lookup.
    if template.contains("{id}") {
        let id = base.split('/').nth(2).expect("an id segment").to_owned();
        let swap = |other: &str| base.replacen(&id, other, 1);
        c.run(server, Case::new(&swap(&id.to_uppercase()), Some(KEY), 200))
            .await;
        for unknown in UNKNOWN_IDS.iter().copied().chain([foreign_id]) {
            c.run(server, Case::new(&swap(unknown), Some(KEY), 404))
                .await;
            c.run(server, Case::new(&swap(unknown), None, 401)).await;
        }
        for malformed in MALFORMED_IDS {
            c.run(server, Case::new(&swap(malformed), Some(KEY), 400))
                .await;
            c.run(server, Case::new(&swap(malformed), None, 401)).await;
        }
    }

    // Query values, judged by the document.
    let sep = if base.contains('?') { '&' } else { '?' };
    let declared = c.query_parameters(template);
    for param in &declared {
        let name = param["name"].as_str().expect("a parameter name");
        let schema = &param["schema"];
        for value in sample_values(resolve(c.doc, schema)) {
            let expect = if c.value_is_valid(schema, &value) {
                200
            } else {
                400
            };
            let path = format!("{base}{sep}{name}={}", enc(&value));
            c.run(server, Case::new(&path, Some(KEY), expect)).await;
            if expect == 400 {
                c.run(server, Case::new(&path, None, 401)).await;
            } else {
                let encoded = format!("{base}{sep}{}={}", enc(name), enc(&value));
                c.run(server, Case::new(&encoded, Some(KEY), 200)).await;
                let twice = format!("{path}&{name}={}", enc(&value));
                c.run(server, Case::new(&twice, Some(KEY), 400)).await;
            }
        }
    }

    // Parameters the operation does not declare are ignored.
    for name in query_names {
        if declared.iter().any(|p| p["name"] == name.as_str()) {
            continue;
        }
        for value in ["", "0", "x"] {
            let path = format!("{base}{sep}{name}={value}");
            c.run(server, Case::new(&path, Some(KEY), 200)).await;
        }
    }
}

/// Values on both sides of every constraint of a parameter's schema.
fn sample_values(schema: &Value) -> Vec<String> {
    let mut values: Vec<String> = Vec::new();
    if schema["type"] == "integer" {
        let min = schema["minimum"].as_u64().unwrap_or(0);
        let max = schema["maximum"].as_u64().unwrap_or(1000);
        if min > 0 {
            values.push((min - 1).to_string());
        } else {
            values.push("-1".to_owned());
        }
        for n in [min, min + 1, max - 1, max, max + 1] {
            values.push(n.to_string());
        }
        values.push(format!("00{}", min + 1));
        for text in [
            "",
            "abc",
            "1.5",
            "+1",
            "1e1",
            " 1",
            "1 ",
            "0x10",
            "18446744073709551616",
        ] {
            values.push(text.to_owned());
        }
    } else {
        for text in [
            "",
            "x",
            "a b",
            "\u{dc}n\u{ef}c\u{f6}de",
            "high",
            "low",
            "done",
        ] {
            values.push(text.to_owned());
        }
        if let Some(allowed) = schema["enum"].as_array() {
            for v in allowed.iter().filter_map(Value::as_str) {
                values.push(v.to_owned());
                values.push(v.to_uppercase());
                values.push(format!("{v},x"));
            }
        }
        if schema.get("pattern").is_some() {
            values.extend(CURSORS.iter().map(|c| (*c).to_owned()));
        }
    }
    values
}

/// Every page of every list, filters, cursors and records by id of one workspace.
async fn traffic(c: &mut Checker<'_>, server: &TestServer, key: &str, snap: &Value) {
    let ids = |collection: &str| -> Vec<String> {
        snap[collection]
            .as_array()
            .map(|list| {
                list.iter()
                    .filter_map(|r| r["id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let distinct = |collection: &str, attribute: &str| -> BTreeSet<String> {
        snap[collection]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["attributes"][attribute].as_str().map(str::to_owned))
            .collect()
    };

    walk_offset(c, server, key, "/portfolio", None).await;
    walk_offset(c, server, key, "/portfolio", Some(5)).await;
    for priority in distinct("companies", "priority")
        .into_iter()
        .chain(["unknown".to_owned()])
    {
        let base = format!("/portfolio?filter[priority]={}", enc(&priority));
        walk_offset(c, server, key, &base, Some(2)).await;
    }
    for company in ids("companies") {
        c.run(
            server,
            Case::new(&format!("/portfolio/{company}"), Some(key), 200),
        )
        .await;
        for sub in ["roles", "metrics"] {
            let path = format!("/portfolio/{company}/{sub}");
            c.run(server, Case::new(&path, Some(key), 200)).await;
        }
        for sub in ["tasks", "notes"] {
            let base = format!("/portfolio/{company}/{sub}");
            walk_offset(c, server, key, &base, None).await;
            walk_offset(c, server, key, &base, Some(7)).await;
        }
    }

    walk_offset(c, server, key, "/tasks", None).await;
    walk_offset(c, server, key, "/tasks", Some(100)).await;
    let mut statuses = distinct("tasks", "status");
    statuses.insert("unknown".to_owned());
    let priorities = distinct("tasks", "priority");
    for status in &statuses {
        let base = format!("/tasks?filter[status]={}", enc(status));
        walk_offset(c, server, key, &base, Some(20)).await;
        for priority in &priorities {
            let base = format!(
                "/tasks?filter[priority]={}&filter%5Bstatus%5D={}",
                enc(priority),
                enc(status)
            );
            walk_offset(c, server, key, &base, Some(30)).await;
        }
    }
    for priority in &priorities {
        let base = format!("/tasks?filter[priority]={}", enc(priority));
        walk_offset(c, server, key, &base, None).await;
    }
    for task in ids("tasks").iter().step_by(7) {
        c.run(server, Case::new(&format!("/tasks/{task}"), Some(key), 200))
            .await;
    }
    c.run(server, Case::new("/roles", Some(key), 200)).await;
    for note in ids("notes").iter().step_by(5) {
        c.run(server, Case::new(&format!("/notes/{note}"), Some(key), 200))
            .await;
    }

    walk_feed(c, server, key, "").await;
    walk_feed(c, server, key, "limit=7").await;
    walk_feed(c, server, key, "limit=1").await;
    walk_feed(c, server, key, "limit=50&cursor=2026-06-01T00:00:00.000Z").await;
    walk_feed(c, server, key, "cursor=2026-03-01T12%3A00%3A00%2B02%3A00").await;
    for kind in distinct("feed", "type")
        .into_iter()
        .chain(["unknown".to_owned()])
    {
        walk_feed(
            c,
            server,
            key,
            &format!("limit=5&filter[type]={}", enc(&kind)),
        )
        .await;
    }

    for meeting in ids("meetings") {
        for query in ["", "?include=notes"] {
            let path = format!("/meetings/{meeting}{query}");
            c.run(server, Case::new(&path, Some(key), 200)).await;
        }
    }
}

/// Pages through an offset list, `limit` at a time (the default if `None`).
async fn walk_offset(
    c: &mut Checker<'_>,
    server: &TestServer,
    key: &str,
    base: &str,
    limit: Option<u64>,
) {
    let sep = if base.contains('?') { '&' } else { '?' };
    let mut offset = 0;
    for _ in 0..1000 {
        let path = match (limit, offset) {
            (None, 0) => base.to_owned(),
            (None, offset) => format!("{base}{sep}offset={offset}"),
            (Some(limit), offset) => format!("{base}{sep}limit={limit}&offset={offset}"),
        };
        let (_, body) = c.run(server, Case::new(&path, Some(key), 200)).await;
        let Some(pagination) = body.as_ref().map(|b| &b["pagination"]) else {
            return;
        };
        if pagination["hasMore"] != true {
            return;
        }
        offset += pagination["limit"].as_u64().expect("pagination.limit");
    }
    panic!("GET {base}: hasMore did not end within 1000 pages");
}

/// Pages through the feed by `nextCursor`; `query` carries the first cursor, if any.
async fn walk_feed(c: &mut Checker<'_>, server: &TestServer, key: &str, query: &str) {
    let without_cursor: Vec<&str> = query
        .split('&')
        .filter(|p| !p.is_empty() && !p.starts_with("cursor="))
        .collect();
    let mut path = if query.is_empty() {
        "/feed".to_owned()
    } else {
        format!("/feed?{query}")
    };
    for _ in 0..1000 {
        let (_, body) = c.run(server, Case::new(&path, Some(key), 200)).await;
        let Some(cursor) = body
            .as_ref()
            .and_then(|b| b["pagination"]["nextCursor"].as_str())
        else {
            return;
        };
        let mut params = without_cursor.clone();
        let cursor = format!("cursor={}", enc(cursor));
        params.push(&cursor);
        path = format!("/feed?{}", params.join("&"));
    }
    panic!("GET /feed?{query}: nextCursor did not end within 1000 pages");
}

// ---------------------------------------------------------------------------
// Data.
// ---------------------------------------------------------------------------

fn read_snapshot(path: &std::path::Path) -> Value {
    let bytes = std::fs::read(path).expect("read a generated snapshot");
    serde_json::from_slice(&bytes).expect("a generated snapshot is JSON")
}

/// A workspace of edge cases: omitted and `null` attributes, a record without
/// attributes, records of unknown companies, tied instants, meetings with and
/// without notes, attendees without names, segments without optional fields.
fn edge_snapshot() -> Value {
    let mut snap = snapshot(WS, &[KEY]);
    let full = uuid(FULL_COMPANY);
    add(
        &mut snap,
        "companies",
        [
            company(BARE_COMPANY, "Bare"),
            record(
                FULL_COMPANY,
                json!({
                    "domain": "zeta.example",
                    "name": "Zeta \"Full\" Ltd",
                    "logo_url": "https://zeta.example/logo.png",
                    "headline": "Everything set",
                    "description": "Line one\nline two \u{2014} \u{e9}t\u{e9}",
                    "professional_network": "https://network.example/zeta",
                    "x": null,
                    "careers_url": "https://zeta.example/careers",
                    "domain_aliases": ["zeta.io", "zeta.dev"],
                    "priority": "high",
                    "labels": ["fintech", "seed"],
                    "value_propositions": [
                        { "problem": "Slow closes", "solution": null, "icp": "CFOs" },
                        {},
                    ],
                    "not_in_the_spec": "dropped",
                }),
            ),
            json!({ "id": uuid(EMPTY_COMPANY) }),
            record(
                NULL_COMPANY,
                json!({
                    "domain": null, "name": null, "logo_url": null, "headline": null,
                    "description": null, "professional_network": null, "x": null,
                    "careers_url": null, "domain_aliases": [], "priority": "low",
                    "labels": null, "value_propositions": [],
                }),
            ),
        ],
    );

    let mut tasks = vec![
        task(TASK, FULL_COMPANY, "2026-03-01T10:00:00Z"),
        record(
            TASK + 1,
            json!({
                "title": "Prepare the board deck",
                "description": "With \"quotes\", a \\ and a\ttab",
                "status": "triage",
                "priority": "low",
                "source": "manual",
                "company_id": full,
                "assignee_id": uuid(500),
                "due_date": "2026-04-01",
                "created_at": "2026-03-01T12:00:00+02:00",
                "updated_at": "2026-03-02T00:00:00.123456Z",
            }),
        ),
        with(
            task(TASK + 2, FULL_COMPANY, "2026-03-01T10:00:00.5Z"),
            json!({ "title": null, "status": null, "priority": null, "updated_at": null }),
        ),
        task(TASK + 3, LOST, "2026-02-01T00:00:00Z"),
    ];
    tasks.extend((4..14).map(|i| {
        with(
            task(
                TASK + i,
                FULL_COMPANY,
                &format!("2026-01-{i:02}T08:00:00-05:00"),
            ),
            json!({
                "status": if i % 2 == 0 { "done" } else { "triage" },
                "priority": if i % 3 == 0 { "high" } else { "low" },
            }),
        )
    }));
    add(&mut snap, "tasks", tasks);

    add(
        &mut snap,
        "roles",
        [
            role(ROLE, FULL_COMPANY, "2026-03-01T10:00:00Z"),
            record(
                ROLE + 1,
                json!({
                    "company_id": full, "name": "Staff Engineer",
                    "url": "https://zeta.example/careers/staff", "description": "Build it",
                    "domain": "engineering", "level": "ic",
                    "opened_at": "2026-03-01T12:00:00+02:00",
                }),
            ),
            role(ROLE + 2, LOST, "2026-01-01T00:00:00.000001Z"),
        ],
    );

    let mut feed = vec![
        record(
            FEED,
            json!({ "company_id": full, "published_at": "2026-04-01T00:00:00Z" }),
        ),
        record(
            FEED + 1,
            json!({
                "company_id": full,
                "type": "fundraise-announcement",
                "title": "Zeta raises a Series A",
                "content": "Details",
                "published_at": "2026-04-02T00:00:00.000+00:00",
                "private": true,
                "sources": [
                    {
                        "source": "professional_network",
                        "url": "https://network.example/post/1",
                        "title": "The announcement",
                        "published_at": "2026-04-02T00:00:00Z",
                    },
                    { "source": null, "url": null, "title": null, "published_at": null },
                    {},
                ],
            }),
        ),
        with(
            feed_entry(FEED + 2, LOST, "2026-04-03T00:00:00Z"),
            json!({ "sources": [], "private": null, "type": null }),
        ),
    ];
    feed.extend(instant_records(FEED + 10, |id, ts| {
        feed_entry(id, FULL_COMPANY, ts)
    }));
    add(&mut snap, "feed", feed);

    add(
        &mut snap,
        "notes",
        [
            note(NOTE, FULL_COMPANY, "2026-03-01T10:00:00Z"),
            record(
                NOTE + 1,
                json!({
                    "company_id": full, "title": "Call notes", "content": "Went well",
                    "source": "manual", "created_by": uuid(500),
                    "created_at": "2026-03-02T10:00:00-01:00",
                }),
            ),
            with(
                note(NOTE + 2, FULL_COMPANY, "2026-03-01T10:00:00Z"),
                json!({ "title": null, "content": null }),
            ),
            note(NOTE + 3, LOST, "2026-03-01T10:00:00Z"),
        ],
    );

    add(
        &mut snap,
        "metrics",
        [
            metric(
                METRIC,
                FULL_COMPANY,
                "Annualized Revenue",
                "2026-01-01T00:00:00Z",
            ),
            json!({
                "id": uuid(METRIC + 1),
                "company_id": full,
                "attributes": {
                    "name": "Annualized Revenue", "unit": "currency", "value_text": "$1.25M",
                    "value_numeric": 1_250_000.5, "value_currency": "USD",
                    "period_label": "Q1 2026", "period_start": "2026-01-01",
                    "period_end": "2026-03-31", "reported_at": "2026-04-05T16:02:54.063182-05:00",
                },
            }),
            with(
                metric(
                    METRIC + 2,
                    FULL_COMPANY,
                    "Custom KPI",
                    "2026-02-01T00:00:00Z",
                ),
                json!({ "unit": "number", "value_numeric": -12, "value_currency": null }),
            ),
            json!({
                "id": uuid(METRIC + 3),
                "company_id": full,
                "attributes": { "reported_at": "2026-02-01T00:00:00Z" },
            }),
            metric(METRIC + 4, LOST, "Headcount", "2026-02-01T00:00:00Z"),
        ],
    );

    let mut upper = meeting(UPPER_MEETING, LOST, "2026-03-03T10:00:00Z");
    upper["id"] = json!(uuid(UPPER_MEETING).to_uppercase());
    add(
        &mut snap,
        "meetings",
        [
            with(
                meeting(MEETING, FULL_COMPANY, "2026-03-01T10:00:00+01:00"),
                json!({
                    "end_time": "2026-03-01T11:00:00.000+01:00",
                    "attendees": [
                        { "email": "ann@example.com", "organizer": true, "name": "Ann" },
                        { "email": "bob+vc@example.co.uk", "organizer": false },
                        { "email": "carl@example.com", "organizer": false, "name": null },
                    ],
                }),
            ),
            with(
                meeting(QUIET_MEETING, FULL_COMPANY, "2026-03-02T10:00:00Z"),
                json!({ "attendees": [] }),
            ),
            upper,
        ],
    );
    add(
        &mut snap,
        "meeting_notes",
        [
            meeting_note(MEETING_NOTE, MEETING, "2026-03-01T10:00:00Z"),
            with(
                meeting_note(MEETING_NOTE + 1, MEETING, "2026-03-01T11:00:00+01:00"),
                json!({
                    "notes": null,
                    "synced_at": "2026-03-01T12:00:00.5+02:00",
                    "transcript": { "segments": [
                        { "text": "Hello", "speaker": "Ann", "startTime": 0.5, "endTime": 2.25 },
                        { "text": "Only text" },
                        { "text": "Some", "startTime": 3 },
                        { "text": "Who", "speaker": "Bob", "endTime": 4.75 },
                        { "text": "Nulls", "speaker": null, "startTime": null, "endTime": null },
                    ] },
                }),
            ),
            with(
                meeting_note(MEETING_NOTE + 2, MEETING, "2026-03-01T12:00:00Z"),
                json!({ "transcript": { "segments": [] } }),
            ),
            meeting_note(MEETING_NOTE + 3, LOST, "2026-03-01T10:00:00Z"),
            meeting_note(MEETING_NOTE + 4, UPPER_MEETING, "2026-03-01T10:00:00Z"),
        ],
    );
    snap
}
