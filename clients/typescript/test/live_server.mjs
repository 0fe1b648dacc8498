// A real `agentloop serve` for the tests: its agent `writer` answers from
// agentloop-fake-server playing a script, and the server requires a bearer
// token. The binaries come from AGENTLOOP_BIN and AGENTLOOP_FAKE_SERVER (set
// by CTest); without them the live tests are skipped.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";

export const BIN = process.env.AGENTLOOP_BIN;
export const FAKE = process.env.AGENTLOOP_FAKE_SERVER;
export const LIVE = Boolean(BIN && FAKE);

function firstLine(stream, re, what) {
  return new Promise((resolve, reject) => {
    const rl = readline.createInterface({ input: stream });
    const lines = [];
    rl.on("line", (line) => {
      lines.push(line);
      const m = re.exec(line);
      if (m) {
        rl.removeAllListeners("line");
        stream.resume();
        resolve(m);
      }
    });
    rl.on("close", () => reject(new Error(`${what} did not start: ${lines.join("\n")}`)));
  });
}

/** Starts the fake model on `script` and a server with a token; returns
 * {baseUrl, token, ws, stop()}. */
export async function startServer(script) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "al_sdk_ts_"));
  const home = path.join(tmp, "home");
  const ws = path.join(tmp, "ws");
  fs.mkdirSync(ws, { recursive: true });
  fs.writeFileSync(path.join(ws, "notes.txt"), "one\ntwo\n");
  const scriptPath = path.join(tmp, "script.json");
  fs.writeFileSync(scriptPath, JSON.stringify(script));
  const procs = [];
  const fake = spawn(FAKE, ["--port", "0", "--script", scriptPath, "--exit-on-stdin-eof"],
                     { stdio: ["pipe", "pipe", "inherit"] });
  procs.push(fake);
  const [, port] = await firstLine(fake.stdout, /^PORT (\d+)/, "the fake model");
  const agentDir = path.join(home, ".config", "agentloop", "agents", "writer");
  fs.mkdirSync(agentDir, { recursive: true });
  fs.writeFileSync(path.join(agentDir, "agent.toml"),
    `[agent]\ndescription = "writes files"\nworkspace = "${ws}"\n\n` +
    `[provider]\nkind = "openai"\nbase_url = "http://127.0.0.1:${port}"\nmodel = "m"\n` +
    `api_key_env = "WRITER_KEY"\n`);
  const token = "tok-sdk-" + createHash("sha256").update(tmp).digest("hex").slice(0, 16);
  const grant = createHash("sha256").update(token).digest("hex") + ":team:read,write,approve";
  fs.writeFileSync(path.join(home, ".config", "agentloop", "config.toml"),
                   `[server]\ntokens = ${JSON.stringify([grant])}\n`);
  const serve = spawn(BIN, ["serve", "--listen", "127.0.0.1:0"], {
    cwd: tmp,
    stdio: ["ignore", "ignore", "pipe"],
    env: { PATH: process.env.PATH, HOME: home, AGENTLOOP_HOME: path.join(tmp, "data"),
           LANG: "C.UTF-8", WRITER_KEY: "sk-test" },
  });
  procs.push(serve);
  let baseUrl;
  try {
    const m = await firstLine(serve.stderr, /on (http:\/\/127\.0\.0\.1:\d+)/, "agentloop serve");
    baseUrl = m[1];
  } catch (err) {
    for (const p of procs) p.kill("SIGKILL");
    throw err;
  }
  const stop = async () => {
    for (const p of procs) {
      if (p.exitCode === null && p.signalCode === null) {
        const done = new Promise((r) => p.once("exit", r));
        p.kill("SIGKILL");
        await done;
      }
    }
    fs.rmSync(tmp, { recursive: true, force: true });
  };
  return { baseUrl, token, ws, stop };
}

/** A TCP proxy to `target` (host:port URL) that cuts the first connection
 * whose answer is an event stream after `limit` bytes of that answer (in
 * the middle of a frame); every other byte passes. */
export async function cuttingProxy(target, limit) {
  const u = new URL(target);
  let cut = 0;
  const sockets = new Set();
  const server = net.createServer((down) => {
    const up = net.connect(Number(u.port), u.hostname);
    sockets.add(down);
    sockets.add(up);
    let seen = -1;  // bytes of the stream answer passed so far
    // The requests' Host names the target, as a reverse proxy's would (the
    // server refuses a Host that is not one of its names).
    const ours = new RegExp(`^(host:[ \\t]*)127\\.0\\.0\\.1:${server.address().port}\\b`, "gim");
    down.on("data", (d) => up.write(Buffer.from(
      d.toString("latin1").replace(ours, (_, head) => `${head}127.0.0.1:${u.port}`), "latin1")));
    up.on("data", (d) => {
      if (seen < 0 && cut === 0 && d.toString("latin1").includes("text/event-stream")) seen = 0;
      if (seen >= 0 && cut === 0) {
        if (seen + d.length >= limit) {
          cut++;
          down.write(d.subarray(0, limit - seen));
          down.destroy();
          up.destroy();
          return;
        }
        seen += d.length;
      }
      down.write(d);
    });
    const end = () => { down.destroy(); up.destroy(); };
    down.on("error", end);
    up.on("error", end);
    down.on("close", end);
    up.on("close", end);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    cuts: () => cut,
    close: () => new Promise((r) => {
      for (const s of sockets) s.destroy();
      server.close(r);
    }),
  };
}
