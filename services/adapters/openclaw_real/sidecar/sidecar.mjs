// memrig openclaw-real sidecar: one long-lived Node process that drives OpenClaw's own builtin memory search
// through its public plugin SDK (`openclaw/plugin-sdk/config-runtime`, `openclaw/plugin-sdk/memory-host-search`).
//
// Why a sidecar: the OpenClaw CLI costs ~10 s a call (module loading); one process keeps the managers warm, so a
// search costs what OpenClaw's search costs. The Python adapter (../backend.py) writes each namespace's workspace
// (MEMORY.md + memory/YYYY-MM-DD.md, the same files the port indexes) and talks to this process over HTTP on a
// Unix socket it owns. Nothing here re-implements OpenClaw: indexing, chunking, FTS, embeddings, merge, decay,
// MMR and selection are OpenClaw's.
//
// One OpenClaw agent per rig namespace: agent `<id>` has workspace `<dir>`, and OpenClaw keeps its index in
// `<stateDir>/agents/<id>/agent/openclaw-agent.sqlite` (docs/reference/memory-config.md "Index storage").
//
// The benchmark's clock: OpenClaw's temporal decay reads Date.now(). A search that carries `nowMs` runs with
// Date.now() reading exactly `nowMs` (frozen, so the same query on the same data scores the same to the last bit).
// Every operation is serialised through one queue, so the clock never leaks into another request.
//
// Protocol (JSON over HTTP/1.1 on the Unix socket; every answer is JSON; errors are {"error": "..."} with 4xx/5xx):
//   GET  /health                                  → {ok, openclaw, node, provider, model}
//   POST /sync   {agent, workspace, force?}       → status of the agent's index after OpenClaw's sync
//   POST /search {agent, query, maxResults, nowMs?, minScore?} → {results: [{path, startLine, endLine, score, vectorScore,
//                                                     textScore, snippet, source}], searchMs}
//   POST /status {agent}                          → status
//   POST /drop   {agent}                          → closes the agent's manager and deletes its index
// Started as: node sidecar.mjs --config <file.json>; prints `READY pid=<pid>` on stdout once it serves.

