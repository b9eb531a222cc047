// pd_request.cpp — the embedded request's encoder and its total decoder (see pd_request.h and
// docs/state-blob.md, "Section 7: the embedded request").
#include "baton/pd/pd_request.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>

#include <nlohmann/json.hpp>

#include "baton/blob.h"
#include "baton/sampling.h"

namespace baton {

namespace {

using ordered_json = nlohmann::ordered_json;
using json = nlohmann::json;

// The field tables: every key an object holds, in the order the encoder writes them (docs/state-blob.md).
constexpr std::initializer_list<const char *> k_top = {
    "version",  "endpoint",        "model", "input",  "max_tokens",    "n",          "n_probs",
    "sampling", "logit_bias_text", "stop",  "stream", "include_usage", "ignore_eos", "return_tokens"};
// Version 4 adds "return_progress" at the end.
constexpr std::initializer_list<const char *> k_top_v4 = {
    "version", "endpoint",      "model",      "input",           "max_tokens",
    "n",       "n_probs",       "sampling",   "logit_bias_text", "stop",
    "stream",  "include_usage", "ignore_eos", "return_tokens",   "return_progress"};
constexpr std::initializer_list<const char *> k_sampling = {
    "temperature",      "top_k", "top_p",      "min_p",  "repeat_penalty", "repeat_last_n", "frequency_penalty",
    "presence_penalty", "seed",  "logit_bias", "grammar"};
constexpr std::initializer_list<const char *> k_grammar = {"gbnf", "lazy", "trigger_patterns"};
constexpr std::initializer_list<const char *> k_reasoning = {"format", "open", "close", "starts_open"};
constexpr std::initializer_list<const char *> k_input_text = {"kind", "text"};
constexpr std::initializer_list<const char *> k_input_tokens = {"kind", "tokens"};
constexpr std::initializer_list<const char *> k_input_chat = {"kind", "tokens", "reasoning", "tool_format"};
constexpr std::initializer_list<const char *> k_input_chat_v2 = {"kind", "tokens", "reasoning", "tool_format",
                                                                 "prefill"};

Status corrupt(const std::string & field, const std::string & what) {
    return {status_code::corrupt, "embedded request: " + field + ": " + what};
}

// bias_json: a bias as JSON (-infinity, "never sample", as false: JSON has no infinity).
ordered_json bias_json(float b) { return b == -INFINITY ? ordered_json(false) : ordered_json(b); }

ordered_json reasoning_json(const openai_reasoning & x) {
    ordered_json j;
    j["format"] = reasoning_format_name(x.format);
    j["open"] = x.tags.open;
    j["close"] = x.tags.close;
    j["starts_open"] = x.starts_open;
    return j;
}

// ---- decoding ----

// exactly: o is an object holding exactly the keys of table.
Status exactly(const json & o, const std::string & field, std::initializer_list<const char *> table) {
    if (!o.is_object()) return corrupt(field, "must be an object");
    for (const char * k : table)
        if (!o.contains(k)) return corrupt(field.empty() ? k : field + "." + k, "is missing");
    if (o.size() != table.size())
        for (const auto & [k, v] : o.items()) {
            bool known = false;
            for (const char * t : table) known = known || k == t;
            if (!known) return corrupt(field.empty() ? k : field + "." + k, "is not a field of this version");
        }
    return {};
}

std::string path(const std::string & parent, const char * key) { return parent.empty() ? key : parent + "." + key; }

Status get_string(const json & o, const std::string & parent, const char * key, std::string & out) {
    const json & v = o.at(key);
    if (!v.is_string()) return corrupt(path(parent, key), "must be a string");
    out = v.get<std::string>();
    return {};
}

Status get_bool(const json & o, const std::string & parent, const char * key, bool & out) {
    const json & v = o.at(key);
    if (!v.is_boolean()) return corrupt(path(parent, key), "must be true or false");
    out = v.get<bool>();
    return {};
}

template <class Int>
Status get_int(const json & o, const std::string & parent, const char * key, Int & out, int64_t lo, int64_t hi) {
    const json & v = o.at(key);
    if (!v.is_number_integer()) return corrupt(path(parent, key), "must be an integer");
    const int64_t x =
        v.is_number_unsigned() ? int64_t(std::min<uint64_t>(v.get<uint64_t>(), uint64_t(INT64_MAX))) : v.get<int64_t>();
    if (x < lo || x > hi)
        return corrupt(path(parent, key),
                       std::to_string(x) + " is not in " + std::to_string(lo) + ".." + std::to_string(hi));
    out = Int(x);
    return {};
}

Status get_float(const json & o, const std::string & parent, const char * key, float & out) {
    const json & v = o.at(key);
    if (!v.is_number()) return corrupt(path(parent, key), "must be a number");
    const double d = v.get<double>();
    if (!std::isfinite(d) || std::fabs(d) > double(std::numeric_limits<float>::max()))
        return corrupt(path(parent, key), "is not a finite float");
    out = float(d);
    return {};
}

Status get_tokens(const json & v, const std::string & field, std::vector<token_id> & out) {
    if (!v.is_array() || v.empty()) return corrupt(field, "must be a non-empty array of token ids");
    out.reserve(v.size());
    for (const auto & t : v) {
        if (!t.is_number_integer()) return corrupt(field, "must hold only integers");
        const int64_t x = t.is_number_unsigned() ? int64_t(std::min<uint64_t>(t.get<uint64_t>(), uint64_t(INT64_MAX)))
                                                 : t.get<int64_t>();
        // (an image's media tokens, blob.h, are negative: a rendered chat with images holds them)
        if ((x < 0 || x > INT32_MAX) && !(x >= INT32_MIN && media_token_is(int32_t(x))))
            return corrupt(field, "token " + std::to_string(x) + " is out of range");
        out.push_back(token_id(x));
    }
    return {};
}

Status get_bias(const json & v, const std::string & field, float & out) {
    if (v.is_boolean() && !v.get<bool>()) {
        out = -INFINITY;
        return {};
    }
    if (!v.is_number()) return corrupt(field, "a bias must be a number or false");
    const double d = v.get<double>();
    if (!(d >= -100 && d <= 100)) return corrupt(field, "a bias must be in -100..100 or false");
    out = float(d);
    return {};
}

Status decode_reasoning(const json & j, openai_reasoning & x) {
    BATON_RETURN_IF_ERROR(exactly(j, "input.reasoning", k_reasoning));
    std::string name;
    BATON_RETURN_IF_ERROR(get_string(j, "input.reasoning", "format", name));
    auto f = reasoning_format_parse(name);
    // "auto" is a request's word for deepseek; an embedded request names the format it resolved to.
    if (!f.ok() || name == "auto")
        return corrupt("input.reasoning.format", "\"" + name.substr(0, 32) + "\" is not a reasoning format");
    x.format = f.value();
    for (auto [key, out] : {std::pair{"open", &x.tags.open}, std::pair{"close", &x.tags.close}}) {
        BATON_RETURN_IF_ERROR(get_string(j, "input.reasoning", key, *out));
        if (out->empty() || out->size() > 64) return corrupt(path("input.reasoning", key), "must be 1..64 bytes");
        for (unsigned char ch : *out)
            if (ch <= ' ' || ch >= 0x7f)
                return corrupt(path("input.reasoning", key), "must be printable ASCII without blanks");
    }
    return get_bool(j, "input.reasoning", "starts_open", x.starts_open);
}

Status decode_input(const json & j, openai_endpoint endpoint, const prompt_limits & lim, int64_t version,
                    openai_request & r) {
    if (!j.is_object() || !j.contains("kind") || !j.at("kind").is_string())
        return corrupt("input.kind", "must be \"text\", \"tokens\" or \"chat_rendered\"");
    const std::string kind = j.at("kind").get<std::string>();
    const bool chat = openai_endpoint_is_chat(endpoint);
    if (kind == "text" && !chat) {
        BATON_RETURN_IF_ERROR(exactly(j, "input", k_input_text));
        openai_prompt_text t;
        BATON_RETURN_IF_ERROR(get_string(j, "input", "text", t.text));
        if (t.text.size() > lim.max_prompt_bytes)
            return Status(status_code::incompatible, "embedded request: input.text: " + std::to_string(t.text.size()) +
                                                         " bytes, more than this node's --max-prompt-mb allows");
        r.input = std::move(t);
        return {};
    }
    if (kind == "tokens" && !chat) {
        BATON_RETURN_IF_ERROR(exactly(j, "input", k_input_tokens));
        openai_prompt_tokens t;
        BATON_RETURN_IF_ERROR(get_tokens(j.at("tokens"), "input.tokens", t.tokens));
        r.input = std::move(t);
        return {};
    }
    if (kind == "chat_rendered" && chat) {
        BATON_RETURN_IF_ERROR(exactly(j, "input", version >= 2 ? k_input_chat_v2 : k_input_chat));
        openai_chat_rendered c;
        if (version >= 2) {
            BATON_RETURN_IF_ERROR(get_string(j, "input", "prefill", c.prefill));
            if (c.prefill.empty() && version == 2)
                return corrupt("input.prefill", "is empty (version 1 carries no prefill)");
            if (c.prefill.size() > lim.max_prompt_bytes)
                return Status(status_code::incompatible, "embedded request: input.prefill: more than this node's "
                                                         "--max-prompt-mb allows");
        }
        BATON_RETURN_IF_ERROR(get_tokens(j.at("tokens"), "input.tokens", c.tokens));
        BATON_RETURN_IF_ERROR(decode_reasoning(j.at("reasoning"), c.reasoning));
        const json & tf = j.at("tool_format");
        if (!tf.is_null()) {
            bool found = false;
            for (tool_call_format f : {tool_call_format::generic, tool_call_format::hermes, tool_call_format::llama3,
                                       tool_call_format::mistral})
                if (tf.is_string() && tf.get_ref<const std::string &>() == tool_call_format_name(f))
                    c.tools = f, found = true;
            if (!found) return corrupt("input.tool_format", "must be null or a tool-call format");
        }
        r.input = std::move(c);
        return {};
    }
    return corrupt("input.kind", "\"" + kind.substr(0, 32) + "\" is not an input of the " +
                                     openai_endpoint_name(endpoint) + " endpoint");
}

Status decode_grammar(const json & j, sampling_grammar & g) {
    BATON_RETURN_IF_ERROR(exactly(j, "sampling.grammar", k_grammar));
    BATON_RETURN_IF_ERROR(get_string(j, "sampling.grammar", "gbnf", g.gbnf));
    BATON_RETURN_IF_ERROR(get_bool(j, "sampling.grammar", "lazy", g.lazy));
    const json & tp = j.at("trigger_patterns");
    if (!tp.is_array() || tp.size() > 16)
        return corrupt("sampling.grammar.trigger_patterns", "must be an array of at most 16 strings");
    for (const auto & p : tp) {
        if (!p.is_string() || p.get_ref<const std::string &>().empty() ||
            p.get_ref<const std::string &>().size() > 4096)
            return corrupt("sampling.grammar.trigger_patterns",
                           "each must be a non-empty string of at most 4096 bytes");
        g.trigger_patterns.push_back(p.get<std::string>());
    }
    return {};
}

Status decode_sampling(const json & j, const grammar_limits & bounds, sampling_params & s) {
    BATON_RETURN_IF_ERROR(exactly(j, "sampling", k_sampling));
    const std::string p = "sampling";
    BATON_RETURN_IF_ERROR(get_float(j, p, "temperature", s.temperature));
    BATON_RETURN_IF_ERROR(get_int(j, p, "top_k", s.top_k, 0, INT32_MAX));
    BATON_RETURN_IF_ERROR(get_float(j, p, "top_p", s.top_p));
    BATON_RETURN_IF_ERROR(get_float(j, p, "min_p", s.min_p));
    BATON_RETURN_IF_ERROR(get_float(j, p, "repeat_penalty", s.repeat_penalty));
    BATON_RETURN_IF_ERROR(get_int(j, p, "repeat_last_n", s.repeat_last_n, 0, 4096));
    BATON_RETURN_IF_ERROR(get_float(j, p, "frequency_penalty", s.frequency_penalty));
    BATON_RETURN_IF_ERROR(get_float(j, p, "presence_penalty", s.presence_penalty));
    BATON_RETURN_IF_ERROR(get_int(j, p, "seed", s.seed, 0, UINT32_MAX));
    const json & lb = j.at("logit_bias");
    if (!lb.is_array() || lb.size() > 1024)
        return corrupt("sampling.logit_bias", "must be an array of at most 1024 [id, bias] pairs");
    for (const auto & e : lb) {
        if (!e.is_array() || e.size() != 2 || !e[0].is_number_integer())
            return corrupt("sampling.logit_bias", "each entry must be [token id, bias]");
        const int64_t id = e[0].is_number_unsigned()
                               ? int64_t(std::min<uint64_t>(e[0].get<uint64_t>(), uint64_t(INT64_MAX)))
                               : e[0].get<int64_t>();
        if (id < 0 || id > INT32_MAX)
            return corrupt("sampling.logit_bias", "token " + std::to_string(id) + " is out of range");
        float b = 0;
        BATON_RETURN_IF_ERROR(get_bias(e[1], "sampling.logit_bias", b));
        s.logit_bias.emplace_back(int32_t(id), b);
    }
    BATON_RETURN_IF_ERROR(decode_grammar(j.at("grammar"), s.grammar));
    s.grammar_bounds = bounds;
    // The engine's own ranges (and the grammar's structure against this node's --grammar-max-*).
    // A refusal here is a blob this node cannot take (its limits may be lower than the prefill node's).
    Status st = sampling_check(s);
    if (!st.ok()) return Status(status_code::incompatible, "embedded request: sampling." + st.message());
    return {};
}

Result<openai_request> decode(const json & j, const pd_request_limits & lim) {
    if (!j.is_object()) return corrupt("body", "must be a JSON object");
    // The version first: a later version may have other fields.
    auto v = j.find("version");
    if (v == j.end() || !v->is_number_integer())
        return Status(status_code::incompatible, "embedded request: no version (a blob made by an older Baton?)");
    const int64_t version = v->get<int64_t>();
    if (version < pd_request_version_min || version > pd_request_version)
        return Status(status_code::incompatible, "embedded request: version " + v->dump() + ", this node reads " +
                                                     std::to_string(pd_request_version_min) + ".." +
                                                     std::to_string(pd_request_version));
    BATON_RETURN_IF_ERROR(exactly(j, "", version >= 4 ? k_top_v4 : k_top));
    openai_request r;
    std::string endpoint;
    BATON_RETURN_IF_ERROR(get_string(j, "", "endpoint", endpoint));
    auto ep = openai_endpoint_parse(endpoint);
    if (!ep.ok()) return corrupt("endpoint", ep.status().message());
    if (ep.value() == openai_endpoint::infill)  // a prefill node embeds /infill as the /completion it became
        return corrupt("endpoint", "infill is never embedded (its prompt is built before the blob)");
    r.endpoint = ep.value();
    if (r.endpoint == openai_endpoint::messages && version < 3)
        return corrupt("endpoint", "messages is embedded in version 3 and later");
    BATON_RETURN_IF_ERROR(get_string(j, "", "model", r.model));
    BATON_RETURN_IF_ERROR(decode_input(j.at("input"), r.endpoint, lim.prompt, version, r));
    BATON_RETURN_IF_ERROR(get_int(j, "", "max_tokens", r.max_tokens, -1, INT32_MAX));
    BATON_RETURN_IF_ERROR(get_int(j, "", "n", r.n, 1, INT32_MAX));
    if (r.n > std::max(lim.n_max, 1))
        return Status(status_code::incompatible,
                      "embedded request: n: " + std::to_string(r.n) + " choices, more than this node's --n-max allows");
    if (r.n > 1 && r.endpoint == openai_endpoint::completion) return corrupt("n", "/completion returns one result");
    BATON_RETURN_IF_ERROR(get_int(j, "", "n_probs", r.n_probs, -1, gen_top_probs_max));
    BATON_RETURN_IF_ERROR(decode_sampling(j.at("sampling"), lim.grammar, r.sampling));
    const json & lbt = j.at("logit_bias_text");
    if (!lbt.is_array() || lbt.size() > openai_logit_bias_texts_max)
        return corrupt("logit_bias_text", "must be an array of at most 64 [text, bias] pairs");
    for (const auto & e : lbt) {
        if (!e.is_array() || e.size() != 2 || !e[0].is_string() || e[0].get_ref<const std::string &>().empty() ||
            e[0].get_ref<const std::string &>().size() > openai_logit_bias_text_bytes_max)
            return corrupt("logit_bias_text", "each entry must be [text of 1..256 bytes, bias]");
        float b = 0;
        BATON_RETURN_IF_ERROR(get_bias(e[1], "logit_bias_text", b));
        r.logit_bias_text.emplace_back(e[0].get<std::string>(), b);
    }
    const json & stop = j.at("stop");
    if (!stop.is_array() || stop.size() > openai_stop_max)
        return corrupt("stop", "must be an array of at most 16 strings");
    for (const auto & s : stop) {
        if (!s.is_string() || s.get_ref<const std::string &>().empty())
            return corrupt("stop", "each must be a non-empty string");
        r.stop.push_back(s.get<std::string>());
    }
    BATON_RETURN_IF_ERROR(get_bool(j, "", "stream", r.stream));
    BATON_RETURN_IF_ERROR(get_bool(j, "", "include_usage", r.include_usage));
    BATON_RETURN_IF_ERROR(get_bool(j, "", "ignore_eos", r.ignore_eos));
    BATON_RETURN_IF_ERROR(get_bool(j, "", "return_tokens", r.return_tokens));
    if (version >= 4) {
        BATON_RETURN_IF_ERROR(get_bool(j, "", "return_progress", r.return_progress));
        if (!r.return_progress) return corrupt("return_progress", "is false (version 3 and earlier carry none)");
    }
    return r;
}

}  // namespace

Result<std::string> pd_request_encode(const openai_request & r) {
    if (std::holds_alternative<openai_prompt_mixed>(r.input))
        return Status(status_code::invalid_argument,
                      "embedded request: a prompt of texts and ids is embedded as its tokens (tokenize it first)");
    if (std::holds_alternative<openai_prompt_media>(r.input))
        return Status(status_code::invalid_argument,
                      "embedded request: a prompt with images is embedded as its tokens (encode it first)");
    if (std::holds_alternative<openai_infill>(r.input) || r.endpoint == openai_endpoint::infill)
        return Status(
            status_code::invalid_argument,
            "embedded request: /infill is embedded as the /completion of its prompt's tokens (build it first)");
    ordered_json j;
    const auto * chat_in = std::get_if<openai_chat_rendered>(&r.input);
    // The lowest version that carries the request, so older nodes read every request they can serve.
    const bool v4 = r.return_progress;
    const bool v3 = v4 || r.endpoint == openai_endpoint::messages;
    const bool v2 = v3 || (chat_in && !chat_in->prefill.empty());
    j["version"] = v4 ? 4 : v3 ? 3 : v2 ? 2 : 1;
    j["endpoint"] = openai_endpoint_name(r.endpoint);
    j["model"] = r.model;
    ordered_json in;
    if (const auto * t = std::get_if<openai_prompt_text>(&r.input)) {
        in["kind"] = "text";
        in["text"] = t->text;
    } else if (const auto * toks = std::get_if<openai_prompt_tokens>(&r.input)) {
        in["kind"] = "tokens";
        in["tokens"] = toks->tokens;
    } else if (const auto * c = std::get_if<openai_chat_rendered>(&r.input)) {
        in["kind"] = "chat_rendered";
        in["tokens"] = c->tokens;
        in["reasoning"] = reasoning_json(c->reasoning);
        in["tool_format"] = c->tools ? ordered_json(tool_call_format_name(*c->tools)) : ordered_json(nullptr);
        if (v2) in["prefill"] = c->prefill;
    } else {
        return Status(status_code::invalid_argument, "embedded request: a chat is embedded rendered (render it first)");
    }
    j["input"] = std::move(in);
    j["max_tokens"] = r.max_tokens;
    j["n"] = r.n;
    j["n_probs"] = r.n_probs;
    const sampling_params & s = r.sampling;
    ordered_json sj;
    sj["temperature"] = s.temperature;
    sj["top_k"] = s.top_k;
    sj["top_p"] = s.top_p;
    sj["min_p"] = s.min_p;
    sj["repeat_penalty"] = s.repeat_penalty;
    sj["repeat_last_n"] = s.repeat_last_n;
    sj["frequency_penalty"] = s.frequency_penalty;
    sj["presence_penalty"] = s.presence_penalty;
    sj["seed"] = s.seed;
    ordered_json bias = ordered_json::array();
    for (const auto & [token, b] : s.logit_bias) bias.push_back({token, bias_json(b)});
    sj["logit_bias"] = std::move(bias);
    sj["grammar"] = {
        {"gbnf", s.grammar.gbnf}, {"lazy", s.grammar.lazy}, {"trigger_patterns", s.grammar.trigger_patterns}};
    j["sampling"] = std::move(sj);
    ordered_json texts = ordered_json::array();
    for (const auto & [text, b] : r.logit_bias_text) texts.push_back({text, bias_json(b)});
    j["logit_bias_text"] = std::move(texts);
    j["stop"] = r.stop;
    j["stream"] = r.stream;
    j["include_usage"] = r.include_usage;
    j["ignore_eos"] = r.ignore_eos;
    j["return_tokens"] = r.return_tokens;
    if (v4) j["return_progress"] = true;
    // Every text came through a JSON parser (valid UTF-8); replace only keeps dump from throwing.
    return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

Result<openai_request> pd_request_decode(std::string_view text, const pd_request_limits & limits) {
    json j = json::parse(text.begin(), text.end(), nullptr, false);
    if (j.is_discarded()) return corrupt("body", "malformed JSON");
    try {
        return decode(j, limits);
    } catch (const std::exception & e) {  // nlohmann throws on invalid UTF-8 in some accessors
        return corrupt("body", e.what());
    }
}

}  // namespace baton
