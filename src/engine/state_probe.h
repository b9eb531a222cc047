// state_probe.h — learns the structure of this node's sequence states (state_shape, baton/state_payload.h)
// from a probe sequence it exports itself, so every incoming state can be checked against it before
// libllama parses it.
// Thread-safety: call before the scheduler thread starts (it uses the context).
#pragma once

#include "baton/base/status.h"
#include "baton/model.h"
#include "baton/state_payload.h"

struct llama_context;

namespace baton {

// state_probe decodes two tokens into sequence seq (which must be empty), exports its full and partial
// state, learns both structures, and removes the sequence again. unsupported when this libllama's state
// layout is not the one Baton knows (the node then refuses every external state, saying why).
Result<state_shape> state_probe(llama_context * ctx, const loaded_model & model, int32_t seq);

}  // namespace baton
