// The console's session timeline (src/server/console/timeline.mjs): repeats
// after a reconnect change nothing, and text never shows twice.
import assert from 'node:assert/strict';
import test from 'node:test';

import { SessionTimeline, sessionStatus } from '../../src/server/console/timeline.mjs';

const S = 'sess';
let n = 0;
const ev = (type, fields = {}) => Object.assign({ type, session_id: S, turn_id: 't1' }, fields);
const durable = (type, fields = {}) => ev(type, Object.assign({ seq: ++n }, fields));

function turn() {
  n = 0;
  return [
    durable('turn_begin', { budget: { max_tokens: 1000, max_tool_calls: 5, max_turns: 9 } }),
    durable('message', { message: { role: 'user', content: [{ type: 'text', text: 'hi' }] } }),
    durable('step_begin', { step: 1 }),
    ev('text_delta', { text: 'Hel' }),
    ev('text_delta', { text: 'lo' }),
    durable('step_end', { step: 1, tokens: 12 }),
    durable('message', { message: { role: 'assistant', content: [{ type: 'text', text: 'Hello' }, { type: 'tool_use', id: 'c1', name: 'write', input: {} }] } }),
    durable('decision', { tool_use_id: 'c1', tool: 'write', decision: 'ask', rule: 'write: ask', reason: 'r', pending_id: 'apr_1' }),
    durable('pending', { items: [{ id: 'apr_1', kind: 'approval', tool_use_id: 'c1', tool: 'write', arguments: { file_path: 'x' }, reason: 'r' }] }),
    durable('turn_end', { stop: 'pending_approval' }),
  ];
}

const visible = (t) => t.items.filter((i) => i.kind !== 'notice').map((i) => [i.kind, i.text || (i.pending && i.pending.id) || '']);

test('a turn folds into user, assistant and approval items', () => {
  const t = new SessionTimeline(S);
  for (const e of turn()) t.apply(e);
  assert.deepEqual(visible(t), [['user', 'hi'], ['assistant', 'Hello'], ['approval', 'apr_1']]);
  assert.equal(t.running, false);
  assert.equal(t.lastSeq, 8);
  const card = t.items[2];
  assert.equal(card.state, 'pending');
  assert.equal(card.rule, 'write: ask');
  assert.equal(card.pending.session_id, S);
  assert.deepEqual(t.pendingCards().map((c) => c.pending.id), ['apr_1']);
  // Another `ask` naming the item (a re-asked batch) does not settle it.
  t.apply(durable('decision', { tool_use_id: 'c1', tool: 'write', decision: 'ask', pending_id: 'apr_1' }));
  assert.equal(card.state, 'pending');
});

test('a replay after a reconnect changes nothing', () => {
  // The server replays durable events only (the deltas' text comes back as
  // the step's message, or as message.snapshot while the step runs).
  const events = turn();
  const t = new SessionTimeline(S);
  for (const e of events) t.apply(e);
  const before = JSON.stringify(t.items);
  for (const e of events.filter((x) => x.seq)) assert.deepEqual(t.apply(e), []);
  assert.equal(JSON.stringify(t.items), before);
});

test('a reconnect mid-step: the snapshot replaces the text the deltas built', () => {
  n = 0;
  const t = new SessionTimeline(S);
  t.apply(durable('turn_begin'));
  t.apply(durable('step_begin'));
  t.apply(ev('text_delta', { text: 'alpha ' }));
  t.apply(ev('text_delta', { text: 'beta ' }));
  // Reconnected after seq 2: nothing durable is new, then the snapshot.
  t.apply(Object.assign(ev('step_begin'), { seq: 2 }));
  t.apply(ev('message.snapshot', { text: 'alpha beta ' }));
  t.apply(ev('text_delta', { text: 'gamma' }));
  assert.deepEqual(visible(t), [['assistant', 'alpha beta gamma']]);
  t.apply(durable('message', { message: { role: 'assistant', content: [{ type: 'text', text: 'alpha beta gamma' }] } }));
  assert.deepEqual(visible(t), [['assistant', 'alpha beta gamma']]);
  assert.equal(t.items[0].streaming, false);
});

