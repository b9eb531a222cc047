// llama_compat.cpp — llama-server's own endpoints on a node, answered as llama-server answers them:
// POST /tokenize, POST /detokenize, POST /apply-template, GET /props (POST is 501) and GET /slots (--slots).
//
//   /tokenize   {"content": TEXT, "add_special": false, "parse_special": true, "with_pieces": false}
//               -> {"tokens": [ID, ...]}, or with_pieces {"tokens": [{"id": ID, "piece": TEXT}, ...]} where a
//               piece that is not valid UTF-8 on its own is an array of its bytes (as llama-server renders it)
//   /detokenize {"tokens": [ID, ...]} -> {"content": TEXT}
//   /apply-template {"messages": [...], "chat_template_kwargs": {...}, "add_generation_prompt": true}
//               -> {"prompt": TEXT}: the chat as this node's template renders it (what it tokenizes)
//   /v1/messages/count_tokens (Anthropic's) a Messages body -> {"input_tokens": N}: the tokens of the prompt
//               the chat renders to (tools included), as llama-server counts them
// Bad fields are 400 naming the field; token ids outside the vocabulary are 400; a content over
// --max-prompt-mb is 413. Tokenizing runs on the bridge pool, not the event loop (a long text takes a while;
// text_tokenize is linear in it).
#include <nlohmann/json.hpp>

#include "baton/model.h"
#include "baton/openai/anthropic_response.h"
#include "baton/text.h"
#include "node_impl.h"

namespace baton {

using json = nlohmann::json;

namespace {

// valid_utf8: s is a sequence of complete, shortest-form UTF-8 characters.
bool valid_utf8(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        const uint8_t c = uint8_t(s[i]);
        size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
        if (n == 0 || i + n > s.size() || (n == 2 && c < 0xc2)) return false;
        for (size_t k = 1; k < n; ++k)
            if ((uint8_t(s[i + k]) & 0xc0) != 0x80) return false;
        i += n;
    }
    return true;
}

Result<bool> flag(const json & j, const char * key, bool fallback) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) return invalid_input(std::string(key) + ": must be true or false");
    return it->get<bool>();
}

}  // namespace

net::awaitable<void> node_impl::on_tokenize(http_exchange & ex) {
    const json j = json::parse(ex.request().body_text(), nullptr, false);
    if (!j.is_object()) co_return (void) co_await ex.respond_error(invalid_input("body: must be a JSON object"));
    auto content = j.find("content");
    if (content == j.end() || !content->is_string())
        co_return (void) co_await ex.respond_error(invalid_input("content: must be a string"));
    auto add_special = flag(j, "add_special", false);
    auto parse_special = flag(j, "parse_special", true);
    auto with_pieces = flag(j, "with_pieces", false);
    for (const auto * f : {&add_special, &parse_special, &with_pieces})
        if (!f->ok()) co_return (void) co_await ex.respond_error(f->status());
    const std::string text = content->get<std::string>();
    if (text.size() > cfg.defaults.prompt.max_prompt_bytes)  // the tokenizer's work is bounded as a prompt's
        co_return (void) co_await ex.respond_error(
            Status(status_code::too_large, "content: " + std::to_string(text.size()) +
                                               " bytes, more than --max-prompt-mb allows (" +
                                               std::to_string(cfg.defaults.prompt.max_prompt_bytes) + " bytes)"));
    const loaded_model & vocab = *model;
    auto out = co_await http->offload([&]() -> Result<json> {
        auto toks = text_tokenize(vocab, text, add_special.value(), parse_special.value());
        if (!toks.ok()) return toks.status();
        json arr = json::array();
        for (token_id t : toks.value()) {
            if (!with_pieces.value()) {
                arr.push_back(t);
                continue;
            }
            const std::string piece = text_token_piece(vocab, t);
            if (valid_utf8(piece)) {
                arr.push_back({{"id", t}, {"piece", piece}});
            } else {
                json bytes = json::array();
                for (unsigned char c : piece) bytes.push_back(int(c));
                arr.push_back({{"id", t}, {"piece", bytes}});
            }
        }
        return json{{"tokens", arr}};
    });
    if (!out.ok()) co_return (void) co_await ex.respond_error(out.status());
    co_await ex.respond(json_response(out.value()));
}

