// Drives every method of the OpenClaw Cortex plugin's own client (Ubundi/openclaw-cortex src/cortex/client.ts,
// loaded from the path in $CORTEX_CLIENT_TS, never vendored) against a Cortex URL, and prints one JSON object:
// {method: {ok: true, value} | {ok: false, error}}. Run by tests/test_cortex_mock_plugin_client.py with
// `node --experimental-transform-types`. argv: <base url> <api key>.
const { CortexClient } = await import(process.env.CORTEX_CLIENT_TS as string);

const [baseUrl, apiKey] = process.argv.slice(2);
const c = new CortexClient(baseUrl, apiKey);
const out: Record<string, unknown> = {};
const USER = "plugin-user";

async function call(name: string, fn: () => Promise<unknown>): Promise<any> {
  try {
    const value = await fn();
    out[name] = { ok: true, value };
    return value;
  } catch (e) {
    out[name] = { ok: false, error: String((e as Error).message ?? e) };
    return undefined;
  }
}

async function waitJob(jobId: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const j = await c.getJob(jobId);
    if (j.status === "completed" || j.status === "failed") return;
    await new Promise((r) => setTimeout(r, 25));
  }
}

await call("healthCheck", () => c.healthCheck());
await call("warmup", () => c.warmup());
await call("ingest", () => c.ingest("We deploy the billing service with Helm. The Helm chart lives in infra/charts.",
  "sess-doc", 10_000, "2026-02-01T10:00:00.000Z", USER));
await call("ingestConversation", () => c.ingestConversation([
  { role: "user", content: "Our staging database is Postgres 16 on RDS." },
  { role: "assistant", content: "Noted: staging runs Postgres 16 on RDS." },
], "sess-1", 10_000, "2026-02-02T10:00:00.000Z", USER));
const sub = await call("submitIngest", () => c.submitIngest("The on-call rotation changes every Monday.", "sess-2",
  "2026-02-03T10:00:00.000Z", USER, "openclaw", "OpenClaw", "inferred",
  { enrichmentMode: "capture_light", captureReason: "agent_end", sourceReason: "auto_capture" }));
const subConv = await call("submitIngestConversation", () => c.submitIngestConversation([
  { role: "user", content: "Grafana dashboards are provisioned from the monitoring repo." },
], "sess-3", "2026-02-04T10:00:00.000Z", USER, "openclaw", "OpenClaw", "inferred", "telegram", "origin-1",
  "ship the dashboards", { enrichmentMode: "full" }));
if (sub?.job_id) await waitJob(sub.job_id);
if (subConv?.job_id) await waitJob(subConv.job_id);
await call("getJob", () => c.getJob(sub?.job_id ?? "missing"));
await call("batchIngest", () => c.batchIngest([
  { text: "The release train leaves every Tuesday.", session_id: "sess-4" },
  { text: "Feature flags are managed in LaunchDarkly.", session_id: "sess-4", user_id: USER },
], 10_000, USER));
const rem = await call("remember", () => c.remember("Remember that the VPN config lives in 1Password.", "sess-5",
  10_000, "2026-02-05", USER));
const remConv = await call("rememberConversation", () => c.rememberConversation([
  { role: "user", content: "The design review is on Thursdays at 3pm." },
], "sess-6", 10_000, "2026-02-06", USER));
if (rem?.job_id) await waitJob(rem.job_id);
if (remConv?.job_id) await waitJob(remConv.job_id);
await call("reflect", () => c.reflect());
const ret = await call("retrieve", () => c.retrieve("Which database does staging use?", 5, "full", 10_000, "combined",
  { referenceDate: "2026-02-10T00:00:00.000Z", userId: USER, sessionId: "sess-9", forceTier: 2,
    sessionGoal: "answer infra questions" }));
await call("retrieveFast", () => c.retrieve("Helm chart", 3, "fast", 10_000, "factual", { debug: true }));
await call("recall", () => c.recall("Where is the Helm chart?", 10_000, {
  limit: 5, context: "infra questions", userId: USER, queryType: "combined", minConfidence: 0.1,
  includeUngrounded: false, includeOrigins: ["openclaw"], derivationMode: "inferred", memoryType: "fact" }));
const nodeId = ret?.results?.[0]?.node_id ?? "missing";
await call("getNode", () => c.getNode(nodeId));
await call("knowledge", () => c.knowledge(USER));
await call("stats", () => c.stats(USER));
await call("forgetEntity", () => c.forgetEntity("LaunchDarkly"));
await call("forgetSession", () => c.forgetSession("sess-3"));
await call("getLinkStatus", () => c.getLinkStatus(USER));
await call("generatePairingCode", () => c.generatePairingCode(USER));
await call("submitBridgePassive", () => c.submitBridgePassive({
  user_id: USER, request_id: "r1", candidates: [{ content: "values honesty", suggested_section: "coreValues",
    confidence: 0.9, risk_tier: "low", evidence_quote: "I value honesty" }] }));
await call("forgetUser", () => c.forgetUser(USER));
await call("knowledgeAfterForgetUser", () => c.knowledge(USER));
console.log(JSON.stringify(out));
