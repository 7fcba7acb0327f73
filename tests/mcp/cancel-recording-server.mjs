// A stdio MCP server whose `wait` never answers, and which writes what it is told to the file
// named by its first argument, one JSON line each: `{"started": ID}` when a `wait` call comes in,
// `{"cancelled": PARAMS}` for every `notifications/cancelled`.
import { appendFileSync } from "node:fs";
import { serve } from "./stdio-server.mjs";

const log = process.argv[2];

function record(entry) {
  // One write per line, so a reader never sees half of one.
  appendFileSync(log, JSON.stringify(entry) + "\n");
}

serve({
  name: "cancel-recording-server",
  tools: [{ name: "wait", description: "Never answers.", inputSchema: { type: "object", properties: {} } }],
  onCall(message) {
    record({ started: message.id });
  },
  onNotification(message) {
    if (message.method === "notifications/cancelled") {
      record({ cancelled: message.params });
    }
  },
});
