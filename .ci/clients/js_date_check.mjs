// Reads every record of every workspace with Node's global fetch and checks
// that JavaScript's Date parses every timestamp in it.
//
//   node js_date_check.mjs BASE_URL MANIFEST.json
//   node js_date_check.mjs --self-test
//
// The traversal is the one of python_client_check.py: /portfolio (paged),
// every company by id and its tasks, notes (paged), roles and metrics,
// /tasks (paged), /roles, the whole /feed by nextCursor (limit 1 and limit
// 50, which must agree), every meeting with include=notes, every task and
// note by id.
//
// Timestamps are found by name, at any depth (feed sources included):
// created_at, updated_at, published_at, opened_at, reported_at, start_time,
// end_time, synced_at (docs/api.md#resources). Each non-null one must give
// a valid Date: !Number.isNaN(new Date(ts).getTime()). Dates (due_date,
// period_start, period_end) must too. Also checked: every answer is a 200
// JSON body; records equal the snapshot's (text, numbers, booleans; ids as
// written); lists are in their documented order by Date; each traversal
// reaches the number of records the manifest expects, without repeats.
// Prints one line per workspace and a summary; exits 1 on any failure.
// No npm packages.

import { readFileSync } from "node:fs";

const TIMESTAMPS = new Set([
  "created_at", "updated_at", "published_at", "opened_at", "reported_at",
  "start_time", "end_time", "synced_at",
]);
const DATES = new Set(["due_date", "period_start", "period_end"]);
const COLLECTIONS = ["companies", "tasks", "roles", "feed", "notes", "metrics", "meetings", "meeting_notes"];
const MAX_ERRORS = 30;

const errors = [];
const stats = { records: 0, responses: 0, requests: 0, timestamps: 0, dates: 0, cursors: 0 };

function fail(message) {
  errors.push(message);
  if (errors.length <= MAX_ERRORS) console.error(`js: FAIL: ${message}`);
}

function validDate(text) {
  return !Number.isNaN(new Date(text).getTime());
}

// Every timestamp and date under value, by key name.
function walk(value, where) {
  if (Array.isArray(value)) {
    value.forEach((item, i) => walk(item, `${where}[${i}]`));
    return;
  }
  if (value === null || typeof value !== "object") return;
  for (const [key, v] of Object.entries(value)) {
    const here = `${where}.${key}`;
    if (TIMESTAMPS.has(key) || DATES.has(key)) {
      if (typeof v === "string") {
        if (!validDate(v)) fail(`${here}: new Date(${JSON.stringify(v)}) is an Invalid Date`);
        stats[TIMESTAMPS.has(key) ? "timestamps" : "dates"] += 1;
      } else if (v !== null) {
        fail(`${here}: a ${typeof v} where a timestamp belongs`);
      }
    }
    walk(v, here);
  }
}

function show(v) {
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 80 ? `${s.slice(0, 80)}...` : s;
}

function sameAsSnapshot(snap, served, where) {
  if (Array.isArray(snap)) {
    if (!Array.isArray(served) || served.length !== snap.length) {
      fail(`${where}: served ${show(served)}, the snapshot has ${show(snap)}`);
      return;
    }
    snap.forEach((s, i) => sameAsSnapshot(s, served[i], `${where}[${i}]`));
  } else if (snap !== null && typeof snap === "object") {
    if (served === null || typeof served !== "object" || Array.isArray(served)) {
      fail(`${where}: served ${show(served)}, the snapshot has an object`);
      return;
    }
    for (const [k, v] of Object.entries(snap)) {
      if (!(k in served)) {
        if (v !== null) fail(`${where}.${k}: missing; the snapshot has ${show(v)}`);
        continue;
      }
      sameAsSnapshot(v, served[k], `${where}.${k}`);
    }
  } else if (snap !== served) {
    fail(`${where}: served ${show(served)}, the snapshot has ${show(snap)}`);
  }
}

class Workspace {
  constructor(baseUrl, entry) {
    this.baseUrl = baseUrl.replace(/\/$/, "");
    this.entry = entry;
    this.name = entry.workspace;
    const snap = JSON.parse(readFileSync(entry.file, "utf8"));
    this.snap = {};
    for (const c of COLLECTIONS) {
      this.snap[c] = new Map((snap[c] ?? []).map((r) => [r.id.toLowerCase(), r]));
    }
    this.counts = {};
  }