test('a decision marks the card resolved; tool calls get their results and the todo list', () => {
  const t = new SessionTimeline(S);
  for (const e of turn()) t.apply(e);
  t.apply(durable('decision', { tool_use_id: 'c1', tool: 'write', decision: 'allow', by: 'http:default', edited: true, pending_id: 'apr_1' }));
  const card = t.byKey.get('pending:apr_1');
  assert.deepEqual([card.state, card.decision, card.by, card.edited], ['resolved', 'approved', 'http:default', true]);
  t.apply(durable('turn_begin'));
  assert.equal(t.running, true);
  t.apply(durable('tool_call_begin', { id: 'c1', tool: 'write', input: { file_path: 'x' } }));
  t.apply(durable('tool_call_end', { id: 'c1', tool: 'write', is_error: false, summary: 'Created x', diff: '--- /dev/null\n' }));
  t.apply(durable('message', { message: { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'c1', content: 'Created x', meta: { details: { tasks: [{ id: 1, subject: 'a', status: 'pending' }, { id: 2, subject: 'b', status: 'deleted' }] } } }] } }));
  const tool = t.byKey.get('tool:c1');
  assert.deepEqual([tool.status, tool.output, tool.diff], ['done', 'Created x', '--- /dev/null\n']);
  assert.deepEqual(t.todos.map((x) => x.subject), ['a']);
  // A tool result is not shown as something the user said.
  assert.equal(t.items.filter((i) => i.kind === 'user').length, 1);
  t.apply(durable('turn_end', { stop: 'failed', reason: 'provider down' }));
  assert.deepEqual(t.lastStop, { stop: 'failed', reason: 'provider down' });
  assert.equal(t.items[t.items.length - 1].kind, 'end');
});

// The header says what the session's events say once they have arrived:
// the inbox and the session list are fetched separately and can be older.
test('the status follows the events, not an older inbox or list', () => {
  const t = new SessionTimeline(S);
  const listed = { id: S, status: 'paused' };
  for (const e of turn()) t.apply(e);
  assert.equal(sessionStatus(listed, t, 1), 'paused');
  // Decided: the turn resumes and ends, while the inbox still lists the item.
  t.apply(durable('decision', { tool_use_id: 'c1', tool: 'write', decision: 'allow', by: 'console', pending_id: 'apr_1' }));
  t.apply(durable('turn_begin', { input: 'resume' }));
  assert.equal(sessionStatus(listed, t, 1), 'running');
  t.apply(durable('tool_call_begin', { id: 'c1', tool: 'write', input: {} }));
  t.apply(durable('tool_call_end', { id: 'c1', tool: 'write', is_error: false, summary: 'ok' }));
  t.apply(durable('turn_end', { stop: 'completed', pending: [] }));
  assert.equal(sessionStatus(listed, t, 1), 'idle');
  assert.equal(sessionStatus({ id: S, status: 'failed' }, t, 0), 'idle');
  // A turn that pauses again is paused by its own end, before any inbox.
  t.apply(durable('turn_begin', { input: 'user' }));
  t.apply(durable('pending', { items: [{ id: 'apr_2', kind: 'approval', tool_use_id: 'c2', tool: 'write', arguments: {}, reason: 'r' }] }));
  t.apply(durable('turn_end', { stop: 'pending_approval', pending: [{ id: 'apr_2', kind: 'approval', tool_use_id: 'c2', tool: 'write', arguments: {}, reason: 'r' }] }));
  assert.equal(sessionStatus({ id: S, status: 'idle' }, t, 0), 'paused');
  t.apply(durable('turn_end', { stop: 'failed', reason: 'the process running it stopped', pending: [] }));
  assert.equal(sessionStatus({ id: S, status: 'idle' }, t, 1), 'failed');
});

test('a session this tab does not watch shows what the list and the inbox say', () => {
  assert.equal(sessionStatus({ id: S, status: 'running' }, null, 0), 'running');
  assert.equal(sessionStatus({ id: S, status: 'idle' }, null, 2), 'paused');
  assert.equal(sessionStatus({ id: S, status: 'paused' }, new SessionTimeline(S), 0), 'paused');
  assert.equal(sessionStatus({ id: S, status: 'failed' }, null, 0), 'failed');
  assert.equal(sessionStatus({ id: S, status: 'idle' }, null, 0), 'idle');
});
