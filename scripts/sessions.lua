-- wrk script of scripts/budget-bench.sh: sessions of API clients over many
-- workspaces, their keys drawn from a Zipf law.
--
--   wrk ... -s scripts/sessions.lua http://HOST:PORT -- SESSIONS_FILE [SEED] [S]
--
-- SESSIONS_FILE has one workspace a line: its API key, then up to three of
-- its company ids, separated by spaces. The line's rank r (1 = the first
-- line) is drawn with probability proportional to 1 / r^S (S = 1.0 by
-- default): the file's order is the popularity order, so budget-bench.sh
-- writes it shuffled (the hot workspaces are not the first files the server
-- scans). The cumulative weights are computed once per thread in init, a
-- draw is a binary search.
--
-- A session is 20 plain GET requests (no Accept-Encoding) with that key,
-- issued one after another by the thread that drew it (run one
-- connection a thread, as budget-bench.sh does, so that they are sent one
-- after another as a client pages, not at once over several
-- connections): /portfolio first, then /tasks?limit=50, /feed?limit=20 and,
-- for each company id in turn, /portfolio/<id>/notes and
-- /portfolio/<id>/tasks (4 of each of the 5 kinds; /portfolio in place of
-- the company pages for a workspace with no company). Then the next session
-- draws its key.
--
-- Each thread seeds its own generator with SEED (default 1) plus its own
-- index, so threads draw different sequences and a run with the same SEED
-- draws the same ones.
--
-- done prints one line for the calling script:
--   SUMMARY requests duration_us p50_us p99_us p99.9_us socket_errors non_2xx_3xx sessions_started

local SESSION = 20

local threads = {}
local next_id = 0

function setup(thread)
  next_id = next_id + 1
  thread:set("thread_id", next_id)
  threads[#threads + 1] = thread
end

local keys, companies, cdf, total = {}, {}, {}, 0
local session_headers, session_companies
local in_session = SESSION -- the first request starts a session
sessions = 0

function init(args)
  local path = args[1] or os.getenv("SESSIONS_FILE")
  if not path then
    error("sessions.lua: no SESSIONS_FILE (wrk ... -- SESSIONS_FILE [SEED] [S])")
  end
  local seed = tonumber(args[2] or os.getenv("SESSIONS_SEED") or "1")
  local s = tonumber(args[3] or os.getenv("SESSIONS_ZIPF_S") or "1.0")
  for line in io.lines(path) do
    local fields = {}
    for field in line:gmatch("%S+") do
      fields[#fields + 1] = field
    end
    if #fields > 0 then
      keys[#keys + 1] = fields[1]
      companies[#companies + 1] = { unpack(fields, 2) }
    end
  end
  if #keys == 0 then
    error("sessions.lua: no keys in " .. path)
  end
  for r = 1, #keys do
    total = total + 1 / r ^ s
    cdf[r] = total
  end
  math.randomseed(seed * 1000 + (thread_id or 0))
  -- LuaJIT's first draws after a seed are close to each other: skip a few.
  for _ = 1, 10 do
    math.random()
  end
end

-- draw: a rank from the Zipf law, by binary search of the first cumulative
-- weight at or above a uniform draw.
local function draw()
  local u = math.random() * total
  local lo, hi = 1, #cdf
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if cdf[mid] < u then
      lo = mid + 1
    else
      hi = mid
    end
  end
  return lo
end

function request()
  if in_session >= SESSION then
    local r = draw()
    session_headers = { ["Authorization"] = "Bearer " .. keys[r] }
    session_companies = companies[r]
    in_session = 0
    sessions = sessions + 1
  end
  local i = in_session -- 0..19
  in_session = in_session + 1
  local kind = i % 5
  local path
  if kind == 0 then
    path = "/portfolio"
  elseif kind == 1 then
    path = "/tasks?limit=50"
  elseif kind == 2 then
    path = "/feed?limit=20"
  elseif #session_companies == 0 then
    path = "/portfolio"
  else
    local id = session_companies[math.floor(i / 5) % #session_companies + 1]
    if kind == 3 then
      path = "/portfolio/" .. id .. "/notes"
    else
      path = "/portfolio/" .. id .. "/tasks"
    end
  end
  return wrk.format("GET", path, session_headers)
end

function done(summary, latency, requests)
  local started = 0
  for _, thread in ipairs(threads) do
    started = started + (tonumber(thread:get("sessions")) or 0)
  end
  local e = summary.errors
  io.write(string.format("SUMMARY %d %d %d %d %d %d %d %d\n", summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9),
    e.connect + e.read + e.write + e.timeout, e.status, started))
end
