// The console's unified-diff parser and renderer (src/server/console/diff.mjs).
import assert from 'node:assert/strict';
import test from 'node:test';

import { parseUnifiedDiff, renderDiff } from '../../src/server/console/diff.mjs';
import { FakeDocument } from './fake_dom.mjs';

const DIFF = [
  '--- a/stats.py',
  '+++ b/stats.py',
  '@@ -1,4 +1,4 @@',
  ' def mean(xs):',
  '-    return sum(xs) / (len(xs) - 1)',
  '+    return sum(xs) / len(xs)',
  ' ',
  '--- not a header: a removed line',
  '\\ No newline at end of file',
  '',
].join('\n');

test('lines get their kinds and old/new numbers', () => {
  const { files } = parseUnifiedDiff(DIFF);
  assert.equal(files.length, 1);
  assert.equal(files[0].oldName, 'a/stats.py');
  assert.equal(files[0].newName, 'b/stats.py');
  const lines = files[0].hunks[0].lines;
  assert.deepEqual(lines.map((l) => [l.kind, l.oldNo, l.newNo]), [
    ['ctx', 1, 1], ['del', 2, null], ['add', null, 2], ['ctx', 3, 3], ['del', 4, null], ['note', null, null],
  ]);
  assert.equal(lines[4].text, '-- not a header: a removed line');
});

test('a new file, several hunks, and text outside a hunk', () => {
  const text = '--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n@@ -9 +10 @@\n-x\n+y\n... 3 more bytes cut\n';
  const { files } = parseUnifiedDiff(text);
  assert.equal(files[0].hunks.length, 2);
  assert.deepEqual(files[0].hunks[1].lines.map((l) => [l.kind, l.oldNo, l.newNo]), [['del', 9, null], ['add', null, 10], ['note', null, null]]);
  assert.deepEqual(parseUnifiedDiff('').files, []);
});

test('rendered with text nodes only: markup in a diff stays text', () => {
  const doc = new FakeDocument();
  const payload = '<img src=x onerror=alert(1)>';
  const table = renderDiff(doc, '--- a/x\n+++ b/x\n@@ -1 +1 @@\n-' + payload + '\n+ok\n');
  assert.equal(table.tagName, 'TABLE');
  assert.equal(doc.htmlAssignments, 0);
  const rows = table.findAll('tr');
  assert.deepEqual(rows.map((r) => r.className), ['file', 'hunk', 'del', 'add']);
  assert.equal(rows[2].findAll('td')[3].textContent, payload);
  assert.equal(table.findAll('img').length, 0);
});
