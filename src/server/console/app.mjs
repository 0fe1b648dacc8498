// The agentloop web console (docs/console.md). Plain modules, no build
// step, nothing fetched from elsewhere. Everything the model, a tool or a
// file says is put on the page with textContent (the CSP refuses any string
// assigned to innerHTML anyway).
//
// One event stream per tab: GET /v1/events/stream for the sessions in view
// (the selected one, the running ones and those waiting for a decision),
// read with fetch and SseParser; when it drops it reconnects with each
// session's last seq, and the timelines ignore repeats.

import { SseParser, afterParam, readInto, splitStreamId } from './sse.mjs';
import { renderDiff } from './diff.mjs';
import { renderMarkdown } from './markdown.mjs';
import { SessionTimeline, sessionStatus } from './timeline.mjs';

const $ = (id) => document.getElementById(id);

// el('div', {class: 'x', onclick: f}, 'text', child...)
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
  }
  return e;
}

const state = {
  who: null,
  agents: [],
  sessions: [],
  pending: [], // the tenant's pending approvals and questions
  trees: new Map(), // session id -> its subagent tree ({children, omitted_children} of GET /v1/sessions/{id})
  timelines: new Map(),
  selected: null,
  view: 'chat',
  nodes: new Map(), // timeline item key -> {node, version, card}
};

// --- API -------------------------------------------------------------------

async function api(method, path, body) {
  const init = { method, credentials: 'same-origin', headers: {} };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  let json = null;
  const text = await res.text();
  if (text) {
    try {
      json = JSON.parse(text);
    } catch (e) {
      json = { detail: text };
    }
  }
  if (res.status === 401 && path !== '/v1/console/session') showSignIn();
  return { status: res.status, json };
}

function problemText(r) {
  const j = r.json || {};
  return (j.code ? j.code + ': ' : '') + (j.detail || j.title || 'HTTP ' + r.status);
}

// --- sign-in -----------------------------------------------------------------

function showSignIn(message) {
  stopStream();
  $('app').hidden = true;
  $('signin').hidden = false;
  $('sign-out').hidden = true;
  $('signin-error').textContent = message || '';
  $('token').focus();
}

// Exchanges `token` for the console's cookie; returns what went wrong, or ''.
async function exchangeToken(token) {
  let res;
  try {
    res = await fetch('/v1/console/session', {
      method: 'POST',
      credentials: 'same-origin',
      headers: { Authorization: 'Bearer ' + token },
    });
  } catch (e) {
    return 'cannot reach the server: ' + e.message;
  }
  if (res.status !== 200) return res.status === 401 ? 'unknown token' : 'sign-in failed (HTTP ' + res.status + ')';
  return '';
}

async function signIn(ev) {
  ev.preventDefault();
  const token = $('token').value.trim();
  $('signin-error').textContent = '';
  const failed = await exchangeToken(token);
  $('token').value = '';
  if (failed) {
    $('signin-error').textContent = failed;
    return;
  }
  await boot();
}

// The address `agentloop serve` prints, /?token=..., signs in with that
// token once; the token leaves the address bar (and the history) first.
async function signInFromAddress() {
  const params = new URLSearchParams(location.search);
  const token = params.get('token');
  if (!token) return '';
  params.delete('token');
  const rest = params.toString();
  history.replaceState(null, '', location.pathname + (rest ? '?' + rest : '') + location.hash);
  return exchangeToken(token);
}

async function signOut() {
  await api('DELETE', '/v1/console/session');
  state.who = null;
  showSignIn('signed out');
}

// --- sessions ----------------------------------------------------------------

function timeline(sid) {
  let t = state.timelines.get(sid);
  if (!t) {
    t = new SessionTimeline(sid);
    state.timelines.set(sid, t);
  }
  return t;
}

function statusOf(s) {
  const pending = state.pending.filter((p) => p.session_id === s.id).length;
  return sessionStatus(s, state.timelines.get(s.id), pending);
}

const STATUS_LABEL = { running: 'running', paused: 'awaiting approval', idle: 'idle', failed: 'failed', queued: 'queued' };

function ago(ms) {
  if (!ms) return '';
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 60) return s + ' s ago';
  if (s < 3600) return Math.round(s / 60) + ' min ago';
  if (s < 86400) return Math.round(s / 3600) + ' h ago';
  return new Date(ms).toISOString().slice(0, 10);
}

function sessionName(s) {
  return s.title || s.id.slice(0, 12);
}

