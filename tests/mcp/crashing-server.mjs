// A stdio MCP server that dies in the middle of a call: `crash` writes a last word to stderr and
// exits before answering; `ping` answers "pong".
import { reply, serve } from "./stdio-server.mjs";

serve({
  name: "crashing-server",
  tools: [
    { name: "crash", description: "Exits before answering.", inputSchema: { type: "object", properties: {} } },
    { name: "ping", description: "Answers pong.", inputSchema: { type: "object", properties: {} } },
  ],
  onCall(message) {
    if (message.params.name === "crash") {
      process.stderr.write("crashing on purpose\n");
      process.exit(3);
    }
    reply(message.id, { content: [{ type: "text", text: "pong" }] });
  },
});
