// rerank_prompt.cpp — llama-server's rerank prompt layouts (see rerank_prompt.h).
#include "baton/rerank_prompt.h"

#include <llama.h>

namespace baton {

rerank_layout rerank_layout_of(const loaded_model & model) {
    rerank_layout l;
    if (const char * t = llama_model_chat_template(model.get(), "rerank"); t != nullptr) l.prompt_template = t;
    const llama_vocab * v = model.vocab();
    auto id = [](llama_token t) { return t == LLAMA_TOKEN_NULL ? token_id(-1) : token_id(t); };
    l.bos = id(llama_vocab_bos(v));
    l.sep = id(llama_vocab_sep(v));
    l.eos = id(llama_vocab_eos(v));
    if (l.eos < 0) l.eos = l.sep;
    l.add_bos = llama_vocab_get_add_bos(v);
    l.add_eos = llama_vocab_get_add_eos(v);
    l.add_sep = llama_vocab_get_add_sep(v);
    return l;
}

namespace {

// replace_all replaces every occurrence of from in s, scanning left to right past each replacement.
void replace_all(std::string & s, std::string_view from, std::string_view to) {
    std::string out;
    size_t pos = 0;
    for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
        out.append(s, pos, hit - pos);
        out.append(to);
    }
    out.append(s, pos, std::string::npos);
    s = std::move(out);
}

}  // namespace

std::string rerank_template_fill(std::string_view prompt_template, std::string_view query, std::string_view document) {
    std::string s(prompt_template);
    replace_all(s, "{query}", query);
    replace_all(s, "{document}", document);
    return s;
}

std::vector<token_id> rerank_join(const rerank_layout & l, const std::vector<token_id> & query,
                                  const std::vector<token_id> & document) {
    std::vector<token_id> out;
    out.reserve(query.size() + document.size() + 4);
    auto mark = [&out](bool add, token_id t) {
        if (add && t >= 0) out.push_back(t);
    };
    mark(l.add_bos, l.bos);
    out.insert(out.end(), query.begin(), query.end());
    mark(l.add_eos, l.eos);
    mark(l.add_sep, l.sep);
    out.insert(out.end(), document.begin(), document.end());
    mark(l.add_eos, l.eos);
    return out;
}

Result<std::vector<std::vector<token_id>>> rerank_prompts(const loaded_model & model, const rerank_layout & layout,
                                                          std::string_view query,
                                                          const std::vector<std::string> & documents) {
    std::vector<std::vector<token_id>> out;
    out.reserve(documents.size());
    if (layout.prompt_template) {
        for (const std::string & d : documents) {
            auto t = text_tokenize(model, rerank_template_fill(*layout.prompt_template, query, d), false, true);
            if (!t.ok()) return t.status();
            out.push_back(std::move(t.value()));
        }
        return out;
    }
    auto q = text_tokenize(model, query, false, false);
    if (!q.ok()) return q.status();
    for (const std::string & d : documents) {
        auto t = text_tokenize(model, d, false, false);
        if (!t.ok()) return t.status();
        out.push_back(rerank_join(layout, q.value(), t.value()));
    }
    return out;
}

}  // namespace baton