function renderSessions() {
  const list = $('session-list');
  const filter = $('session-filter').value.trim().toLowerCase();
  const only = $('status-filter').value;
  list.textContent = '';
  const byId = new Map(state.sessions.map((s) => [s.id, s]));
  const parentOf = (s) => s.parent_id || (s.metadata && s.metadata.parent_id) || '';
  const children = new Map();
  const roots = [];
  for (const s of state.sessions) {
    const p = parentOf(s);
    if (p && byId.has(p)) {
      if (!children.has(p)) children.set(p, []);
      children.get(p).push(s);
    } else {
      roots.push(s);
    }
  }
  const matches = (s) => {
    const st = statusOf(s);
    if (only && st !== only) return false;
    if (!filter) return true;
    return [s.id, s.title, s.agent].some((v) => String(v || '').toLowerCase().includes(filter));
  };
  const add = (s, depth) => {
    const kids = children.get(s.id) || [];
    if (matches(s) || kids.some(matches)) {
      const st = statusOf(s);
      const pending = state.pending.filter((p) => p.session_id === s.id).length;
      const li = el('li', { class: 'session' + (s.id === state.selected ? ' selected' : ''), 'data-session': s.id, style: null });
      if (depth > 0) li.classList.add('child');
      const b = el('button', { type: 'button', class: 'session-button', 'aria-current': s.id === state.selected ? 'true' : null, onclick: () => select(s.id) },
        el('span', { class: 'name', text: sessionName(s) }),
        el('span', { class: 'badge ' + st, text: STATUS_LABEL[st] || st }),
        pending > 0 ? el('span', { class: 'count', title: 'waiting for a decision', text: String(pending) }) : null,
        el('span', { class: 'meta', text: s.agent + ' · ' + ago(s.updated_at_ms) }));
      li.appendChild(b);
      list.appendChild(li);
    }
    for (const k of kids) add(k, depth + 1);
  };
  for (const s of roots) add(s, 0);
  if (!list.firstChild) list.appendChild(el('li', { class: 'empty', text: state.sessions.length ? 'No session matches' : 'No session yet' }));
}

async function refreshSessions() {
  const r = await api('GET', '/v1/sessions?limit=200');
  if (r.status !== 200) return;
  state.sessions = r.json.items || [];
  renderSessions();
  renderChatHead();
}

async function refreshInbox() {
  const [a, q] = await Promise.all([api('GET', '/v1/approvals'), api('GET', '/v1/questions')]);
  if (a.status !== 200 || q.status !== 200) return;
  // An item whose session's events this tab reads is listed while they
  // say it waits (an answer fetched before its decision is older).
  const waits = (p) => {
    const t = state.timelines.get(p.session_id);
    return !(t && t.lastSeq > 0 && t.lastStop && !t.running) || t.outstanding.has(p.id);
  };
  state.pending = [...(a.json.items || []), ...(q.json.items || [])].filter(waits);
  state.pending.sort((x, y) => x.created_at_ms - y.created_at_ms);
  $('inbox-count').textContent = String(state.pending.length);
  renderInbox();
  renderSessions();
  ensureStream();
}

let refreshTimer = null;
function refreshSoon() {
  if (refreshTimer) return;
  refreshTimer = setTimeout(() => {
    refreshTimer = null;
    refreshSessions();
    refreshInbox();
  }, 150);
}

async function newSession() {
  const agent = $('agent-select').value;
  const r = await api('POST', '/v1/sessions', agent ? { agent } : {});
  if (r.status !== 201) {
    $('chat-error').textContent = problemText(r);
    return;
  }
  state.sessions.unshift(r.json);
  await select(r.json.id);
  $('prompt').focus();
}

async function select(sid) {
  state.selected = sid;
  history.replaceState(null, '', '#' + encodeURIComponent(sid));
  showView('chat');
  state.nodes.clear();
  $('timeline').textContent = '';
  $('chat-error').textContent = '';
  const t = timeline(sid);
  for (const it of t.items) renderItem(it);
  renderSessions();
  renderChatHead();
  ensureStream();
  if (window.matchMedia('(max-width: 700px)').matches) toggleSessions(false);
  const r = await api('GET', '/v1/sessions/' + encodeURIComponent(sid));
  if (r.status === 200) {
    const i = state.sessions.findIndex((s) => s.id === sid);
    if (i >= 0) state.sessions[i] = Object.assign(state.sessions[i], r.json);
    else state.sessions.unshift(r.json);
    keepTree(r.json);
    renderChatHead();
  }
}

function currentSession() {
  return state.sessions.find((s) => s.id === state.selected) || null;
}