net::awaitable<void> node_impl::on_detokenize(http_exchange & ex) {
    const json j = json::parse(ex.request().body_text(), nullptr, false);
    if (!j.is_object()) co_return (void) co_await ex.respond_error(invalid_input("body: must be a JSON object"));
    auto it = j.find("tokens");
    if (it == j.end() || !it->is_array())
        co_return (void) co_await ex.respond_error(invalid_input("tokens: must be an array of token ids"));
    const int64_t n_vocab = model->identity().n_vocab;
    std::vector<token_id> tokens;
    for (size_t i = 0; i < it->size(); ++i) {
        const json & t = (*it)[i];
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab)
            co_return (void) co_await ex.respond_error(invalid_input("tokens[" + std::to_string(i) + "]: " + t.dump() +
                                                                     " is not a token id in 0.." +
                                                                     std::to_string(n_vocab - 1)));
        tokens.push_back(token_id(t.get<int64_t>()));
    }
    const loaded_model & vocab = *model;
    const std::string text = co_await http->offload([&] { return text_detokenize(vocab, tokens); });
    co_await ex.respond(json_response({{"content", text}}));
}

net::awaitable<void> node_impl::on_apply_template(http_exchange & ex) {
    auto oreq = openai_parse(ex.request().body_text(), openai_endpoint::chat, cfg.defaults);
    if (!oreq.ok()) co_return (void) co_await ex.respond_error(oreq.status());
    auto prompt = co_await http->offload([&] { return chat->render(std::get<openai_chat>(oreq->input)); });
    if (!prompt.ok()) co_return (void) co_await ex.respond_error(prompt.status());
    co_await ex.respond(json_response({{"prompt", prompt->text}}));
}

net::awaitable<void> node_impl::on_count_tokens(http_exchange & ex) {
    auto oreq = openai_parse(ex.request().body_text(), openai_endpoint::messages, cfg.defaults);
    if (!oreq.ok()) co_return (void) co_await ex.respond_error(oreq.status());
    if (Status st = co_await fetch_image_urls(oreq.value()); !st.ok()) co_return (void) co_await ex.respond_error(st);
    // (No context bound: a prompt too long to generate from is still counted; --max-prompt-mb bounds it.)
    auto rendered =
        co_await http->offload([&] { return chat->render_request(std::move(oreq.value()), *model, 0, media.get()); });
    if (!rendered.ok()) co_return (void) co_await ex.respond_error(rendered.status());
    const auto * in = std::get_if<openai_chat_rendered>(&rendered->input);
    const uint32_t n = in ? uint32_t(in->tokens.size()) : 0;
    co_await ex.respond(http_response::json(anthropic_count_tokens_json(n)));
}

net::awaitable<void> node_impl::on_props(http_exchange & ex) {
    if (ex.request().method == "POST")
        co_return (void) co_await ex.respond_error(Status(
            status_code::not_implemented, "this server does not support changing global properties (POST /props)"));
    openai_request defaults;
    defaults.max_tokens = cfg.defaults.max_tokens;
    defaults.sampling = cfg.defaults.sampling;
    const kv_layout c = eng->layout();
    json props = {{"default_generation_settings",
                   {{"params", openai_generation_settings(defaults, n_ctx_slot())}, {"n_ctx", n_ctx_slot()}}},
                  {"total_slots", c.n_seq_max},
                  {"model_alias", model_name},
                  {"model_path", cfg.model_path},
                  {"modalities",
                   {{"vision", media != nullptr && media->vision()},
                    {"video", false},
                    {"audio", media != nullptr && media->audio()}}},
                  {"endpoint_slots", cfg.slots_endpoint},
                  {"endpoint_props", false},
                  {"endpoint_metrics", true},
                  {"chat_template", chat->source()},
                  {"bos_token", model->info().bos_text},
                  {"eos_token", model->info().eos_text},
                  {"build_info", cfg.build_info},
                  {"is_sleeping", false},
                  {"baton",
                   {{"role", node_role_name(cfg.role)},
                    {"jinja", chat->jinja()},
                    {"chat_template_origin", chat->origin()},
                    {"chat_usable", chat->usable().ok()},
                    {"reasoning_format", reasoning_format_name(cfg.chat.reasoning)},
                    {"slot_save_path", !cfg.slot_save_path.empty()}}}};
    co_await ex.respond(json_response(props));
}

net::awaitable<void> node_impl::on_llama_slots(http_exchange & ex) {
    if (!cfg.slots_endpoint)
        co_return (void) co_await ex.respond_error(Status(
            status_code::not_implemented, "this server does not support the slots endpoint: start it with --slots"));
    json arr = json::array();
    for (const slot_info & s : eng->slots())
        arr.push_back({{"id", s.id},
                       {"n_ctx", n_ctx_slot()},  // a slot's share, as llama-server reports it
                       {"speculative", false},
                       {"is_processing", s.busy},
                       {"n_tokens", s.n_tokens},
                       {"parked", s.parked},
                       {"n_checkpoints", s.n_checkpoints}});
    co_await ex.respond(json_response(arr));
}

}  // namespace baton