  count(what, n) {
    this.counts[what] = (this.counts[what] ?? 0) + n;
  }

  async get(path, params = {}) {
    const url = new URL(this.baseUrl + path);
    for (const [k, v] of Object.entries(params)) url.searchParams.set(k, String(v));
    stats.requests += 1;
    const response = await fetch(url, {
      headers: { Authorization: `Bearer ${this.entry.key}` },
      signal: AbortSignal.timeout(30000),
    });
    const text = await response.text();
    if (response.status !== 200) {
      throw new Error(`${this.name} ${url.pathname}${url.search}: status ${response.status}: ${text.slice(0, 200)}`);
    }
    const body = JSON.parse(text);
    walk(body, `${this.name} ${url.pathname}${url.search}`);
    stats.responses += 1;
    return body;
  }

  record(collection, served, where) {
    stats.records += 1;
    const snap = this.snap[collection].get(String(served.id).toLowerCase());
    if (!snap) {
      fail(`${where}: id ${served.id} is not in the snapshot's ${collection}`);
      return;
    }
    if (served.id !== snap.id) fail(`${where}: id served as ${served.id}, written ${snap.id}`);
    sameAsSnapshot(snap.attributes ?? {}, served.attributes, `${where}.attributes`);
  }

  ordered(records, field, where, newestFirst = true) {
    const times = records.map((r) => new Date(r.attributes[field]).getTime());
    for (let i = 1; i < times.length; i++) {
      const [a, b] = [times[i - 1], times[i]];
      if (newestFirst ? a < b : a > b) {
        fail(`${where}: ${field} out of order at ${i}: ${records[i - 1].attributes[field]} then ${records[i].attributes[field]}`);
      }
    }
  }

  async offsetPages(path, collection, limit) {
    const all = [];
    for (let offset = 0; ; offset += limit) {
      const page = await this.get(path, { limit, offset });
      const p = page.pagination;
      if (p.limit !== limit || p.offset !== offset) {
        fail(`${this.name} ${path}: pagination echoes ${p.limit}/${p.offset}, asked ${limit}/${offset}`);
      }
      page.data.forEach((r, i) => this.record(collection, r, `${this.name} ${path}[${offset + i}]`));
      all.push(...page.data);
      if (!p.hasMore) break;
      if (page.data.length !== limit) {
        fail(`${this.name} ${path}: hasMore with a short page of ${page.data.length}`);
        break;
      }
    }
    if (new Set(all.map((r) => r.id)).size !== all.length) fail(`${this.name} ${path}: paging repeated records`);
    return all;
  }

  async feed(limit) {
    const all = [];
    let cursor = null;
    for (let pages = 0; ; pages++) {
      const page = await this.get("/feed", cursor === null ? { limit } : { limit, cursor });
      page.data.forEach((r, i) => this.record("feed", r, `${this.name} /feed limit=${limit} page ${pages}[${i}]`));
      all.push(...page.data);
      if (page.pagination.nextCursor === null) break;
      cursor = page.pagination.nextCursor;
      stats.cursors += 1;
      if (pages > 100000) throw new Error(`${this.name} /feed: does not end`);
    }
    if (new Set(all.map((r) => r.id)).size !== all.length) fail(`${this.name} /feed limit=${limit}: a record came twice`);
    this.ordered(all, "published_at", `${this.name} /feed limit=${limit}`);
    return all.map((r) => r.id);
  }

