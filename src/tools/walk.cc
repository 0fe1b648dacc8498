#include "tools/walk.h"

#include <dirent.h>
#include <fcntl.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <sys/stat.h>

#include "tools/ignore.h"

namespace agentloop::tools {
namespace {

struct DirItem {
  std::string abs;
  std::shared_ptr<const IgnoreNode> ignore;
  int depth = 0;
};

class Walker {
 public:
  Walker(const WalkOptions& options, const std::function<void(int, const WalkEntry&)>& on_file)
      : options_(options), on_file_(on_file) {}

  Status Run() {
    DirItem root;
    root.abs = options_.start;
    if (options_.respect_ignore && !options_.ignore_root.empty() &&
        (options_.start == options_.ignore_root ||
         options_.start.rfind(options_.ignore_root + "/", 0) == 0)) {
      root.ignore = IgnoreChainAbove(options_.ignore_root, options_.start);
    }
    stack_.push_back(std::move(root));
    int n = WalkThreads(options_);
    std::vector<std::thread> extra;
    for (int i = 1; i < n; ++i) extra.emplace_back([this, i] { Work(i); });
    Work(0);
    for (auto& t : extra) t.join();
    if (cancelled_.load()) return Cancelled("walk cancelled");
    return Status::Ok();
  }

 private:
  void Work(int worker) {
    while (true) {
      DirItem item;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !stack_.empty() || busy_ == 0 || cancelled_.load(); });
        if (stack_.empty() || cancelled_.load()) {
          cv_.notify_all();
          return;
        }
        item = std::move(stack_.back());
        stack_.pop_back();
        ++busy_;
      }
      if (options_.stop.stop_requested()) {
        cancelled_.store(true);
      } else {
        ListDir(worker, item);
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        --busy_;
        if (busy_ == 0 || cancelled_.load()) cv_.notify_all();
      }
    }
  }

  void ListDir(int worker, const DirItem& item) {
    DIR* dir = opendir(item.abs.c_str());
    if (dir == nullptr) return;
    int dfd = dirfd(dir);
    // Names stored back to back; entries point into the buffer by offset.
    std::string names;
    struct Entry {
      size_t off;
      size_t len;
      unsigned char type;
    };
    std::vector<Entry> entries;
    bool has_gitignore = false;
    bool has_dot_ignore = false;
    while (struct dirent* de = readdir(dir)) {
      const char* name = de->d_name;
      if (name[0] == '.') {
        if (name[1] == '\0' || (name[1] == '.' && name[2] == '\0')) continue;
        if (std::strcmp(name, ".gitignore") == 0) has_gitignore = true;
        if (std::strcmp(name, ".ignore") == 0) has_dot_ignore = true;
        if (std::strcmp(name, ".git") == 0) continue;
        if (!options_.include_hidden) continue;
      }
      unsigned char type = de->d_type;
      if (type == DT_UNKNOWN) {
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_LNK;
      }
      if (type != DT_DIR && type != DT_REG) continue;
      size_t len = std::strlen(name);
      entries.push_back({names.size(), len, type});
      names.append(name, len);
    }
    closedir(dir);

    std::shared_ptr<const IgnoreNode> ignore = item.ignore;
    if (options_.respect_ignore) {
      ignore = LoadIgnoreNode(ignore, item.abs, has_gitignore, has_dot_ignore, false);
    }
    const int child_depth = item.depth + 1;
    const bool descend = options_.max_depth < 0 || child_depth < options_.max_depth;
    std::string path = item.abs;
    if (path.size() > 1) path += '/';
    const size_t base_len = path.size();
    const size_t rel_start = options_.start.size() == 1 ? 1 : options_.start.size() + 1;

    std::vector<DirItem> subdirs;
    for (const Entry& e : entries) {
      if (e.type != DT_DIR || !descend) continue;
      path.resize(base_len);
      path.append(names, e.off, e.len);
      if (ignore != nullptr && IsIgnored(ignore.get(), path, true)) continue;
      subdirs.push_back({path, ignore, child_depth});
    }
    if (!subdirs.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& d : subdirs) stack_.push_back(std::move(d));
      cv_.notify_all();
    }
    for (const Entry& e : entries) {
      if (e.type != DT_REG) continue;
      path.resize(base_len);
      path.append(names, e.off, e.len);
      if (ignore != nullptr && IsIgnored(ignore.get(), path, false)) continue;
      WalkEntry we;
      we.abs = path;
      we.rel = std::string_view(path).substr(rel_start);
      we.name = std::string_view(path).substr(base_len);
      on_file_(worker, we);
    }
  }

  const WalkOptions& options_;
  const std::function<void(int, const WalkEntry&)>& on_file_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<DirItem> stack_;  // Guarded by mu_.
  int busy_ = 0;                // Guarded by mu_.
  std::atomic<bool> cancelled_{false};
};

}  // namespace

int WalkThreads(const WalkOptions& options) {
  if (options.threads > 0) return options.threads;
  unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : static_cast<int>(std::min(hc, 16u));
}

Status Walk(const WalkOptions& options,
            const std::function<void(int worker, const WalkEntry& entry)>& on_file) {
  Walker walker(options, on_file);
  return walker.Run();
}

}  // namespace agentloop::tools