function renderChatHead() {
  const s = currentSession();
  const t = state.selected ? timeline(state.selected) : null;
  $('chat-title').textContent = s ? sessionName(s) + ' · ' + s.agent : state.selected ? state.selected : 'No session selected';
  const st = s ? statusOf(s) : '';
  const badge = $('chat-status');
  badge.className = 'badge ' + st;
  badge.textContent = STATUS_LABEL[st] || st;
  const running = !!(t && t.running);
  $('send').disabled = !state.selected || running;
  $('prompt').disabled = !state.selected;
  $('cancel').hidden = !running;
  renderMeter(t);
  renderTodos(t);
  renderSubagents(state.selected ? state.trees.get(state.selected) : null);
}

// The sessions the selected session's subagents started (the `children` of
// GET /v1/sessions/{id}), nested, each with its status and spending.
function renderSubagents(tree) {
  const ul = $('subagents');
  ul.textContent = '';
  const kids = (tree && tree.children) || [];
  if (!kids.length) {
    ul.appendChild(el('li', { class: 'empty', text: 'No subagents' }));
    return;
  }
  const node = (n) => {
    const c = n.counters || {};
    const cost = n.counters ? (c.tokens || 0).toLocaleString('en-US') + ' tokens · ' + (c.tool_calls || 0) + ' tool calls' : '';
    const li = el('li', { class: 'subagent', 'data-session': n.id },
      el('button', { type: 'button', class: 'subagent-title link', title: 'open its log', onclick: () => select(n.id) }, n.title || n.id), ' ',
      el('span', { class: 'badge ' + n.status, text: n.status }),
      cost ? el('span', { class: 'subagent-cost', text: cost }) : null);
    if (n.children && n.children.length) {
      const sub = el('ul', { class: 'subagents' });
      for (const k of n.children) sub.appendChild(node(k));
      li.appendChild(sub);
    }
    if (n.omitted_children) li.appendChild(el('span', { class: 'hint', text: n.omitted_children + ' more not shown' }));
    return li;
  };
  for (const k of kids) ul.appendChild(node(k));
  if (tree.omitted_children) ul.appendChild(el('li', { class: 'hint', text: tree.omitted_children + ' more not shown' }));
}

// Reloads the selected session's resource (its subagent tree changes as
// children start and end).
async function refreshDetail(sid) {
  const r = await api('GET', '/v1/sessions/' + encodeURIComponent(sid));
  if (r.status !== 200) return;
  const i = state.sessions.findIndex((x) => x.id === sid);
  if (i >= 0) state.sessions[i] = Object.assign(state.sessions[i], r.json);
  keepTree(r.json);
  if (sid === state.selected) renderChatHead();
}

function keepTree(detail) {
  state.trees.set(detail.id, { children: detail.children || [], omitted_children: detail.omitted_children || 0 });
}

function renderMeter(t) {
  const m = $('meter');
  m.textContent = '';
  if (!t || !t.meter) return;
  const add = (label, v, max) => {
    if (v === undefined || v === null) return;
    const part = el('span', { class: 'gauge' }, label + ' ' + v + (max ? ' / ' + max : ''));
    if (max) {
      const bar = el('meter', { min: '0', max: String(max), value: String(Math.min(v, max)), 'aria-label': label });
      part.appendChild(bar);
    }
    m.appendChild(part);
  };
  add('tokens', t.meter.tokens, t.meter.maxTokens);
  add('tool calls', t.meter.toolCalls, t.meter.maxToolCalls);
  add('model calls', t.meter.modelCalls, t.meter.maxTurns);
}

function renderTodos(t) {
  const ul = $('todos');
  ul.textContent = '';
  if (!t || !t.todos || !t.todos.length) {
    ul.appendChild(el('li', { class: 'empty', text: 'No todo list' }));
    return;
  }
  for (const task of t.todos) {
    ul.appendChild(el('li', { class: 'todo ' + task.status }, el('span', { class: 'todo-status', text: task.status === 'completed' ? '✓' : task.status === 'in_progress' ? '▸' : '○' }), ' ' + (task.subject || '')));
  }
}

// --- the timeline ------------------------------------------------------------

