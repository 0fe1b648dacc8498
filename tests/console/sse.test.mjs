// The console's event-stream parser (src/server/console/sse.mjs).
import assert from 'node:assert/strict';
import test from 'node:test';

import { SseParser, afterParam, splitStreamId } from '../../src/server/console/sse.mjs';

function parse(chunks) {
  const events = [];
  const retries = [];
  const p = new SseParser((e) => events.push(e), (ms) => retries.push(ms));
  for (const c of chunks) p.push(c);
  return { events, retries, parser: p };
}

const STREAM =
  'retry: 2000\n\n: hb\n\nid: s1.3\nevent: text_delta\ndata: {"type":"text_delta","text":"hé"}\n\n' +
  'event: message.snapshot\ndata: {"a":1}\ndata: {"b":2}\n\n';

test('frames: id, event, multi-line data, comments and retry', () => {
  const { events, retries } = parse([STREAM]);
  assert.deepEqual(retries, [2000]);
  assert.equal(events.length, 2);
  assert.deepEqual(events[0], { id: 's1.3', lastEventId: 's1.3', event: 'text_delta', data: '{"type":"text_delta","text":"hé"}' });
  assert.equal(events[1].event, 'message.snapshot');
  assert.equal(events[1].data, '{"a":1}\n{"b":2}');
  assert.equal(events[1].id, '');
  assert.equal(events[1].lastEventId, 's1.3');
});

test('any chunking gives the same events, down to one character', () => {
  const whole = parse([STREAM]).events;
  const single = parse([...STREAM]).events;
  assert.deepEqual(single, whole);
  for (let cut = 1; cut < STREAM.length; cut += 7) {
    assert.deepEqual(parse([STREAM.slice(0, cut), STREAM.slice(cut)]).events, whole);
  }
});

test('CRLF and CR line ends, a CRLF split across chunks', () => {
  const crlf = STREAM.replace(/\n/g, '\r\n');
  assert.deepEqual(parse([crlf]).events, parse([STREAM]).events);
  const half = crlf.indexOf('\r\n') + 1;
  assert.deepEqual(parse([crlf.slice(0, half), crlf.slice(half)]).events, parse([STREAM]).events);
  assert.deepEqual(parse([STREAM.replace(/\n/g, '\r')]).events, parse([STREAM]).events);
});

test('an event is dispatched only at its blank line; an unfinished one is dropped at the end', () => {
  const { events, parser } = parse(['event: x\ndata: 1\n']);
  assert.equal(events.length, 0);
  parser.end();
  parser.push('\n');
  assert.equal(events.length, 0);
});

test('an event without data is not dispatched; the field name alone is an empty value', () => {
  const { events } = parse(['event: x\n\ndata\n\n']);
  assert.deepEqual(events.map((e) => [e.event, e.data]), [['message', '']]);
});

test('a bad retry is ignored; unknown fields too', () => {
  const { events, retries } = parse(['retry: soon\nfoo: bar\ndata: ok\n\n']);
  assert.deepEqual(retries, []);
  assert.equal(events[0].data, 'ok');
});

test('multiplexed ids and cursors', () => {
  assert.deepEqual(splitStreamId('5b1f-aa.12'), { session: '5b1f-aa', seq: 12 });
  assert.deepEqual(splitStreamId('a.b.7'), { session: 'a.b', seq: 7 });
  assert.equal(splitStreamId('12'), null);
  assert.equal(splitStreamId('s.x'), null);
  assert.equal(afterParam({ b: 7, a: 10, c: 0 }), 'a:10,b:7');
});