import { createServer } from "node:http";
import { readFileSync, writeFileSync, rmSync, mkdirSync, existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const out = process.stdout;
// OpenClaw logs through console.*; keep stdout for the READY line only.
for (const k of ["log", "info", "warn", "debug"]) console[k] = (...a) => console.error(...a);

function arg(name) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const configPath = arg("--config");
if (!configPath) {
  console.error("usage: node sidecar.mjs --config <file.json>");
  process.exit(2);
}
const conf = JSON.parse(readFileSync(configPath, "utf8"));
for (const k of ["socket", "stateDir", "provider"]) {
  if (typeof conf[k] !== "string" || !conf[k]) {
    console.error(`config: '${k}' must be a non-empty string`);
    process.exit(2);
  }
}
if (!["none", "openai-compatible"].includes(conf.provider)) {
  console.error(`config: 'provider' must be "none" or "openai-compatible", got ${JSON.stringify(conf.provider)}`);
  process.exit(2);
}
if (conf.provider === "openai-compatible" && !(conf.baseUrl && conf.model)) {
  console.error("config: 'baseUrl' and 'model' are required with provider openai-compatible");
  process.exit(2);
}

// OpenClaw resolves its config and state from these before any of its modules load.
mkdirSync(conf.stateDir, { recursive: true });
const openclawConfigPath = path.join(conf.stateDir, "openclaw.json");
const search = { provider: conf.provider };
if (conf.provider === "openai-compatible") {
  search.model = conf.model;
  // The key is read from the environment, never from argv or the config file on disk.
  search.remote = { baseUrl: conf.baseUrl, apiKey: process.env.MEMRIG_OPENCLAW_EMBED_API_KEY || "memrig-local" };
}
writeFileSync(openclawConfigPath, JSON.stringify({ memory: { search }, agents: { entries: {} } }, null, 2));
process.env.OPENCLAW_STATE_DIR = conf.stateDir;
process.env.OPENCLAW_CONFIG_PATH = openclawConfigPath;

const { loadConfig } = await import("openclaw/plugin-sdk/config-runtime");
const { getActiveMemorySearchManager, closeActiveMemorySearchManager } = await import(
  "openclaw/plugin-sdk/memory-host-search"
);
// The package's exports map hides package.json; read it from the sidecar's own node_modules.
const here = path.dirname(fileURLToPath(import.meta.url));
const openclawVersion = JSON.parse(readFileSync(path.join(here, "node_modules", "openclaw", "package.json"), "utf8")).version;

const cfg = loadConfig();
cfg.agents ??= {};
cfg.agents.entries ??= {};
const managers = new Map(); // agent id → OpenClaw memory search manager

// ---------------------------------------------------------------- one operation at a time, optionally re-clocked
let queue = Promise.resolve();
function serial(fn) {
  const run = queue.then(fn, fn);
  queue = run.then(() => undefined, () => undefined);
  return run;
}
const realNow = Date.now;
async function withClock(nowMs, fn) {
  if (nowMs === undefined || nowMs === null) return await fn();
  Date.now = () => nowMs;
  try {
    return await fn();
  } finally {
    Date.now = realNow;
  }
}

class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function agentId(body) {
  const id = body.agent;
  if (typeof id !== "string" || !/^[a-z0-9][a-z0-9_-]{0,63}$/.test(id)) {
    throw new HttpError(400, "agent: must match ^[a-z0-9][a-z0-9_-]{0,63}$");
  }
  return id;
}

async function manager(id, workspace) {
  let m = managers.get(id);
  if (m) return m;
  if (!cfg.agents.entries[id]) {
    if (typeof workspace !== "string" || !path.isAbsolute(workspace) || !existsSync(workspace)) {
      throw new HttpError(404, `agent ${id}: unknown; sync it first with an absolute, existing 'workspace'`);
    }
    cfg.agents.entries[id] = { workspace };
  }
  const res = await getActiveMemorySearchManager({ cfg, agentId: id, purpose: "search" });
  if (!res?.manager) throw new HttpError(503, `agent ${id}: OpenClaw gave no memory manager: ${res?.error ?? "unknown"}`);
  managers.set(id, res.manager);
  return res.manager;
}

function summary(st) {
  return {
    files: st.files, chunks: st.chunks, dirty: st.dirty, provider: st.provider, model: st.model,
    requestedProvider: st.requestedProvider, searchMode: st.custom?.searchMode, workspaceDir: st.workspaceDir,
    dbPath: st.dbPath, sources: st.sources, fts: st.fts, vector: st.vector,
    providerUnavailableReason: st.custom?.providerUnavailableReason,
  };
}

const routes = {
  "GET /health": async () => ({
    ok: true, openclaw: openclawVersion, node: process.version, provider: conf.provider, model: conf.model ?? null,
    agents: managers.size,
  }),
  "POST /sync": (body) => serial(async () => {
    const id = agentId(body);
    const m = await manager(id, body.workspace);
    await m.sync({ reason: "memrig-ingest", force: body.force === true });
    return summary(m.status());
  }),
  "POST /status": (body) => serial(async () => summary((await manager(agentId(body))).status())),
  "POST /search": (body) => serial(async () => {
    const id = agentId(body);
    if (typeof body.query !== "string") throw new HttpError(400, "query: must be a string");
    const maxResults = body.maxResults;
    if (!Number.isInteger(maxResults) || maxResults < 1 || maxResults > 1000) {
      throw new HttpError(400, "maxResults: must be an integer in [1, 1000]");
    }
    if (body.nowMs !== undefined && body.nowMs !== null && !Number.isFinite(body.nowMs)) {
      throw new HttpError(400, "nowMs: must be a finite number of milliseconds since the epoch");
    }
    const opts = { maxResults };
    if (body.minScore !== undefined) {
      if (!Number.isFinite(body.minScore) || body.minScore < 0 || body.minScore > 1) {
        throw new HttpError(400, "minScore: must be a number in [0, 1]");
      }
      opts.minScore = body.minScore; // OpenClaw's own search option (memory.search.query.minScore otherwise)
    }
    const m = await manager(id);
    const t0 = performance.now();
    const rows = await withClock(body.nowMs, () => m.search(body.query, opts));
    const searchMs = performance.now() - t0;
    return {
      searchMs,
      results: rows.map((r) => ({
        path: r.path, startLine: r.startLine, endLine: r.endLine, score: r.score,
        vectorScore: r.vectorScore ?? null, textScore: r.textScore ?? null, snippet: r.snippet, source: r.source,
      })),
    };
  }),
  "POST /drop": (body) => serial(async () => {
    const id = agentId(body);
    const had = managers.has(id) || Boolean(cfg.agents.entries[id]);
    if (managers.has(id)) await closeActiveMemorySearchManager({ cfg, agentId: id });
    managers.delete(id);
    delete cfg.agents.entries[id];
    rmSync(path.join(conf.stateDir, "agents", id), { recursive: true, force: true });
    return { dropped: had };
  }),
};

const MAX_BODY = 16 * 1024 * 1024;
const server = createServer((req, res) => {
  const chunks = [];
  let size = 0;
  req.on("data", (c) => {
    size += c.length;
    if (size <= MAX_BODY) chunks.push(c);
  });
  req.on("end", async () => {
    let status = 200;
    let payload;
    try {
      const handler = routes[`${req.method} ${req.url}`];
      if (!handler) throw new HttpError(404, `unknown route ${req.method} ${req.url}`);
      if (size > MAX_BODY) throw new HttpError(413, `body over ${MAX_BODY} bytes`);
      let body = {};
      if (chunks.length) {
        try {
          body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
        } catch {
          throw new HttpError(400, "body: not valid JSON");
        }
      }
      if (body === null || typeof body !== "object" || Array.isArray(body)) throw new HttpError(400, "body: must be a JSON object");
      payload = await handler(body);
    } catch (err) {
      status = err instanceof HttpError ? err.status : 500;
      payload = { error: String(err?.message ?? err) };
      if (status === 500) console.error(err);
    }
    const text = JSON.stringify(payload);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
    res.end(text);
  });
});

async function shutdown() {
  server.close();
  for (const id of managers.keys()) {
    try {
      await closeActiveMemorySearchManager({ cfg, agentId: id });
    } catch (err) {
      console.error(`close ${id}:`, err);
    }
  }
  process.exit(0);
}
process.on("SIGTERM", shutdown);
process.on("SIGINT", shutdown);

// Warm-up: OpenClaw loads its search runtime lazily (~5 s on the first search here). Do that once now, on a
// throwaway agent, so no measured request pays for module loading.
if (conf.warmup !== false) {
  const ws = path.join(conf.stateDir, "warmup-workspace");
  mkdirSync(path.join(ws, "memory"), { recursive: true });
  writeFileSync(path.join(ws, "MEMORY.md"), "# Memory\n\n- warm-up note\n");
  const body = { agent: "memrig-warmup", workspace: ws };
  try {
    await routes["POST /sync"](body);
    await routes["POST /search"]({ ...body, query: "warm-up note", maxResults: 1 });
  } catch (err) {
    console.error("warm-up failed (searches will still work):", err);
  }
  await routes["POST /drop"](body);
  rmSync(ws, { recursive: true, force: true });
}

rmSync(conf.socket, { force: true });
server.listen(conf.socket, () => {
  out.write(`READY pid=${process.pid}\n`);
});