  async run() {
    const n = this.name;
    const companies = await this.offsetPages("/portfolio", "companies", 5);
    this.counts.companies = companies.length;
    for (const c of companies) {
      const base = `/portfolio/${c.id}`;
      const one = await this.get(base);
      this.record("companies", one.data, `${n} ${base}`);
      const tasks = await this.offsetPages(`${base}/tasks`, "tasks", 7);
      this.ordered(tasks, "created_at", `${n} ${base}/tasks`);
      const notes = await this.offsetPages(`${base}/notes`, "notes", 7);
      this.ordered(notes, "created_at", `${n} ${base}/notes`);
      const roles = (await this.get(`${base}/roles`)).data;
      roles.forEach((r, i) => this.record("roles", r, `${n} ${base}/roles[${i}]`));
      this.ordered(roles, "opened_at", `${n} ${base}/roles`);
      const metrics = (await this.get(`${base}/metrics`)).data;
      metrics.forEach((r, i) => this.record("metrics", r, `${n} ${base}/metrics[${i}]`));
      this.count("company_tasks", tasks.length);
      this.count("company_notes", notes.length);
      this.count("company_roles", roles.length);
      this.count("company_metrics", metrics.length);
    }

    const tasks = await this.offsetPages("/tasks", "tasks", 100);
    this.ordered(tasks, "created_at", `${n} /tasks`);
    this.counts.tasks = tasks.length;
    for (const t of tasks) {
      const one = await this.get(`/tasks/${t.id}`);
      this.record("tasks", one.data, `${n} /tasks/${t.id}`);
      if (JSON.stringify(one.data) !== JSON.stringify(t)) fail(`${n} /tasks/${t.id}: differs from its /tasks entry`);
    }

    const roles = (await this.get("/roles")).data;
    roles.forEach((r, i) => this.record("roles", r, `${n} /roles[${i}]`));
    this.ordered(roles, "opened_at", `${n} /roles`);
    this.counts.roles = roles.length;

    const oneByOne = await this.feed(1);
    const paged = await this.feed(50);
    if (JSON.stringify(oneByOne) !== JSON.stringify(paged)) fail(`${n} /feed: limit=1 and limit=50 give different sequences`);
    this.counts.feed = paged.length;

    for (const id of this.entry.note_ids) {
      const one = await this.get(`/notes/${id}`);
      this.record("notes", one.data, `${n} /notes/${id}`);
      this.count("notes_by_id", 1);
    }

    for (const id of this.entry.meeting_ids) {
      const where = `${n} /meetings/${id}?include=notes`;
      const { data } = await this.get(`/meetings/${id}`, { include: "notes" });
      this.record("meetings", { id: data.id, attributes: data.attributes }, where);
      if (!Array.isArray(data.notes)) {
        fail(`${where}: no notes array`);
        continue;
      }
      data.notes.forEach((r, i) => this.record("meeting_notes", r, `${where}.notes[${i}]`));
      this.ordered(data.notes, "created_at", `${where}.notes`, false);
      this.count("meetings", 1);
      this.count("meeting_notes", data.notes.length);
    }

    for (const [what, expected] of Object.entries(this.entry.expect)) {
      const got = this.counts[what] ?? 0;
      if (got !== expected) fail(`${n}: ${what}: reached ${got}, the snapshot holds ${expected}`);
    }
  }
}

function selfTest() {
  // What the loader now rejects, and what JavaScript's Date makes of it.
  const leap = ["2016-12-31T23:59:60Z", "2017-01-01T00:59:60.5+01:00"];
  const flagged = leap.filter((ts) => !validDate(ts));
  if (flagged.length !== leap.length) {
    console.error(`js: self-test FAILED: a leap second parsed as a Date`);
    return 1;
  }
  const lower = ["2026-03-01t10:00:00z", "2026-03-01t10:00:00.5Z"];
  const lowerOk = lower.filter(validDate).length;
  console.log(
    `js self-test: ${flagged.length} leap seconds are Invalid Dates as expected; ` +
      `node ${process.version} parses ${lowerOk} of ${lower.length} lower-case t/z timestamps (Python does not)`,
  );
  return 0;
}

async function main() {
  if (process.argv[2] === "--self-test") return selfTest();
  const [baseUrl, manifestPath] = process.argv.slice(2);
  const manifest = JSON.parse(readFileSync(manifestPath, "utf8"));
  try {
    for (const entry of manifest.workspaces) {
      const ws = new Workspace(baseUrl, entry);
      await ws.run();
      const counts = Object.entries(ws.counts).map(([k, v]) => `${k} ${v}`).join(", ");
      console.log(`js: ${ws.name}: ${counts}`);
    }
  } catch (e) {
    console.error(e);
    fail("an exception stopped the traversal");
  }
  console.log(
    `js Date: ${stats.records} records, ${stats.responses} responses, ${stats.requests} requests, ` +
      `${stats.cursors} cursors, ${stats.timestamps} timestamps, ${stats.dates} dates, ${errors.length} failures`,
  );
  return errors.length ? 1 : 0;
}

process.exitCode = await main();
