// The client against a real `agentloop serve` (with a bearer token) whose
// agent answers from the fake model: turns, approvals with edited arguments
// and scope, questions, typed errors, the multiplexed stream, a turn's
// stream resumed through a proxy that cuts it, and the example.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

import { AgentloopClient, AuthenticationError, ConflictError, NotFoundError } from "../src/index.js";
import { dts, fieldNames } from "./dts.mjs";
import { LIVE, cuttingProxy, startServer } from "./live_server.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const write = (tag, file, content) => ({
  match: tag, tool_calls: [{ id: `c-${tag}`, name: "write", input: { file_path: file, content } }],
});
const SCRIPT = { responses: [
  { match: "tag-plain", text: "hello from the model" },
  write("tag-approve", "served.txt", "from the sdk\n"),
  { match: "tag-approve", text: "wrote served.txt" },
  write("tag-edit", "asked.txt", "asked\n"),
  { match: "tag-edit", text: "wrote it" },
  { match: "tag-ask", tool_calls: [{ id: "c-ask", name: "ask_user",
                                     input: { question: "Which file?", options: ["a", "b"] } }] },
  { match: "tag-ask", text: "you said b" },
  { match: "tag-drop", text: "reading first",
    tool_calls: [{ id: "c-read", name: "read", input: { file_path: "notes.txt" } }] },
  { match: "tag-drop", text: "notes.txt has two lines" },
  { match: "tag-multi-a", text: "first session" },
  { match: "tag-multi-b", text: "second session" },
  write("tag-example", "example.txt", "from the example\n"),
  { match: "tag-example", text: "example done" },
  write("tag-shape", "shape.txt", "shape\n"),
  { match: "tag-shape", text: "shaped" },
  write("create hello.txt", "hello.txt", "hello\n"),
  { match: "create hello.txt", text: "created hello.txt" },
] };

let srv;
let client;
before(async () => {
  if (!LIVE) return;
  srv = await startServer(SCRIPT);
  client = new AgentloopClient({ baseUrl: srv.baseUrl, token: srv.token });
});
after(async () => { await srv?.stop(); });

const live = { skip: LIVE ? false : "AGENTLOOP_BIN and AGENTLOOP_FAKE_SERVER are not set" };

async function collect(iterable) {
  const out = [];
  for await (const e of iterable) out.push(e);
  return out;
}

test("a turn streams its events to the final turn_end", live, async () => {
  const s = await client.createSession({ agent: "writer", title: "plain" });
  const turn = client.streamTurn(s.id, "say hello tag-plain");
  const events = await collect(turn);
  assert.equal(events[0].type, "turn_begin");
  assert.equal(events.at(-1).type, "turn_end");
  assert.equal(turn.result.stop, "completed");
  assert.equal(turn.result.final_text, "hello from the model");
  const persisted = events.filter((e) => e.seq > 0).map((e) => e.seq);
  assert.deepEqual(persisted, [...persisted].sort((a, b) => a - b));
  const waited = await client.waitForTurn(s.id, turn.turnId);
  assert.equal(waited.result.stop, "completed");
  const stored = await client.listEvents(s.id, { after: 0 });
  assert.deepEqual(stored.items.map((e) => e.seq), persisted);
});

test("without the token the server answers a typed 401", live, async () => {
  const anon = new AgentloopClient({ baseUrl: srv.baseUrl, token: null });
  await assert.rejects(anon.listSessions(), (e) => e instanceof AuthenticationError && e.code === "unauthorized");
});

test("404 and 409 are typed errors with the problem code", live, async () => {
  await assert.rejects(client.getSession("no-such-session"),
                       (e) => e instanceof NotFoundError && e.code === "not_found" && e.status === 404);
  const s = await client.createSession({ agent: "writer" });
  const t = await client.startTurn(s.id, { input: "write it tag-approve" });
  const w = await client.waitForTurn(s.id, t.id);
  assert.equal(w.result.stop, "pending_approval");
  await assert.rejects(client.startTurn(s.id, "again"),
                       (e) => e instanceof ConflictError && e.code === "session_paused");
  // The streamed form is refused before any event (with the code
  // failed_precondition, in an error frame).
  await assert.rejects(collect(client.streamTurn(s.id, "again")),
                       (e) => e instanceof ConflictError && e.status === 409);
  const [item] = (await client.listPending(s.id)).items;
  const diff = await client.getApprovalDiff(item.id);
  assert.match(diff.diff, /\+from the sdk/);
  const r = await client.approve(item.id);
  assert.equal(r.status, "resumed");
  assert.equal((await client.waitForTurn(s.id, t.id)).result.stop, "completed");
  assert.equal((await client.approve(item.id)).status, "already_resolved");
  await assert.rejects(client.deny(item.id, "no"),
                       (e) => e instanceof ConflictError && e.code === "approval_already_resolved");
  assert.equal(fs.readFileSync(path.join(srv.ws, "served.txt"), "utf8"), "from the sdk\n");
});

