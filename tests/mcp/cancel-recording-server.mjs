// A stdio MCP server whose `wait` never answers, and which writes what it is told to the file
// named by its first argument, one JSON line each: `{"started": ID}` when a `wait` call comes in,
// `{"cancelled": PARAMS}` for every `notifications/cancelled`. No SDK, so what it speaks is
// plain to see.
import { appendFileSync } from "node:fs";
import { createInterface } from "node:readline";

const log = process.argv[2];
const tools = [
  { name: "wait", description: "Never answers.", inputSchema: { type: "object", properties: {} } },
];

function record(entry) {
  // One write per line, so a reader never sees half of one.
  appendFileSync(log, JSON.stringify(entry) + "\n");
}

function reply(id, result) {
  process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id, result }) + "\n");
}

createInterface({ input: process.stdin }).on("line", (line) => {
  const message = JSON.parse(line);
  switch (message.method) {
    case "initialize":
      reply(message.id, {
        protocolVersion: "2025-06-18",
        capabilities: { tools: {} },
        serverInfo: { name: "cancel-recording-server", version: "1.0.0" },
      });
      break;
    case "tools/list":
      reply(message.id, { tools });
      break;
    case "tools/call":
      record({ started: message.id });
      break;
    case "notifications/cancelled":
      record({ cancelled: message.params });
      break;
    default:
      if (message.id !== undefined) {
        process.stdout.write(
          JSON.stringify({ jsonrpc: "2.0", id: message.id, error: { code: -32601, message: "no such method" } }) + "\n",
        );
      }
  }
});
