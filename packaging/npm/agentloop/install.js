"use strict";
// postinstall: links the platform package's native binary over
// bin/agentloop (the path npm's `agentloop` command points at), so that
// running agentloop starts the binary itself and no Node process stays
// between the shell and it. A hard link, else a copy. When the platform
// package is missing, says what to run and leaves the JS launcher, which
// says it again at each run; the install itself still succeeds.
const fs = require("node:fs");
const path = require("node:path");
const { findBinary } = require("./lib/launcher.js");

function install() {
  const found = findBinary();
  if (found.error) {
    process.stderr.write(found.error);
    return;
  }
  const target = path.join(__dirname, "bin", "agentloop");
  const tmp = target + ".tmp-" + process.pid;
  try {
    try {
      fs.linkSync(found.path, tmp);
    } catch (e) {
      fs.copyFileSync(found.path, tmp);
    }
    fs.chmodSync(tmp, 0o755);
    fs.renameSync(tmp, target);
  } catch (e) {
    try {
      fs.unlinkSync(tmp);
    } catch (ignored) {}
    process.stderr.write(
      `agentloop: could not link ${found.path} over ${target} (${e.message}); ` +
        "the JavaScript launcher will start it instead.\n",
    );
  }
}

install();
