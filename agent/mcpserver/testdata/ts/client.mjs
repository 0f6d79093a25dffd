// The official TypeScript MCP client against two `teambus mcp` processes
// (members tm1 and tm2 of one team): list the tools, send, inbox, ack.
// Usage: node client.mjs TEAMBUS_BIN TEAM
// Prints one JSON line of what it saw; exits 1 on the first failure.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [bin, team] = process.argv.slice(2);

async function connect(member) {
  const transport = new StdioClientTransport({
    command: bin,
    args: ["mcp"],
    env: { ...process.env, TEAMBUS_TEAM: team, TEAMBUS_MEMBER: member, TEAMBUS_SESSION: "s-" + member },
    stderr: "inherit",
  });
  const client = new Client({ name: "teambus-ts-test", version: "0" });
  await client.connect(transport);
  return client;
}

function fail(msg) {
  console.error("ts client: " + msg);
  process.exit(1);
}

// call returns the structured content of a tool call that must succeed.
async function call(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  if (res.isError) fail(`${name}: ${JSON.stringify(res.content)}`);
  if (!res.structuredContent) fail(`${name}: no structuredContent`);
  return res.structuredContent;
}

const tm1 = await connect("tm1");
const tm2 = await connect("tm2");
const server = tm1.getServerVersion();
// listTools validates every tool's schemas; one bad schema fails the list.
const tools = (await tm1.listTools()).tools.map((t) => t.name).sort();
for (const want of ["whoami", "send", "inbox", "ack", "task_next", "checkpoint"]) {
  if (!tools.includes(want)) fail(`tool ${want} not listed: ${tools}`);
}
const tools2 = (await tm2.listTools()).tools.length;

const sent = await call(tm2, "send", { to: "tm1", body: "hello from ts", id: "ts-1", data: { n: 1 } });
const dup = await call(tm2, "send", { to: "tm1", body: "hello from ts", id: "ts-1" });
const peek = await call(tm1, "inbox", {});
const seqs = peek.messages.map((m) => m.seq);
const acked = await call(tm1, "ack", { seqs });
const after = await call(tm1, "inbox", {});
const bad = await tm1.callTool({ name: "send", arguments: { to: "nobody", body: "x" } });

console.log(JSON.stringify({
  server,
  tools,
  tools2,
  sent,
  duplicate: dup.duplicate,
  peek,
  acked,
  after: after.messages.length,
  bad: { isError: bad.isError, text: bad.content[0].text },
}));
await tm1.close();
await tm2.close();
