// openai.cpp — OpenAI request bodies <-> typed requests.
#include "baton/server/openai.h"

#include <nlohmann/json.hpp>

#include <climits>

#include "baton/model.h"

namespace baton {

using json = nlohmann::json;

const char * openai_endpoint_name(openai_endpoint e) { return e == openai_endpoint::chat ? "chat" : "completions"; }

namespace {

Status bad(const std::string & m) { return {status_code::invalid_argument, m}; }

// Field readers: absent or null leaves the target unchanged; a wrong type is an error naming the field.
Status get_number(const json & j, const char * key, float & out, double lo, double hi) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return {};
    if (!it->is_number()) return bad(std::string(key) + ": must be a number");
    const double v = it->get<double>();
    if (!(v >= lo && v <= hi)) return bad(std::string(key) + ": " + it->dump() + " is not in " + std::to_string(lo) + ".." + std::to_string(hi));
    out = float(v);
    return {};
}

template <typename T>
Status get_int(const json & j, const char * key, T & out, int64_t lo, int64_t hi) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return {};
    if (!it->is_number_integer()) return bad(std::string(key) + ": must be an integer");
    const int64_t v = it->is_number_unsigned() ? int64_t(std::min<uint64_t>(it->get<uint64_t>(), uint64_t(INT64_MAX))) : it->get<int64_t>();
    if (v < lo || v > hi) return bad(std::string(key) + ": " + it->dump() + " is not in " + std::to_string(lo) + ".." + std::to_string(hi));
    out = T(v);
    return {};
}

Status get_bool(const json & j, const char * key, bool & out) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return {};
    if (!it->is_boolean()) return bad(std::string(key) + ": must be true or false");
    out = it->get<bool>();
    return {};
}

Status parse_stop(const json & j, std::vector<std::string> & out) {
    auto it = j.find("stop");
    if (it == j.end() || it->is_null()) return {};
    if (it->is_string()) {
        out = {it->get<std::string>()};
    } else if (it->is_array()) {
        if (it->size() > 16) return bad("stop: at most 16 stop strings");
        for (const auto & s : *it) {
            if (!s.is_string()) return bad("stop: must be a string or an array of strings");
            out.push_back(s.get<std::string>());
        }
    } else {
        return bad("stop: must be a string or an array of strings");
    }
    for (const auto & s : out)
        if (s.empty()) return bad("stop: stop strings must not be empty");
    return {};
}

Status parse_prompt(const json & j, openai_request & r) {
    auto it = j.find("prompt");
    if (it == j.end() || it->is_null()) return bad("prompt: is required");
    if (it->is_string()) {
        r.input = openai_prompt_text{it->get<std::string>()};
        return {};
    }
    if (it->is_array() && it->size() == 1 && (*it)[0].is_string()) {
        r.input = openai_prompt_text{(*it)[0].get<std::string>()};
        return {};
    }
    if (it->is_array() && !it->empty() && (*it)[0].is_number_integer()) {
        openai_prompt_tokens p;
        for (const auto & t : *it) {
            if (!t.is_number_integer()) return bad("prompt: a token array must hold only integers");
            const int64_t v = t.get<int64_t>();
            if (v < 0 || v > INT32_MAX) return bad("prompt: token " + t.dump() + " is out of range");
            p.tokens.push_back(token_id(v));
        }
        r.input = std::move(p);
        return {};
    }
    return bad("prompt: must be a string or an array of token ids");
}

Status parse_messages(const json & j, openai_request & r) {
    auto it = j.find("messages");
    if (it == j.end() || !it->is_array() || it->empty()) return bad("messages: must be a non-empty array");
    openai_chat chat;
    for (size_t i = 0; i < it->size(); ++i) {
        const json & m = (*it)[i];
        const std::string where = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) return bad(where + ": must be an object");
        auto role = m.find("role");
        if (role == m.end() || !role->is_string()) return bad(where + ".role: must be a string");
        chat_message cm;
        cm.role = role->get<std::string>();
        auto content = m.find("content");
        if (content == m.end() || content->is_null()) {
            cm.content = "";
        } else if (content->is_string()) {
            cm.content = content->get<std::string>();
        } else if (content->is_array()) {
            for (const auto & part : *content) {
                if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
                    return bad(where + ".content: only text parts are supported");
                cm.content += part["text"].get<std::string>();
            }
        } else {
            return bad(where + ".content: must be a string or an array of text parts");
        }
        chat.messages.push_back(std::move(cm));
    }
    r.input = std::move(chat);
    return {};
}