test("an approval with edited arguments and session scope", live, async () => {
  const s = await client.createSession({ agent: "writer" });
  const turn = client.streamTurn(s.id, "write asked.txt tag-edit");
  let decided = 0;
  for await (const e of turn) {
    if (e.type !== "turn_end" || e.stop !== "pending_approval") continue;
    for (const item of e.pending) {
      const listed = await client.listApprovals();
      assert.ok(listed.items.some((a) => a.id === item.id));
      const r = await client.decideApproval(item.id, {
        decision: "approve", scope: "session",
        edited_args: { file_path: "edited.txt", content: "edited\n" },
      });
      assert.equal(r.status, "resumed");
      decided++;
    }
  }
  assert.equal(decided, 1);
  assert.equal(turn.result.stop, "completed");
  assert.equal(fs.readFileSync(path.join(srv.ws, "edited.txt"), "utf8"), "edited\n");
  assert.equal(fs.existsSync(path.join(srv.ws, "asked.txt")), false);
});

test("a question is answered and the turn goes on", live, async () => {
  const s = await client.createSession({ agent: "writer" });
  const turn = client.streamTurn(s.id, "ask me tag-ask");
  for await (const e of turn) {
    if (e.type === "turn_end" && e.stop === "pending_question") {
      const [q] = (await client.listQuestions()).items.filter((i) => i.session_id === s.id);
      assert.equal(q.arguments.question, "Which file?");
      const r = await client.answerQuestion(q.id, "b");
      assert.equal(r.status, "resumed");
    }
  }
  assert.equal(turn.result.stop, "completed");
  assert.equal(turn.result.final_text, "you said b");
});

test("a turn's stream cut mid-frame resumes with no event lost or repeated", live, async () => {
  const proxy = await cuttingProxy(srv.baseUrl, 700);
  try {
    const viaProxy = new AgentloopClient({ baseUrl: proxy.url, token: srv.token,
                                           stream: { baseDelayMs: 10 } });
    const s = await viaProxy.createSession({ agent: "writer" });
    const turn = viaProxy.streamTurn(s.id, "read notes tag-drop");
    const events = await collect(turn);
    assert.equal(proxy.cuts(), 1);
    assert.ok(turn.stream.reconnects >= 1);
    assert.equal(turn.result.stop, "completed");
    const seqs = events.filter((e) => e.seq > 0).map((e) => e.seq);
    assert.equal(new Set(seqs).size, seqs.length, `repeated: ${seqs}`);
    for (let i = 1; i < seqs.length; i++) assert.equal(seqs[i], seqs[i - 1] + 1, `gap: ${seqs}`);
    const stored = await client.listEvents(s.id, { after: 0 });
    assert.deepEqual(seqs, stored.items.map((e) => e.seq));
  } finally {
    await proxy.close();
  }
});

test("the multiplexed stream carries two sessions' turns", live, async () => {
  const a = await client.createSession({ agent: "writer" });
  const b = await client.createSession({ agent: "writer" });
  const ends = new Set();
  const stream = client.streamSessions([a.id, b.id], {
    stopAfter: (e) => e.type === "turn_end" && ends.add(e.session_id) && ends.size === 2,
  });
  const ta = await client.startTurn(a.id, "tag-multi-a");
  const tb = await client.startTurn(b.id, "tag-multi-b");
  const events = await collect(stream);
  const finals = events.filter((e) => e.type === "turn_end").map((e) => [e.session_id, e.turn_id, e.final_text]);
  assert.deepEqual(finals.sort(), [[a.id, ta.id, "first session"], [b.id, tb.id, "second session"]].sort());
  for (const sid of [a.id, b.id]) {
    const seqs = events.filter((e) => e.session_id === sid && e.seq > 0).map((e) => e.seq);
    assert.equal(seqs[0], 1);
    for (let i = 1; i < seqs.length; i++) assert.equal(seqs[i], seqs[i - 1] + 1);
  }
});

