// The package as npm ships it: packed, installed offline into a temporary
// project, and imported by its name (its `exports` and `files` hold).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const npm = spawnSync("npm", ["--version"], { encoding: "utf8" });

test("the packed package installs offline and imports by name", { skip: npm.status === 0 ? false : "npm not found" }, () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "al_sdk_pack_"));
  try {
    const env = { ...process.env, npm_config_cache: path.join(tmp, "cache"), npm_config_update_notifier: "false" };
    const pack = spawnSync("npm", ["pack", "--pack-destination", tmp], { cwd: path.join(here, ".."), encoding: "utf8", env });
    assert.equal(pack.status, 0, pack.stderr);
    const tgz = path.join(tmp, pack.stdout.trim().split("\n").at(-1));
    const app = path.join(tmp, "app");
    fs.mkdirSync(app);
    fs.writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
    const inst = spawnSync("npm", ["install", "--offline", "--no-audit", "--no-fund", tgz], { cwd: app, encoding: "utf8", env });
    assert.equal(inst.status, 0, inst.stderr);
    const run = spawnSync(process.execPath, ["--input-type=module", "-e",
      'import { AgentloopClient, NotFoundError } from "@agentloop/client"; ' +
      'console.log(typeof AgentloopClient, typeof NotFoundError)'], { cwd: app, encoding: "utf8" });
    assert.equal(run.status, 0, run.stderr);
    assert.equal(run.stdout.trim(), "function function");
    const pkg = path.join(app, "node_modules", "@agentloop", "client");
    assert.ok(fs.existsSync(path.join(pkg, "src", "index.d.ts")));
    assert.ok(fs.existsSync(path.join(pkg, "examples", "approve.mjs")));
    assert.ok(!fs.existsSync(path.join(pkg, "test")));
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});
