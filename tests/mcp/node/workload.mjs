// Concurrent read-modify-write sessions against an MCP file server, on the official TypeScript
// SDK's client: the MCP tests' and benchmark's own client, written as any agent's would be.
//
//   node workload.mjs '<spec JSON>'      (or the spec on stdin)
//
// The spec:
//   servers     [server, ...] (or "server": one); sessions are dealt to them in turn. A server is
//               {"command": [program, ...args], "cwd"?, "env"?} (stdio: each session starts a
//               process of its own) or {"url", "token"?} (streamable HTTP: each session opens an
//               MCP session of its own, with "Authorization: Bearer <token>").
//   mode        "workload" (default) or "calls".
//   node_modules  where the SDK is (default: $TOOLKERNEL_MCP_NODE_MODULES, else the repository's
//               .venv/mcp-node/node_modules, where tests/mcp/node_packages.py installs it).
//
// "workload": "sessions" sessions, each making "edits" appends one after another, all sessions at
// once. An append reads the file, takes its last line and edits that line into
// "<last line>\n<session>-<n>": "s<k>-<n>", k from 0, n from 1; edit n of session k goes to
// files[(k + n - 1) % files.length]. "dialect" says which tools: "toolkernel" (Read, whose
// answer is `cat -n` lines, and Edit with old_string/new_string) or "reference" (the reference
// filesystem server's read_text_file, and edit_file with edits [{oldText, newText}]). An edit
// refused (isError) is retried after a fresh Read, at most "attempts" times in all (default 200):
// a refusal is "stale" when its message says the file changed since this session read it, else
// "other". A call that throws (a protocol or transport error) ends its session. The files must
// exist and end with a newline. Prints one JSON object:
//   {dialect, sessions, edits_per_session, files, attempted, succeeded, landed: [[file, line,
//    after]...],
//    refusals: {stale, other}, other_refusals: [message...], gave_up, errors: [message...],
//    calls: {read, edit}, connect_s, elapsed_s}
// "landed" lists [file, line, after] for each edit the server reported successful: the line, to
// look for in the file, and the last line this session read before it. A server that refuses
// edits from stale views keeps every such line right after its "after" (each edit appends to the
// file as its session last read it); one that doesn't may put another session's line between.
// elapsed_s counts the edits only (the sessions connect first).
//
// "calls": {"sessions"?: n (default 1), "calls": [{"session"?: k, "tool", "arguments"}, ...]} makes
// the calls one after another, each in its session, and prints {"results": [{session, tool,
// isError, text, content, structuredContent} or {session, tool, error}]}.
//
// A spec that can't be run, or a session that can't connect, prints {"fatal": message} and exits
// with status 2.

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const STALE = /modified since|read it again/i; // toolkernel's StaleViewError, as Claude Code says it

/** A module of the SDK by its path under the package (say "client/index.js"), resolved through
 * the package's own export map: the SDK lives outside this directory's node_modules lookup. */
export async function sdk(subpath, modules = defaultModules()) {
  const root = join(modules, "@modelcontextprotocol", "sdk");
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  const target = pkg.exports["./*"].import.replace("*", subpath);
  return import(pathToFileURL(join(root, target)).href);
}

function defaultModules() {
  return (
    process.env.TOOLKERNEL_MCP_NODE_MODULES ||
    join(HERE, "..", "..", "..", ".venv", "mcp-node", "node_modules")
  );
}

/** Connect one MCP session to `server` (see the spec above). Returns {client, close, stderr}:
 * stderr() is the tail of what a stdio server wrote there. */
export async function connect(server, { name = "toolkernel-tests", modules } = {}) {
  const { Client } = await sdk("client/index.js", modules);
  const client = new Client({ name, version: "1.0.0" });
  let tail = "";
  let transport;
  if (server.url) {
    const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js", modules);
    const headers = server.token ? { Authorization: `Bearer ${server.token}` } : {};
    transport = new StreamableHTTPClientTransport(new URL(server.url), {
      requestInit: { headers },
    });
  } else if (server.command) {
    const { StdioClientTransport } = await sdk("client/stdio.js", modules);
    const [command, ...args] = server.command;
    transport = new StdioClientTransport({
      command,
      args,
      cwd: server.cwd,
      env: { ...process.env, ...(server.env || {}) }, // the SDK's default keeps only a few
      stderr: "pipe",
    });
    // Drained, or a chatty server would block on a full pipe.
    transport.stderr.on("data", (chunk) => {
      tail = (tail + chunk).slice(-4000);
    });
  } else {
    throw new Error(`a server is {"command": [...]} or {"url": ...}, not ${JSON.stringify(server)}`);
  }
  try {
    await client.connect(transport);
  } catch (error) {
    await transport.close().catch(() => {});
    throw new Error(`${describe(server)}: ${error.message}${tail ? `; its stderr: ${tail}` : ""}`);
  }
  const close = async () => {
    if (server.url) await transport.terminateSession().catch(() => {});
    await client.close().catch(() => {});
  };
  return { client, close, stderr: () => tail };
}

function describe(server) {
  return server.url ? server.url : JSON.stringify(server.command);
}

/** The text content of a tool's result. */
export function textOf(result) {
  return (result.content || [])
    .filter((part) => part.type === "text")
    .map((part) => part.text)
    .join("");
}

