// A server-sent events parser for a stream read with fetch(), so that the
// request can carry credentials and cursors that EventSource cannot send.
// It follows the HTML standard's event-stream interpretation: lines end at
// CRLF, LF or CR (a CR at the end of a chunk may be the first half of a
// CRLF); `data` lines are joined with LF; comment lines start with ':';
// an event is dispatched at a blank line, and only when it has data.

export class SseParser {
  // onEvent({id, event, data}) for each event; onRetry(ms) for `retry:`.
  constructor(onEvent, onRetry = () => {}) {
    this.onEvent = onEvent;
    this.onRetry = onRetry;
    this.buffer = '';
    this.pendingCR = false;
    this.lastEventId = '';
    this.resetEvent();
  }

  resetEvent() {
    this.eventType = '';
    this.data = [];
    this.hasData = false;
    this.idThisEvent = null;
  }

  // Feeds decoded text (any chunking, down to single characters).
  push(text) {
    let start = 0;
    if (this.pendingCR && text.length > 0) {
      this.pendingCR = false;
      if (text[0] === '\n') start = 1;
    }
    let s = this.buffer + text.slice(start);
    this.buffer = '';
    let from = 0;
    for (let i = 0; i < s.length; i++) {
      const c = s[i];
      if (c !== '\n' && c !== '\r') continue;
      this.line(s.slice(from, i));
      if (c === '\r') {
        if (i + 1 === s.length) {
          this.pendingCR = true;
        } else if (s[i + 1] === '\n') {
          i++;
        }
      }
      from = i + 1;
    }
    this.buffer = s.slice(from);
  }

  // The stream ended: an event without its blank line is dropped, as the
  // standard says.
  end() {
    this.buffer = '';
    this.pendingCR = false;
    this.resetEvent();
  }

  line(l) {
    if (l === '') {
      if (this.idThisEvent !== null) this.lastEventId = this.idThisEvent;
      if (this.hasData) {
        this.onEvent({
          id: this.idThisEvent !== null ? this.idThisEvent : '',
          lastEventId: this.lastEventId,
          event: this.eventType || 'message',
          data: this.data.join('\n'),
        });
      }
      this.resetEvent();
      return;
    }
    if (l[0] === ':') return;
    const colon = l.indexOf(':');
    let field = l;
    let value = '';
    if (colon >= 0) {
      field = l.slice(0, colon);
      value = l.slice(colon + 1);
      if (value[0] === ' ') value = value.slice(1);
    }
    switch (field) {
      case 'event':
        this.eventType = value;
        break;
      case 'data':
        this.data.push(value);
        this.hasData = true;
        break;
      case 'id':
        if (!value.includes('\0')) this.idThisEvent = value;
        break;
      case 'retry':
        if (/^[0-9]+$/.test(value)) this.onRetry(Number(value));
        break;
      default:
        break;
    }
  }
}

// "<session>.<seq>" (the multiplexed stream's ids) -> {session, seq}; null
// for anything else.
export function splitStreamId(id) {
  const dot = id.lastIndexOf('.');
  if (dot <= 0) return null;
  const seq = id.slice(dot + 1);
  if (!/^[0-9]+$/.test(seq)) return null;
  return { session: id.slice(0, dot), seq: Number(seq) };
}

// The `after=` value of the multiplexed stream for these cursors
// ({session: seq}).
export function afterParam(cursors) {
  return Object.keys(cursors)
    .filter((s) => cursors[s] > 0)
    .sort()
    .map((s) => s + ':' + cursors[s])
    .join(',');
}

// Reads a fetch() response body into the parser until it ends; resolves
// when the stream ends, rejects on a network error or an abort.
export async function readInto(response, parser) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder('utf-8');
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      parser.push(decoder.decode(value, { stream: true }));
    }
    parser.push(decoder.decode());
  } finally {
    parser.end();
  }
}
