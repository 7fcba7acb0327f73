// A real ACP client, the official TypeScript SDK's, driving `cwcode-cli acp` for
// tests/tests/acp.rs. It prints one JSON object per line, each naming its `step`, and the Rust
// test asserts on them. Usage:
//   node client.mjs CWCODE_CLI WORKSPACE main         the editor's whole first visit
//   node client.mjs CWCODE_CLI WORKSPACE load ID      a fresh process loading session ID, then
//                                                     watching a turn another client sends
//   node client.mjs CWCODE_CLI WORKSPACE stop         a prompt the daemon stops under
//   node client.mjs CWCODE_CLI WORKSPACE elsewhere    an approval and a mode change made by
//                                                     another client while the editor watches
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const [cli, workspace, scenario, loadId] = process.argv.slice(2);
const say = (step, fields = {}) => process.stdout.write(JSON.stringify({ step, ...fields }) + "\n");
// Nothing in these scenarios may take this long: a hang fails the test instead of stalling it.
const deadline = setTimeout(() => {
  say("hung");
  process.exit(3);
}, 60_000);

const agent = spawn(cli, ["acp"], { stdio: ["pipe", "pipe", "inherit"] });
const stream = acp.ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));

const updates = [];
const waiters = [];
/** The next update (from now on, or already received after index `from`) matching `test`. */
function nextUpdate(test, from = updates.length) {
  const found = updates.slice(from).find(test);
  if (found) return Promise.resolve(found);
  return new Promise((resolve) => waiters.push({ test, resolve }));
}
// What the editor answers to each permission request, in order; "wait" leaves it open until
// the agent withdraws it.
const answers = [];
const permissionRequests = [];

const app = acp
  .client({ name: "cwcode-e2e" })
  .onNotification("session/update", ({ params }) => {
    updates.push(params.update);
    for (const waiter of waiters.splice(0)) {
      if (waiter.test(params.update)) waiter.resolve(params.update);
      else waiters.push(waiter);
    }
  })
  .onRequest("session/request_permission", async ({ params, signal }) => {
    permissionRequests.push(params);
    const optionId = answers.shift() ?? "reject";
    if (optionId === "wait") {
      say("asked", { toolCallId: params.toolCall.toolCallId });
      if (!signal.aborted) await new Promise((resolve) => signal.addEventListener("abort", resolve));
      say("withdrawn");
      return { outcome: { outcome: "cancelled" } };
    }
    return { outcome: { outcome: "selected", optionId } };
  });

const text = (kind) =>
  updates
    .filter((update) => update.sessionUpdate === kind)
    .map((update) => update.content.text)
    .join("");

async function main(ctx) {
  const init = await ctx.request("initialize", {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: {},
  });
  say("initialized", {
    protocolVersion: init.protocolVersion,
    agentInfo: init.agentInfo,
    capabilities: init.agentCapabilities,
  });
  const session = await ctx.request("session/new", { cwd: workspace, mcpServers: [] });
  const sessionId = session.sessionId;
  say("session", { sessionId, modes: session.modes, configOptions: session.configOptions });

  answers.push("allow_once");
  let from = updates.length;
  const granted = await ctx.request("session/prompt", {
    sessionId,
    prompt: [{ type: "text", text: "make one.txt" }],
  });
  say("granted", {
    stopReason: granted.stopReason,
    updates: updates.slice(from),
    permission: permissionRequests.at(-1),
  });

  answers.push("reject");
  from = updates.length;
  const denied = await ctx.request("session/prompt", {
    sessionId,
    prompt: [{ type: "text", text: "make two.txt" }],
  });
  say("denied", { stopReason: denied.stopReason, updates: updates.slice(from) });

  from = updates.length;
  const streaming = ctx.request("session/prompt", {
    sessionId,
    prompt: [{ type: "text", text: "talk for a long time" }],
  });
  await nextUpdate((update) => update.sessionUpdate === "agent_message_chunk", from);
  await ctx.notify("session/cancel", { sessionId });
  const cancelled = await streaming;
  say("cancelled", { stopReason: cancelled.stopReason });

  from = updates.length;
  await ctx.request("session/set_mode", { sessionId, modeId: "plan" });
  const modeUpdate = await nextUpdate((update) => update.sessionUpdate === "current_mode_update", from);
  say("mode", { update: modeUpdate });

  const listed = await ctx.request("session/list", { cwd: workspace });
  const elsewhere = await ctx.request("session/list", { cwd: "/nonexistent-workspace" });
  say("listed", { sessions: listed.sessions, elsewhere: elsewhere.sessions });
}

async function load(ctx) {
  await ctx.request("initialize", { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
  await ctx.request("session/load", { sessionId: loadId, cwd: workspace, mcpServers: [] });
  say("loaded", {
    userText: updates
      .filter((update) => update.sessionUpdate === "user_message_chunk")
      .map((update) => update.content.text),
    agentText: text("agent_message_chunk"),
    toolCalls: updates.filter((update) => update.sessionUpdate === "tool_call"),
  });
  // Another client (the test runs the CLI now) sends a prompt to the same session.
  const from = updates.length;
  await nextUpdate(
    (update) => update.sessionUpdate === "agent_message_chunk" && update.content.text.includes("cli"),
    from,
  );
  await nextUpdate((update) => update.sessionUpdate === "usage_update", from);
  say("live", { updates: updates.slice(from) });
}

async function stop(ctx) {
  await ctx.request("initialize", { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
  const { sessionId } = await ctx.request("session/new", { cwd: workspace, mcpServers: [] });
  const prompt = ctx.request("session/prompt", {
    sessionId,
    prompt: [{ type: "text", text: "talk until the daemon stops" }],
  });
  await nextUpdate((update) => update.sessionUpdate === "agent_message_chunk");
  say("streaming");
  try {
    const response = await prompt;
    say("stopped", { response });
  } catch (error) {
    say("stopped", { error: { code: error.code, message: error.message, data: error.data } });
  }
}

async function elsewhere(ctx) {
  await ctx.request("initialize", { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
  const { sessionId } = await ctx.request("session/new", { cwd: workspace, mcpServers: [] });
  say("session", { sessionId });
  // The test approves this one with the CLI: the editor's request is withdrawn.
  answers.push("wait");
  const done = await ctx.request("session/prompt", {
    sessionId,
    prompt: [{ type: "text", text: "make three.txt" }],
  });
  const from = updates.length;
  say("done", { stopReason: done.stopReason });
  const mode = await nextUpdate((update) => update.sessionUpdate === "current_mode_update", from);
  say("mode", { update: mode });
}

const scenarios = { main, load, stop, elsewhere };
try {
  await app.connectWith(stream, scenarios[scenario]);
} catch (error) {
  say("failed", { error: String(error?.stack ?? error), data: error?.data });
  process.exitCode = 1;
}
clearTimeout(deadline);
agent.stdin.end();
agent.kill();