function renderItem(it) {
  const have = state.nodes.get(it.key);
  if (have && have.card) {
    have.card.update(it);
    return;
  }
  if (have && have.version === it.version) return;
  let node;
  switch (it.kind) {
    case 'user':
      node = el('li', { class: 'item user' }, el('div', { class: 'who', text: 'You' }), el('div', { class: 'text', text: it.text }));
      break;
    case 'assistant':
      node = el('li', { class: 'item assistant' + (it.streaming ? ' streaming' : '') }, el('div', { class: 'who', text: 'Agent' }), renderMarkdown(document, it.text));
      break;
    case 'thinking':
      node = el('li', { class: 'item thinking' }, el('details', {}, el('summary', { text: it.streaming ? 'Thinking…' : 'Thinking' }), el('pre', { text: it.text })));
      break;
    case 'tool':
      node = toolNode(it);
      break;
    case 'notice':
      node = el('li', { class: 'item notice ' + (it.level || ''), text: it.text });
      break;
    case 'end':
      node = el('li', { class: 'item end ' + it.stop, text: 'turn ended: ' + it.stop + (it.reason ? ' — ' + it.reason : '') });
      break;
    case 'approval':
    case 'question': {
      const card = it.kind === 'approval' ? new ApprovalCard(it.pending, it) : new QuestionCard(it.pending, it);
      node = el('li', { class: 'item card-item' }, card.node);
      const tl = $('timeline');
      const stick = nearBottom();
      tl.appendChild(node);
      state.nodes.set(it.key, { node, version: it.version, card });
      if (stick) scrollDown();
      return;
    }
    default:
      return;
  }
  const stick = nearBottom();
  if (have) {
    // A collapsed tool call keeps its state when its end arrives.
    const wasOpen = have.node.querySelector('details') && have.node.querySelector('details').open;
    have.node.replaceWith(node);
    if (wasOpen && node.querySelector('details')) node.querySelector('details').open = true;
  } else {
    $('timeline').appendChild(node);
  }
  state.nodes.set(it.key, { node, version: it.version });
  if (stick) scrollDown();
}

function toolNode(it) {
  const status = it.status === 'running' ? 'running…' : it.status === 'error' ? 'error' : 'done';
  const summary = el('summary', {}, el('span', { class: 'tool-name', text: it.tool || 'tool' }), ' ', el('span', { class: 'tool-arg', text: shortArgs(it.input) }), ' ', el('span', { class: 'tool-status ' + (it.status || ''), text: status }));
  const body = el('div', { class: 'tool-body' });
  if (it.input !== null && it.input !== undefined) {
    body.appendChild(el('h4', { text: 'Arguments' }));
    body.appendChild(el('pre', { class: 'args', text: JSON.stringify(it.input, null, 2) }));
  }
  if (it.diff) {
    body.appendChild(el('h4', { text: 'Change' }));
    body.appendChild(renderDiff(document, it.diff));
  }
  if (it.output !== undefined || it.summary) {
    body.appendChild(el('h4', { text: 'Output' }));
    body.appendChild(el('pre', { class: 'output' + (it.isError ? ' error' : ''), text: it.output !== undefined ? it.output : it.summary }));
  }
  return el('li', { class: 'item tool' }, el('details', {}, summary, body));
}

function shortArgs(input) {
  if (!input || typeof input !== 'object') return '';
  const v = input.file_path || input.command || input.pattern || input.path || input.url || '';
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s.length > 80 ? s.slice(0, 79) + '…' : s;
}

function nearBottom() {
  const m = $('timeline');
  return m.scrollHeight - m.scrollTop - m.clientHeight < 80;
}
function scrollDown() {
  const m = $('timeline');
  m.scrollTop = m.scrollHeight;
}

// --- approval and question cards ------------------------------------------

function sessionLabel(sid) {
  const s = state.sessions.find((x) => x.id === sid);
  return s ? sessionName(s) + ' (' + s.agent + ')' : sid;
}

let cardCount = 0;

