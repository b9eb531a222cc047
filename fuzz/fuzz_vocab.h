// fuzz_vocab.h — the vocabulary fuzz targets tokenize or sample with: a small mkmodel llama model written to
// a file (the path in env_var when set, else /tmp/baton-NAME-<pid>.gguf, removed once loaded) and loaded
// vocab-only. Exits the fuzzer with a message when it cannot.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "baton/model.h"
#include "baton/testmodel/mkmodel.h"

namespace baton {

inline std::unique_ptr<loaded_model> fuzz_vocab(const std::string & name, const char * env_var,
                                                const std::string & vocab = "spm") {
    const char * env = env_var ? std::getenv(env_var) : nullptr;
    const std::string path = env && *env ? env : "/tmp/baton-" + name + "-" + std::to_string(long(getpid())) + ".gguf";
    mkmodel_params p;
    p.arch = "llama";
    p.n_embd = 32;
    p.n_layer = 1;
    p.vocab = vocab;
    auto die = [&](const char * what, const Status & s) {
        std::fprintf(stderr, "%s: %s %s\n", name.c_str(), what, s.to_string().c_str());
        std::abort();
    };
    if (Status s = mkmodel_ensure(p, path); !s.ok()) die("mkmodel:", s);
    model_load_params lp;
    lp.vocab_only = true;
    auto m = loaded_model::load(path, lp);
    if (!m.ok()) die("loading the vocabulary:", m.status());
    if (!env || !*env) std::remove(path.c_str());  // loaded: the file is no longer needed
    return std::move(m.value());
}

}  // namespace baton
