// embeddings.cpp — the node's embedding endpoints (/embedding, /embeddings, /v1/embeddings): the request
// parsed (openai/embeddings.h), its strings tokenized as llama-server tokenizes them, the embedder's results
// rendered; all of it off the event loop.
#include <nlohmann/json.hpp>

#include "baton/openai/embeddings.h"
#include "node_impl.h"

namespace baton {

net::awaitable<void> node_impl::on_embeddings(http_exchange & ex, bool oai) {
    if (!emb)
        co_return (void) co_await ex.respond_error(Status(
            status_code::not_implemented, "This server does not support embeddings. Start it with `--embeddings`"));
    auto req = openai_embedding_parse(ex.request().body_text(), cfg.defaults.prompt);
    if (!req.ok()) co_return (void) co_await ex.respond_error(req.status());
    if (oai && emb->pooling() == pooling_kind::none)
        co_return (void) co_await ex.respond_error(invalid_input(
            "Pooling type 'none' is not OAI compatible. Please use a different pooling type (--pooling)"));
    auto body = co_await http->offload([&]() -> Result<std::string> {
        std::vector<std::vector<token_id>> inputs;
        for (size_t i = 0; i < req->inputs.size(); ++i) {
            if (const auto * text = std::get_if<std::string>(&req->inputs[i])) {
                auto t = text_tokenize(*model, *text, true, true);  // (bounded by --max-prompt-mb; embed() checks -b)
                if (!t.ok()) return t.status();
                inputs.push_back(std::move(t.value()));
            } else {
                inputs.push_back(std::get<std::vector<token_id>>(req->inputs[i]));  // (embed() checks the ids)
            }
        }
        auto results = emb->embed(inputs, req->normalize.value_or(cfg.embedding->normalize));
        if (!results.ok()) return results.status();
        return openai_embedding_json(req.value(), results.value(), oai, model_name);
    });
    if (!body.ok()) co_return (void) co_await ex.respond_error(body.status());
    co_await ex.respond(http_response::json(std::move(body.value())));
}

}  // namespace baton