class ApprovalCard {
  // `p`: the pending item (from a `pending` event or GET /v1/approvals).
  constructor(p, item) {
    this.p = p;
    this.original = JSON.stringify(p.arguments);
    this.done = false;
    // The same item may have a card in the conversation and one in the
    // inbox: ids and radio groups are per card.
    const id = 'ap-' + ++cardCount;
    this.args = el('textarea', { id: id + '-args', class: 'args-editor', rows: String(Math.min(14, JSON.stringify(p.arguments, null, 2).split('\n').length + 1)), spellcheck: 'false', 'aria-describedby': id + '-argerr' });
    this.args.value = JSON.stringify(p.arguments, null, 2);
    this.args.addEventListener('input', () => this.validate());
    this.argError = el('p', { id: id + '-argerr', class: 'error', 'aria-live': 'polite' });
    this.reason = el('input', { id: id + '-reason', class: 'deny-reason', type: 'text', placeholder: 'Reason (the model sees it)' });
    this.reason.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') {
        e.preventDefault();
        this.decide('deny');
      }
    });
    this.scopeOnce = el('input', { type: 'radio', name: id + '-scope', value: 'once', id: id + '-once', checked: true });
    this.scopeSession = el('input', { type: 'radio', name: id + '-scope', value: 'session', id: id + '-session' });
    this.approveBtn = el('button', { type: 'button', class: 'approve', 'aria-keyshortcuts': 'a', onclick: () => this.decide('approve') }, 'Approve');
    this.denyBtn = el('button', { type: 'button', class: 'deny', 'aria-keyshortcuts': 'd', onclick: () => this.decide('deny') }, 'Deny');
    this.result = el('p', { class: 'result', role: 'status' });
    this.ruleLine = el('p', { class: 'rule' });
    this.diffBox = el('div', { class: 'diff-box' });
    this.node = el('article', { class: 'card approval', tabindex: '0', 'data-pending': p.id, 'aria-label': 'Approval: ' + p.tool },
      el('h3', {}, 'Approve ', el('code', { text: p.tool }), '?'),
      el('p', { class: 'meta', text: 'session ' + sessionLabel(p.session_id) }),
      p.reason ? el('p', { class: 'reason', text: p.reason }) : null,
      this.ruleLine,
      this.diffBox,
      el('label', { for: id + '-args', text: 'Arguments (JSON; edit them to change the call)' }),
      this.args,
      this.argError,
      el('fieldset', { class: 'scope' }, el('legend', { text: 'Scope' }),
        this.scopeOnce, el('label', { for: id + '-once', text: 'once' }),
        this.scopeSession, el('label', { for: id + '-session', text: 'this session' })),
      el('label', { for: id + '-reason', class: 'visually-hidden', text: 'Reason for a denial' }),
      this.reason,
      el('div', { class: 'actions' }, this.approveBtn, this.denyBtn),
      this.result);
    if (p.tool === 'write' || p.tool === 'edit') this.loadDiff();
    if (item) this.update(item);
  }

  async loadDiff() {
    const r = await api('GET', '/v1/approvals/' + encodeURIComponent(this.p.id) + '/diff');
    this.diffBox.textContent = '';
    if (r.status !== 200) {
      this.diffBox.appendChild(el('p', { class: 'note', text: 'no diff: ' + problemText(r) }));
      return;
    }
    this.diffBox.appendChild(el('h4', { text: (r.json.created ? 'New file ' : 'Change to ') + r.json.path }));
    if (r.json.note) this.diffBox.appendChild(el('p', { class: 'note', text: r.json.note }));
    if (r.json.diff) this.diffBox.appendChild(renderDiff(document, r.json.diff));
  }

  // The edited arguments, or undefined when unchanged; throws with the
  // reason when they are not a JSON object.
  edited() {
    let v;
    try {
      v = JSON.parse(this.args.value);
    } catch (e) {
      throw new Error('not JSON: ' + e.message);
    }
    if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new Error('the arguments must be a JSON object');
    return JSON.stringify(v) === this.original ? undefined : v;
  }

  validate() {
    try {
      this.edited();
      this.argError.textContent = '';
      if (!this.done) this.approveBtn.disabled = false;
      return true;
    } catch (e) {
      this.argError.textContent = e.message;
      this.approveBtn.disabled = true;
      return false;
    }
  }

  async decide(decision) {
    if (this.done || this.busy) return;
    const body = { decision };
    if (decision === 'approve') {
      if (!this.validate()) return;
      const e = this.edited();
      if (e !== undefined) body.edited_args = e;
      body.scope = this.scopeSession.checked ? 'session' : 'once';
    } else {
      const reason = this.reason.value.trim();
      if (reason) body.reason = reason;
    }
    this.busy = true;
    this.result.className = 'result';
    this.result.textContent = decision === 'approve' ? 'approving…' : 'denying…';
    let r;
    try {
      r = await api('POST', '/v1/approvals/' + encodeURIComponent(this.p.id) + '/decision', body);
    } catch (e) {
      r = { status: 0, json: { detail: 'cannot reach the server: ' + e.message } };
    }
    this.busy = false;
    if (r.status === 200) {
      const st = r.json.status;
      // The session's decision event may have come first, with more to say.
      if (!this.done) this.finish(st === 'cancelled' ? 'cancelled (its batch was closed)' : st === 'already_resolved' ? 'already decided' : (decision === 'approve' ? 'approved' : 'denied') + (st === 'recorded' ? ' (other items of the batch still wait)' : ''));
      refreshSoon();
    } else {
      // The item stays pending (a refused edit is a 400): say why.
      this.result.className = 'result error';
      this.result.textContent = problemText(r);
    }
  }

  finish(text) {
    this.done = true;
    this.node.classList.add('decided');
    for (const c of [this.args, this.reason, this.scopeOnce, this.scopeSession, this.approveBtn, this.denyBtn]) c.disabled = true;
    this.result.className = 'result ok';
    this.result.textContent = text;
  }

  update(item) {
    if (item.rule) this.ruleLine.textContent = 'rule: ' + item.rule;
    // The decision as the session's log has it (also when this tab made it).
    if (item.state === 'resolved') {
      this.finish(item.decision + (item.by ? ' by ' + item.by : '') + (item.edited ? ' (arguments edited)' : '') + (item.decisionReason && item.decision === 'denied' ? ': ' + item.decisionReason : ''));
    }
  }
}

