// router.h — `baton route`: the OpenAI front that drives prefill -> blob -> decode across node pools.
//
// A request whose prompt has at least pd_min_tokens tokens goes to a prefill node (/v1/prefill), its blob
// to a decode node (/v1/decode), and the decode node's response back to the client; shorter prompts go
// straight to a decode node. Failure policy (each case counted in /metrics by reason):
//   prefill node error or timeout  -> the next prefill node; all failed -> local prefill on a decode node
//                                     (fallback local) or an explicit error (fallback fail);
//   decode node rejects the blob   -> local prefill on a decode node, or an explicit error;
//   decode node unreachable before the first byte -> another decode node; after the first byte -> an
//                                     error event in the stream and a closed response;
//   every hop has a timeout; nodes failing health checks are ejected and re-admitted when healthy;
//   a node that gives its health check no answer (dead or stalled) has its calls in flight cancelled at
//   once, and each is then retried, fallen back or ended with an explicit error by the rules above.
// Capacity: the router lets each node hold its slots plus --node-queue requests (by default as many again
// as it has slots, so a freed slot's next request is already waiting there; slots learned from the node's
// /v1/models); a request that finds every node full waits at the router (at most --queue-max of
// them, each until its deadline) and is admitted in arrival order as capacity frees up.
// Threads: the router runs on the HTTP edge's event loop (http_server): client requests, upstream calls,
// the blob relay and the health checker are coroutines; no request holds a thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "baton/base/status.h"
#include "baton/cluster/etcd_client.h"
#include "baton/http/http_server.h"
#include "baton/openai/openai.h"

namespace baton {

enum class fallback_policy : uint8_t { local, fail };
// How a state moves from the prefill node to the decode node (docs/router.md, "Direct transfer"):
//   direct: the prefill node holds it under a lease and the decode node fetches it from there; the router
//           moves no KV bytes (the default);
//   relay:  the prefill node sends it to the router, which streams it on to the decode node (for nodes that
//           cannot reach each other).
enum class pd_transfer : uint8_t { direct, relay };

struct router_config {
    std::vector<std::string> prefill_urls;
    std::vector<std::string> decode_urls;
    std::string host = "127.0.0.1";
    int port = 8080;
    std::string api_key;          // clients must send it (Authorization: Bearer) when set
    std::string node_key;         // sent to nodes when set
    // Prompts with fewer tokens than this that the chosen decode node does not already hold (KV events,
    // with -m; else the whole prompt) skip the prefill hop.
    uint32_t pd_min_tokens = 64;
    // --pd-delta: when the decode node the request goes to holds a prefix of its prompt (KV events, with -m), the
    // prefill node ships only the cells past that prefix (a delta, docs/state-blob.md); off: always the whole state.
    bool pd_delta = true;
    fallback_policy fallback = fallback_policy::local;
    pd_transfer transfer = pd_transfer::direct;  // --pd-transfer
    size_t kv_index_blocks = size_t(1) << 18;    // --kv-index-blocks: the prefix index's bound per model
    double timeout_s = 300;            // whole-request deadline; every hop gets what is left
    double health_interval_s = 1.0;    // health checks of every node
    // A node that does not answer its health check within this many seconds is ejected, and the calls in
    // flight to it are cancelled at once (a stalled node is found within interval + timeout).
    double health_timeout_s = 1.0;
    uint32_t load_cap = 4;             // decode affinity yields when a node is this far above the least loaded
    std::string model_path;            // optional: count prompt tokens exactly with this model's vocabulary
    size_t max_body_bytes = 8u << 20;  // client request bodies
    prompt_limits prompt;              // --max-messages, --max-prompt-mb: as on a node, checked while routing
    uint64_t max_blob_bytes = uint64_t(1024) << 20;  // a prefill node's blob (--max-blob-mb); larger: prefill failure
    uint32_t queue_max = 4096;  // requests that may wait at the router for node capacity; beyond: 503
    int32_t node_queue = -1;    // requests the router lets wait at a node beyond its slots; -1: as many as it has slots
    http_limits limits;         // the HTTP edge's limits and deadlines (http/http_server.h)
    http_cors cors;             // CORS (--cors-origins ...)
    std::string static_dir;     // static files at the paths no endpoint takes (--path, the web UI; http_static.h)
    uint32_t http_threads = 2;  // event-loop threads
    std::optional<etcd_config> etcd;  // follow the cluster's registrations (docs/cluster.md)
    std::string cluster = "baton";    // with etcd: keys under /baton/<cluster>/
};

class router_impl;

class router {
  public:
    // create validates the config (URLs, ports) and loads the vocabulary when model_path is set.
    static Result<std::unique_ptr<router>> create(const router_config & cfg);
    ~router();
    // start binds (port 0 picks a free port) and starts serving and health checking; returns the port.
    Result<int> start();
    // stop stops accepting, lets in-flight requests end, joins threads. Idempotent.
    void stop();
    // wait blocks until stop() was called (from a signal handler thread, say).
    void wait();

  private:
    explicit router(std::unique_ptr<router_impl> impl);
    std::unique_ptr<router_impl> impl_;
};

}  // namespace baton
