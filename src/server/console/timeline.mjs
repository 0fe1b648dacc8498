// What the console knows about one session, folded from its events
// (docs/protocol.md). Durable events carry a gap-free `seq`: one at or below
// the last seen is a repeat (a replay after a reconnect) and is ignored, so
// nothing shows twice. Text deltas carry no seq; the text they built is
// replaced by the step's `message` (or by `message.snapshot` after a
// reconnect), so a replay never doubles it either. No DOM here.

export class SessionTimeline {
  constructor(sessionId) {
    this.sessionId = sessionId;
    this.lastSeq = 0;
    this.items = []; // {key, kind, version, ...}
    this.byKey = new Map();
    this.running = false;
    this.turnId = '';
    this.lastStop = null; // {stop, reason}
    // The pending ids waiting for a decision, as the events say: added by
    // `pending`, removed by a verdict's `decision`, and exactly the newest
    // `turn_end`'s `pending` (none once a turn begins: a resumed turn's
    // batch is decided).
    this.outstanding = new Set();
    this.meter = null; // {tokens, maxTokens, toolCalls, maxToolCalls, modelCalls, maxTurns}
    this.todos = null; // [{id, subject, status}]
    this.rules = new Map(); // tool_use_id -> {rule, reason}
    this.live = null; // the assistant item the deltas of the step in flight go to
    this.liveThinking = null;
    this.seqCounter = 0;
  }

  item(key, make) {
    let it = this.byKey.get(key);
    if (!it) {
      it = make();
      it.key = key;
      it.version = 0;
      this.items.push(it);
      this.byKey.set(key, it);
    }
    return it;
  }

  touch(it) {
    it.version++;
    return it;
  }

  // Folds one event (the parsed JSON of a frame). Returns the items it
  // changed (empty for a repeat or an event of no interest).
  apply(ev) {
    const seq = Number(ev.seq || 0);
    if (seq > 0) {
      if (seq <= this.lastSeq) return [];
      this.lastSeq = seq;
    }
    const changed = [];
    const mark = (it) => changed.push(this.touch(it));
    switch (ev.type) {
      case 'turn_begin':
        this.running = true;
        this.outstanding.clear();
        this.turnId = ev.turn_id || '';
        this.live = null;
        if (ev.budget) {
          this.meter = Object.assign({}, this.meter || {}, {
            maxTokens: ev.budget.max_tokens,
            maxToolCalls: ev.budget.max_tool_calls,
            maxTurns: ev.budget.max_turns,
          });
        }
        break;
      case 'budget_check':
        this.meter = {
          tokens: ev.tokens,
          maxTokens: ev.max_tokens,
          toolCalls: ev.tool_calls,
          maxToolCalls: ev.max_tool_calls,
          modelCalls: ev.model_calls,
          maxTurns: ev.max_turns,
          contextTokens: ev.context_tokens,
          contextWindow: ev.context_window,
        };
        break;
      case 'step_begin':
        this.live = null;
        this.liveThinking = null;
        break;
      case 'step_end':
        if (this.meter) this.meter = Object.assign({}, this.meter, { tokens: ev.tokens });
        break;
      case 'text_delta': {
        if (!this.live) {
          this.live = this.item('live:' + seq + ':' + ++this.seqCounter, () => ({ kind: 'assistant', text: '', streaming: true }));
        }
        this.live.text += ev.text || '';
        mark(this.live);
        break;
      }
      case 'thinking_delta': {
        if (!this.liveThinking) {
          this.liveThinking = this.item('think:' + ++this.seqCounter, () => ({ kind: 'thinking', text: '', streaming: true }));
        }
        this.liveThinking.text += ev.text || '';
        mark(this.liveThinking);
        break;
      }
      case 'message.snapshot': {
        if (!this.live) {
          this.live = this.item('live:snap:' + ++this.seqCounter, () => ({ kind: 'assistant', text: '', streaming: true }));
        }
        this.live.text = ev.text || '';
        mark(this.live);
        break;
      }
      case 'message':
        this.message(ev, seq, mark);
        break;
      case 'decision': {
        if (ev.tool_use_id) this.rules.set(ev.tool_use_id, { rule: ev.rule || '', reason: ev.reason || '' });
        // The `ask` that created the item names it too; only a verdict settles it.
        if (ev.pending_id && ev.decision !== 'ask') {
          this.outstanding.delete(ev.pending_id);
          const card = this.byKey.get('pending:' + ev.pending_id);
          if (card) {
            card.state = 'resolved';
            card.decision = ev.decision === 'allow' ? 'approved' : ev.decision === 'deny' ? 'denied' : ev.decision;
            card.by = ev.by || '';
            card.edited = !!ev.edited;
            card.decisionReason = ev.reason || '';
            mark(card);
          }
        }
        const tool = ev.tool_use_id && this.byKey.get('tool:' + ev.tool_use_id);
        if (tool) {
          tool.rule = ev.rule || tool.rule;
          mark(tool);
        }
        break;
      }
      case 'tool_call_begin': {
        const it = this.item('tool:' + ev.id, () => ({ kind: 'tool', id: ev.id, tool: ev.tool, input: ev.input, status: 'running' }));
        it.tool = ev.tool;
        it.input = ev.input;
        it.status = 'running';
        this.live = null;
        mark(it);
        break;
      }
      case 'tool_call_end': {
        const it = this.item('tool:' + ev.id, () => ({ kind: 'tool', id: ev.id, tool: ev.tool, input: null }));
        it.status = ev.is_error ? 'error' : 'done';
        it.summary = ev.summary || '';
        it.diff = ev.diff || '';
        it.exitCode = ev.exit_code;
        mark(it);
        break;
      }
      case 'pending':
        for (const p of ev.items || []) {
          this.outstanding.add(p.id);
          const card = this.item('pending:' + p.id, () => ({ kind: p.kind === 'question' ? 'question' : 'approval', state: 'pending' }));
          // Items of a `pending` event do not name their session.
          card.pending = Object.assign({ session_id: this.sessionId }, p);
          card.sessionId = this.sessionId;
          const r = this.rules.get(p.tool_use_id);
          if (r) card.rule = r.rule;
          mark(card);
        }
        break;
      case 'notice':
        mark(this.item('notice:' + seq, () => ({ kind: 'notice', level: ev.level, text: ev.text })));
        break;
      case 'compaction':
        mark(this.item('notice:' + seq, () => ({ kind: 'notice', level: 'info', text: 'compacted ' + ev.from + ' → ' + ev.to + ' messages' })));
        break;
      case 'turn_end':
        this.running = false;
        this.live = null;
        this.liveThinking = null;
        this.lastStop = { stop: ev.stop, reason: ev.reason || '' };
        if (Array.isArray(ev.pending)) this.outstanding = new Set(ev.pending.map((p) => p.id));
        if (ev.stop !== 'completed' && ev.stop !== 'pending_approval' && ev.stop !== 'pending_question') {
          mark(this.item('end:' + seq, () => ({ kind: 'end', stop: ev.stop, reason: ev.reason || '' })));
        }
        break;
      default:
        break;
    }
    return changed;
  }