class QuestionCard {
  constructor(p, item) {
    this.p = p;
    this.done = false;
    const args = p.arguments || {};
    const id = 'q-' + ++cardCount;
    this.answer = el('input', { id: id + '-answer', type: 'text', placeholder: 'Your answer' });
    this.answer.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') {
        e.preventDefault();
        this.send(this.answer.value);
      }
    });
    this.result = el('p', { class: 'result', role: 'status' });
    const options = Array.isArray(args.options) ? args.options : [];
    this.buttons = options.map((o) => {
      const label = typeof o === 'string' ? o : o && o.label ? String(o.label) : JSON.stringify(o);
      return el('button', { type: 'button', class: 'option', onclick: () => this.send(label) }, label);
    });
    this.sendBtn = el('button', { type: 'button', onclick: () => this.send(this.answer.value) }, 'Answer');
    this.node = el('article', { class: 'card question', tabindex: '0', 'data-pending': p.id, 'aria-label': 'Question' },
      el('h3', { text: 'Question' }),
      el('p', { class: 'meta', text: 'session ' + sessionLabel(p.session_id) }),
      el('p', { class: 'question-text', text: args.question || p.reason || '' }),
      this.buttons.length ? el('div', { class: 'options' }, ...this.buttons) : null,
      el('label', { for: id + '-answer', class: 'visually-hidden', text: 'Answer' }),
      el('div', { class: 'actions' }, this.answer, this.sendBtn),
      this.result);
    if (item) this.update(item);
  }

  async send(answer) {
    if (this.done || !String(answer).trim()) return;
    const r = await api('POST', '/v1/questions/' + encodeURIComponent(this.p.id) + '/answer', { answer: String(answer) });
    if (r.status === 200) {
      this.finish('answered: ' + answer);
      refreshSoon();
    } else {
      this.result.className = 'result error';
      this.result.textContent = problemText(r);
    }
  }

  finish(text) {
    this.done = true;
    this.node.classList.add('decided');
    for (const c of [this.answer, this.sendBtn, ...this.buttons]) c.disabled = true;
    this.result.className = 'result ok';
    this.result.textContent = text;
  }

  update(item) {
    if (item.state === 'resolved' && !this.done) this.finish('answered' + (item.by ? ' by ' + item.by : ''));
  }
}

// The inbox: one card per pending item, kept while the item waits (so
// what someone is typing into it survives a refresh).
const inboxCards = new Map();
function renderInbox() {
  const box = $('inbox-items');
  const ids = new Set(state.pending.map((p) => p.id));
  for (const [id, card] of inboxCards) {
    // A card whose own decision is on its way says how it went itself.
    if (!ids.has(id) && !card.done && !card.busy) {
      card.finish('decided elsewhere');
    }
  }
  for (const p of state.pending) {
    if (inboxCards.has(p.id)) continue;
    const card = p.type === 'question' ? new QuestionCard(p) : new ApprovalCard(p);
    inboxCards.set(p.id, card);
    box.appendChild(card.node);
  }
  for (const [id, card] of inboxCards) {
    if (!ids.has(id) && card.done && card.node.dataset.stale) {
      card.node.remove();
      inboxCards.delete(id);
    } else if (!ids.has(id)) {
      card.node.dataset.stale = '1';
    }
  }
  if (!box.querySelector('.card')) {
    if (!box.querySelector('.empty')) box.appendChild(el('p', { class: 'empty', text: 'Nothing waits for a decision.' }));
  } else {
    const empty = box.querySelector('.empty');
    if (empty) empty.remove();
  }
}

function showView(view) {
  state.view = view;
  $('inbox').hidden = view !== 'inbox';
  $('chat').hidden = view !== 'chat';
  $('open-inbox').setAttribute('aria-pressed', view === 'inbox' ? 'true' : 'false');
}

// --- the event stream -------------------------------------------------------

const stream = { key: '', controller: null, retryMs: 2000, timer: null, attempt: 0 };

function setConn(text, cls) {
  const c = $('conn');
  c.textContent = text;
  c.className = 'conn ' + (cls || '');
}

function wantedSessions() {
  const ids = new Set();
  if (state.selected) ids.add(state.selected);
  for (const p of state.pending) ids.add(p.session_id);
  for (const s of state.sessions) if (s.status === 'running' || s.status === 'paused') ids.add(s.id);
  return [...ids].slice(0, 100).sort();
}

function ensureStream() {
  const ids = wantedSessions();
  const key = ids.join(',');
  if (key === stream.key && (stream.controller || stream.timer)) return;
  stopStream();
  stream.key = key;
  if (!ids.length) {
    setConn('idle', '');
    return;
  }
  connect(ids);
}

