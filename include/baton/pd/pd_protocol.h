// pd_protocol.h — the router <-> node protocol of prefill/decode disaggregation, defined once: the paths a
// router calls on a node, the X-Baton-* headers either side writes, and what a node's answer means to the
// router (pd_classify_node_answer, a pure function its unit test tables). Node (server), router and the
// CLI's demo use these names; none spells a path or header itself. docs/router.md describes the protocol.
// Thread-safety: constants and pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace baton {

// Paths a router calls on a node.
inline constexpr std::string_view pd_path_prefill = "/v1/prefill";  // POST the client's request -> a state blob
inline constexpr std::string_view pd_path_decode = "/v1/decode";    // POST a state blob -> the client's answer
inline constexpr std::string_view pd_path_slot_state = "/v1/slots/{id}/state";  // GET/PUT/DELETE a slot's state
// Direct transfer (docs/router.md): a state a prefill node holds under a lease. GET: a decode node fetches it;
// DELETE: the router releases it. {id}: 32 lowercase hex digits.
inline constexpr std::string_view pd_path_held_state = "/v1/states/{id}";
inline constexpr std::string_view pd_path_held_state_prefix = "/v1/states/";
inline constexpr size_t pd_state_id_chars = 32;
// pd_state_id_valid: whether id has the form of a held state's id (pd_state_id_chars lowercase hex digits):
// checked by the node before any lookup and by the router before it names the id to a decode node.
bool pd_state_id_valid(std::string_view id);
// KV events (docs/kv-events.md): what a node's caches hold, for routers' prefix indexes. GET
// /v1/kv/events?after=SEQ&epoch=EPOCH -> {"node", "epoch", "seed", "seq", "resync", "batches": [batch...]}; GET /v1/kv/snapshot
// -> a snapshot. Block hashes cover pd_kv_block_tokens tokens each.
inline constexpr std::string_view pd_path_kv_events = "/v1/kv/events";
inline constexpr std::string_view pd_path_kv_snapshot = "/v1/kv/snapshot";
inline constexpr uint32_t pd_kv_block_tokens = 64;

// Headers.
inline constexpr std::string_view pd_header_draining = "X-Baton-Draining";  // node -> router on a 503: leaving
inline constexpr std::string_view pd_header_prompt_tokens = "X-Baton-Prompt-Tokens";  // prefill answer: prompt
inline constexpr std::string_view pd_header_cached_tokens = "X-Baton-Cached-Tokens";  // prefill answer: reused
// router -> prefill node: the endpoint of the client's request ("completions" | "chat" | "completion",
// openai_endpoint_name); the body is the client's, unchanged. Absent: completions.
inline constexpr std::string_view pd_header_endpoint = "X-Baton-Endpoint";
// Direct transfer. router -> prefill node: "1": hold the state (state_hold) and answer with its id (JSON
// {"state": id, "bytes": n}) instead of the blob. router -> decode node: where the state is (the prefill node's
// origin, "http://HOST:PORT") and its id; the body is then empty.
inline constexpr std::string_view pd_header_state_hold = "X-Baton-State-Hold";
inline constexpr std::string_view pd_header_state_source = "X-Baton-State-Source";
inline constexpr std::string_view pd_header_state_id = "X-Baton-State-Id";
// Streamed transfer. router -> prefill node, with X-Baton-State-Hold: "1": a node that streams states
// (--state-stream-tokens) holds the state as a stream (state_stream.h) and answers with its id before the
// prompt computes ({"state": id, "stream": true}); the decode node's fetch then reads the parts as they come.
inline constexpr std::string_view pd_header_state_stream = "X-Baton-State-Stream";
// Deltas. router -> prefill node: the decode node holds the prompt's first N tokens (decimal), so the state is a
// delta over them (blob format 1.2, only the cells past them); the decode node restores it onto the slot that
// holds them, or refuses it (422) when none does.
inline constexpr std::string_view pd_header_delta_base = "X-Baton-Delta-Base";
// Live migration (docs/cluster.md "Live migration"). router -> decode node: "1": the router can move this
// generation to another decode node (it splices the answer), so the node may pause it (POST /admin/migrate,
// drain) and hand its state on instead of finishing it. node -> router, when it did: the state is held here (as
// a direct transfer's) and named, with the response's id and created time, by JSON {"state": id, "bytes": n,
// "id": ..., "created": ...}: a stream ends with that as the data of SSE event pd_sse_migrated (and no [DONE]), a
// whole answer is a 200 with header X-Baton-Migrated: id and that JSON as its body. router -> the decode node
// that resumes it (with the state's source and id): the response's id and created time, its answer's own.
inline constexpr std::string_view pd_header_migratable = "X-Baton-Migratable";
inline constexpr std::string_view pd_header_migrated = "X-Baton-Migrated";
inline constexpr std::string_view pd_sse_migrated = "baton-migrated";
inline constexpr std::string_view pd_header_resume_id = "X-Baton-Resume-Id";
inline constexpr std::string_view pd_header_resume_created = "X-Baton-Resume-Created";
inline constexpr std::string_view pd_header_route = "X-Baton-Route";  // router -> client: "pd", "local", ...
inline constexpr std::string_view pd_header_decode_node = "X-Baton-Decode-Node";  // router -> client: which node

// pd_hop: which call of the PD flow a node answered.
enum class pd_hop : uint8_t {
    prefill,  // POST /v1/prefill
    decode,   // POST /v1/decode (or a forwarded request on a decode node)
};

// pd_answer: what the router makes of a node's HTTP answer (transport failures are failure_policy's).
enum class pd_answer : uint8_t {
    ok,             // 200: use it (a blob from prefill, the client's answer from decode)
    blob_rejected,  // decode, 422: the node refused the blob itself; the router re-runs the request locally
    state_lost,     // decode, 424: the node could not fetch the held state it was sent to (direct transfer)
    draining,       // 503 with X-Baton-Draining: the node leaves the cluster; mark it and try another
    busy,           // 503 without it: no free slot there; try another node
    client_error,   // prefill, 400: the request is at fault; no other node would take it, answer the client
    node_error,     // anything else: a prefill hop tries the next node; a decode hop relays it as it is
};

// pd_classify_node_answer: the meaning of status (with or without the draining header) on hop.
pd_answer pd_classify_node_answer(pd_hop hop, int status, bool draining);

const char * pd_answer_name(pd_answer a);  // for metrics and test output: "ok", "blob_rejected", ...

}  // namespace baton
