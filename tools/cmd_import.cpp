// Placeholder until the import command lands (being written in this session).
#include "cli_common.h"

namespace ft::cli {

void add_import_command(CLI::App& app) { (void)app; }

}  // namespace ft::cli