function stopStream() {
  if (stream.controller) stream.controller.abort();
  stream.controller = null;
  if (stream.timer) clearTimeout(stream.timer);
  stream.timer = null;
  stream.key = '';
}

async function connect(ids) {
  const controller = new AbortController();
  stream.controller = controller;
  const cursors = {};
  for (const id of ids) cursors[id] = timeline(id).lastSeq;
  let url = '/v1/events/stream?sessions=' + ids.map(encodeURIComponent).join(',');
  const after = afterParam(cursors);
  if (after) url += '&after=' + encodeURIComponent(after);
  let ended = 'closed';
  try {
    const res = await fetch(url, { signal: controller.signal, credentials: 'same-origin', headers: { Accept: 'text/event-stream' } });
    if (res.status === 401) {
      showSignIn('signed out (the sign-in expired)');
      return;
    }
    if (!res.ok || !res.body) {
      ended = 'HTTP ' + res.status;
    } else {
      stream.attempt = 0;
      setConn('live', 'live');
      const parser = new SseParser(onFrame, (ms) => {
        stream.retryMs = ms;
      });
      await readInto(res, parser);
    }
  } catch (e) {
    ended = e.name === 'AbortError' ? 'aborted' : e.message;
  }
  if (controller.signal.aborted || stream.controller !== controller) return;
  stream.controller = null;
  stream.attempt++;
  const wait = Math.min(15000, stream.retryMs * Math.min(stream.attempt, 4));
  setConn('reconnecting…', 'reconnecting');
  stream.timer = setTimeout(() => {
    stream.timer = null;
    stream.key = '';
    ensureStream();
  }, stream.attempt === 1 ? 0 : wait);
  void ended;
}

function onFrame(f) {
  if (f.event === 'stream.desync' || f.event === 'shutdown' || f.event === 'error') {
    // Nothing is lost: the next connection replays from the cursors.
    if (stream.controller) stream.controller.abort();
    stream.controller = null;
    setConn('reconnecting…', 'reconnecting');
    stream.attempt++;
    stream.timer = setTimeout(() => {
      stream.timer = null;
      stream.key = '';
      ensureStream();
    }, f.event === 'shutdown' ? stream.retryMs : 0);
    return;
  }
  let ev;
  try {
    ev = JSON.parse(f.data);
  } catch (e) {
    return;
  }
  const fromId = splitStreamId(f.id || '');
  const sid = ev.session_id || (fromId && fromId.session);
  if (!sid) return;
  if (!ev.type) ev.type = f.event;
  const t = timeline(sid);
  const wasRunning = t.running;
  const changed = t.apply(ev);
  if (sid === state.selected && (ev.type === 'subagent_started' || ev.type === 'subagent_completed' || ev.type === 'turn_end')) {
    refreshDetail(sid);
  }
  if (!changed.length && wasRunning === t.running && ev.type !== 'budget_check' && ev.type !== 'step_end') return;
  if (sid === state.selected) {
    for (const it of changed) renderItem(it);
    renderChatHead();
  }
  if (ev.type === 'pending' || ev.type === 'decision' || ev.type === 'turn_end' || ev.type === 'turn_begin') {
    // The inbox keeps what the events say still waits.
    const before = state.pending.length;
    state.pending = state.pending.filter((p) => p.session_id !== sid || t.running || !t.lastStop || t.outstanding.has(p.id));
    if (state.pending.length !== before) {
      $('inbox-count').textContent = String(state.pending.length);
      renderInbox();
    }
    const s = state.sessions.find((x) => x.id === sid);
    if (s) s.status = t.running ? 'running' : ev.type === 'pending' ? 'paused' : s.status === 'paused' && ev.type === 'turn_end' && ev.stop !== 'pending_approval' && ev.stop !== 'pending_question' ? 'idle' : s.status;
    renderSessions();
    refreshSoon();
  }
}

// --- sending and cancelling ------------------------------------------------

async function send(ev) {
  if (ev) ev.preventDefault();
  const text = $('prompt').value;
  if (!state.selected || !text.trim()) return;
  $('chat-error').textContent = '';
  $('send').disabled = true;
  const r = await api('POST', '/v1/sessions/' + encodeURIComponent(state.selected) + '/turns', { input: text });
  if (r.status === 202) {
    $('prompt').value = '';
  } else {
    $('chat-error').textContent = problemText(r);
  }
  renderChatHead();
}

async function cancel() {
  const t = state.selected && timeline(state.selected);
  if (!t || !t.turnId) return;
  const r = await api('POST', '/v1/sessions/' + encodeURIComponent(state.selected) + '/turns/' + encodeURIComponent(t.turnId) + '/cancel');
  if (r.status !== 202) $('chat-error').textContent = problemText(r);
}

