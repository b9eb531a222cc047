// node_record.cpp — the record's JSON form, its group and the key layout (see node_record.h).
#include "baton/cluster/node_record.h"

#include <nlohmann/json.hpp>

namespace baton {

using json = nlohmann::json;

namespace {

Status bad(const std::string & m) { return Status(status_code::invalid_argument, "node record: " + m); }

// A ggml type number from its name ("f16"), through the one name table (identity_kv_type_name).
bool kv_type_from_name(const std::string & name, int32_t & out) {
    for (int32_t t = 0; t < 64; ++t) {
        if (identity_kv_type_name(t) == name) {
            out = t;
            return true;
        }
    }
    return false;
}

bool fingerprint_from_hex(const std::string & hex, std::array<uint8_t, 16> & out) {
    if (hex.size() != 32) return false;
    auto nib = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        return -1;
    };
    for (size_t i = 0; i < 16; ++i) {
        const int hi = nib(hex[2 * i]), lo = nib(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        out[i] = uint8_t(hi << 4 | lo);
    }
    return true;
}

Status get_u32(const json & j, const char * key, const std::string & where, uint32_t & out) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_unsigned() || it->get<uint64_t>() > UINT32_MAX)
        return bad(where + key + ": must be an integer in 0..2^32-1");
    out = it->get<uint32_t>();
    return {};
}

Status get_string(const json & j, const char * key, const std::string & where, std::string & out, size_t max = 1024) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) return bad(where + key + ": must be a string");
    out = it->get<std::string>();
    if (out.size() > max) return bad(where + key + ": longer than " + std::to_string(max) + " bytes");
    return {};
}

Status get_bool(const json & j, const char * key, const std::string & where, bool & out) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_boolean()) return bad(where + key + ": must be true or false");
    out = it->get<bool>();
    return {};
}

Status parse_fields(const json & j, node_record & r) {
    if (!j.is_object()) return bad("must be a JSON object");
    auto v = j.find("version");
    if (v == j.end() || !v->is_number_integer() || v->get<int64_t>() != k_node_record_version)
        return bad("version: must be " + std::to_string(k_node_record_version));
    std::string role;
    BATON_RETURN_IF_ERROR(get_string(j, "role", "", role));
    auto parsed_role = node_role_parse(role);
    if (!parsed_role.ok()) return bad(parsed_role.status().message());
    r.role = parsed_role.value();
    BATON_RETURN_IF_ERROR(get_string(j, "url", "", r.url));
    auto m = j.find("model");
    if (m == j.end() || !m->is_object()) return bad("model: must be an object");
    BATON_RETURN_IF_ERROR(get_string(*m, "id", "model.", r.model_id));
    BATON_RETURN_IF_ERROR(get_string(*m, "alias", "model.", r.model_alias));
    std::string fp;
    BATON_RETURN_IF_ERROR(get_string(*m, "fingerprint", "model.", fp));
    if (!fingerprint_from_hex(fp, r.fingerprint)) return bad("model.fingerprint: must be 32 lowercase hex digits");
    auto kv = j.find("kv");
    if (kv == j.end() || !kv->is_object()) return bad("kv: must be an object");
    BATON_RETURN_IF_ERROR(get_u32(*kv, "n_ctx", "kv.", r.kv.n_ctx));
    std::string tk, tv;
    BATON_RETURN_IF_ERROR(get_string(*kv, "type_k", "kv.", tk));
    BATON_RETURN_IF_ERROR(get_string(*kv, "type_v", "kv.", tv));
    if (!kv_type_from_name(tk, r.kv.type_k)) return bad("kv.type_k: \"" + tk + "\" is no ggml type");
    if (!kv_type_from_name(tv, r.kv.type_v)) return bad("kv.type_v: \"" + tv + "\" is no ggml type");
    BATON_RETURN_IF_ERROR(get_bool(*kv, "flash_attn", "kv.", r.kv.flash_attn));
    BATON_RETURN_IF_ERROR(get_bool(*kv, "kv_unified", "kv.", r.kv.kv_unified));
    BATON_RETURN_IF_ERROR(get_u32(*kv, "n_seq_max", "kv.", r.kv.n_seq_max));
    BATON_RETURN_IF_ERROR(get_u32(j, "slots", "", r.slots));
    auto load = j.find("load");
    if (load == j.end() || !load->is_object()) return bad("load: must be an object");
    BATON_RETURN_IF_ERROR(get_u32(*load, "busy", "load.", r.busy));
    BATON_RETURN_IF_ERROR(get_u32(*load, "waiting", "load.", r.waiting));
    BATON_RETURN_IF_ERROR(get_bool(j, "draining", "", r.draining));
    if (j.contains("vision")) BATON_RETURN_IF_ERROR(get_bool(j, "vision", "", r.vision));
    if (j.contains("audio")) BATON_RETURN_IF_ERROR(get_bool(j, "audio", "", r.audio));
    return {};
}

}  // namespace

