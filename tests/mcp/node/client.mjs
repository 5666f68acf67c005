// One MCP session on the official TypeScript SDK: list the server's tools, call one, print it.
//
//   node client.mjs '{"server": {...}, "tool"?: NAME, "arguments"?: {...}}'   (or on stdin)
//
// The server is as in workload.mjs: {"command": [program, ...args], "cwd"?, "env"?} or
// {"url", "token"?}. Prints one JSON object: {server: {name, version}, tools: [{name,
// description, inputSchema, annotations}], result?: {isError, text, content,
// structuredContent}}, or {"fatal": message} with exit status 2 when it can't connect (a wrong
// token, say) or the call throws.

import { connect, fail, readSpec, textOf } from "./workload.mjs";

async function main() {
  const spec = readSpec();
  const { client, close } = await connect(spec.server, { modules: spec.node_modules });
  try {
    const listed = await client.listTools();
    const answer = {
      server: client.getServerVersion(),
      tools: listed.tools.map(({ name, description, inputSchema, annotations }) => ({
        name,
        description,
        inputSchema,
        annotations,
      })),
    };
    if (spec.tool) {
      const result = await client.callTool({ name: spec.tool, arguments: spec.arguments ?? {} });
      answer.result = {
        isError: Boolean(result.isError),
        text: textOf(result),
        content: result.content,
        structuredContent: result.structuredContent,
      };
    }
    process.stdout.write(`${JSON.stringify(answer)}\n`);
  } finally {
    await close();
  }
  process.exit(0);
}

main().catch(fail);
