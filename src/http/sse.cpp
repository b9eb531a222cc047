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

std::string sse_named_event(const std::string & name, const std::string & payload) {
    return "event: " + name + "\ndata: " + payload + "\n\n";
}

std::string sse_named_error(const Status & st) {
    std::string body = http_error_json(st);  // {"error":{...}}: Anthropic's shape once "type" leads it
    body.insert(1, "\"type\":\"error\",");
    return sse_named_event("error", body);
}

}  // namespace baton