const char * node_role_name(node_role r) {
    switch (r) {
        case node_role::both: return "both";
        case node_role::prefill: return "prefill";
        case node_role::decode: return "decode";
    }
    return "both";
}

Result<node_role> node_role_parse(std::string_view s) {
    if (s == "both") return node_role::both;
    if (s == "prefill") return node_role::prefill;
    if (s == "decode") return node_role::decode;
    return Status(status_code::invalid_argument, "role: \"" + std::string(s) + "\" is not both, prefill or decode");
}

std::string node_record_json(const node_record & r) {
    const json j = {
        {"version", k_node_record_version},
        {"role", node_role_name(r.role)},
        {"url", r.url},
        {"model",
         {{"id", r.model_id}, {"alias", r.model_alias}, {"fingerprint", identity_fingerprint_hex(r.fingerprint)}}},
        {"kv",
         {{"n_ctx", r.kv.n_ctx},
          {"type_k", identity_kv_type_name(r.kv.type_k)},
          {"type_v", identity_kv_type_name(r.kv.type_v)},
          {"flash_attn", r.kv.flash_attn},
          {"kv_unified", r.kv.kv_unified},
          {"n_seq_max", r.kv.n_seq_max}}},
        {"slots", r.slots},
        {"load", {{"busy", r.busy}, {"waiting", r.waiting}}},
        {"draining", r.draining},
        {"vision", r.vision},
        {"audio", r.audio}};
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<node_record> node_record_parse(std::string_view text) {
    const json j = json::parse(text.begin(), text.end(), nullptr, false);
    if (j.is_discarded()) return bad("not JSON");
    node_record r;
    try {
        BATON_RETURN_IF_ERROR(parse_fields(j, r));
    } catch (const std::exception & e) {  // nlohmann throws on invalid UTF-8 in some accessors
        return bad(e.what());
    }
    return r;
}

std::string node_record_group(const node_record & r) {
    std::string g = identity_fingerprint_hex(r.fingerprint) + "/" + identity_kv_type_name(r.kv.type_k) + "/" +
                    identity_kv_type_name(r.kv.type_v) + (r.kv.flash_attn ? "/fa" : "/nofa") +
                    (r.kv.kv_unified ? "/unified" : "/split" + std::to_string(r.kv.n_seq_max));
    return g;
}

bool node_record_serves(const node_record & r, std::string_view model) {
    return !model.empty() && (model == r.model_id || (!r.model_alias.empty() && model == r.model_alias));
}

Status cluster_name_check(std::string_view name) {
    if (name.empty() || name.size() > 64)
        return Status(status_code::invalid_argument, "--cluster: must be 1..64 characters");
    for (char c : name)
        if (!(std::isalnum(uint8_t(c)) || c == '.' || c == '_' || c == '-'))
            return Status(status_code::invalid_argument,
                          "--cluster: \"" + std::string(name) + "\" may hold only letters, digits, '.', '_' and '-'");
    return {};
}

std::string cluster_prefix(std::string_view cluster) { return "/baton/" + std::string(cluster) + "/nodes/"; }

std::string cluster_node_key(std::string_view cluster, node_role role, std::string_view host_port) {
    return cluster_prefix(cluster) + node_role_name(role) + "/" + std::string(host_port);
}

}  // namespace baton
