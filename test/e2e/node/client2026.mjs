// The end-to-end tests' MCP 2026-07-28 client: the official TypeScript SDK
// v2 Client (@modelcontextprotocol/client), pinned to the sessionless
// revision, drives a server (through mcpbox) and prints what it got.
//
//   node client2026.mjs stdio -- CMD [ARG...]
//   node client2026.mjs http URL [--token TOKEN]
//
// Standard input is a JSON array of steps, each one of
//   {"op": "info"}                                   (era, version, server info)
//   {"op": "listTools"}
//   {"op": "callTool", "name": N, "arguments": {...}, "answer": A}
//       the SDK's own multi round-trip driver answers every elicitation
//       (input request) with {decision: A}; prints {result, elicitations}
//   {"op": "approveManual", "name": N, "arguments": {...}, "answer": A}
//       drives the round trip by hand: the call, then retries with the
//       answer under a state with a flipped signature byte, a re-encoded
//       payload, other arguments, then the genuine state, then the genuine
//       state again (replay); prints each leg's result or error
//   {"op": "request", "method": M, "params": {...}}  (raw result)
// and standard output gets one JSON line per step: the result, or
// {"error": MESSAGE, "code": CODE} when the step failed.
//
// Exit codes: 0 when every step ran (failed steps included), 1 on usage or
// connection failure, 2 when the global timeout (MCP_CLIENT_TIMEOUT_S,
// 60 s by default) ran out.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const version = "2026-07-28";
const timeoutS = Number(process.env.MCP_CLIENT_TIMEOUT_S || 60);
const deadline = setTimeout(() => {
  process.stderr.write(`client2026.mjs: timed out after ${timeoutS} s\n`);
  process.exit(2);
}, timeoutS * 1000);

function usage(msg) {
  process.stderr.write(`client2026.mjs: ${msg}\nusage: node client2026.mjs stdio -- CMD [ARG...] | http URL [--token T]\n`);
  process.exit(1);
}

function transportFromArgs(argv) {
  const [kind, ...rest] = argv;
  if (kind === "stdio") {
    if (rest[0] !== "--" || rest.length < 2) usage("stdio needs -- CMD");
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

// The answer the elicitation handler gives next (set per step).
let answer = "once";
let elicitations = [];

function errorLine(e) {
  const line = { error: String(e?.message ?? e) };
  if (e?.code !== undefined) line.code = e.code;
  return line;
}

// flip changes one character of s at i to another base64url character.
function flip(s, i) {
  const c = s[i] === "A" ? "B" : "A";
  return s.slice(0, i) + c + s.slice(i + 1);
}

// Variants of a gateway request state (mcpbox1.PAYLOAD.MAC) an attacker
// could send: the MAC changed, and the payload re-encoded with a changed
// claim (the MAC left as it was).
function tampered(state) {
  const out = { signature: flip(state, state.length - 2) };
  const parts = state.split(".");
  if (parts.length === 3) {
    try {
      const claims = JSON.parse(Buffer.from(parts[1], "base64url").toString("utf8"));
      for (const k of Object.keys(claims)) {
        if (typeof claims[k] === "number") claims[k] += 3600;
      }
      out.payload = [parts[0], Buffer.from(JSON.stringify(claims)).toString("base64url"), parts[2]].join(".");
    } catch {
      out.payload = [parts[0], flip(parts[1], 1), parts[2]].join(".");
    }
  } else {
    out.payload = flip(state, 1);
  }
  return out;
}

async function approveManual(client, step, opts) {
  const params = { name: step.name, arguments: step.arguments ?? {} };
  const manual = { ...opts, allowInputRequired: true };
  const first = await client.request({ method: "tools/call", params }, manual);
  const out = { first };
  if (first?.resultType !== "input_required" || typeof first.requestState !== "string") {
    return out;
  }
  const keys = Object.keys(first.inputRequests ?? {});
  const responses = {};
  for (const k of keys) responses[k] = { action: "accept", content: { decision: step.answer ?? "once" } };
  const leg = async (p) => {
    try {
      return await client.request({ method: "tools/call", params: p }, manual);
    } catch (e) {
      return errorLine(e);
    }
  };
  const state = first.requestState;
  const t = tampered(state);
  out.signature = await leg({ ...params, inputResponses: responses, requestState: t.signature });
  out.payload = await leg({ ...params, inputResponses: responses, requestState: t.payload });
  out.otherArguments = await leg({ ...params, arguments: step.otherArguments ?? {}, inputResponses: responses, requestState: state });
  out.genuine = await leg({ ...params, inputResponses: responses, requestState: state });
  out.replay = await leg({ ...params, inputResponses: responses, requestState: state });
  return out;
}

async function runStep(client, step, opts) {
  switch (step.op) {
    case "info":
      return {
        era: client.getProtocolEra(),
        version: client.getNegotiatedProtocolVersion(),
        serverInfo: client.getServerVersion(),
        capabilities: client.getServerCapabilities(),
      };
    case "listTools":
      return client.listTools({}, opts);
    case "callTool": {
      answer = step.answer ?? "once";
      elicitations = [];
      let result;
      try {
        result = await client.callTool({ name: step.name, arguments: step.arguments ?? {} }, opts);
      } catch (e) {
        result = errorLine(e);
      }
      return { result, elicitations };
    }
    case "approveManual":
      return approveManual(client, step, opts);
    case "request":
      return client.request({ method: step.method, params: step.params ?? {} }, { ...opts, allowInputRequired: true });
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
  const client = new Client(
    { name: "mcpbox-e2e-ts2026", version: "1" },
    {
      capabilities: { elicitation: { form: {} } },
      versionNegotiation: { mode: { pin: version } },
    },
  );
  client.setRequestHandler("elicitation/create", async (req) => {
    elicitations.push(req.params);
    return { action: "accept", content: { decision: answer } };
  });
  try {
    await client.connect(transport, { timeout: timeoutS * 1000 });
  } catch (e) {
    process.stderr.write(`client2026.mjs: connecting: ${e.stack ?? e}\n`);
    process.exit(1);
  }
  const opts = { timeout: timeoutS * 1000 };
  for (const step of steps) {
    let line;
    try {
      line = await runStep(client, step, opts);
    } catch (e) {
      line = errorLine(e);
    }
    process.stdout.write(JSON.stringify(line) + "\n");
  }
  await client.close();
  clearTimeout(deadline);
}

main().catch((e) => {
  process.stderr.write(`client2026.mjs: ${e.stack ?? e}\n`);
  process.exit(1);
});