const DIALECTS = {
  toolkernel: {
    read: (file) => ({ name: "Read", arguments: { file_path: file } }),
    // `cat -n` lines: "     1\tline"; anything else (a note about the file) is not a line of it.
    lines: (text) =>
      text
        .split("\n")
        .map((row) => /^\s*\d+\t(.*)$/.exec(row))
        .filter(Boolean)
        .map((match) => match[1]),
    edit: (file, oldText, newText) => ({
      name: "Edit",
      arguments: { file_path: file, old_string: oldText, new_string: newText },
    }),
  },
  reference: {
    read: (file) => ({ name: "read_text_file", arguments: { path: file } }),
    lines: (text) => (text.endsWith("\n") ? text.slice(0, -1) : text).split("\n"),
    edit: (file, oldText, newText) => ({
      name: "edit_file",
      arguments: { path: file, edits: [{ oldText, newText }] },
    }),
  },
};

async function workload(spec, servers) {
  const dialect = DIALECTS[spec.dialect];
  if (!dialect) throw new Error(`dialect is "toolkernel" or "reference", not ${spec.dialect}`);
  const { sessions, edits, files } = spec;
  const attempts = spec.attempts ?? 200;
  const summary = {
    dialect: spec.dialect,
    sessions,
    edits_per_session: edits,
    files,
    attempted: sessions * edits,
    succeeded: 0,
    landed: [],
    refusals: { stale: 0, other: 0 },
    other_refusals: [],
    gave_up: 0,
    errors: [],
    calls: { read: 0, edit: 0 },
  };
  const began = performance.now();
  const connections = await Promise.all(
    Array.from({ length: sessions }, (_, k) =>
      connect(servers[k % servers.length], { name: `session-${k}`, modules: spec.node_modules }),
    ),
  );
  summary.connect_s = (performance.now() - began) / 1000;

  async function append(k, client) {
    for (let n = 1; n <= edits; n++) {
      const file = files[(k + n - 1) % files.length];
      const line = `s${k}-${n}`;
      for (let attempt = 1; ; attempt++) {
        summary.calls.read++;
        const read = await client.callTool(dialect.read(file));
        if (read.isError) throw new Error(`reading ${file} failed: ${textOf(read)}`);
        const lines = dialect.lines(textOf(read));
        if (lines.length === 0) throw new Error(`no lines in the answer: ${textOf(read)}`);
        // The last line with the newline before it: no shorter line matches inside a longer one.
        const before = lines.length > 1 ? "\n" : "";
        const after = lines[lines.length - 1];
        const last = `${before}${after}\n`;
        summary.calls.edit++;
        const edited = await client.callTool(dialect.edit(file, last, `${last}${line}\n`));
        if (!edited.isError) {
          summary.succeeded++;
          summary.landed.push([file, line, after]);
          break;
        }
        const message = textOf(edited);
        if (STALE.test(message)) {
          summary.refusals.stale++;
        } else {
          summary.refusals.other++;
          if (summary.other_refusals.length < 10) summary.other_refusals.push(message);
        }
        if (attempt >= attempts) {
          summary.gave_up++;
          break;
        }
      }
    }
  }

  const started = performance.now();
  await Promise.all(
    connections.map(({ client, stderr }, k) =>
      append(k, client).catch((error) => {
        const tail = stderr();
        summary.errors.push(`session ${k}: ${error.message}${tail ? `; stderr: ${tail}` : ""}`);
      }),
    ),
  );
  summary.elapsed_s = (performance.now() - started) / 1000;
  await Promise.all(connections.map(({ close }) => close()));
  return summary;
}

async function calls(spec, servers) {
  const count = spec.sessions ?? 1;
  const connections = [];
  for (let k = 0; k < count; k++) {
    const server = servers[k % servers.length];
    connections.push(await connect(server, { name: `session-${k}`, modules: spec.node_modules }));
  }
  const results = [];
  try {
    for (const { session = 0, tool, arguments: args = {} } of spec.calls) {
      try {
        const result = await connections[session].client.callTool({ name: tool, arguments: args });
        results.push({
          session,
          tool,
          isError: Boolean(result.isError),
          text: textOf(result),
          content: result.content,
          structuredContent: result.structuredContent,
        });
      } catch (error) {
        results.push({ session, tool, error: error.message });
      }
    }
  } finally {
    await Promise.all(connections.map(({ close }) => close()));
  }
  return { results };
}

/** The spec from argv[2], else stdin. */
export function readSpec() {
  const text = process.argv[2] ?? readFileSync(0, "utf8");
  return JSON.parse(text);
}

export function fail(error) {
  process.stdout.write(`${JSON.stringify({ fatal: error.message ?? String(error) })}\n`);
  process.exit(2);
}

async function main() {
  const spec = readSpec();
  const servers = spec.servers ?? (spec.server ? [spec.server] : []);
  if (servers.length === 0) throw new Error("the spec names no server");
  const mode = spec.mode ?? "workload";
  if (mode !== "workload" && mode !== "calls") {
    throw new Error(`mode is "workload" or "calls", not ${mode}`);
  }
  const result = mode === "calls" ? await calls(spec, servers) : await workload(spec, servers);
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(0); // a stdio server slow to go must not hold the answer back
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch(fail);
}
