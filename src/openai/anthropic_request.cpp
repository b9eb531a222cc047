// anthropic_request.cpp — Messages API bodies into chat requests (see anthropic_request.h).
#include "anthropic_request.h"

#include <string>
#include <string_view>
#include <vector>

#include "image_input.h"
#include "message_quote.h"
#include "request_fields.h"

namespace baton {

namespace {

using ajson = nlohmann::json;
using aordered = nlohmann::ordered_json;

// A Messages body's texts together, held to --max-prompt-mb as they are read (before the template runs).
struct anthropic_text_budget {
    uint64_t max_bytes = 0;
    uint64_t bytes = 0;
    Status add(size_t n, const std::string & where) {
        bytes += n;
        if (bytes <= max_bytes) return {};
        return request_fields::too_large("messages: more than " + std::to_string(max_bytes) + " bytes of text by " +
                                         where + " (--max-prompt-mb)");
    }
};

// anthropic_billing_header_normalize: Claude Code opens its system prompt with
// "x-anthropic-billing-header: ...; cch=XXXXX; ..." where the 5 characters after "cch=" change with every
// request; llama-server writes them as "fffff" so the prompt's prefix stays cacheable. Any other text is left
// as it is.
void anthropic_billing_header_normalize(std::string & text) {
    constexpr std::string_view prefix = "x-anthropic-billing-header:";
    constexpr size_t stamp = 5;
    if (text.compare(0, prefix.size(), prefix) != 0) return;
    const size_t at = text.find("cch=", prefix.size());
    if (at == std::string::npos) return;
    const size_t from = at + 4;
    if (from + stamp < text.size() && text[from + stamp] == ';') text.replace(from, stamp, stamp, 'f');
}

// anthropic_type_of: an object's "type" (a block's, tool_choice's, thinking's; invalid_argument when it is
// not a string).
Result<std::string> anthropic_type_of(const ajson & obj, const std::string & where) {
    auto t = obj.find("type");
    if (t == obj.end() || !t->is_string()) return invalid_input(where + ".type: must be a string");
    return t->get<std::string>();
}

// anthropic_block_type: a content block's "type" (invalid_argument when it has none).
Result<std::string> anthropic_block_type(const ajson & block, const std::string & where) {
    if (!block.is_object()) return invalid_input(where + ": must be an object (a content block)");
    return anthropic_type_of(block, where);
}

// anthropic_text_of: a block's string field (absent or null: "").
Result<std::string> anthropic_text_of(const ajson & block, const char * key, const std::string & where) {
    auto it = block.find(key);
    if (it == block.end() || it->is_null()) return std::string();
    if (!it->is_string()) return invalid_input(where + "." + key + ": must be a string");
    return it->get<std::string>();
}

Status anthropic_refuse_block(const std::string & type, const std::string & where) {
    return invalid_input(where + ".type: " + quoted_for_message(type) +
                         " is not a content block Baton takes (text, image, thinking, redacted_thinking, "
                         "tool_use, tool_result)");
}

// anthropic_system: "system", a string or text blocks (concatenated), as a leading system message.
Status anthropic_system(const ajson & j, anthropic_text_budget & budget, std::vector<chat_message> & out) {
    auto it = j.find("system");
    if (it == j.end() || it->is_null()) return {};
    std::string text;
    if (it->is_string()) {
        text = it->get<std::string>();
        anthropic_billing_header_normalize(text);
    } else if (it->is_array()) {
        for (size_t i = 0; i < it->size(); ++i) {
            const std::string where = "system[" + std::to_string(i) + "]";
            auto type = anthropic_block_type((*it)[i], where);
            if (!type.ok()) return type.status();
            if (*type != "text") return invalid_input(where + ".type: the system prompt takes only text blocks");
            auto piece = anthropic_text_of((*it)[i], "text", where);
            if (!piece.ok()) return piece.status();
            anthropic_billing_header_normalize(piece.value());
            text += piece.value();
        }
    } else {
        return invalid_input("system: must be a string or an array of text blocks");
    }
    BATON_RETURN_IF_ERROR(budget.add(text.size(), "system"));
    out.push_back(chat_message{.role = "system", .content = std::move(text)});
    return {};
}

// anthropic_tool_result: one tool_result block as a tool message (its content a string, or text blocks
// concatenated).
Status anthropic_tool_result(const ajson & block, const std::string & where, anthropic_text_budget & budget,
                             chat_message & out) {
    out.role = "tool";
    auto id = anthropic_text_of(block, "tool_use_id", where);
    if (!id.ok()) return id.status();
    out.tool_call_id = std::move(id.value());
    auto c = block.find("content");
    if (c == block.end() || c->is_null()) return {};
    if (c->is_string()) {
        out.content = c->get<std::string>();
    } else if (c->is_array()) {
        for (size_t k = 0; k < c->size(); ++k) {
            const std::string at = where + ".content[" + std::to_string(k) + "]";
            auto type = anthropic_block_type((*c)[k], at);
            if (!type.ok()) return type.status();
            if (*type != "text") return anthropic_refuse_block(*type, at);
            auto text = anthropic_text_of((*c)[k], "text", at);
            if (!text.ok()) return text.status();
            out.content += text.value();
        }
    } else {
        return invalid_input(where + ".content: must be a string or an array of text blocks");
    }
    return budget.add(out.content.size() + out.tool_call_id.size(), where);
}

// anthropic_image: an image block's file bytes, {"type":"image","source":{"type":"base64","media_type":"image/png",
// "data":"..."}}, or its URL, {"source":{"type":"url","url":"https://..."}} (fetched by the node only with
// --image-urls).
Result<image_source> anthropic_image(const ajson & block, const std::string & where) {
    auto src = block.find("source");
    if (src == block.end() || !src->is_object()) return invalid_input(where + ".source: must be an object");
    auto kind = anthropic_text_of(*src, "type", where + ".source");
    if (!kind.ok()) return kind.status();
    if (kind.value() == "url") {
        auto url = anthropic_text_of(*src, "url", where + ".source");
        if (!url.ok()) return url.status();
        if (!url->starts_with("http://") && !url->starts_with("https://"))
            return invalid_input(where + ".source.url: must be an http(s) URL");
        return image_source(image_link{url.value()});
    }
    if (kind.value() != "base64") return invalid_input(where + ".source.type: must be \"base64\" or \"url\"");
    auto type = anthropic_text_of(*src, "media_type", where + ".source");
    if (!type.ok()) return type.status();
    auto data = anthropic_text_of(*src, "data", where + ".source");
    if (!data.ok()) return data.status();
    auto bytes = image_from_base64(type.value(), data.value(), where + ".source");
    if (!bytes.ok()) return bytes.status();
    return image_source(std::move(bytes.value()));
}

// anthropic_message: one message of "messages" as the chat messages it becomes (none, the turn itself,
// and/or tool messages after it), in llama-server's order: the turn (text, images, thinking, tool calls), then
// its tool results. An image block becomes openai_media_marker() in the turn's text and its bytes in images.
Status anthropic_message(const ajson & m, const std::string & where, anthropic_text_budget & budget,
                         std::vector<chat_message> & out, std::vector<std::string> & images,
                         std::vector<openai_chat::image_url> & image_urls) {
    if (!m.is_object()) return invalid_input(where + ": must be an object");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return invalid_input(where + ".role: must be a string");
    const std::string r = role->get<std::string>();
    if (r != "user" && r != "assistant")
        return invalid_input(where + ".role: " + quoted_for_message(r) +
                             " is not user or assistant (the system prompt is the top-level \"system\")");
    const bool assistant = r == "assistant";
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
        if (assistant) return {};  // (llama-server skips an assistant turn without content)
        return invalid_input(where + ".content: is required");
    }
    if (content->is_string()) {
        BATON_RETURN_IF_ERROR(budget.add(content->get_ref<const std::string &>().size(), where));
        out.push_back(chat_message{.role = r, .content = content->get<std::string>()});
        return {};
    }
    if (!content->is_array()) return invalid_input(where + ".content: must be a string or an array of content blocks");
    chat_message turn{.role = r};
    bool any_text = false;
    std::vector<chat_message> results;
    for (size_t k = 0; k < content->size(); ++k) {
        const ajson & block = (*content)[k];
        const std::string at = where + ".content[" + std::to_string(k) + "]";
        auto type = anthropic_block_type(block, at);
        if (!type.ok()) return type.status();
        const std::string & t = type.value();
        if (t == "text") {
            auto text = anthropic_text_of(block, "text", at);
            if (!text.ok()) return text.status();
            BATON_RETURN_IF_ERROR(budget.add(text->size(), at));
            turn.content += text.value();
            any_text = true;
        } else if (t == "image") {
            if (assistant) return invalid_input(at + ": image blocks belong to user messages");
            auto img = anthropic_image(block, at);
            if (!img.ok()) return img.status();
            if (auto * link = std::get_if<image_link>(&img.value()))
                image_urls.push_back({images.size(), std::move(link->url), at + ".source.url"});
            images.push_back(std::holds_alternative<std::string>(img.value())
                                 ? std::move(std::get<std::string>(img.value()))
                                 : std::string());
            turn.content += openai_media_marker();
            any_text = true;
        } else if (t == "thinking") {
            if (!assistant) return invalid_input(at + ": thinking blocks belong to assistant messages");
            auto text = anthropic_text_of(block, "thinking", at);
            if (!text.ok()) return text.status();
            BATON_RETURN_IF_ERROR(budget.add(text->size(), at));
            turn.reasoning_content += text.value();
        } else if (t == "redacted_thinking") {
            // Encrypted by Anthropic for its own models: nothing a local model can read.
        } else if (t == "tool_use") {
            if (!assistant) return invalid_input(at + ": tool_use blocks belong to assistant messages");
            auto id = anthropic_text_of(block, "id", at);
            if (!id.ok()) return id.status();
            auto name = anthropic_text_of(block, "name", at);
            if (!name.ok()) return name.status();
            if (name->empty()) return invalid_input(at + ".name: must be a non-empty string");
            ajson input = ajson::object();
            if (auto in = block.find("input"); in != block.end() && !in->is_null()) {
                if (!in->is_object()) return invalid_input(at + ".input: must be an object");
                if (!request_fields::json_plain(*in, 1))
                    return invalid_input(at + ".input: nested deeper than 32 levels or a number out of range");
                input = *in;
            }
            chat_tool_call call{
                .id = std::move(id.value()), .name = std::move(name.value()), .arguments = input.dump()};
            BATON_RETURN_IF_ERROR(budget.add(call.id.size() + call.name.size() + call.arguments.size(), at));
            turn.tool_calls.push_back(std::move(call));
        } else if (t == "tool_result") {
            if (assistant) return invalid_input(at + ": tool_result blocks belong to user messages");
            chat_message result;
            BATON_RETURN_IF_ERROR(anthropic_tool_result(block, at, budget, result));
            results.push_back(std::move(result));
        } else {
            return anthropic_refuse_block(t, at);
        }
    }
    if (any_text || !turn.tool_calls.empty() || !turn.reasoning_content.empty()) out.push_back(std::move(turn));
    for (chat_message & res : results) out.push_back(std::move(res));
    return {};
}

// anthropic_tools: "tools" [{name, description?, input_schema?}] as OpenAI function tools (in the client's
// key order, description "" and parameters {} when absent, as llama-server writes them), checked by
// tools_check. A tool with another "type" than "custom" is one of Anthropic's server tools.
Status anthropic_tools(const ajson & j, const aordered & ordered, openai_chat & chat) {
    auto it = j.find("tools");
    if (it == j.end() || it->is_null()) return {};
    if (!it->is_array()) return invalid_input("tools: must be an array");
    if (!request_fields::json_plain(*it, 0))
        return invalid_input("tools: nested deeper than 32 levels or a number out of range");
    const aordered * keyed = ordered.contains("tools") ? &ordered["tools"] : nullptr;
    aordered tools = aordered::array();
    for (size_t i = 0; i < it->size(); ++i) {
        const std::string where = "tools[" + std::to_string(i) + "]";
        const ajson & t = (*it)[i];
        if (!t.is_object()) return invalid_input(where + ": must be an object");
        if (auto type = t.find("type"); type != t.end() && !type->is_null() && *type != "custom")
            return invalid_input(
                where + ".type: " + quoted_for_message(type->is_string() ? type->get<std::string>() : type->dump()) +
                " is one of Anthropic's server tools, which Baton does not run (give tools as "
                "{name, description, input_schema})");
        auto name = t.find("name");
        if (name == t.end() || !name->is_string()) return invalid_input(where + ".name: must be a string");
        std::string description;
        if (auto d = t.find("description"); d != t.end() && !d->is_null()) {
            if (!d->is_string()) return invalid_input(where + ".description: must be a string");
            description = d->get<std::string>();
        }
        aordered parameters = aordered::object();
        if (auto s = t.find("input_schema"); s != t.end() && !s->is_null()) {
            if (!s->is_object()) return invalid_input(where + ".input_schema: must be an object (a JSON Schema)");
            const aordered * src = keyed && keyed->is_array() && i < keyed->size() ? &(*keyed)[i] : nullptr;
            parameters =
                src && src->is_object() && src->contains("input_schema") ? (*src)["input_schema"] : aordered(*s);
        }
        tools.push_back({{"type", "function"},
                         {"function",
                          {{"name", name->get<std::string>()},
                           {"description", std::move(description)},
                           {"parameters", std::move(parameters)}}}});
    }
    BATON_RETURN_IF_ERROR(tools_check(tools));
    if (!tools.empty()) chat.tools = std::move(tools);
    return {};
}

// anthropic_tool_choice: {type: auto | any | tool (with name) | none, disable_parallel_tool_use?}. any is
// OpenAI's required; tool names the one tool to call (llama-server asks for any tool there; Baton forces the
// named one, as Anthropic does); none calls no tool.
Status anthropic_tool_choice(const ajson & j, openai_chat & chat) {
    auto it = j.find("tool_choice");
    if (it == j.end() || it->is_null()) return {};
    if (!it->is_object()) return invalid_input("tool_choice: must be an object {\"type\": auto|any|tool|none}");
    auto type = anthropic_type_of(*it, "tool_choice");
    if (!type.ok()) return type.status();
    const std::string & t = type.value();
    aordered oai;
    if (t == "auto") {
        oai = "auto";
    } else if (t == "any") {
        oai = "required";
    } else if (t == "none") {
        oai = "none";
    } else if (t == "tool") {
        auto name = it->find("name");
        if (name == it->end() || !name->is_string())
            return invalid_input("tool_choice.name: must name a tool (type tool)");
        oai = {{"type", "function"}, {"function", {{"name", name->get<std::string>()}}}};
    } else {
        return invalid_input("tool_choice.type: " + quoted_for_message(t) + " is not auto, any, tool or none");
    }
    auto choice = tool_choice_parse(oai, chat.tools.is_null() ? aordered::array() : chat.tools);
    if (!choice.ok()) return choice.status();
    chat.choice = choice.value();
    bool one_call = false;
    BATON_RETURN_IF_ERROR(request_fields::get_bool(*it, "disable_parallel_tool_use", one_call));
    chat.parallel_tool_calls = !one_call;
    return {};
}

// anthropic_thinking: {type: enabled | disabled | adaptive, budget_tokens?}, checked. Whether a model thinks
// is its chat template's to decide (chat_template_kwargs, e.g. {"enable_thinking": false}); its thought comes
// back as thinking blocks. No budget is enforced (docs/api.md).
Status anthropic_thinking(const ajson & j) {
    auto it = j.find("thinking");
    if (it == j.end() || it->is_null()) return {};
    if (!it->is_object()) return invalid_input("thinking: must be an object {\"type\": enabled|disabled}");
    auto type = anthropic_type_of(*it, "thinking");
    if (!type.ok()) return type.status();
    const std::string & t = type.value();
    if (t != "enabled" && t != "disabled" && t != "adaptive")
        return invalid_input("thinking.type: " + quoted_for_message(t) + " is not enabled, disabled or adaptive");
    int64_t budget = 0;
    return request_fields::get_int(*it, "budget_tokens", budget, 0, INT32_MAX);
}

// anthropic_refuse_unsupported: Messages fields whose value would change the answer and that Baton does
// not implement.
Status anthropic_refuse_unsupported(const ajson & j) {
    auto present = [&](const char * key) -> const ajson * {
        auto it = j.find(key);
        if (it == j.end() || it->is_null()) return nullptr;
        if ((it->is_array() || it->is_object()) && it->empty()) return nullptr;
        return &*it;
    };
    if (present("mcp_servers")) return invalid_input("mcp_servers: MCP connectors are not supported");
    if (present("container")) return invalid_input("container: code-execution containers are not supported");
    for (const char * key : {"output_format", "output_config"})
        if (present(key)) return invalid_input(std::string(key) + ": not supported");
    return {};
}

}  // namespace

