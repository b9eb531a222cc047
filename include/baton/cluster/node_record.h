// node_record.h — what a node tells the cluster about itself: the value of its key in etcd.
//
// A record says how to reach the node (url), which work it takes (role), what a blob must match to be
// restored there (the model fingerprint and the KV layout: its group), how many slots it has and how busy
// it is, and whether it drains. The JSON form is specified in docs/cluster.md; node_record_parse is total:
// anything else is an error naming the field, never a half-filled record.
// Thread-safety: plain values and pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "baton/base/identity.h"
#include "baton/base/status.h"

namespace baton {

// node_role: which work a node takes (`baton serve --role`, its cluster record).
enum class node_role : uint8_t { both, prefill, decode };
const char * node_role_name(node_role r);  // "both" | "prefill" | "decode"
// node_role_parse: invalid_argument naming the value otherwise.
Result<node_role> node_role_parse(std::string_view s);

struct node_record {
    node_role role = node_role::both;
    std::string url;                        // "http://host:port" (--advertise)
    std::string model_id;                   // what /v1/models calls the model (the GGUF's file name)
    std::string model_alias;                // --alias, or empty
    std::array<uint8_t, 16> fingerprint{};  // the model's fingerprint (model.h)
    kv_layout kv;                           // the node's KV layout (with its n_ctx)
    uint32_t slots = 0;
    uint32_t busy = 0;     // slots working now
    uint32_t waiting = 0;  // admitted requests waiting for a slot
    bool draining = false;
    // The node takes images (serve --mmproj). Optional in the JSON ("vision"; absent: false), so version-1
    // readers and writers without it interoperate.
    bool vision = false;
    // The node takes audio clips (serve --mmproj with a projector that reads audio): "audio", optional likewise.
    bool audio = false;

    bool operator==(const node_record &) const = default;
};

constexpr int k_node_record_version = 1;

std::string node_record_json(const node_record & r);
// node_record_parse: invalid_argument naming the field for anything but a version-1 record.
Result<node_record> node_record_parse(std::string_view json_text);

// node_record_group: the blob-compatibility class of a node: fingerprint and the kv_layout fields a blob
// must match (n_seq_max only for a non-unified cache). Nodes of one group can restore each other's blobs.
std::string node_record_group(const node_record & r);

// node_record_serves says whether the node answers to a request's "model" (its id or alias).
bool node_record_serves(const node_record & r, std::string_view model);

// Keys: cluster_prefix(NAME) = "/baton/NAME/nodes/"; a node's key = prefix + role + "/" + host:port.
// cluster_name_check: 1..64 of [A-Za-z0-9._-] (invalid_argument naming --cluster otherwise).
Status cluster_name_check(std::string_view name);
std::string cluster_prefix(std::string_view cluster);
std::string cluster_node_key(std::string_view cluster, node_role role, std::string_view host_port);

}  // namespace baton