test("examples/approve.mjs approves the write and exits 0", live, async () => {
  const child = spawn(process.execPath, [path.join(here, "..", "examples", "approve.mjs"),
                                         srv.baseUrl, "writer", "write example.txt tag-example"],
                      { env: { ...process.env, AGENTLOOP_TOKEN: srv.token }, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  const code = await new Promise((r) => child.on("exit", r));
  assert.equal(code, 0, out);
  assert.match(out, /approving write/);
  assert.match(out, /\+from the example/);
  assert.match(out, /ended: completed/);
  assert.equal(fs.readFileSync(path.join(srv.ws, "example.txt"), "utf8"), "from the example\n");
});

test("the example exits 1 when the turn does not complete", live, async () => {
  const child = spawn(process.execPath, [path.join(here, "..", "examples", "approve.mjs"),
                                         srv.baseUrl, "no-such-agent", "hello"],
                      { env: { ...process.env, AGENTLOOP_TOKEN: srv.token }, stdio: "ignore" });
  assert.equal(await new Promise((r) => child.on("exit", r)), 1);
});

test("the TypeScript example of docs/clients.md runs as shown", live, async () => {
  const doc = fs.readFileSync(path.join(here, "..", "..", "..", "docs", "clients.md"), "utf8");
  const block = /## TypeScript\n\n```js\n([^]*?)```/.exec(doc)[1];
  const lines = block.trimEnd().split("\n");
  assert.ok(lines.length <= 12, `${lines.length} lines`);
  // The served agent of this test is `writer`; the import is the source.
  const src = block
    .replace('"@agentloop/client"', JSON.stringify(pathToFileURL(path.join(here, "..", "src", "index.js")).href))
    .replace('agent: "default"', 'agent: "writer"');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "al_sdk_doc_"));
  const file = path.join(dir, "doc.mjs");
  fs.writeFileSync(file, src);
  try {
    const child = spawn(process.execPath, [file], {
      env: { ...process.env, AGENTLOOP_URL: srv.baseUrl, AGENTLOOP_TOKEN: srv.token },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    const code = await new Promise((r) => child.on("exit", r));
    assert.equal(code, 0, out);
    assert.match(out, /^write /m);
    assert.match(out, /completed created hello\.txt\s*$/);
    assert.equal(fs.readFileSync(path.join(srv.ws, "hello.txt"), "utf8"), "hello\n");
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("every field of the server's answers is declared in index.d.ts", live, async () => {
  const declared = (name, value) => {
    const names = fieldNames(name);
    const extra = Object.keys(value).filter((k) => !names.has(k));
    assert.deepEqual(extra, [], `${name} lacks ${extra.join(", ")}`);
  };
  const created = await client.createSession({ agent: "writer", title: "shape" });
  declared("Session", created);
  const t = await client.startTurn(created.id, "tag-shape");
  declared("TurnAccepted", t);
  const w = await client.waitForTurn(created.id, t.id);
  declared("Turn", w);
  declared("TurnResult", w.result);
  const session = await client.getSession(created.id);
  declared("Session", session);
  declared("ApprovalItem", session.pending[0]);
  const [item] = (await client.listPending(created.id)).items;
  declared("ApprovalItem", item);
  declared("ApprovalItem", await client.getApproval(item.id));
  declared("ApprovalDiff", await client.getApprovalDiff(item.id));
  for (const a of (await client.listAgents()).items) declared("Agent", a);
  const r = await client.approve(item.id);
  assert.deepEqual(Object.keys(r).sort(),
                   ["detail", "events_url", "session_id", "status", "turn_id", "wait_url"]);
  await client.waitForTurn(created.id, t.id);
  declared("ApprovalItem", await client.getApproval(item.id));
  for (const e of (await client.listEvents(created.id, { after: 0 })).items) {
    const name = dts.match(new RegExp(`export interface (\\w+) extends EventBase \\{\\n  type: "${e.type}";`))?.[1];
    assert.ok(name, `no interface for ${e.type}`);
    declared(name, e);
  }
});

test("iterSessions follows next_cursor through every page", live, async () => {
  const made = [];
  for (let i = 0; i < 3; i++) made.push((await client.createSession({ agent: "writer", title: `page ${i}` })).id);
  const seen = [];
  for await (const s of client.iterSessions({ agent: "writer", limit: 1 })) seen.push(s.id);
  for (const id of made) assert.ok(seen.includes(id), id);
  assert.equal(new Set(seen).size, seen.length);
});
