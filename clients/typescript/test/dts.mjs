// The interfaces of src/index.d.ts as data: name -> {base, fields, request}.
// Each top-level field sits on a line of its own, indented two spaces.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
export const dts = fs.readFileSync(path.join(here, "..", "src", "index.d.ts"), "utf8");

export function interfaces() {
  const out = new Map();
  const re = /(\/\*\*[^]*?\*\/\s*)?export interface (\w+)(?: extends (\w+))? \{\n([^]*?)\n\}/g;
  for (const m of dts.matchAll(re)) {
    const fields = new Map();
    for (const line of m[4].split("\n")) {
      const f = /^ {2}(\w+)(\?)?: (.*);$/.exec(line);
      if (f) fields.set(f[1], { optional: Boolean(f[2]), type: f[3] });
    }
    const request = m[1] && /@request (\w+) (\S+)/.exec(m[1]);
    out.set(m[2], { base: m[3], fields, request: request ? [request[1], request[2]] : null });
  }
  return out;
}

/** Every field name of an interface, its bases' included. */
export function fieldNames(name, all = interfaces()) {
  const i = all.get(name);
  if (!i) throw new Error(`no interface ${name} in index.d.ts`);
  const names = new Set(i.fields.keys());
  if (i.base) for (const n of fieldNames(i.base, all)) names.add(n);
  return names;
}
