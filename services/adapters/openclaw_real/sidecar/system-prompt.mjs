// memrig: what OpenClaw sends a model on every turn before the conversation, built by OpenClaw's own code.
//
// Usage: node system-prompt.mjs   (run from this directory, so `openclaw` resolves to ./node_modules/openclaw)
// Prints one JSON object on stdout; OpenClaw's own logging goes to stderr. Nothing outside a temp dir is written.
//
// It sets up a fresh install the way local onboarding leaves one (docs/start/onboarding.md: `tools.profile: "full"`;
// the bundled session-memory hook on; the user's zone UTC, as the rig runs), has OpenClaw write the agent's workspace
// (`ensureAgentWorkspace` with ensureBootstrapFiles, dist/workspace-DDLxBwAa.mjs line 606: what every reply's
// `reply.ensure_workspace` step calls, dist/get-reply-DXzvDRjY.mjs line 6465), and then asks OpenClaw for the
// system prompt and tools of a turn in the main webchat session by the `/context` estimate path
// (`resolveCommandsSystemPromptBundle`, dist/commands-system-prompt-DNGbbHYj.mjs, which calls
// `buildConfiguredAgentSystemPrompt` and `createOpenClawCodingTools`; dist/commands-handlers.runtime-BtQ-ofsw.mjs
// `resolveContextReport`, line 2361), with `buildSystemPromptReport` for OpenClaw's own char counts.
//
// Two states: "first-run" (the workspace as onboarding writes it: BOOTSTRAP.md pending) and "steady" (after the first
// memory file: once `memory/` exists, the next turn's ensureAgentWorkspace marks setup complete and deletes
// BOOTSTRAP.md, `reconcileWorkspaceBootstrapCompletionState`; this script creates `memory/` and lets OpenClaw do it).
// The model is OpenClaw's default (`openai/gpt-6-astra`, dist/defaults-BbU4k6fu.mjs); it only appears in one line.

import { mkdirSync, writeFileSync, readdirSync, readFileSync, mkdtempSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

for (const k of ["log", "info", "warn", "debug"]) console[k] = (...a) => console.error(...a);

const root = mkdtempSync(path.join(os.tmpdir(), "memrig-ocsp-"));
try {
  const stateDir = path.join(root, "state");
  const workspace = path.join(root, "workspace");
  mkdirSync(stateDir, { recursive: true });
  const configPath = path.join(stateDir, "openclaw.json");
  const onboarded = {
    tools: { profile: "full" },
    agents: { defaults: { workspace, userTimezone: "UTC" } },
    hooks: { internal: { entries: { "session-memory": { enabled: true } } } },
  };
  writeFileSync(configPath, JSON.stringify(onboarded, null, 2));
  process.env.OPENCLAW_STATE_DIR = stateDir;
  process.env.OPENCLAW_CONFIG_PATH = configPath;

  const here = path.dirname(fileURLToPath(import.meta.url));
  const version = JSON.parse(readFileSync(path.join(here, "node_modules", "openclaw", "package.json"), "utf8")).version;
  const distUrl = new URL("../", import.meta.resolve("openclaw/plugin-sdk/session-store-runtime"));
  async function pinned(rel, name) {
    const mod = await import(new URL(rel, distUrl).href);
    if (typeof mod[name] !== "function") {
      throw new Error(`OpenClaw ${version}: dist/${rel} has no export '${name}' (this script reads openclaw 2026.9.6)`);
    }
    return mod[name];
  }
  const { loadConfig } = await import("openclaw/plugin-sdk/config-runtime");
  const ensureAgentWorkspace = await pinned("workspace-DDLxBwAa.mjs", "t");
  const resolveBundle = await pinned("commands-system-prompt-DNGbbHYj.mjs", "t");
  const buildSystemPromptReport = await pinned("system-prompt-report-DGQFUGNu.mjs", "t");
  const cfg = loadConfig();

  const files = () => readdirSync(workspace).filter((f) => f.endsWith(".md") && statSync(path.join(workspace, f)).isFile()).sort();
  async function turn(state) {
    await ensureAgentWorkspace({ dir: workspace, ensureBootstrapFiles: true });
    const sessionKey = "agent:main:main";
    const sessionEntry = { sessionId: "00000000-0000-4000-8000-000000000000", chatType: "direct" };
    const params = {
      cfg, workspaceDir: workspace, sessionKey, agentId: "main", sessionEntry,
      command: { channel: "webchat", senderId: "operator" }, ctx: { ChatType: "direct" },
      elevated: { enabled: false, allowed: false }, provider: "openai", model: "gpt-6-astra",
    };
    const b = await resolveBundle(params);
    const report = buildSystemPromptReport({
      source: "estimate", generatedAt: 0, sessionKey, provider: params.provider, model: params.model,
      workspaceDir: workspace, sandbox: { mode: b.sandboxRuntime.mode, sandboxed: b.sandboxRuntime.sandboxed },
      systemPrompt: b.systemPrompt, injectedWorkspaceFiles: [], skillsPrompt: b.skillsPrompt, tools: b.tools,
    });
    return {
      state,
      files: files(),
      injected: b.injectedFiles.map((f) => ({ name: path.basename(f.path), chars: (f.content ?? "").length })),
      systemPrompt: b.systemPrompt,
      skillsPrompt: b.skillsPrompt,
      // Each tool as a provider request carries it (name, description, JSON-schema parameters), serialised compactly.
      tools: b.tools.map((t) => ({ name: t.name, json: JSON.stringify({ name: t.name, description: t.description ?? "",
        parameters: t.parameters ?? {} }) })),
      report: { systemPrompt: report.systemPrompt, skills: { promptChars: report.skills.promptChars,
        entries: report.skills.entries.length }, tools: { schemaChars: report.tools.schemaChars } },
    };
  }
  const firstRun = await turn("first-run");
  mkdirSync(path.join(workspace, "memory"));
  const steady = await turn("steady");
  const text = JSON.stringify({
    openclaw: version, node: process.version, workspace, config: onboarded, provider: "openai", model: "gpt-6-astra",
    states: [firstRun, steady],
  }) + "\n";
  await new Promise((resolve) => process.stdout.write(text, resolve)); // a pipe: flushed before exit below
} finally {
  rmSync(root, { recursive: true, force: true });
}
process.exit(0);