Status parse_fields(const json & j, openai_endpoint endpoint, openai_request & r) {
    if (auto it = j.find("model"); it != j.end() && it->is_string()) r.model = it->get<std::string>();
    if (endpoint == openai_endpoint::chat) BATON_RETURN_IF_ERROR(parse_messages(j, r));
    else BATON_RETURN_IF_ERROR(parse_prompt(j, r));
    BATON_RETURN_IF_ERROR(get_int(j, "max_tokens", r.max_tokens, -1, INT32_MAX));
    BATON_RETURN_IF_ERROR(get_int(j, "max_completion_tokens", r.max_tokens, -1, INT32_MAX));
    BATON_RETURN_IF_ERROR(get_int(j, "n_predict", r.max_tokens, -1, INT32_MAX));
    int32_t n = 1;
    BATON_RETURN_IF_ERROR(get_int(j, "n", n, 1, 1));
    sampling_params & s = r.sampling;
    BATON_RETURN_IF_ERROR(get_number(j, "temperature", s.temperature, 0, 100));
    BATON_RETURN_IF_ERROR(get_number(j, "top_p", s.top_p, 0, 1));
    BATON_RETURN_IF_ERROR(get_int(j, "top_k", s.top_k, 0, INT32_MAX));
    BATON_RETURN_IF_ERROR(get_number(j, "min_p", s.min_p, 0, 1));
    BATON_RETURN_IF_ERROR(get_number(j, "repeat_penalty", s.repeat_penalty, 0, 10));
    BATON_RETURN_IF_ERROR(get_int(j, "repeat_last_n", s.repeat_last_n, 0, 4096));
    BATON_RETURN_IF_ERROR(get_number(j, "frequency_penalty", s.frequency_penalty, -2, 2));
    BATON_RETURN_IF_ERROR(get_number(j, "presence_penalty", s.presence_penalty, -2, 2));
    int64_t seed = s.seed;  // -1, as llama-server takes it: a random seed (LLAMA_DEFAULT_SEED)
    BATON_RETURN_IF_ERROR(get_int(j, "seed", seed, -1, UINT32_MAX));
    s.seed = seed < 0 ? 0xFFFFFFFFu : uint32_t(seed);
    BATON_RETURN_IF_ERROR(sampling_check(s));
    BATON_RETURN_IF_ERROR(parse_stop(j, r.stop));
    BATON_RETURN_IF_ERROR(get_bool(j, "stream", r.stream));
    BATON_RETURN_IF_ERROR(get_bool(j, "ignore_eos", r.ignore_eos));
    if (auto it = j.find("stream_options"); it != j.end() && !it->is_null()) {
        if (!it->is_object()) return bad("stream_options: must be an object");
        BATON_RETURN_IF_ERROR(get_bool(*it, "include_usage", r.include_usage));
    }
    return {};
}

}  // namespace

openai_endpoint openai_request_endpoint(const openai_request & r) {
    return std::holds_alternative<openai_chat>(r.input) ? openai_endpoint::chat : openai_endpoint::completions;
}

Result<openai_request> openai_parse(std::string_view body, openai_endpoint endpoint, bool allow_endpoint_field) {
    json j = json::parse(body.begin(), body.end(), nullptr, false);
    if (j.is_discarded()) return bad("body: malformed JSON");
    if (!j.is_object()) return bad("body: must be a JSON object");
    openai_request r;
    if (auto it = j.find("endpoint"); it != j.end() && allow_endpoint_field) {
        if (!it->is_string()) return bad("endpoint: must be \"completions\" or \"chat\"");
        const std::string e = it->get<std::string>();
        if (e == "chat") endpoint = openai_endpoint::chat;
        else if (e == "completions") endpoint = openai_endpoint::completions;
        else return bad("endpoint: \"" + e + "\" is not \"completions\" or \"chat\"");
    }
    try {
        BATON_RETURN_IF_ERROR(parse_fields(j, endpoint, r));
    } catch (const std::exception & e) {  // nlohmann throws on invalid UTF-8 in some accessors
        return bad(std::string("body: ") + e.what());
    }
    return r;
}

std::string openai_request_json(const openai_request & r) {
    json j;
    j["endpoint"] = openai_endpoint_name(openai_request_endpoint(r));
    j["model"] = r.model;
    if (const auto * chat = std::get_if<openai_chat>(&r.input)) {
        json msgs = json::array();
        for (const auto & m : chat->messages) msgs.push_back({{"role", m.role}, {"content", m.content}});
        j["messages"] = msgs;
    } else if (const auto * toks = std::get_if<openai_prompt_tokens>(&r.input)) {
        j["prompt"] = toks->tokens;
    } else {
        j["prompt"] = std::get<openai_prompt_text>(r.input).text;
    }
    j["max_tokens"] = r.max_tokens;
    const sampling_params & s = r.sampling;
    j["temperature"] = s.temperature;
    j["top_p"] = s.top_p;
    j["top_k"] = s.top_k;
    j["min_p"] = s.min_p;
    j["repeat_penalty"] = s.repeat_penalty;
    j["repeat_last_n"] = s.repeat_last_n;
    j["frequency_penalty"] = s.frequency_penalty;
    j["presence_penalty"] = s.presence_penalty;
    j["seed"] = s.seed;
    j["stop"] = r.stop;
    j["stream"] = r.stream;
    j["stream_options"] = {{"include_usage", r.include_usage}};
    j["ignore_eos"] = r.ignore_eos;
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<gen_request> openai_to_gen(const openai_request & r, const loaded_model & model) {
    gen_request g;
    g.n_predict = r.max_tokens < 0 ? INT32_MAX : r.max_tokens;
    g.sampling = r.sampling;
    g.stop = r.stop;
    g.ignore_eos = r.ignore_eos;
    if (const auto * chat = std::get_if<openai_chat>(&r.input)) {
        auto text = text_apply_chat_template(model.get(), chat->messages);
        if (!text.ok()) return text.status();
        auto toks = text_tokenize(model.vocab(), text.value(), true, true);
        if (!toks.ok()) return toks.status();
        g.prompt = std::move(toks.value());
    } else if (const auto * ids = std::get_if<openai_prompt_tokens>(&r.input)) {
        g.prompt = ids->tokens;
    } else {
        auto toks = text_tokenize(model.vocab(), std::get<openai_prompt_text>(r.input).text, true, false);
        if (!toks.ok()) return toks.status();
        g.prompt = std::move(toks.value());
    }
    if (g.prompt.empty()) return bad("prompt: is empty after tokenization");
    return g;
}

}  // namespace baton
