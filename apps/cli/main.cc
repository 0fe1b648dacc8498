// agentloop: the command-line front end (docs/cli.md).
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"
#include "interrupt.h"

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  agentloop::cli::Interrupts::Install();
  agentloop::cli::CliContext ctx;
  ctx.env = agentloop::ProcessEnv();
  std::error_code ec;
  ctx.cwd = std::filesystem::current_path(ec);
  if (ec) {
    std::cerr << "agentloop: cannot read the current directory: " << ec.message() << "\n";
    return 1;
  }
  ctx.stdin_tty = isatty(STDIN_FILENO) != 0;
  ctx.stdout_tty = isatty(STDOUT_FILENO) != 0;
  ctx.stderr_tty = isatty(STDERR_FILENO) != 0;
  std::vector<std::string> args(argv + 1, argv + argc);
  int code = agentloop::cli::RunCli(args, ctx, std::cin, std::cout, std::cerr);
  std::cout.flush();
  std::cerr.flush();
  return code;
}
