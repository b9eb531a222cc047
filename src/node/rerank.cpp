// rerank.cpp — the node's rerank endpoints (/rerank, /reranking, /v1/rerank, /v1/reranking): the request
// parsed (openai/rerank.h), each document made into the model's rerank prompt with the query
// (rerank_prompt.h), all of them scored by the embedder with rank pooling in as few decodes as fit, and the
// scores rendered; all of it off the event loop.
#include "baton/openai/rerank.h"
#include "node_impl.h"

namespace baton {

net::awaitable<void> node_impl::on_rerank(http_exchange & ex) {
    if (!emb || emb->pooling() != pooling_kind::rank)
        co_return (void) co_await ex.respond_error(Status(
            status_code::not_implemented, "This server does not support reranking. Start it with `--reranking`"));
    auto req = openai_rerank_parse(ex.request().body_text(), cfg.defaults.prompt);
    if (!req.ok()) co_return (void) co_await ex.respond_error(req.status());
    auto body = co_await http->offload([&]() -> Result<std::string> {
        auto inputs = rerank_prompts(*model, rerank, req->query, req->documents);
        if (!inputs.ok()) return inputs.status();
        // (embed() checks each prompt against -b; rank pooling leaves the scores unnormalized.)
        auto results = emb->embed(inputs.value(), -1);
        if (!results.ok()) return results.status();
        std::vector<rerank_score> scores(results->size());
        for (size_t i = 0; i < scores.size(); ++i) {
            const embedding_result & e = results.value()[i];
            if (e.vectors.empty() || e.vectors[0].empty())
                return Status(status_code::engine_error, "rerank: no score for a document");
            scores[i] = {e.vectors[0][0], e.n_tokens};
        }
        return openai_rerank_json(req.value(), scores, model_name);
    });
    if (!body.ok()) co_return (void) co_await ex.respond_error(body.status());
    co_await ex.respond(http_response::json(std::move(body.value())));
}

}  // namespace baton
