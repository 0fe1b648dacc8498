#!/usr/bin/env node
// Usage: approve.mjs BASE_URL AGENT PROMPT
// Starts a session of AGENT, runs PROMPT, approves every approval as it
// arrives (printing its diff), and exits 0 when the turn completes, 1
// otherwise. The bearer token comes from AGENTLOOP_TOKEN when set.
import { AgentloopClient, APIError } from "../src/index.js";

const [baseUrl, agent, prompt] = process.argv.slice(2);
if (!baseUrl || !agent || !prompt) {
  console.error("usage: approve.mjs BASE_URL AGENT PROMPT");
  process.exit(2);
}
const client = new AgentloopClient({ baseUrl, token: process.env.AGENTLOOP_TOKEN || null });

async function main() {
  const session = await client.createSession({ agent });
  const turn = client.streamTurn(session.id, prompt);
  for await (const ev of turn) {
    if (ev.type === "text_delta") process.stdout.write(ev.text);
    // A pause ends with a turn_end listing its items; the stream goes on
    // once they are decided.
    if (ev.type !== "turn_end" || ev.stop !== "pending_approval" && ev.stop !== "pending_question") continue;
    for (const item of ev.pending) {
      if (item.kind !== "approval") {
        console.log(`\n${item.kind} ${item.id} (${item.tool}) needs someone else`);
        return 1;
      }
      let diff = null;
      try {
        diff = (await client.getApprovalDiff(item.id)).diff;
      } catch (err) {
        if (!(err instanceof APIError) || err.status >= 500) throw err;  // no diff for this tool
      }
      console.log(`\napproving ${item.tool} ${JSON.stringify(item.arguments)}`);
      console.log(diff ?? "(no diff)");
      await client.approve(item.id);
    }
  }
  const stop = turn.result?.stop;
  console.log(`\nturn ${turn.turnId} ended: ${stop}${turn.result?.reason ? ` (${turn.result.reason})` : ""}`);
  return stop === "completed" ? 0 : 1;
}

main().then((code) => process.exit(code), (err) => {
  console.error(`approve.mjs: ${err.message}`);
  process.exit(1);
});
