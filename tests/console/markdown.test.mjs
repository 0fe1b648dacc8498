// The console's markdown renderer (src/server/console/markdown.mjs): model
// output is untrusted.
import assert from 'node:assert/strict';
import test from 'node:test';

import { parseBlocks, parseInline, renderMarkdown, safeUrl } from '../../src/server/console/markdown.mjs';
import { FakeDocument } from './fake_dom.mjs';

test('blocks: headings, fenced code, lists, quotes, paragraphs', () => {
  const b = parseBlocks('# Title\n\ntext\nmore\n\n```js\nlet x = 1;\n```\n- a\n- b\n\n2. two\n3. three\n> said\n\n---');
  assert.deepEqual(b.map((x) => x.type), ['h', 'p', 'code', 'ul', 'ol', 'quote', 'hr']);
  assert.equal(b[1].text, 'text\nmore');
  assert.deepEqual(b[2], { type: 'code', lang: 'js', text: 'let x = 1;' });
  assert.deepEqual(b[3].items, ['a', 'b']);
  assert.equal(b[4].start, 2);
});

test('inline: code, strong, em, links; snake_case stays as written', () => {
  const i = parseInline('use `a<b>` with **care**, *really*, see [docs](https://x.test/a) and snake_case_name');
  assert.deepEqual(i.map((n) => n.type), ['text', 'code', 'text', 'strong', 'text', 'em', 'text', 'link', 'text']);
  assert.equal(i[1].text, 'a<b>');
  assert.equal(i[7].href, 'https://x.test/a');
  assert.equal(i[8].text, ' and snake_case_name');
  assert.deepEqual(parseInline('window.__x=1; window.__x=2'), [{ type: 'text', text: 'window.__x=1; window.__x=2' }]);
});

test('only http, https and mailto links; everything else is text', () => {
  assert.equal(safeUrl('javascript:alert(1)'), null);
  assert.equal(safeUrl(' JaVaScRiPt:alert(1)'), null);
  assert.equal(safeUrl('data:text/html,<b>'), null);
  assert.equal(safeUrl('vbscript:x'), null);
  assert.equal(safeUrl('//evil.test'), null);
  assert.equal(safeUrl('HTTPS://ok.test/'), 'HTTPS://ok.test/');
  const i = parseInline('[click](javascript:alert(1))');
  assert.equal(i.some((n) => n.type === 'link'), false);
  assert.equal(i.map((n) => n.text).join(''), '[click](javascript:alert(1))');
});

test('raw HTML is rendered as text, never as elements', () => {
  const doc = new FakeDocument();
  const payload = '<img src=x onerror="alert(1)"><script>alert(2)</script>';
  const root = renderMarkdown(doc, 'hi ' + payload + '\n\n```\n' + payload + '\n```\n- ' + payload);
  assert.equal(doc.htmlAssignments, 0);
  assert.equal(root.findAll('img').length + root.findAll('script').length, 0);
  assert.equal(root.textContent.split(payload).length - 1, 3);
  const a = renderMarkdown(doc, '[x](https://ok.test)').findAll('a')[0];
  assert.equal(a.getAttribute('href'), 'https://ok.test');
  assert.match(a.getAttribute('rel'), /noopener/);
});
