// A small markdown renderer for model output, which is untrusted: the text
// is parsed into a tree of known node types and built with createElement
// and textContent, so no markup in it is ever interpreted. Raw HTML stays
// text; links keep only http:, https: and mailto: targets (anything else,
// javascript: included, is shown as text); images are not loaded.
//
// Blocks: paragraphs, ATX headings (#..######), fenced code (``` or ~~~),
// bullet and numbered lists (one level), block quotes, thematic breaks.
// Inline: `code`, **strong**, *em* / _em_, [text](url), <https://...>.

const SAFE_URL = /^(https?:\/\/|mailto:)[^\s]*$/i;

export function safeUrl(url) {
  const u = String(url).trim();
  return SAFE_URL.test(u) ? u : null;
}

// -> [{type: 'p'|'h'|'code'|'ul'|'ol'|'quote'|'hr', ...}]
export function parseBlocks(text) {
  const lines = String(text || '').replace(/\r\n?/g, '\n').split('\n');
  const blocks = [];
  let para = [];
  const flush = () => {
    if (para.length) blocks.push({ type: 'p', text: para.join('\n') });
    para = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = /^ {0,3}(```+|~~~+)\s*([^`\s]*)/.exec(line);
    if (fence) {
      flush();
      const close = fence[1];
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trimStart().startsWith(close)) body.push(lines[i++]);
      blocks.push({ type: 'code', lang: fence[2] || '', text: body.join('\n') });
      continue;
    }
    if (/^\s*$/.test(line)) {
      flush();
      continue;
    }
    const h = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
    if (h) {
      flush();
      blocks.push({ type: 'h', level: h[1].length, text: h[2] });
      continue;
    }
    if (/^ {0,3}([-*_])(\s*\1){2,}\s*$/.test(line)) {
      flush();
      blocks.push({ type: 'hr' });
      continue;
    }
    const item = /^ {0,3}([-*+]|\d{1,9}[.)])\s+(.*)$/.exec(line);
    if (item) {
      flush();
      const ordered = /\d/.test(item[1][0]);
      const list = { type: ordered ? 'ol' : 'ul', items: [item[2]] };
      if (ordered) list.start = parseInt(item[1], 10);
      while (i + 1 < lines.length) {
        const next = /^ {0,3}([-*+]|\d{1,9}[.)])\s+(.*)$/.exec(lines[i + 1]);
        if (next && /\d/.test(next[1][0]) === ordered) {
          list.items.push(next[2]);
          i++;
        } else if (lines[i + 1].startsWith('  ') && lines[i + 1].trim() !== '') {
          list.items[list.items.length - 1] += '\n' + lines[i + 1].trim();
          i++;
        } else {
          break;
        }
      }
      blocks.push(list);
      continue;
    }
    if (/^ {0,3}>/.test(line)) {
      flush();
      const body = [line.replace(/^ {0,3}> ?/, '')];
      while (i + 1 < lines.length && /^ {0,3}>/.test(lines[i + 1])) {
        body.push(lines[++i].replace(/^ {0,3}> ?/, ''));
      }
      blocks.push({ type: 'quote', text: body.join('\n') });
      continue;
    }
    para.push(line);
  }
  flush();
  return blocks;
}

