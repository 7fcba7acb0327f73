// A stdio MCP server that dies in the middle of a call: `crash` writes a last word to stderr and
// exits before answering; `ping` answers "pong". No SDK, so what it speaks is plain to see.
import { createInterface } from "node:readline";

const tools = [
  { name: "crash", description: "Exits before answering.", inputSchema: { type: "object", properties: {} } },
  { name: "ping", description: "Answers pong.", inputSchema: { type: "object", properties: {} } },
];

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
        serverInfo: { name: "crashing-server", version: "1.0.0" },
      });
      break;
    case "tools/list":
      reply(message.id, { tools });
      break;
    case "tools/call":
      if (message.params.name === "crash") {
        process.stderr.write("crashing on purpose\n");
        process.exit(3);
      }
      reply(message.id, { content: [{ type: "text", text: "pong" }] });
      break;
    default:
      if (message.id !== undefined) {
        process.stdout.write(
          JSON.stringify({ jsonrpc: "2.0", id: message.id, error: { code: -32601, message: "no such method" } }) + "\n",
        );
      }
  }
});
