// baton.cpp — the `baton` executable: every job is a subcommand (see src/cli/).
#include "baton/cli/cli_main.h"

int main(int argc, char ** argv) { return baton::cli_main(argc, argv); }