// --- keyboard ---------------------------------------------------------------

function firstPendingCard(kind) {
  const root = state.view === 'inbox' ? $('inbox') : $('timeline');
  const focused = document.activeElement && document.activeElement.closest && document.activeElement.closest('.card:not(.decided)');
  if (focused && root.contains(focused) && (!kind || focused.classList.contains(kind))) return focused;
  return root.querySelector('.card.' + (kind || 'approval') + ':not(.decided)');
}

function cardFor(node) {
  for (const v of state.nodes.values()) if (v.card && v.card.node === node) return v.card;
  for (const c of inboxCards.values()) if (c.node === node) return c;
  return null;
}

function onKey(e) {
  const t = e.target;
  const typing = t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT');
  if (t && t.id === 'prompt' && e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
    e.preventDefault();
    send();
    return;
  }
  if (e.key === 'Escape' && typing) {
    t.blur();
    return;
  }
  if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
  switch (e.key) {
    case 'a': {
      const node = firstPendingCard('approval');
      const card = node && cardFor(node);
      if (card) {
        e.preventDefault();
        card.node.focus();
        card.decide('approve');
      }
      break;
    }
    case 'd': {
      const node = firstPendingCard('approval');
      const card = node && cardFor(node);
      if (card) {
        e.preventDefault();
        card.reason.focus();
      }
      break;
    }
    case 'i':
      e.preventDefault();
      showView(state.view === 'inbox' ? 'chat' : 'inbox');
      if (state.view === 'inbox') {
        const first = firstPendingCard();
        (first || $('inbox')).focus();
      }
      break;
    case '/':
      e.preventDefault();
      toggleSessions(true);
      $('session-filter').focus();
      break;
    case 'n':
      e.preventDefault();
      newSession();
      break;
    case 's':
      e.preventDefault();
      toggleSessions();
      break;
    default:
      break;
  }
}

function toggleSessions(open) {
  const nav = $('sessions');
  const show = open === undefined ? nav.classList.contains('collapsed') : open;
  nav.classList.toggle('collapsed', !show);
  $('toggle-sessions').setAttribute('aria-expanded', show ? 'true' : 'false');
}

// --- start ------------------------------------------------------------------

let started = false;
async function boot() {
  let r;
  try {
    r = await api('GET', '/v1/console/session');
  } catch (e) {
    setConn('offline', 'reconnecting');
    setTimeout(boot, 2000);
    return;
  }
  if (r.status === 401) {
    showSignIn();
    return;
  }
  if (r.status !== 200) {
    showSignIn('the server answered HTTP ' + r.status);
    return;
  }
  state.who = r.json;
  $('signin').hidden = true;
  $('app').hidden = false;
  $('who').textContent = state.who.tokens_required ? state.who.tenant : '';
  $('sign-out').hidden = !state.who.cookie;
  const agents = await api('GET', '/v1/agents');
  state.agents = agents.status === 200 ? agents.json.items || [] : [];
  const sel = $('agent-select');
  sel.textContent = '';
  for (const a of state.agents) sel.appendChild(el('option', { value: a.name, text: a.name + (a.description ? ' — ' + a.description : '') }));
  await refreshSessions();
  await refreshInbox();
  const fromHash = decodeURIComponent(location.hash.slice(1));
  if (fromHash && state.sessions.some((s) => s.id === fromHash)) await select(fromHash);
  else if (!state.selected && state.sessions.length) await select(state.sessions[0].id);
  ensureStream();
  if (!started) {
    started = true;
    // New sessions and items of sessions not yet watched.
    setInterval(() => {
      if (state.who && !document.hidden) refreshSoon();
    }, 4000);
  }
}

function init() {
  $('signin-form').addEventListener('submit', signIn);
  $('sign-out').addEventListener('click', signOut);
  $('new-session').addEventListener('click', newSession);
  $('session-filter').addEventListener('input', renderSessions);
  $('status-filter').addEventListener('change', renderSessions);
  $('composer').addEventListener('submit', send);
  $('cancel').addEventListener('click', cancel);
  $('open-inbox').addEventListener('click', () => showView(state.view === 'inbox' ? 'chat' : 'inbox'));
  $('toggle-sessions').addEventListener('click', () => toggleSessions());
  document.addEventListener('keydown', onKey);
  window.addEventListener('hashchange', () => {
    const id = decodeURIComponent(location.hash.slice(1));
    if (id && id !== state.selected) select(id);
  });
  signInFromAddress().then(async (failed) => {
    await boot();
    if (failed) $('signin-error').textContent = failed;
  });
}

init();
