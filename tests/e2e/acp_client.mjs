// The client side of test_cli_acp.py: the official ACP TypeScript SDK
// (@agentclientprotocol/sdk, pinned in tests/acp/package-lock.json) runs
// `agentloop acp` as a subprocess over its stdio, as an editor does, and
// drives one conversation. Usage: node acp_client.mjs CONFIG.json, where
// CONFIG holds {sdk: the SDK's entry file, command: [argv], env, cwd,
// prompts: [text], answer: the permission option to pick ("" answers
// `cancelled`, "cancel-turn" sends session/cancel first), load: a session id to load instead of creating one, fs:
// offer fs/read_text_file and fs/write_text_file, served from the disk}.
// Prints one JSON object: what the agent sent (updates, permission
// requests, each prompt's stop reason) and its exit code.
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
const acp = await import(pathToFileURL(config.sdk).href);

const child = spawn(config.command[0], config.command.slice(1), {
  cwd: config.cwd,
  env: config.env,
  stdio: ["pipe", "pipe", "pipe"],
});
let stderr = "";
child.stderr.on("data", (d) => (stderr += d));
const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));

const record = { updates: [], permissions: [], stops: [], errors: [], fs: [] };
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const app = acp
  .client({ name: "agentloop-e2e" })
  .onRequest(acp.methods.client.session.requestPermission, async ({ params, agent }) => {
    record.permissions.push(params);
    if (config.answer === "cancel-turn") {
      // The person stops the turn while it asks: the protocol's order is
      // session/cancel, then `cancelled` for every pending request.
      await agent.notify(acp.methods.agent.session.cancel, { sessionId: params.sessionId });
      return { outcome: { outcome: "cancelled" } };
    }
    if (!config.answer) return { outcome: { outcome: "cancelled" } };
    return { outcome: { outcome: "selected", optionId: config.answer } };
  })
  .onNotification(acp.methods.client.session.update, async ({ params }) => {
    record.updates.push(params);
  })
  .onRequest(acp.methods.client.fs.readTextFile, async ({ params }) => {
    record.fs.push({ method: "read", path: params.path, sessionId: params.sessionId });
    return { content: readFileSync(params.path, "utf8") };
  })
  .onRequest(acp.methods.client.fs.writeTextFile, async ({ params }) => {
    record.fs.push({ method: "write", path: params.path, content: params.content });
    writeFileSync(params.path, params.content);
    return {};
  });

try {
  await app.connectWith(stream, async (ctx) => {
    record.initialize = await ctx.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: !!config.fs, writeTextFile: !!config.fs } },
    });
    let sessionId = config.load;
    if (sessionId) {
      record.load = await ctx.request(acp.methods.agent.session.load, {
        sessionId,
        cwd: config.cwd,
        mcpServers: [],
      });
    } else {
      const created = await ctx.request(acp.methods.agent.session.new, {
        cwd: config.cwd,
        mcpServers: [],
      });
      sessionId = created.sessionId;
    }
    record.sessionId = sessionId;
    for (const text of config.prompts || []) {
      const answer = await ctx.request(acp.methods.agent.session.prompt, {
        sessionId,
        prompt: [{ type: "text", text }],
      });
      record.stops.push(answer.stopReason);
    }
  });
} catch (err) {
  record.errors.push(String(err && err.stack ? err.stack : err));
}
child.stdin.end();
record.exit_code = await exited;
record.stderr = stderr;
process.stdout.write(JSON.stringify(record) + "\n");
