// Parallel directory walk with ignore rules, used by grep, glob and ls.
//
// Workers (hardware threads by default) share a LIFO stack of directories:
// a worker lists a directory, pushes its subdirectories for anyone to take,
// then hands each regular file to the callback itself. Symbolic links are
// never followed (nor reported), so a walk cannot leave its root. `.git` is
// always skipped; other hidden entries unless `include_hidden`.
//
// Thread-safety: the callback runs concurrently on several threads, each
// call tagged with its worker index in [0, WalkThreads(options)).
#pragma once

#include <functional>
#include <stop_token>
#include <string>
#include <string_view>

#include "agentloop/status.h"

namespace agentloop::tools {

struct WalkOptions {
  // Directory where ignore chains start (the workspace root); ignore files
  // between it and `start` apply. Empty: only files at or below `start`.
  std::string ignore_root;
  std::string start;  // absolute canonical directory to walk
  bool respect_ignore = true;
  bool include_hidden = false;
  int max_depth = -1;  // 1: only the entries of `start`; -1: unlimited
  int threads = 0;     // 0: hardware concurrency
  std::stop_token stop;
};

struct WalkEntry {
  std::string_view abs;   // absolute path; abs.data() is NUL-terminated
  std::string_view rel;   // relative to options.start
  std::string_view name;  // base name
};

int WalkThreads(const WalkOptions& options);

// Calls `on_file` for every regular file that is not ignored. Returns
// kCancelled when options.stop fired (some files may have been reported).
Status Walk(const WalkOptions& options,
            const std::function<void(int worker, const WalkEntry& entry)>& on_file);

}  // namespace agentloop::tools
