"use strict";
// Finds the native agentloop binary of this platform's package
// (@agentloop/<os>-<cpu>, an optional dependency) and runs it. install.js
// links that binary over bin/agentloop at install, so this file runs only
// when install scripts were skipped (npm --ignore-scripts) or the link
// failed, or when called directly (`node lib/launcher.js`).
const { spawn } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");

const VERSION = require("../package.json").version;

// The platform packages this version is published with: process.platform
// and process.arch to the package's name.
const PLATFORMS = {
  "linux-x64": "@agentloop/linux-x64",
  "linux-arm64": "@agentloop/linux-arm64",
};

function platformKey() {
  return process.platform + "-" + process.arch;
}

// True when this Node runs on musl (Alpine): the packages carry glibc builds.
function isMusl() {
  if (process.platform !== "linux") return false;
  const report = process.report && process.report.getReport ? process.report.getReport() : null;
  const header = report && (typeof report === "string" ? JSON.parse(report) : report).header;
  return !!header && !header.glibcVersionRuntime;
}

// What to tell the user when there is no binary to run: what is missing and
// the command that installs it.
function missingMessage(key, pkg, detail) {
  if (!pkg) {
    return (
      `agentloop: no native build for ${key} (the npm packages carry ` +
      `${Object.keys(PLATFORMS).join(", ")}, for glibc).\n` +
      "Build it from source (README.md, \"Build\") or use the release tarball of your platform.\n"
    );
  }
  return (
    `agentloop: the native binary for ${key} is missing: the package ${pkg} ` +
    `(an optional dependency of agentloop) is not installed${detail ? " (" + detail + ")" : ""}.\n` +
    `npm skips optional dependencies with --omit=optional or --no-optional. Run:\n` +
    `  npm install -g agentloop@${VERSION} ${pkg}@${VERSION}\n`
  );
}

// The binary's path, or {error} with the message to print. AGENTLOOP_BINARY
// names a binary to use instead of the platform package's.
function findBinary() {
  if (process.env.AGENTLOOP_BINARY) return { path: process.env.AGENTLOOP_BINARY };
  const key = platformKey();
  const pkg = isMusl() ? null : PLATFORMS[key];
  if (!pkg) return { error: missingMessage(key, null) };
  let manifest;
  try {
    manifest = require.resolve(pkg + "/package.json");
  } catch (e) {
    return { error: missingMessage(key, pkg) };
  }
  const version = JSON.parse(fs.readFileSync(manifest, "utf8")).version;
  if (version !== VERSION) {
    return { error: missingMessage(key, pkg, `found version ${version}, want ${VERSION}`) };
  }
  const bin = path.join(path.dirname(manifest), "bin", "agentloop");
  if (!fs.existsSync(bin)) return { error: missingMessage(key, pkg, `no ${bin}`) };
  return { path: bin };
}

// Runs the binary with this process's arguments and stdio, forwards the
// signals a terminal or a supervisor sends, and exits as the child did.
function main() {
  const found = findBinary();
  if (found.error) {
    process.stderr.write(found.error);
    process.exit(1);
  }
  const child = spawn(found.path, process.argv.slice(2), { stdio: "inherit" });
  const forward = (sig) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(sig);
  };
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(sig, () => forward(sig));
  child.on("error", (e) => {
    process.stderr.write(`agentloop: cannot run ${found.path}: ${e.message}\n`);
    process.exit(1);
  });
  child.on("exit", (code, signal) => {
    if (signal) {
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
      return;
    }
    process.exit(code === null ? 1 : code);
  });
}

module.exports = { findBinary, main, missingMessage, PLATFORMS };

if (require.main === module) main();
