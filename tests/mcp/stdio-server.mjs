// The plain stdio MCP server the test servers share: line-delimited JSON-RPC, `initialize` and
// `tools/list` answered from what the caller gives, `tools/call` and notifications handed to it.
// No SDK, so what it speaks is plain to see.
import { createInterface } from "node:readline";

export function reply(id, result) {
  process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id, result }) + "\n");
}

// `onCall(message)` answers a `tools/call` (with `reply`) or not at all; `onNotification(message)`
// sees every message without an id that is not handled here.
export function serve({ name, tools, onCall, onNotification = () => {} }) {
  createInterface({ input: process.stdin }).on("line", (line) => {
    const message = JSON.parse(line);
    switch (message.method) {
      case "initialize":
        reply(message.id, {
          protocolVersion: "2025-06-18",
          capabilities: { tools: {} },
          serverInfo: { name, version: "1.0.0" },
        });
        break;
      case "tools/list":
        reply(message.id, { tools });
        break;
      case "tools/call":
        onCall(message);
        break;
      default:
        if (message.id === undefined) {
          onNotification(message);
        } else {
          process.stdout.write(
            JSON.stringify({ jsonrpc: "2.0", id: message.id, error: { code: -32601, message: "no such method" } }) + "\n",
          );
        }
    }
  });
}
