// Running the fusetrack command line from tests.
#pragma once
#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <utility>

#include "support/paths.h"

namespace ft::test {

/// Runs a shell command; returns its exit status (-1 if it did not exit) and its output
/// (stdout and stderr).
inline std::pair<int, std::string> run_command(const std::string& cmd) {
  std::string out;
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  while (f && fgets(buf, sizeof buf, f)) out += buf;
  const int status = f ? pclose(f) : -1;
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

/// The fusetrack binary of this build.
inline std::string fusetrack_binary() { return build_path("bin/fusetrack"); }

}  // namespace ft::test
