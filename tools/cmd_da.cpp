// Placeholder until the da command lands (being written in this session).
#include "cli_common.h"

namespace ft::cli {

void add_da_command(CLI::App& app) { (void)app; }

}  // namespace ft::cli
