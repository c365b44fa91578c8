// Runs a shell command from a test and keeps what it printed: the end-to-end tests of the
// kite binary's subcommands share it.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace kite::test_support {

struct CommandResult {
  int exit_code;       // -1 when the command did not exit normally (or could not start)
  std::string output;  // its stdout; stderr too where the command redirects it (2>&1)
};

inline CommandResult run_command(const std::string& command) {
  CommandResult r{-1, ""};
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace kite::test_support
