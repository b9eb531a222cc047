// openai.cpp — OpenAI request bodies <-> typed requests.
#include "baton/openai/openai.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <random>

#include "anthropic_request.h"
#include "baton/openai/chat_template.h"
#include "baton/openai/json_schema_grammar.h"
#include "image_input.h"
#include "request_fields.h"

namespace baton {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

const char * openai_endpoint_name(openai_endpoint e) {
    switch (e) {
        case openai_endpoint::chat: return "chat";
        case openai_endpoint::completion: return "completion";
        case openai_endpoint::infill: return "infill";
        case openai_endpoint::messages: return "messages";
        case openai_endpoint::completions: break;
    }
    return "completions";
}

Result<openai_endpoint> openai_endpoint_parse(std::string_view name) {
    for (openai_endpoint e : {openai_endpoint::completions, openai_endpoint::chat, openai_endpoint::completion,
                              openai_endpoint::infill, openai_endpoint::messages})
        if (name == openai_endpoint_name(e)) return e;
    return Status(status_code::invalid_argument, "endpoint: \"" + std::string(name.substr(0, 32)) +
                                                     "\" is not completions, chat, completion, infill or messages");
}

const std::string & openai_media_marker() {
    static const std::string marker = [] {
        std::random_device rd;
        char hex[17];
        std::snprintf(hex, sizeof hex, "%08x%08x", rd(), rd());
        return std::string("<__image_") + hex + "__>";
    }();
    return marker;
}

namespace {

using namespace request_fields;

// chat_image_part: an "image_url" content part, {"type":"image_url","image_url":{"url":"data:...","detail":...}}
// (or the url as a string, as some clients send it); "detail" is accepted and ignored (docs/api.md).
Result<image_source> chat_image_part(const json & part, const std::string & where) {
    auto iu = part.find("image_url");
    if (iu == part.end()) return invalid_input(where + ".image_url: is missing");
    if (iu->is_string()) return image_from_url(iu->get<std::string>(), where + ".image_url");
    if (!iu->is_object()) return invalid_input(where + ".image_url: must be an object with a url");
    auto url = iu->find("url");
    if (url == iu->end() || !url->is_string()) return invalid_input(where + ".image_url.url: must be a string");
    if (auto d = iu->find("detail"); d != iu->end() && !d->is_null() && !d->is_string())
        return invalid_input(where + ".image_url.detail: must be a string");
    return image_from_url(url->get<std::string>(), where + ".image_url.url");
}

// parse_logit_bias reads OpenAI's {"TOKEN_ID": bias} or llama-server's [[TOKEN_ID, bias | false], ...]
// (false: never sample it). Text instead of an id — an array entry's string, or an object key that is not
// a number, as llama-server takes them — goes to texts (openai_to_gen tokenizes it: every token gets the bias).
Status parse_logit_bias(const json & j, std::vector<std::pair<int32_t, float>> & out,
                        std::vector<std::pair<std::string, float>> & texts) {
    auto it = j.find("logit_bias");
    if (it == j.end() || it->is_null()) return {};
    // key_form: an object's key (a string that is an id when it is a decimal number, optionally signed).
    auto add = [&](const json & id, const json & bias, const std::string & where, bool key_form) -> Status {
        float b = 0;
        if (bias.is_boolean() && !bias.get<bool>()) b = -INFINITY;
        else if (bias.is_number()) b = float(bias.get<double>());
        else return invalid_input(where + ": the bias must be a number, or false (never)");
        if (bias.is_number() && !(bias.get<double>() >= -100 && bias.get<double>() <= 100))
            return invalid_input(where + ": bias " + bias.dump() + " is not in -100..100");
        int64_t token = -1;
        if (id.is_number_integer()) {
            token = id.is_number_unsigned() ? int64_t(std::min<uint64_t>(id.get<uint64_t>(), uint64_t(INT64_MAX)))
                                            : id.get<int64_t>();
        } else if (id.is_string()) {
            const std::string s = id.get<std::string>();
            // A key that is a decimal number (optionally signed) is a token id, however long: one that no
            // token has is the client's mistake (a 400), never text to tokenize.
            const size_t sign = !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
            const bool number = s.size() > sign && s.find_first_not_of("0123456789", sign) == std::string::npos;
            if (!key_form || !number) {
                if (s.empty() || s.size() > openai_logit_bias_text_bytes_max)
                    return invalid_input(where + ": a text must be 1..256 bytes");
                if (texts.size() >= openai_logit_bias_texts_max) return invalid_input("logit_bias: at most 64 texts");
                texts.emplace_back(s, b);
                return {};
            }
            const size_t lead = s.find_first_not_of('0', sign);  // npos: the number is 0
            const std::string digits = lead == std::string::npos ? "0" : s.substr(lead);
            if (digits.size() > 10 || (s[0] == '-' && digits != "0") ||
                std::strtoll(digits.c_str(), nullptr, 10) > INT32_MAX)
                return invalid_input(where + ": key \"" + s.substr(0, 32) + (s.size() > 32 ? "..." : "") +
                                     "\" is not a token id of this model (ids are 0.." + std::to_string(INT32_MAX) +
                                     ", below the vocabulary's size)");
            token = std::strtoll(digits.c_str(), nullptr, 10);
        } else {
            return invalid_input(where + ": a token must be an integer id or a text");
        }
        if (token < 0 || token > INT32_MAX) return invalid_input(where + ": token " + id.dump() + " is out of range");
        out.emplace_back(int32_t(token), b);
        return {};
    };
    if (it->is_object()) {
        for (const auto & [k, v] : it->items())
            BATON_RETURN_IF_ERROR(add(json(k), v, "logit_bias[\"" + k.substr(0, 32) + "\"]", true));
    } else if (it->is_array()) {
        for (size_t i = 0; i < it->size(); ++i) {
            const json & e = (*it)[i];
            if (!e.is_array() || e.size() != 2)
                return invalid_input("logit_bias[" + std::to_string(i) + "]: must be [token, bias]");
            BATON_RETURN_IF_ERROR(add(e[0], e[1], "logit_bias[" + std::to_string(i) + "]", false));
        }
    } else {
        return invalid_input("logit_bias: must be an object {\"token id\": bias} or an array [[token id, bias], ...]");
    }
    return {};
}

Status parse_token_ids(const json & arr, const char * field, std::vector<token_id> & out) {
    for (const auto & t : arr) {
        if (!t.is_number_integer())
            return invalid_input(std::string(field) + ": a token array must hold only integers");
        const int64_t v = t.is_number_unsigned() ? int64_t(std::min<uint64_t>(t.get<uint64_t>(), uint64_t(INT64_MAX)))
                                                 : t.get<int64_t>();
        if (v < 0 || v > INT32_MAX)
            return invalid_input(std::string(field) + ": token " + t.dump() + " is out of range");
        out.push_back(token_id(v));
    }
    return {};
}

// prompt_bytes_check: a text prompt within --max-prompt-mb.
Status prompt_bytes_check(const std::string & text, const prompt_limits & lim) {
    if (text.size() <= lim.max_prompt_bytes) return {};
    return too_large("prompt: " + std::to_string(text.size()) + " bytes, more than --max-prompt-mb allows (" +
                     std::to_string(lim.max_prompt_bytes) + " bytes)");
}

// parse_prompt_media: llama-server's multimodal prompt object, {"prompt_string", "multimodal_data": [base64]}:
// each "<__media__>" of the text stands for the next image. Without images it is the text prompt it holds.
Status parse_prompt_media(const json & p, const prompt_limits & lim, openai_request & r) {
    auto s = p.find("prompt_string");
    if (s == p.end() || !s->is_string()) return invalid_input("prompt.prompt_string: must be a string");
    BATON_RETURN_IF_ERROR(prompt_bytes_check(s->get_ref<const std::string &>(), lim));
    for (const auto & [key, v] : p.items())
        if (key != "prompt_string" && key != "multimodal_data")
            return invalid_input("prompt." + key.substr(0, 64) +
                                 ": is not a field of a multimodal prompt "
                                 "(prompt_string, multimodal_data)");
    openai_prompt_media m;
    if (auto d = p.find("multimodal_data"); d != p.end() && !d->is_null()) {
        if (!d->is_array()) return invalid_input("prompt.multimodal_data: must be an array of base64 strings");
        for (size_t i = 0; i < d->size(); ++i) {
            const std::string where = "prompt.multimodal_data[" + std::to_string(i) + "]";
            if (!(*d)[i].is_string()) return invalid_input(where + ": must be a base64 string");
            auto img = image_from_base64("image/", (*d)[i].get<std::string>(), where);
            if (!img.ok()) return img.status();
            m.images.push_back(std::move(img.value()));
        }
    }
    const std::string & text = s->get_ref<const std::string &>();
    if (m.images.empty()) {
        r.input = openai_prompt_text{text};
        return {};
    }
    for (size_t at = 0;;) {  // llama-server's marker -> this process's (which no client can write)
        const size_t k = text.find(openai_media_marker_llama, at);
        m.text.append(text, at, k == std::string::npos ? std::string::npos : k - at);
        if (k == std::string::npos) break;
        m.text += openai_media_marker();
        at = k + openai_media_marker_llama.size();
    }
    r.input = std::move(m);
    return {};
}

Status parse_prompt(const json & j, const prompt_limits & lim, openai_request & r) {
    auto it = j.find("prompt");
    if (it == j.end() || it->is_null()) return invalid_input("prompt: is required");
    if (it->is_string()) {
        BATON_RETURN_IF_ERROR(prompt_bytes_check(it->get_ref<const std::string &>(), lim));
        r.input = openai_prompt_text{it->get<std::string>()};
        return {};
    }
    if (it->is_array() && it->size() == 1 && (*it)[0].is_string()) {
        BATON_RETURN_IF_ERROR(prompt_bytes_check((*it)[0].get_ref<const std::string &>(), lim));
        r.input = openai_prompt_text{(*it)[0].get<std::string>()};
        return {};
    }
    if (it->is_object()) return parse_prompt_media(*it, lim, r);
    if (it->is_array() && it->size() == 1 && (*it)[0].is_array() && !(*it)[0].empty()) {
        openai_prompt_tokens p;
        BATON_RETURN_IF_ERROR(parse_token_ids((*it)[0], "prompt", p.tokens));
        r.input = std::move(p);
        return {};
    }
    bool any_id = false, any_text = false, other = false;
    if (it->is_array())
        for (const auto & t : *it) {
            any_id = any_id || t.is_number_integer();
            any_text = any_text || t.is_string();
            other = other || (!t.is_number_integer() && !t.is_string());
        }
    if (any_id && !any_text && !other) {
        openai_prompt_tokens p;
        BATON_RETURN_IF_ERROR(parse_token_ids(*it, "prompt", p.tokens));
        r.input = std::move(p);
        return {};
    }
    if (any_id && any_text && !other) {  // llama-server's direct token input: texts and ids in one prompt
        openai_prompt_mixed m;
        size_t bytes = 0;
        for (size_t i = 0; i < it->size(); ++i) {
            const json & t = (*it)[i];
            if (t.is_string()) {
                bytes += t.get_ref<const std::string &>().size();
                m.parts.emplace_back(t.get<std::string>());
            } else {
                std::vector<token_id> one;
                BATON_RETURN_IF_ERROR(parse_token_ids(json::array({t}), "prompt", one));
                m.parts.emplace_back(one[0]);
            }
        }
        if (bytes > lim.max_prompt_bytes)
            return too_large("prompt: " + std::to_string(bytes) + " bytes of text, more than --max-prompt-mb allows (" +
                             std::to_string(lim.max_prompt_bytes) + " bytes)");
        r.input = std::move(m);
        return {};
    }
    const bool several = it->is_array() && it->size() > 1 && std::all_of(it->begin(), it->end(), [](const json & e) {
                             return e.is_string() || e.is_array() || e.is_object();
                         });
    if (several)  // (openai_prompts_split takes them apart before a node parses them)
        return invalid_input("prompt: several prompts in one request make no one state (a prefill, a slot "
                             "action): send them to /v1/completions or /completion, or one request per prompt");
    return invalid_input("prompt: must be a string, an array of token ids (or of ids and strings), a multimodal "
                         "prompt object, or an array of several of those");
}

// parse_infill: llama-server's /infill fields. input_prefix and input_suffix (strings, absent: ""), prompt (a
// string, absent: "": text the middle starts with), input_extra ([{"filename", "text"}]: other files of the
// project, as context). Every text counts against --max-prompt-mb together.
Status parse_infill(const json & j, const prompt_limits & lim, openai_request & r) {
    openai_infill in;
    size_t bytes = 0;
    auto text = [&](const json & o, const char * key, std::string & out, const std::string & where) -> Status {
        auto it = o.find(key);
        if (it == o.end() || it->is_null()) return {};
        if (!it->is_string()) return invalid_input(where + key + ": must be a string");
        out = it->get<std::string>();
        bytes += out.size();
        return {};
    };
    BATON_RETURN_IF_ERROR(text(j, "input_prefix", in.prefix, ""));
    BATON_RETURN_IF_ERROR(text(j, "input_suffix", in.suffix, ""));
    BATON_RETURN_IF_ERROR(text(j, "prompt", in.prompt, ""));
    if (auto it = j.find("input_extra"); it != j.end() && !it->is_null()) {
        if (!it->is_array()) return invalid_input("input_extra: must be an array of {\"filename\", \"text\"} objects");
        if (it->size() > openai_infill_extra_max)
            return invalid_input("input_extra: at most " + std::to_string(openai_infill_extra_max) + " chunks");
        for (size_t i = 0; i < it->size(); ++i) {
            const json & c = (*it)[i];
            const std::string where = "input_extra[" + std::to_string(i) + "].";
            if (!c.is_object()) return invalid_input("input_extra[" + std::to_string(i) + "]: must be an object");
            openai_infill_chunk chunk;
            chunk.filename = "tmp";  // llama-server's name for a chunk that gives none
            BATON_RETURN_IF_ERROR(text(c, "filename", chunk.filename, where));
            BATON_RETURN_IF_ERROR(text(c, "text", chunk.text, where));
            in.extra.push_back(std::move(chunk));
        }
    }
    if (bytes > lim.max_prompt_bytes)
        return too_large("input: " + std::to_string(bytes) + " bytes of text, more than --max-prompt-mb allows (" +
                         std::to_string(lim.max_prompt_bytes) + " bytes)");
    r.input = std::move(in);
    return {};
}

// parse_tools reads "tools", "tool_choice" and "parallel_tool_calls" of a chat; the tools as the client
// ordered their keys (ordered: see ordered_parts).
Status parse_tools(const json & j, const ordered_json & ordered, openai_chat & chat) {
    if (auto t = j.find("tools"); t != j.end() && !t->is_null()) {
        if (!json_plain(*t, 0)) return invalid_input("tools: nested deeper than 32 levels or a number out of range");
        BATON_RETURN_IF_ERROR(tools_check(*t));
        if (!t->empty()) chat.tools = ordered.contains("tools") ? ordered["tools"] : ordered_json(*t);
    }
    if (auto c = j.find("tool_choice"); c != j.end() && !c->is_null()) {
        auto choice = tool_choice_parse(*c, chat.tools.is_null() ? ordered_json::array() : chat.tools);
        if (!choice.ok()) return choice.status();
        chat.choice = choice.value();
    }
    return get_bool(j, "parallel_tool_calls", chat.parallel_tool_calls);
}

// parse_messages reads a chat's messages: at most --max-messages of them, their texts (content, role,
// name, tool calls) together within --max-prompt-mb, checked before a message is copied.
Status parse_messages(const json & j, const ordered_json & ordered, const prompt_limits & lim, openai_request & r) {
    auto it = j.find("messages");
    if (it == j.end() || !it->is_array() || it->empty()) return invalid_input("messages: must be a non-empty array");
    if (it->size() > lim.max_messages)
        return too_large("messages: " + std::to_string(it->size()) + " messages, more than --max-messages " +
                         std::to_string(lim.max_messages));
    uint64_t text_bytes = 0;
    const auto count_text = [&](const json & v) {
        if (v.is_string()) text_bytes += v.get_ref<const std::string &>().size();
        else if (v.is_structured()) text_bytes += v.dump(-1, ' ', false, json::error_handler_t::replace).size();
    };
    openai_chat chat;
    for (size_t i = 0; i < it->size(); ++i) {
        if (const json & m = (*it)[i]; m.is_object()) {
            for (const char * key : {"role", "content", "name", "tool_call_id", "tool_calls"})
                if (auto v = m.find(key); v != m.end()) count_text(*v);
            if (text_bytes > lim.max_prompt_bytes)
                return too_large("messages: more than " + std::to_string(lim.max_prompt_bytes) +
                                 " bytes of text by messages[" + std::to_string(i) + "] (--max-prompt-mb)");
        }
        const json & m = (*it)[i];
        const std::string where = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) return invalid_input(where + ": must be an object");
        auto role = m.find("role");
        if (role == m.end() || !role->is_string()) return invalid_input(where + ".role: must be a string");
        chat_message cm;
        cm.role = role->get<std::string>();
        if (auto calls = m.find("tool_calls"); calls != m.end() && !calls->is_null()) {
            if (cm.role != "assistant")
                return invalid_input(where + ".tool_calls: only assistant messages make tool calls");
            BATON_RETURN_IF_ERROR(tool_calls_history_check(*calls, where + ".tool_calls"));
            for (const auto & c : *calls) {
                const json & f = c["function"];
                const json args = json::parse(f["arguments"].get<std::string>(), nullptr, false);
                if (!json_plain(args, 0))
                    return invalid_input(
                        where + ".tool_calls: arguments nested deeper than 32 levels or a number out of range");
                cm.tool_calls.push_back({c.value("id", ""), f["name"].get<std::string>(), args.dump()});
            }
        }
        for (auto [key, out] : {std::pair{"tool_call_id", &cm.tool_call_id}, std::pair{"name", &cm.name}}) {
            auto v = m.find(key);
            if (v == m.end() || v->is_null()) continue;
            if (!v->is_string()) return invalid_input(where + "." + key + ": must be a string");
            *out = v->get<std::string>();
        }
        auto content = m.find("content");
        if (content == m.end() || content->is_null()) {
            cm.content = "";
        } else if (content->is_string()) {
            cm.content = content->get<std::string>();
        } else if (content->is_array()) {
            for (size_t k = 0; k < content->size(); ++k) {
                const json & part = (*content)[k];
                const std::string pw = where + ".content[" + std::to_string(k) + "]";
                const std::string type = part.is_object() ? part.value("type", "") : "";
                if (type == "image_url") {
                    auto img = chat_image_part(part, pw);
                    if (!img.ok()) return img.status();
                    if (auto * link = std::get_if<image_link>(&img.value()))
                        chat.image_urls.push_back({chat.images.size(), std::move(link->url), pw + ".image_url"});
                    chat.images.push_back(std::holds_alternative<std::string>(img.value())
                                              ? std::move(std::get<std::string>(img.value()))
                                              : std::string());
                    cm.content += openai_media_marker();
                    continue;
                }
                if (type == "input_audio") {
                    auto ia = part.find("input_audio");
                    if (ia == part.end() || !ia->is_object())
                        return invalid_input(pw + ".input_audio: must be an object with data and format");
                    auto data = ia->find("data"), format = ia->find("format");
                    if (data == ia->end() || !data->is_string())
                        return invalid_input(pw + ".input_audio.data: must be a string (base64)");
                    if (format == ia->end() || !format->is_string())
                        return invalid_input(pw + ".input_audio.format: must be a string (wav or mp3)");
                    auto clip =
                        audio_from_base64(format->get<std::string>(), data->get<std::string>(), pw + ".input_audio");
                    if (!clip.ok()) return clip.status();
                    chat.images.push_back(std::move(clip.value()));
                    cm.content += openai_media_marker();
                    continue;
                }
                if (type != "text" || !part.contains("text") || !part["text"].is_string())
                    return invalid_input(pw + ": only text, image_url and input_audio parts are supported");
                cm.content += part["text"].get<std::string>();
            }
        } else {
            return invalid_input(where + ".content: must be a string or an array of text, image_url and input_audio "
                                         "parts");
        }
        chat.messages.push_back(std::move(cm));
    }
    if (chat.messages.size() >= 2 && chat.messages.back().role == "assistant" &&
        chat.messages[chat.messages.size() - 2].role == "assistant")  // (llama-server's refusal, in its words)
        return invalid_input("messages: Cannot have 2 or more assistant messages at the end of the list.");
    if (auto k = j.find("chat_template_kwargs"); k != j.end() && !k->is_null()) {
        if (!k->is_object()) return invalid_input("chat_template_kwargs: must be an object");
        if (!json_plain(*k, 0))
            return invalid_input("chat_template_kwargs: nested deeper than 32 levels or holds a number out of range");
        if (!k->empty()) chat.template_kwargs = *k;
    }
    BATON_RETURN_IF_ERROR(get_bool(j, "add_generation_prompt", chat.add_generation_prompt));
    if (auto f = j.find("reasoning_format"); f != j.end() && !f->is_null()) {
        if (!f->is_string()) return invalid_input("reasoning_format: must be a string");
        auto fmt = reasoning_format_parse(f->get<std::string>());
        if (!fmt.ok()) return invalid_input("reasoning_format: " + fmt.status().message());
        chat.reasoning = fmt.value();
    }
    BATON_RETURN_IF_ERROR(parse_tools(j, ordered, chat));
    r.input = std::move(chat);
    return {};
}

// Fields of OpenAI's and llama-server's APIs that Baton does not implement. Each is refused when its value
// would change the answer and accepted when it asks for the default behaviour (docs/api.md).
bool json_empty(const json & v) {
    return v.is_null() || ((v.is_array() || v.is_object() || v.is_string()) && v.empty());
}

Status refuse_unsupported(const json & j, openai_endpoint endpoint) {
    auto present = [&](const char * key) -> const json * {
        auto it = j.find(key);
        return it == j.end() || it->is_null() ? nullptr : &*it;
    };
    auto number_is = [](const json & v, double want) { return v.is_number() && v.get<double>() == want; };
    auto refuse = [](const char * key, const std::string & why) {
        return invalid_input(std::string(key) + ": " + why);
    };
    if (const json * v = present("functions"); v && !json_empty(*v))
        return refuse("functions", "the deprecated functions API is not supported: use tools");
    if (const json * v = present("function_call"); v && !(v->is_string() && *v == "none"))
        return refuse("function_call", "the deprecated functions API is not supported: use tool_choice");
    for (const char * key : {"lora", "samplers", "response_fields", "grammar_triggers", "preserved_tokens"})
        if (const json * v = present(key); v && !json_empty(*v)) return refuse(key, "not supported");
    if (const json * v = present("post_sampling_probs"); v && !(v->is_boolean() && !v->get<bool>()))
        return refuse("post_sampling_probs", "only false: Baton reports the model's distribution (docs/api.md)");
    if (endpoint != openai_endpoint::chat) {
        for (const char * key : {"tools", "tool_choice"})
            if (const json * v = present(key); v && !json_empty(*v))
                return refuse(key, "tools are for the chat endpoint (/v1/chat/completions)");
    }
    // Samplers Baton's chain does not have: only their "off" values are accepted.
    const std::pair<const char *, double> off[] = {
        {"mirostat", 0}, {"typical_p", 1}, {"dynatemp_range", 0},   {"xtc_probability", 0}, {"dry_multiplier", 0},
        {"min_keep", 0}, {"n_indent", 0},  {"t_max_predict_ms", 0}, {"best_of", 1},         {"n_cmpl", 1}};
    for (const auto & [key, value] : off)
        if (const json * v = present(key); v && !number_is(*v, value))
            return refuse(key, "only " + std::to_string(int(value)) + " (off) is supported");
    if (const json * v = present("top_n_sigma"); v && !(v->is_number() && v->get<double>() <= 0))
        return refuse("top_n_sigma", "only a value <= 0 (off) is supported");
    if (const json * v = present("echo"); v && !(v->is_boolean() && !v->get<bool>()))
        return refuse("echo", "only false is supported");
    if (const json * v = present("suffix"); v && !json_empty(*v))
        return refuse("suffix", "insertion (suffix) is not supported");
    (void)endpoint;
    return {};
}

// parse_grammar reads the output constraint: llama-server's "grammar" (GBNF) and "json_schema", OpenAI's
// "response_format" (json_object, optionally with llama-server's "schema"; json_schema with
// json_schema.schema). At most one of the three. "grammar_lazy" with "grammar_trigger_patterns" (Baton's,
// what a tool-call grammar resolves to in a blob's request) makes a GBNF grammar lazy.
Status parse_grammar(const json & j, const ordered_json & ordered, sampling_grammar & g) {
    int sources = 0;
    if (auto it = j.find("grammar"); it != j.end() && !it->is_null()) {
        if (!it->is_string()) return invalid_input("grammar: must be a string (GBNF)");
        if (!it->get_ref<const std::string &>().empty()) g.gbnf = it->get<std::string>(), ++sources;
    }
    // The schema as the client ordered its keys (properties are generated in that order).
    auto from_schema = [&](const json & schema, const std::string & field) -> Status {
        if (!schema.is_object() && !schema.is_boolean())
            return invalid_input(field + ": must be a JSON Schema (an object)");
        const ordered_json * o = &ordered;
        std::vector<std::string> path;
        if (field == "json_schema") path = {"json_schema"};
        else if (field == "response_format.schema") path = {"response_format", "schema"};
        else path = {"response_format", "json_schema", "schema"};
        for (const auto & k : path) o = (o && o->is_object() && o->contains(k)) ? &(*o)[k] : nullptr;
        auto gbnf = json_schema_to_gbnf(o ? *o : ordered_json(schema));
        if (!gbnf.ok()) return invalid_input(field + ": " + gbnf.status().message());
        g.gbnf = std::move(gbnf.value());
        ++sources;
        return {};
    };
    if (auto it = j.find("json_schema"); it != j.end() && !it->is_null())
        BATON_RETURN_IF_ERROR(from_schema(*it, "json_schema"));
    if (auto it = j.find("response_format"); it != j.end() && !it->is_null()) {
        if (!it->is_object()) return invalid_input("response_format: must be an object");
        auto t = it->find("type");
        if (t == it->end() || !t->is_string()) return invalid_input("response_format.type: must be a string");
        if (*t == "json_object") {
            if (auto sc = it->find("schema"); sc != it->end() && !sc->is_null())
                BATON_RETURN_IF_ERROR(from_schema(*sc, "response_format.schema"));
            else g.gbnf = json_object_gbnf(), ++sources;
        } else if (*t == "json_schema") {
            auto js = it->find("json_schema");
            if (js == it->end() || !js->is_object())
                return invalid_input("response_format.json_schema: must be an object");
            auto sc = js->find("schema");
            if (sc == js->end() || sc->is_null())
                return invalid_input("response_format.json_schema.schema: is required");
            BATON_RETURN_IF_ERROR(from_schema(*sc, "response_format.json_schema.schema"));
        } else if (*t != "text") {
            return invalid_input("response_format.type: \"" + t->get<std::string>().substr(0, 32) +
                                 "\" is not text, json_object or json_schema");
        }
    }
    if (sources > 1) return invalid_input("grammar: give one of grammar, json_schema and response_format");
    BATON_RETURN_IF_ERROR(get_bool(j, "grammar_lazy", g.lazy));
    if (auto it = j.find("grammar_trigger_patterns"); it != j.end() && !it->is_null()) {
        if (!it->is_array()) return invalid_input("grammar_trigger_patterns: must be an array of strings");
        for (const auto & p : *it) {
            if (!p.is_string() || p.get_ref<const std::string &>().empty() ||
                p.get_ref<const std::string &>().size() > 4096)
                return invalid_input("grammar_trigger_patterns: each must be a non-empty string of at most 4096 bytes");
            g.trigger_patterns.push_back(p.get<std::string>());
        }
    }
    return {};
}

// parse_logprobs: llama-server's "n_probs" on every endpoint; chat's "logprobs" (bool) and "top_logprobs";
// completions' "logprobs" (the number of top tokens). -1: none.
Status parse_logprobs(const json & j, openai_endpoint endpoint, openai_request & r) {
    BATON_RETURN_IF_ERROR(get_int(j, "n_probs", r.n_probs, -1, gen_top_probs_max));
    const bool native = endpoint == openai_endpoint::completion || endpoint == openai_endpoint::infill;
    if (r.n_probs == 0 && native) r.n_probs = -1;  // llama-server: 0 is off
    auto lp = j.find("logprobs");
    if (endpoint == openai_endpoint::chat) {
        bool on = false;
        BATON_RETURN_IF_ERROR(get_bool(j, "logprobs", on));
        int32_t top = 0;
        BATON_RETURN_IF_ERROR(get_int(j, "top_logprobs", top, 0, gen_top_probs_max));
        if (top > 0 && !on) return invalid_input("top_logprobs: needs \"logprobs\": true");
        if (on) r.n_probs = top;
        else if (lp != j.end() && !lp->is_null()) r.n_probs = -1;
        return {};
    }
    if (native) return {};  // llama-server's /completion and /infill: n_probs only
    if (lp != j.end() && !lp->is_null()) {
        if (lp->is_boolean()) r.n_probs = lp->get<bool>() ? std::max(r.n_probs, 0) : -1;
        else BATON_RETURN_IF_ERROR(get_int(j, "logprobs", r.n_probs, 0, gen_top_probs_max));
    }
    return {};
}

Status parse_fields(const json & j, const ordered_json & ordered, openai_endpoint endpoint, const openai_defaults & d,
                    openai_request & r) {
    r.endpoint = endpoint;
    r.max_tokens = d.max_tokens;
    r.sampling = d.sampling;
    if (auto it = j.find("model"); it != j.end() && it->is_string()) r.model = it->get<std::string>();
    if (endpoint == openai_endpoint::chat) {
        BATON_RETURN_IF_ERROR(parse_messages(j, ordered, d.prompt, r));
    } else if (endpoint == openai_endpoint::infill) {
        BATON_RETURN_IF_ERROR(parse_infill(j, d.prompt, r));
    } else {
        BATON_RETURN_IF_ERROR(parse_prompt(j, d.prompt, r));
    }
    BATON_RETURN_IF_ERROR(refuse_unsupported(j, endpoint));
    BATON_RETURN_IF_ERROR(get_int(j, "max_tokens", r.max_tokens, -1, INT32_MAX));
    BATON_RETURN_IF_ERROR(get_int(j, "max_completion_tokens", r.max_tokens, -1, INT32_MAX));
    BATON_RETURN_IF_ERROR(get_int(j, "n_predict", r.max_tokens, -1, INT32_MAX));
    BATON_RETURN_IF_ERROR(get_int(j, "n", r.n, 1, std::max(d.n_max, 1)));
    if (r.n > 1 && (endpoint == openai_endpoint::completion || endpoint == openai_endpoint::infill))
        return invalid_input("n: /completion and /infill return one result; ask /v1/completions or "
                             "/v1/chat/completions for several choices");
    BATON_RETURN_IF_ERROR(parse_logprobs(j, endpoint, r));
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
    if (j.contains("logit_bias")) s.logit_bias.clear();  // the request's own, not added to the node's
    BATON_RETURN_IF_ERROR(parse_logit_bias(j, s.logit_bias, r.logit_bias_text));
    s.grammar = {};  // the request's own (a node has no default grammar)
    BATON_RETURN_IF_ERROR(parse_grammar(j, ordered, s.grammar));
    BATON_RETURN_IF_ERROR(sampling_check(s));
    BATON_RETURN_IF_ERROR(get_stop(j, "stop", r.stop));
    BATON_RETURN_IF_ERROR(get_bool(j, "stream", r.stream));
    BATON_RETURN_IF_ERROR(get_bool(j, "ignore_eos", r.ignore_eos));
    BATON_RETURN_IF_ERROR(get_bool(j, "return_tokens", r.return_tokens));
    BATON_RETURN_IF_ERROR(get_bool(j, "return_progress", r.return_progress));
    if (auto it = j.find("stream_options"); it != j.end() && !it->is_null()) {
        if (!it->is_object()) return invalid_input("stream_options: must be an object");
        BATON_RETURN_IF_ERROR(get_bool(*it, "include_usage", r.include_usage));
    }
    return {};
}

}  // namespace