// -> [{type: 'text'|'code'|'strong'|'em'|'link'|'br', ...}]
export function parseInline(text) {
  const out = [];
  let plain = '';
  const pushText = () => {
    if (plain) out.push({ type: 'text', text: plain });
    plain = '';
  };
  const s = String(text);
  let i = 0;
  while (i < s.length) {
    const c = s[i];
    if (c === '\\' && i + 1 < s.length && /[\\`*_[\]()<>#!-]/.test(s[i + 1])) {
      plain += s[i + 1];
      i += 2;
      continue;
    }
    if (c === '`') {
      let n = 1;
      while (s[i + n] === '`') n++;
      const ticks = '`'.repeat(n);
      const end = s.indexOf(ticks, i + n);
      if (end > 0) {
        pushText();
        out.push({ type: 'code', text: s.slice(i + n, end) });
        i = end + n;
        continue;
      }
      plain += ticks;
      i += n;
      continue;
    }
    if ((c === '*' || c === '_') && canOpen(s, i, s[i + 1] === c ? 2 : 1)) {
      const n = s[i + 1] === c ? 2 : 1;
      const end = findCloser(s, i + n, c.repeat(n));
      if (end > i + n) {
        pushText();
        out.push({ type: n === 2 ? 'strong' : 'em', children: parseInline(s.slice(i + n, end)) });
        i = end + n;
        continue;
      }
      plain += c.repeat(n);
      i += n;
      continue;
    }
    if (c === '[') {
      const m = /^\[([^\]\n]*)\]\(([^)\s]*)(?:\s+"[^"]*")?\)/.exec(s.slice(i));
      if (m) {
        pushText();
        const href = safeUrl(m[2]);
        if (href) {
          out.push({ type: 'link', href, children: parseInline(m[1]) });
        } else {
          out.push({ type: 'text', text: m[0] });
        }
        i += m[0].length;
        continue;
      }
    }
    if (c === '<') {
      const m = /^<(https?:\/\/[^\s<>]+)>/.exec(s.slice(i));
      if (m) {
        pushText();
        out.push({ type: 'link', href: m[1], children: [{ type: 'text', text: m[1] }] });
        i += m[0].length;
        continue;
      }
    }
    if (c === '\n') {
      pushText();
      out.push({ type: 'br' });
      i++;
      continue;
    }
    plain += c;
    i++;
  }
  pushText();
  return out;
}

const ALNUM = /[\p{L}\p{N}]/u;

// Emphasis opens before a non-space; `_` not inside a word (snake_case,
// __dunder__ names in code-like text stay as written).
function canOpen(s, i, n) {
  const next = s[i + n];
  if (!next || /\s/.test(next)) return false;
  return s[i] !== '_' || i === 0 || !ALNUM.test(s[i - 1]);
}

// The index of the delimiter `d` that closes emphasis opened before `from`:
// after a non-space, and for `_` not followed by a letter or digit.
function findCloser(s, from, d) {
  for (let j = s.indexOf(d, from); j >= 0; j = s.indexOf(d, j + 1)) {
    if (j === from || /\s/.test(s[j - 1])) continue;
    if (d.length === 1 && s[j + 1] === d) {
      j++;
      continue;
    }
    if (d[0] === '_' && s[j + d.length] && ALNUM.test(s[j + d.length])) continue;
    return j;
  }
  return -1;
}

function appendInline(doc, parent, nodes) {
  for (const n of nodes) {
    let el;
    switch (n.type) {
      case 'text':
        parent.appendChild(doc.createTextNode(n.text));
        continue;
      case 'br':
        parent.appendChild(doc.createElement('br'));
        continue;
      case 'code':
        el = doc.createElement('code');
        el.textContent = n.text;
        break;
      case 'strong':
      case 'em':
        el = doc.createElement(n.type);
        appendInline(doc, el, n.children);
        break;
      case 'link':
        el = doc.createElement('a');
        el.setAttribute('href', n.href);
        el.setAttribute('rel', 'noopener noreferrer nofollow');
        el.setAttribute('target', '_blank');
        appendInline(doc, el, n.children);
        break;
      default:
        continue;
    }
    parent.appendChild(el);
  }
}

// A <div class="md"> for `text`, built with `doc` (a Document).
export function renderMarkdown(doc, text) {
  const root = doc.createElement('div');
  root.className = 'md';
  for (const b of parseBlocks(text)) {
    let el;
    switch (b.type) {
      case 'p':
        el = doc.createElement('p');
        appendInline(doc, el, parseInline(b.text));
        break;
      case 'h':
        el = doc.createElement('h' + Math.min(6, b.level + 2));
        appendInline(doc, el, parseInline(b.text));
        break;
      case 'code': {
        el = doc.createElement('pre');
        const code = doc.createElement('code');
        code.textContent = b.text;
        el.appendChild(code);
        break;
      }
      case 'ul':
      case 'ol':
        el = doc.createElement(b.type);
        if (b.type === 'ol' && b.start !== 1) el.setAttribute('start', String(b.start));
        for (const t of b.items) {
          const li = doc.createElement('li');
          appendInline(doc, li, parseInline(t));
          el.appendChild(li);
        }
        break;
      case 'quote':
        el = doc.createElement('blockquote');
        appendInline(doc, el, parseInline(b.text));
        break;
      case 'hr':
        el = doc.createElement('hr');
        break;
      default:
        continue;
    }
    root.appendChild(el);
  }
  return root;
}
