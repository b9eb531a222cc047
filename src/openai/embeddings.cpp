// embeddings.cpp — the embedding endpoints' dialect (see embeddings.h).
#include "baton/openai/embeddings.h"

#include <nlohmann/json.hpp>

#include <cstring>

#include "baton/base/base64.h"
#include "request_fields.h"

namespace baton {

namespace {

using json = nlohmann::json;

Status token_array(const json & a, const std::string & where, std::vector<token_id> & out) {
    for (const auto & t : a) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX)
            return invalid_input(where + ": a token array must hold only token ids (integers 0..2^31-1)");
        out.push_back(token_id(t.get<int64_t>()));
    }
    return {};
}

}  // namespace

Result<openai_embedding_request> openai_embedding_parse(std::string_view body, const prompt_limits & lim) {
    auto parsed = request_fields::body_object(body);
    if (!parsed.ok()) return parsed.status();
    const json & j = parsed.value();
    openai_embedding_request r;
    try {
        const char * key = j.contains("input") && !j["input"].is_null() ? "input" : "content";
        auto it = j.find(key);
        if (it == j.end() || it->is_null()) return invalid_input("input: \"input\" or \"content\" must be provided");
        const json & in = *it;
        size_t bytes = 0;
        if (in.is_string()) {
            r.inputs.emplace_back(in.get<std::string>());
            bytes += in.get_ref<const std::string &>().size();
        } else if (in.is_array()) {
            if (in.empty()) return invalid_input(std::string(key) + ": must not be an empty array");
            if (in.size() > openai_embedding_inputs_max)
                return Status(status_code::too_large,
                              std::string(key) + ": " + std::to_string(in.size()) + " inputs, more than " +
                                  std::to_string(openai_embedding_inputs_max) + " in one request");
            if (in[0].is_number_integer()) {  // one input of token ids
                std::vector<token_id> t;
                BATON_RETURN_IF_ERROR(token_array(in, key, t));
                r.inputs.emplace_back(std::move(t));
            } else {
                for (size_t i = 0; i < in.size(); ++i) {
                    const std::string where = std::string(key) + "[" + std::to_string(i) + "]";
                    if (in[i].is_string()) {
                        r.inputs.emplace_back(in[i].get<std::string>());
                        bytes += in[i].get_ref<const std::string &>().size();
                    } else if (in[i].is_array() && !in[i].empty()) {
                        std::vector<token_id> t;
                        BATON_RETURN_IF_ERROR(token_array(in[i], where, t));
                        r.inputs.emplace_back(std::move(t));
                    } else {
                        return invalid_input(where + ": must be a string or a non-empty array of token ids");
                    }
                }
            }
        } else {
            return invalid_input(std::string(key) + ": must be a string or an array of strings or token ids");
        }
        if (bytes > lim.max_prompt_bytes)
            return Status(status_code::too_large, std::string(key) + ": " + std::to_string(bytes) +
                                                      " bytes of text, more than --max-prompt-mb allows (" +
                                                      std::to_string(lim.max_prompt_bytes) + " bytes)");
        if (auto f = j.find("encoding_format"); f != j.end() && !f->is_null()) {
            if (!f->is_string() || (*f != "float" && *f != "base64"))
                return invalid_input("encoding_format: must be \"float\" or \"base64\"");
            r.base64 = *f == "base64";
        }
        if (auto n = j.find("embd_normalize"); n != j.end() && !n->is_null()) {
            if (!n->is_number_integer() || n->get<int64_t>() < -1 || n->get<int64_t>() > 64)
                return invalid_input("embd_normalize: must be an integer -1..64");
            r.normalize = int32_t(n->get<int64_t>());
        }
        if (auto d = j.find("dimensions"); d != j.end() && !d->is_null())
            return invalid_input("dimensions: not supported (the model's embedding width is fixed)");
        if (auto m = j.find("model"); m != j.end() && m->is_string()) r.model = m->get<std::string>();
    } catch (const std::exception & e) {  // nlohmann throws on invalid UTF-8 in some accessors
        return invalid_input(std::string("body: ") + e.what());
    }
    return r;
}

std::string openai_embedding_json(const openai_embedding_request & r, const std::vector<embedding_result> & results,
                                  bool oai, const std::string & model_name) {
    auto vector_json = [&](const std::vector<float> & v) -> json {
        if (!r.base64) return json(v);
        std::string bytes(v.size() * sizeof(float), '\0');
        std::memcpy(bytes.data(), v.data(), bytes.size());  // little-endian hosts (as OpenAI's float32 bytes)
        return base64_encode(bytes);
    };
    json out;
    if (oai) {
        uint64_t tokens = 0;
        json data = json::array();
        for (size_t i = 0; i < results.size(); ++i) {
            tokens += results[i].n_tokens;
            data.push_back(
                {{"embedding", vector_json(results[i].vectors.at(0))}, {"index", i}, {"object", "embedding"}});
        }
        out = {{"model", r.model.empty() ? model_name : r.model},
               {"object", "list"},
               {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}},
               {"data", std::move(data)}};
    } else {
        out = json::array();
        for (size_t i = 0; i < results.size(); ++i) {
            json vecs = json::array();
            for (const auto & v : results[i].vectors) vecs.push_back(vector_json(v));
            out.push_back({{"index", i}, {"embedding", std::move(vecs)}});
        }
    }
    return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace baton
