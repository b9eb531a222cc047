// http_static.h — static files from a directory (llama-server's --path and its web UI), answered by the HTTP
// edge for GET/HEAD paths that no route takes, without the API key (as llama-server serves its pages).
//
// Only regular files under the root's real path are served: the path is refused when a segment is empty, "."
// or "..", or holds a backslash, NUL or '%', and the file's real path (symlinks resolved) must lie under the
// root; "/" is "/index.html". Files over 16 MiB are not served. The content type comes from the extension
// (html, js/mjs, css, json, svg, png, webp, ico, txt/md; else application/octet-stream).
// Thread-safety: pure functions (they read the file system).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "baton/http/http_message.h"

namespace baton {

// http_static_root: dir's real path, or "" when dir is not a readable directory.
std::string http_static_root(const std::string & dir);

// http_static_file: the file at path under root (a http_static_root) as a 200 response, or nullopt.
std::optional<http_response> http_static_file(const std::string & root, std::string_view path);

}  // namespace baton
