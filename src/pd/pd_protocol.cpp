// pd_protocol.cpp — what a node's answer means to the router (see pd_protocol.h).
#include "baton/pd/pd_protocol.h"

namespace baton {

pd_answer pd_classify_node_answer(pd_hop hop, int status, bool draining) {
    if (status == 200) return pd_answer::ok;
    if (status == 503) return draining ? pd_answer::draining : pd_answer::busy;
    if (hop == pd_hop::decode && status == 422) return pd_answer::blob_rejected;
    if (hop == pd_hop::decode && status == 424) return pd_answer::state_lost;
    if (hop == pd_hop::prefill && status == 400) return pd_answer::client_error;
    return pd_answer::node_error;
}

bool pd_state_id_valid(std::string_view id) {
    return id.size() == pd_state_id_chars && id.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

const char * pd_answer_name(pd_answer a) {
    switch (a) {
        case pd_answer::ok: return "ok";
        case pd_answer::blob_rejected: return "blob_rejected";
        case pd_answer::state_lost: return "state_lost";
        case pd_answer::draining: return "draining";
        case pd_answer::busy: return "busy";
        case pd_answer::client_error: return "client_error";
        case pd_answer::node_error: return "node_error";
    }
    return "unknown";
}

}  // namespace baton
