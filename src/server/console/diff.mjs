// Unified diffs (as the server computes them: `--- a/x`, `+++ b/x`, `@@`
// hunks) parsed into lines with their old and new line numbers, and shown
// as a table built with textContent only: a diff is file content, which is
// untrusted.

// -> {files: [{oldName, newName, hunks: [{header, lines: [{kind, text,
// oldNo, newNo}]}]}]}; kind is 'add', 'del', 'ctx' or 'note' (a `\ No
// newline at end of file` line, or text outside any hunk such as a cut
// notice).
export function parseUnifiedDiff(text) {
  const files = [];
  let file = null;
  let hunk = null;
  let oldNo = 0;
  let newNo = 0;
  const lines = String(text || '').split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  for (const line of lines) {
    if (line.startsWith('--- ') && (!hunk || hunkDone(hunk))) {
      file = { oldName: line.slice(4), newName: '', hunks: [] };
      files.push(file);
      hunk = null;
      continue;
    }
    if (line.startsWith('+++ ') && file && !file.newName && !hunk) {
      file.newName = line.slice(4);
      continue;
    }
    const m = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$/.exec(line);
    if (m) {
      if (!file) {
        file = { oldName: '', newName: '', hunks: [] };
        files.push(file);
      }
      oldNo = Number(m[1]);
      newNo = Number(m[3]);
      hunk = {
        header: line,
        oldLeft: m[2] === undefined ? 1 : Number(m[2]),
        newLeft: m[4] === undefined ? 1 : Number(m[4]),
        lines: [],
      };
      file.hunks.push(hunk);
      continue;
    }
    if (!hunk) {
      if (!file) {
        file = { oldName: '', newName: '', hunks: [] };
        files.push(file);
      }
      file.hunks.push({ header: '', oldLeft: 0, newLeft: 0, lines: [{ kind: 'note', text: line, oldNo: null, newNo: null }] });
      continue;
    }
    const c = line[0];
    if (c === '+' && hunk.newLeft > 0) {
      hunk.lines.push({ kind: 'add', text: line.slice(1), oldNo: null, newNo: newNo++ });
      hunk.newLeft--;
    } else if (c === '-' && hunk.oldLeft > 0) {
      hunk.lines.push({ kind: 'del', text: line.slice(1), oldNo: oldNo++, newNo: null });
      hunk.oldLeft--;
    } else if ((c === ' ' || line === '') && hunk.oldLeft > 0 && hunk.newLeft > 0) {
      hunk.lines.push({ kind: 'ctx', text: line.slice(1), oldNo: oldNo++, newNo: newNo++ });
      hunk.oldLeft--;
      hunk.newLeft--;
    } else {
      hunk.lines.push({ kind: 'note', text: line, oldNo: null, newNo: null });
    }
  }
  return { files };
}

function hunkDone(h) {
  return h.oldLeft <= 0 && h.newLeft <= 0;
}

// A <table class="diff"> for `text`, built with `doc` (a Document).
export function renderDiff(doc, text) {
  const table = doc.createElement('table');
  table.className = 'diff';
  const body = doc.createElement('tbody');
  table.appendChild(body);
  const row = (cls, a, b, sign, content) => {
    const tr = doc.createElement('tr');
    tr.className = cls;
    for (const [v, c] of [[a, 'ln'], [b, 'ln'], [sign, 'sign'], [content, 'code']]) {
      const td = doc.createElement('td');
      td.className = c;
      td.textContent = v === null || v === undefined ? '' : String(v);
      tr.appendChild(td);
    }
    body.appendChild(tr);
  };
  for (const f of parseUnifiedDiff(text).files) {
    if (f.oldName || f.newName) row('file', '', '', '', f.oldName + ' → ' + f.newName);
    for (const h of f.hunks) {
      if (h.header) row('hunk', '', '', '', h.header);
      for (const l of h.lines) {
        const sign = l.kind === 'add' ? '+' : l.kind === 'del' ? '-' : l.kind === 'ctx' ? ' ' : '';
        row(l.kind, l.oldNo, l.newNo, sign, l.text);
      }
    }
  }
  return table;
}