Result<openai_request> openai_parse(std::string_view body, openai_endpoint endpoint, const openai_defaults & defaults) {
    auto parsed = request_fields::body_object(body);
    if (!parsed.ok()) return parsed.status();
    json j = std::move(parsed.value());
    openai_request r;
    try {
        auto ordered = ordered_parts(body, j);
        if (!ordered.ok()) return ordered.status();
        if (endpoint == openai_endpoint::messages)
            BATON_RETURN_IF_ERROR(anthropic_parse_fields(j, ordered.value(), defaults, r));
        else BATON_RETURN_IF_ERROR(parse_fields(j, ordered.value(), endpoint, defaults, r));
    } catch (const std::exception & e) {  // nlohmann throws on invalid UTF-8 in some accessors
        return invalid_input(std::string("body: ") + e.what());
    }
    return r;
}

namespace {

// may_hold_prompt_array: false when body cannot hold a "prompt" member whose value is an array — no `"prompt"`
// followed by a colon and `[` (JSON whitespace between), and no \u escape (a key may spell "prompt" with one).
// Conservative: true sends the body to the full parse, which decides. It keeps the common one-prompt request
// from being parsed twice (here and by openai_parse).
bool may_hold_prompt_array(std::string_view body) {
    if (body.find("\\u") != std::string_view::npos) return true;
    constexpr std::string_view key = "\"prompt\"";
    const auto ws = [&](size_t i) {
        while (i < body.size() && (body[i] == ' ' || body[i] == '\t' || body[i] == '\n' || body[i] == '\r')) ++i;
        return i;
    };
    for (size_t at = body.find(key); at != std::string_view::npos; at = body.find(key, at + 1)) {
        size_t i = ws(at + key.size());
        if (i >= body.size() || body[i] != ':') continue;
        i = ws(i + 1);
        if (i < body.size() && body[i] == '[') return true;
    }
    return false;
}

}  // namespace

