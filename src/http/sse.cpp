// sse.cpp — see sse.h.
#include "baton/http/sse.h"

#include "baton/http/http_errors.h"

namespace baton {

std::string sse_event(const std::string & payload) { return "data: " + payload + "\n\n"; }

const std::string & sse_done() {
    static const std::string done = "data: [DONE]\n\n";
    return done;
}

std::string sse_error_and_done(const Status & st) { return sse_event(http_error_json(st)) + sse_done(); }

}  // namespace baton