  message(ev, seq, mark) {
    const m = ev.message || {};
    const blocks = Array.isArray(m.content) ? m.content : [];
    if (m.role === 'assistant') {
      const text = blocks.filter((b) => b.type === 'text').map((b) => b.text || '').join('');
      const thinking = blocks.filter((b) => b.type === 'thinking').map((b) => b.thinking || '').join('');
      if (thinking) {
        const t = this.liveThinking || this.item('think:' + seq, () => ({ kind: 'thinking', text: '' }));
        t.text = thinking;
        t.streaming = false;
        mark(t);
      }
      if (text || this.live) {
        const it = this.live || this.item('msg:' + seq, () => ({ kind: 'assistant', text: '' }));
        it.text = text;
        it.streaming = false;
        mark(it);
      }
      this.live = null;
      this.liveThinking = null;
      return;
    }
    if (m.tag) return; // engine-made entries (continuation markers, summaries)
    const results = blocks.filter((b) => b.type === 'tool_result');
    for (const r of results) {
      const it = this.byKey.get('tool:' + r.tool_use_id);
      if (it) {
        it.output = flatten(r.content);
        it.isError = !!r.is_error;
        mark(it);
      }
      const tasks = r.meta && r.meta.details && r.meta.details.tasks;
      if (Array.isArray(tasks)) this.todos = tasks.filter((t) => t.status !== 'deleted');
    }
    const text = blocks.filter((b) => b.type === 'text').map((b) => b.text || '').join('');
    if (m.role === 'user' && text) {
      mark(this.item('user:' + seq, () => ({ kind: 'user', text })));
    }
  }

  pendingCards() {
    return this.items.filter((i) => (i.kind === 'approval' || i.kind === 'question') && i.state === 'pending');
  }
}

// The status a session shows (the list's badge, the chat header): `listed`
// is the session as GET /v1/sessions lists it, `t` its timeline (null when
// this tab reads none of its events) and `inboxItems` the items the inbox
// lists for it. A session whose events this tab reads shows what they say
// (the list and the inbox are fetched apart from them and may be older);
// until a turn of it has ended there, the list and the inbox fill in.
export function sessionStatus(listed, t, inboxItems) {
  const watched = t && t.lastSeq > 0;
  if (watched && t.running) return 'running';
  if (watched && t.lastStop) {
    if (t.outstanding.size > 0) return 'paused';
    return t.lastStop.stop === 'failed' ? 'failed' : 'idle';
  }
  if (watched && t.outstanding.size > 0) return 'paused';
  if (!watched && listed.status === 'running') return 'running';
  if (inboxItems > 0 || listed.status === 'paused') return 'paused';
  return listed.status === 'failed' ? 'failed' : 'idle';
}

function flatten(content) {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content.map((c) => (typeof c === 'string' ? c : c && c.type === 'text' ? c.text : JSON.stringify(c))).join('');
  }
  return content === undefined || content === null ? '' : JSON.stringify(content);
}