Result<std::vector<std::string>> openai_prompts_split(std::string_view body, openai_endpoint endpoint) {
    using ojson = nlohmann::ordered_json;
    std::vector<std::string> out;
    if (endpoint != openai_endpoint::completions && endpoint != openai_endpoint::completion) return out;
    if (!may_hold_prompt_array(body)) return out;
    ojson j = ojson::parse(body, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return out;
    auto it = j.find("prompt");
    if (it == j.end() || !it->is_array() || it->size() < 2) return out;
    bool all_strings = true, any_nested = false;
    for (const auto & e : *it) {
        all_strings = all_strings && e.is_string();
        any_nested = any_nested || e.is_array() || e.is_object();
    }
    if (!all_strings && !any_nested) return out;  // ids, or ids and strings: one prompt (direct token input)
    if (it->size() > openai_prompts_max)
        return invalid_input("prompt: " + std::to_string(it->size()) + " prompts, more than " +
                             std::to_string(openai_prompts_max) + " in one request");
    const ojson prompts = std::move(*it);
    for (size_t i = 0; i < prompts.size(); ++i) {
        const ojson & e = prompts[i];
        if (!e.is_string() && !e.is_array() && !e.is_object())
            return invalid_input("prompt[" + std::to_string(i) +
                                 "]: each of several prompts must be a string, an array of token ids (or of ids and "
                                 "strings) or a multimodal prompt object");
        j["prompt"] = e;
        try {  // (the parser took the body, so its strings are valid UTF-8: dump does not throw)
            out.push_back(j.dump());
        } catch (const std::exception & x) {
            return invalid_input(std::string("body: ") + x.what());
        }
    }
    return out;
}

Result<std::vector<token_id>> openai_mixed_tokens(const openai_prompt_mixed & m, const loaded_model & model) {
    std::vector<token_id> out;
    for (size_t i = 0; i < m.parts.size(); ++i) {
        if (const auto * id = std::get_if<token_id>(&m.parts[i])) {
            out.push_back(*id);
            continue;
        }
        auto t = text_tokenize(model, std::get<std::string>(m.parts[i]), i == 0, true);
        if (!t.ok()) return t.status();
        out.insert(out.end(), t->begin(), t->end());
    }
    return out;
}

Result<gen_request> openai_to_gen(const openai_request & r, const loaded_model & model, uint32_t n_ctx) {
    gen_request g;
    g.n_predict = r.max_tokens < 0 ? INT32_MAX : r.max_tokens;
    g.sampling = r.sampling;
    g.stop = r.stop;
    g.ignore_eos = r.ignore_eos;
    // Progress events are chunks of a stream (llama-server sends none in a whole answer); Anthropic's Messages
    // stream has no event for them.
    g.return_progress = r.return_progress && r.stream && r.endpoint != openai_endpoint::messages;
    g.n_probs = r.n_probs;
    if (std::holds_alternative<openai_chat>(r.input)) {
        return invalid_input("messages: the chat was not rendered by a chat template");
    } else if (const auto * m = std::get_if<openai_prompt_mixed>(&r.input)) {
        auto toks = openai_mixed_tokens(*m, model);
        if (!toks.ok()) return toks.status();
        g.prompt = std::move(toks.value());
    } else if (std::holds_alternative<openai_prompt_media>(r.input)) {
        return invalid_input("prompt: its images were not encoded (a node with --mmproj encodes them)");
    } else if (std::holds_alternative<openai_infill>(r.input)) {
        return invalid_input("input_prefix: the infill prompt was not built (infill_tokens)");
    } else if (const auto * rendered = std::get_if<openai_chat_rendered>(&r.input)) {
        g.prompt = rendered->tokens;
        g.media = rendered->media;
    } else if (const auto * ids = std::get_if<openai_prompt_tokens>(&r.input)) {
        g.prompt = ids->tokens;
        g.media = ids->media;
    } else {
        // As llama-server: control tokens written in a raw prompt ("<|im_start|>") are parsed.
        auto toks = text_tokenize(model, std::get<openai_prompt_text>(r.input).text, true, true, n_ctx);
        if (!toks.ok()) return toks.status();
        g.prompt = std::move(toks.value());
    }
    if (g.prompt.empty()) return invalid_input("prompt: is empty after tokenization");
    for (const auto & [text, bias] : r.logit_bias_text) {
        auto toks = text_tokenize(model, text, false, false);
        if (!toks.ok()) return toks.status();
        if (toks->empty()) return invalid_input("logit_bias: \"" + text.substr(0, 32) + "\" has no tokens");
        for (token_id t : toks.value()) g.sampling.logit_bias.emplace_back(t, bias);
    }
    if (!r.logit_bias_text.empty()) BATON_RETURN_IF_ERROR(sampling_check(g.sampling));
    const int64_t n_vocab = model.identity().n_vocab;
    for (const auto & [token, bias] : g.sampling.logit_bias)
        if (token >= n_vocab)
            return invalid_input("logit_bias: token " + std::to_string(token) + " is not in the vocabulary (" +
                                 std::to_string(n_vocab) + " tokens)");
    BATON_RETURN_IF_ERROR(sampling_check_grammar(g.sampling, model));
    return g;
}

}  // namespace baton
