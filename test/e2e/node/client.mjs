// A small generic MCP client for the end-to-end tests: the official
// TypeScript SDK's Client drives a server (through mcpbox) and prints what
// it got, so Go tests can check how the gateway looks to a real client.
//
//   node client.mjs stdio -- CMD [ARG...]
//   node client.mjs http URL [--token TOKEN]
//
// Standard input is a JSON array of steps, each one of
//   {"op": "listTools"} | {"op": "listPrompts"} | {"op": "listResources"}
//   {"op": "callTool", "name": N, "arguments": {...}}
//   {"op": "getPrompt", "name": N, "arguments": {...}}
//   {"op": "readResource", "uri": U}
//   {"op": "request", "method": M, "params": {...}}   (raw result, unknown keys kept)
//   {"op": "serverInfo"}                              (initialize's serverInfo and capabilities)
// and standard output gets one JSON line per step: the result, or
// {"error": MESSAGE, "code": CODE} when the step failed.
//
// MCP_CLIENT_CAPABILITIES, if set, is the JSON of the client capabilities
// to declare (none by default); with roots declared, roots/list is answered
// with an empty list.
//
// Exit codes: 0 when every step ran (failed steps included), 1 on usage or
// connection failure, 2 when the global timeout (MCP_CLIENT_TIMEOUT_S,
// 60 s by default) ran out.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ListRootsRequestSchema, ResultSchema } from "@modelcontextprotocol/sdk/types.js";

const timeoutS = Number(process.env.MCP_CLIENT_TIMEOUT_S || 60);
const deadline = setTimeout(() => {
  process.stderr.write(`client.mjs: timed out after ${timeoutS} s\n`);
  process.exit(2);
}, timeoutS * 1000);

function usage(msg) {
  process.stderr.write(`client.mjs: ${msg}\nusage: node client.mjs stdio -- CMD [ARG...] | http URL [--token T]\n`);
  process.exit(1);
}

function transportFromArgs(argv) {
  const [kind, ...rest] = argv;
  if (kind === "stdio") {
    if (rest[0] !== "--" || rest.length < 2) usage("stdio needs -- CMD");
    // The whole environment goes to the child: the test decides what it is.
    const env = Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== undefined));
    return new StdioClientTransport({ command: rest[1], args: rest.slice(2), env, stderr: "inherit" });
  }
  if (kind === "http") {
    if (rest.length < 1) usage("http needs URL");
    const headers = {};
    for (let i = 1; i < rest.length; i++) {
      if (rest[i] === "--token" && i + 1 < rest.length) {
        headers.Authorization = `Bearer ${rest[++i]}`;
      } else {
        usage(`unknown argument ${rest[i]}`);
      }
    }
    return new StreamableHTTPClientTransport(new URL(rest[0]), { requestInit: { headers } });
  }
  usage(`unknown transport ${kind}`);
}

async function readStdin() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  const text = Buffer.concat(chunks).toString("utf8").trim();
  return text === "" ? [] : JSON.parse(text);
}

async function runStep(client, step, opts) {
  switch (step.op) {
    case "listTools":
      return client.listTools({}, opts);
    case "callTool":
      return client.callTool({ name: step.name, arguments: step.arguments ?? {} }, undefined, opts);
    case "listPrompts":
      return client.listPrompts({}, opts);
    case "getPrompt":
      return client.getPrompt({ name: step.name, arguments: step.arguments ?? {} }, opts);
    case "listResources":
      return client.listResources({}, opts);
    case "readResource":
      return client.readResource({ uri: step.uri }, opts);
    case "request":
      return client.request({ method: step.method, params: step.params ?? {} }, ResultSchema, opts);
    case "serverInfo":
      return { serverInfo: client.getServerVersion(), capabilities: client.getServerCapabilities() };
    default:
      throw new Error(`unknown op ${JSON.stringify(step.op)}`);
  }
}

async function main() {
  let steps;
  try {
    steps = await readStdin();
  } catch (e) {
    usage(`reading the steps: ${e.message}`);
  }
  if (!Array.isArray(steps)) usage("the steps must be a JSON array");
  const transport = transportFromArgs(process.argv.slice(2));
  let capabilities = {};
  try {
    capabilities = JSON.parse(process.env.MCP_CLIENT_CAPABILITIES || "{}");
  } catch (e) {
    usage(`MCP_CLIENT_CAPABILITIES: ${e.message}`);
  }
  const client = new Client({ name: "mcpbox-e2e-ts", version: "1" }, { capabilities });
  if (capabilities.roots) {
    client.setRequestHandler(ListRootsRequestSchema, () => ({ roots: [] }));
  }
  try {
    await client.connect(transport, { timeout: timeoutS * 1000 });
  } catch (e) {
    process.stderr.write(`client.mjs: connecting: ${e.message}\n`);
    process.exit(1);
  }
  const opts = { timeout: timeoutS * 1000 };
  for (const step of steps) {
    let line;
    try {
      line = await runStep(client, step, opts);
    } catch (e) {
      line = { error: String(e.message ?? e) };
      if (e.code !== undefined) line.code = e.code;
    }
    process.stdout.write(JSON.stringify(line) + "\n");
  }
  if (transport instanceof StreamableHTTPClientTransport) {
    // End the MCP session so the gateway can release what it holds for it.
    await transport.terminateSession().catch((e) => process.stderr.write(`client.mjs: ending the session: ${e.message}\n`));
  }
  await client.close();
  clearTimeout(deadline);
}

main().catch((e) => {
  process.stderr.write(`client.mjs: ${e.stack ?? e}\n`);
  process.exit(1);
});
