// http_static.cpp — static files (see http_static.h).
#include "baton/http/http_static.h"

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <iterator>

namespace baton {

namespace {

constexpr off_t k_static_bytes_max = off_t(16) << 20;

std::string real_path(const std::string & p) {
    char buf[PATH_MAX];
    if (!::realpath(p.c_str(), buf)) return {};
    return buf;
}

const char * content_type_of(std::string_view path) {
    const size_t dot = path.rfind('.');
    const std::string_view ext = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
    if (ext == "html" || ext == "htm") return "text/html; charset=utf-8";
    if (ext == "js" || ext == "mjs") return "text/javascript; charset=utf-8";
    if (ext == "css") return "text/css; charset=utf-8";
    if (ext == "json") return "application/json";
    if (ext == "svg") return "image/svg+xml";
    if (ext == "png") return "image/png";
    if (ext == "webp") return "image/webp";
    if (ext == "ico") return "image/x-icon";
    if (ext == "txt" || ext == "md") return "text/plain; charset=utf-8";
    return "application/octet-stream";
}

}  // namespace

std::string http_static_root(const std::string & dir) {
    if (dir.empty()) return {};
    const std::string r = real_path(dir);
    struct stat st{};
    if (r.empty() || ::stat(r.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || ::access(r.c_str(), R_OK | X_OK) != 0)
        return {};
    return r;
}

std::optional<http_response> http_static_file(const std::string & root, std::string_view path) {
    if (root.empty() || path.empty() || path[0] != '/') return std::nullopt;
    std::string rel = path == "/" ? std::string("/index.html") : std::string(path);
    // Every segment a plain name: no empty, "." or ".." segment, no backslash, NUL or escapes.
    for (size_t at = 1; at <= rel.size();) {
        const size_t slash = std::min(rel.find('/', at), rel.size());
        const std::string_view seg(rel.data() + at, slash - at);
        if (seg.empty() || seg == "." || seg == "..") return std::nullopt;
        at = slash + 1;
    }
    if (rel.find_first_of(std::string("\\%\0", 3)) != std::string::npos) return std::nullopt;
    const std::string file = real_path(root + rel);
    if (file.size() <= root.size() || file.compare(0, root.size(), root) != 0 || file[root.size()] != '/')
        return std::nullopt;  // (a symlink out of the root)
    struct stat st{};
    if (::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > k_static_bytes_max) return std::nullopt;
    std::ifstream in(file, std::ios::binary);
    if (!in) return std::nullopt;
    http_response r;
    r.body.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) return std::nullopt;
    r.content_type = content_type_of(rel);
    return r;
}

}  // namespace baton
