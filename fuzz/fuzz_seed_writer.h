// fuzz_seed_writer.h — the LLVMFuzzerInitialize of the targets that write their own seeds (scripts/fuzz runs them
// once with BATON_FUZZ_WRITE_SEEDS=DIR before fuzzing): write the seeds into DIR and exit, or go on fuzzing.
#pragma once

#include <cstdlib>
#include <string>

namespace baton {

// fuzz_seed_writer_init: call from LLVMFuzzerInitialize; write_seeds(DIR) writes the target's seed files.
inline int fuzz_seed_writer_init(void (*write_seeds)(const std::string & dir)) {
    if (const char * dir = std::getenv("BATON_FUZZ_WRITE_SEEDS")) {
        write_seeds(dir);
        std::exit(0);
    }
    return 0;
}

}  // namespace baton
