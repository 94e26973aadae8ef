//! Requests and their answers judged against the document: statuses,
//! headers and bodies, `$ref`s resolved, formats checked, defaults echoed,
//! and what has been seen so far.

use std::collections::{BTreeSet, HashMap};

use serde_json::{Value, json};

use crate::util::*;

/// One request and the status it must get.
pub(super) struct Case {
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
    pub(super) fn new(path: &str, key: Option<&str>, expect: u16) -> Case {
        Case {
            path: path.to_owned(),
            key: key.map(str::to_owned),
            headers: Vec::new(),
            expect,
            exact: true,
        }
    }

    pub(super) fn header(mut self, name: &str, value: &str) -> Case {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub(super) fn lenient(mut self) -> Case {
        self.exact = false;
        self
    }
}

/// Sends requests and checks every answer against the document.
pub(super) struct Checker<'d> {
    pub(super) doc: &'d Value,
    validators: HashMap<String, jsonschema::Validator>,
    /// `(path template, status)` of every answer.
    seen: BTreeSet<(String, u16)>,
    failures: Vec<String>,
    pub(super) requests: usize,
    /// Once the server is ready, 400s are predicted from the parameters.
    pub(super) ready: bool,
}

impl<'d> Checker<'d> {
    pub(super) fn new(doc: &'d Value) -> Checker<'d> {
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
    pub(super) async fn run(
        &mut self,
        server: &TestServer,
        case: Case,
    ) -> (Response, Option<Value>) {
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
    pub(super) fn check(&mut self, case: &Case, resp: &Response) -> (Vec<String>, Option<Value>) {
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
    pub(super) fn template(&self, path: &str) -> Option<(String, Vec<(String, String)>)> {
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
    pub(super) fn parameters(&self, template: &str) -> Vec<&'d Value> {
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
    pub(super) fn query_parameters(&self, template: &str) -> Vec<&'d Value> {
        self.parameters(template)
            .into_iter()
            .filter(|p| p["in"] == "query")
            .collect()
    }

    /// The name of every query parameter of any operation.
    pub(super) fn query_parameter_names(&self) -> BTreeSet<String> {
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
    pub(super) fn secured(&self, template: &str) -> bool {
        let op = &self.doc["paths"][template]["get"];
        let security = op.get("security").unwrap_or(&self.doc["security"]);
        security.as_array().is_some_and(|s| !s.is_empty())
    }

    /// Why the document says the request's parameters are invalid, if it does.
    pub(super) fn invalid_parameter(
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
    pub(super) fn value_is_valid(&mut self, schema: &Value, text: &str) -> bool {
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
    pub(super) fn validate(&mut self, schema: &Value, instance: &Value) -> Result<(), String> {
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
    pub(super) fn pagination_problem(
        &self,
        template: &str,
        query: &str,
        body: &Value,
    ) -> Option<String> {
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
    pub(super) fn assert_everything_seen(&mut self) {
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

    pub(super) fn assert_no_failures(&self) {
        assert!(
            self.failures.is_empty(),
            "{} of {} answers disagree with src/serve/api/openapi.json; the first ones:\n{}",
            self.failures.len(),
            self.requests,
            self.failures[..self.failures.len().min(40)].join("\n")
        );
    }
}

/// Follows `$ref`s within the document.
pub(super) fn resolve<'a>(doc: &'a Value, mut value: &'a Value) -> &'a Value {
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
