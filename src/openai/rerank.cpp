// rerank.cpp — the rerank endpoints' dialect (see rerank.h).
#include "baton/openai/rerank.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <numeric>

#include "request_fields.h"

namespace baton {

namespace {

using json = nlohmann::json;

constexpr const char * k_documents_error = "\"documents\" must be a non-empty string array";  // llama-server's

// string_array: j as strings, or nullopt when it is not an array of strings.
std::optional<std::vector<std::string>> string_array(const json & j) {
    if (!j.is_array()) return std::nullopt;
    std::vector<std::string> out;
    out.reserve(j.size());
    for (const auto & e : j) {
        if (!e.is_string()) return std::nullopt;
        out.push_back(e.get<std::string>());
    }
    return out;
}

}  // namespace

Result<openai_rerank_request> openai_rerank_parse(std::string_view body, const prompt_limits & lim) {
    auto parsed = request_fields::body_object(body);
    if (!parsed.ok()) return parsed.status();
    const json & j = parsed.value();
    openai_rerank_request r;
    try {
        auto q = j.find("query");
        if (q == j.end()) return invalid_input("\"query\" must be provided");
        if (!q->is_string()) return invalid_input("\"query\" must be a string");
        r.query = q->get<std::string>();
        r.tei = j.contains("texts");
        // As llama-server's json_value: "documents" when it is an array of strings, else "texts".
        std::optional<std::vector<std::string>> docs;
        for (const char * key : {"documents", "texts"})
            if (auto d = j.find(key); !docs && d != j.end() && !d->is_null()) docs = string_array(*d);
        if (!docs || docs->empty()) return invalid_input(k_documents_error);
        if (docs->size() > openai_rerank_documents_max)
            return Status(status_code::too_large, "documents: " + std::to_string(docs->size()) +
                                                      " documents, more than " +
                                                      std::to_string(openai_rerank_documents_max) + " in one request");
        // Every document is tokenized with the query (a rerank template holds both).
        uint64_t bytes = 0;
        for (const auto & d : *docs) bytes += d.size() + r.query.size();
        if (bytes > lim.max_prompt_bytes)
            return Status(status_code::too_large,
                          "documents: " + std::to_string(bytes) +
                              " bytes of text with the query, more than --max-prompt-mb allows (" +
                              std::to_string(lim.max_prompt_bytes) + " bytes)");
        r.documents = std::move(*docs);
        if (auto n = j.find("top_n"); n != j.end() && !n->is_null()) {
            if (!n->is_number_integer()) return invalid_input("top_n: must be an integer >= 0");
            if (n->is_number_unsigned()) r.top_n = n->get<uint64_t>();
            else if (n->get<int64_t>() >= 0) r.top_n = uint64_t(n->get<int64_t>());
            else return invalid_input("top_n: must be an integer >= 0");
        }
        if (auto t = j.find("return_text"); t != j.end() && !t->is_null()) {
            if (!t->is_boolean()) return invalid_input("return_text: must be a boolean");
            r.return_text = t->get<bool>();
        }
        if (auto m = j.find("model"); m != j.end() && m->is_string()) r.model = m->get<std::string>();
    } catch (const std::exception & e) {  // nlohmann throws on invalid UTF-8 in some accessors
        return invalid_input(std::string("body: ") + e.what());
    }
    return r;
}

std::vector<size_t> openai_rerank_order(const std::vector<rerank_score> & scores, std::optional<uint64_t> top_n) {
    std::vector<size_t> order(scores.size());
    std::iota(order.begin(), order.end(), size_t(0));
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a].score > scores[b].score; });
    if (top_n && *top_n < order.size()) order.resize(size_t(*top_n));
    return order;
}

std::string openai_rerank_json(const openai_rerank_request & r, const std::vector<rerank_score> & scores,
                               const std::string & model_name) {
    uint64_t tokens = 0;
    for (const auto & s : scores) tokens += s.n_tokens;
    json results = json::array();
    for (size_t i : openai_rerank_order(scores, r.top_n)) {
        json e = {{"index", i}, {r.tei ? "score" : "relevance_score", double(scores[i].score)}};
        if (r.tei && r.return_text) e["text"] = r.documents[i];
        results.push_back(std::move(e));
    }
    json out = r.tei ? std::move(results)
                     : json{{"model", r.model.empty() ? model_name : r.model},
                            {"object", "list"},
                            {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}},
                            {"results", std::move(results)}};
    return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace baton