Status anthropic_parse_fields(const nlohmann::json & j, const nlohmann::ordered_json & ordered,
                              const openai_defaults & d, openai_request & r) {
    r.endpoint = openai_endpoint::messages;
    r.max_tokens = anthropic_max_tokens_default;
    r.sampling = d.sampling;
    if (auto it = j.find("model"); it != j.end() && it->is_string()) r.model = it->get<std::string>();
    auto it = j.find("messages");
    if (it == j.end() || !it->is_array() || it->empty()) return invalid_input("messages: must be a non-empty array");
    if (it->size() > d.prompt.max_messages)
        return request_fields::too_large("messages: " + std::to_string(it->size()) +
                                         " messages, more than --max-messages " +
                                         std::to_string(d.prompt.max_messages));
    anthropic_text_budget budget{d.prompt.max_prompt_bytes};
    openai_chat chat;
    BATON_RETURN_IF_ERROR(anthropic_system(j, budget, chat.messages));
    for (size_t i = 0; i < it->size(); ++i)
        BATON_RETURN_IF_ERROR(anthropic_message((*it)[i], "messages[" + std::to_string(i) + "]", budget, chat.messages,
                                                chat.images, chat.image_urls));
    if (chat.messages.empty()) return invalid_input("messages: no message has content");
    const size_t n = chat.messages.size();
    if (n >= 2 && chat.messages[n - 1].role == "assistant" && chat.messages[n - 2].role == "assistant")
        return invalid_input("messages: Cannot have 2 or more assistant messages at the end of the list.");
    if (auto k = j.find("chat_template_kwargs"); k != j.end() && !k->is_null()) {
        if (!k->is_object()) return invalid_input("chat_template_kwargs: must be an object");
        if (!request_fields::json_plain(*k, 0))
            return invalid_input("chat_template_kwargs: nested deeper than 32 levels or holds a number out of range");
        if (!k->empty()) chat.template_kwargs = *k;
    }
    BATON_RETURN_IF_ERROR(anthropic_tools(j, ordered, chat));
    BATON_RETURN_IF_ERROR(anthropic_tool_choice(j, chat));
    BATON_RETURN_IF_ERROR(anthropic_thinking(j));
    BATON_RETURN_IF_ERROR(anthropic_refuse_unsupported(j));
    if (auto m = j.find("metadata"); m != j.end() && !m->is_null() && !m->is_object())
        return invalid_input("metadata: must be an object");
    r.input = std::move(chat);
    BATON_RETURN_IF_ERROR(request_fields::get_int(j, "max_tokens", r.max_tokens, -1, INT32_MAX));
    sampling_params & s = r.sampling;
    BATON_RETURN_IF_ERROR(request_fields::get_number(j, "temperature", s.temperature, 0, 100));
    BATON_RETURN_IF_ERROR(request_fields::get_number(j, "top_p", s.top_p, 0, 1));
    BATON_RETURN_IF_ERROR(request_fields::get_int(j, "top_k", s.top_k, 0, INT32_MAX));
    s.grammar = {};  // (a node has no default grammar; tools make theirs when the chat is rendered)
    BATON_RETURN_IF_ERROR(sampling_check(s));
    BATON_RETURN_IF_ERROR(request_fields::get_stop(j, "stop_sequences", r.stop));
    BATON_RETURN_IF_ERROR(request_fields::get_bool(j, "stream", r.stream));
    return {};
}

}  // namespace baton
