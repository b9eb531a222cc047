// node.h — a Baton node: one model, one engine, one HTTP server (`baton serve`).
//
// The node speaks the OpenAI API (/v1/completions, /v1/chat/completions), the PD endpoints (/v1/prefill
// returns a state blob, /v1/decode continues one) and the slot state endpoints, plus /health, /v1/models,
// /v1/slots and /metrics, and llama-server's endpoints (/completion, /tokenize, /detokenize, /apply-template,
// /props, /slots, unprefixed aliases); docs/api.md is the reference. Handlers are coroutines on the HTTP edge's event
// loop (include/baton/http/http_server.h): they parse requests, submit typed tasks to the engine and wait for their
// events without holding a thread; only the engine's scheduler thread touches the llama context. Every
// error becomes an HTTP response in http/http_errors.cpp.
//
// Lifecycle: bind() (port 0 picks a free port) -> start() (accepting; /health answers 503) -> load()
// (model + engine; /health answers 200) -> shutdown() (stop accepting, cancel in-flight work, join).
// Thread-safety: the lifecycle functions are called from one thread; the handlers run on HTTP threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "baton/base/status.h"
#include "baton/cluster/etcd_client.h"
#include "baton/cluster/node_record.h"
#include "baton/device.h"
#include "baton/embedder.h"
#include "baton/engine.h"
#include "baton/http/http_server.h"
#include "baton/openai/chat_format.h"
#include "baton/openai/openai.h"
#include "baton/tier/valkey_client.h"

namespace baton {

// Registration in a cluster (docs/cluster.md).
struct node_cluster_config {
    etcd_config etcd;
    std::string cluster = "baton";  // key prefix /baton/<cluster>/
    std::string advertise;          // "http://host:port" routers use to reach this node
    double lease_ttl_s = 10;        // 2..3600
    double load_interval_s = 2;     // record refresh, 0.2..60
};

// The shared prefix-cache tier on Valkey (--tier-valkey, docs/tier.md "A node and the tier").
struct node_tier_config {
    valkey_config valkey;
    uint32_t ttl_s = 3600;  // of every entry the node writes
    bool deltas = true;     // a turn's state as a delta over the node's entry for the turn before (--no-tier-deltas)
};

// Fetching the http(s) images a chat names (--image-urls, docs/api.md "Images"): off unless set, since it makes the
// node fetch any address a client names, the network behind it included.
struct image_url_config {
    std::chrono::milliseconds timeout{10000};  // --image-url-timeout: all of one request's fetches
    std::string ca_file;                       // --image-url-ca: https is verified against it (empty: the system's)
    int max_redirects = 3;
};

struct node_config {
    std::string model_path;
    std::string host = "127.0.0.1";
    int port = 8080;  // 0: any free port
    node_role role = node_role::both;
    engine_config engine;                         // context (slots = ctx.n_seq_max), blob limits
    offload_config offload;                       // devices and layers (-ngl, -dev, ...); default CPU only
    std::string api_key;                          // empty: no authentication
    uint64_t max_blob_bytes = uint64_t(1) << 30;  // body cap of /v1/decode and PUT state (bytes)
    uint64_t max_json_bytes = uint64_t(8) << 20;  // body cap of JSON endpoints (bytes)
    // Direct transfer (prefill role): the states held for decode nodes to fetch: --state-hold-mb,
    // --state-lease-ms (docs/router.md).
    uint64_t state_hold_bytes = uint64_t(2) << 30;
    uint32_t state_lease_ms = 30000;
    // --state-compress-level N (prefill role): a state sent for PD (fetched by a decode node, or a /v1/prefill
    // blob for a router) is packed (zstd at level N over byte planes, blob_pack.h) when the asker accepts it; 0
    // (the default): sent as it is. docs/benchmarks.md, figure
    // 22, says on which links packing pays.
    int state_compress_level = 0;
    // --state-stream-tokens N (prefill role, direct transfer): a state a router asks to stream leaves in parts
    // of N tokens (at least prompt/16) while the prompt computes, and the decode node joins them as they come
    // (state_stream.h, docs/router.md "Streamed transfer"). 0 (the default): the state leaves whole after the
    // prompt. Not with deltas (a delta base: whole) or packing (a stream is sent as it is).
    uint32_t state_stream_tokens = 0;
    double timeout_s = 600;                       // per request, from arrival to the last byte; 0: none
    http_limits limits;                           // the HTTP edge's limits and per-phase deadlines (http_server.h)
    http_cors cors;                               // CORS (--cors-origins ...)
    std::string static_dir;  // static files at the paths no endpoint takes (--path, the web UI; http_static.h)
    uint32_t http_threads = 2;                    // event-loop threads of the HTTP edge
    double drain_s = 0;                           // shutdown: wait this long for in-flight requests before cancelling
    std::optional<node_cluster_config> cluster;   // register in etcd when set
    std::optional<node_tier_config> tier;         // the shared prefix-cache tier when set
    std::string alias;                            // the model's name in /v1/models and responses (cluster records)
    std::vector<std::string> tags;                // --tags: informational model tags (/v1/models meta.tags)
    // --embedding (--pooling, --embd-normalize, -b): the embedding endpoints (an embedder beside the engine);
    // unset: they answer 501, as llama-server without --embeddings.
    std::optional<embedder_config> embedding;
    // --mmproj (--no-mmproj-offload, --mmproj-max-images, --mmproj-max-image-mb): images in chats, encoded by this
    // projector (media.h); unset: a chat with images is refused (400), as llama-server without --mmproj.
    std::optional<media_config> media;
    // --image-urls (--image-url-timeout, --image-url-ca): fetch the http(s) images a chat names (image_fetch.h);
    // unset: such images are refused (400). Needs media.
    std::optional<image_url_config> image_urls;
    openai_defaults defaults;                     // --temp, --top-k, ..., --seed, -n: what requests leave out
    chat_format_config chat;     // --jinja, --chat-template(-file), --chat-template-kwargs, --reasoning-format
    bool slots_endpoint = true;  // --slots / --no-slots: GET /slots
    std::string slot_save_path;  // --slot-save-path: POST /slots/{id}?action=save|restore; "" off
    bool verbose = false;        // --verbose: one log line per generation
    std::string build_info;      // /props "build_info" (the CLI's version string)
};

class node_impl;
struct node_test_access;

class node {
  public:
    explicit node(node_config cfg);
    ~node();  // shutdown()

    // bind binds the listening socket; returns the port.
    Result<int> bind();
    // start accepts connections on a background thread. REQUIRES: bind() succeeded.
    void start();
    // load loads the model and creates the engine; afterwards the node is ready.
    Status load();
    // running is false once the HTTP server stopped (shutdown, or a listener failure).
    bool running() const;
    // shutdown drains: it deregisters from the cluster first, then refuses new work (503 draining), lets
    // in-flight requests finish for up to drain_s, cancels the rest and stops the HTTP edge. Idempotent.
    void shutdown();
    // drain_requested: an authenticated POST /admin/drain asked the node to drain (the caller then runs
    // shutdown(), as on SIGTERM).
    bool drain_requested() const;

  private:
    friend struct node_test_access;  // the test node (src/node/node_test_seam.h)
    std::unique_ptr<node_impl> impl_;
};

}  // namespace baton
