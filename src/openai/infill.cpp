// infill.cpp — /infill's prompt (see infill.h).
#include "baton/openai/infill.h"

#include <algorithm>
#include <string>

namespace baton {

namespace {

Status tokenize_into(const loaded_model & model, const std::string & text, bool parse_special,
                     std::vector<token_id> & out) {
    auto t = text_tokenize(model, text, false, parse_special);
    if (!t.ok()) return t.status();
    out.insert(out.end(), t->begin(), t->end());
    return {};
}

}  // namespace

Result<std::vector<token_id>> infill_tokens(const openai_infill & in, const loaded_model & model, uint32_t n_batch,
                                            int32_t n_predict, uint32_t n_ctx) {
    const text_special sp = text_special_tokens(model);
    if (sp.fim_pre < 0 || sp.fim_suf < 0 || sp.fim_mid < 0) {
        std::string why = "Infill is not supported by this model:";
        if (sp.fim_pre < 0) why += " it has no FIM prefix token.";
        if (sp.fim_suf < 0) why += " it has no FIM suffix token.";
        if (sp.fim_mid < 0) why += " it has no FIM middle token.";
        return Status(status_code::not_implemented, why);
    }
    // Other files first: the context the middle may draw on, oldest (least kept) first.
    std::vector<token_id> extra;
    if (sp.fim_rep >= 0) {
        extra.push_back(sp.fim_rep);
        BATON_RETURN_IF_ERROR(tokenize_into(model, "myproject\n", false, extra));
    }
    for (const openai_infill_chunk & c : in.extra) {
        if (sp.fim_sep >= 0) {
            extra.push_back(sp.fim_sep);
            BATON_RETURN_IF_ERROR(tokenize_into(model, c.filename + "\n", false, extra));
        } else {
            BATON_RETURN_IF_ERROR(tokenize_into(model, "\n\n--- snippet ---\n\n", false, extra));
        }
        BATON_RETURN_IF_ERROR(tokenize_into(model, c.text, false, extra));
    }
    if (sp.fim_sep >= 0) {
        extra.push_back(sp.fim_sep);
        BATON_RETURN_IF_ERROR(tokenize_into(model, "filename\n", false, extra));
    }
    std::vector<token_id> prefix, suffix, prompt;
    BATON_RETURN_IF_ERROR(tokenize_into(model, in.prefix, false, prefix));
    BATON_RETURN_IF_ERROR(tokenize_into(model, in.suffix, false, suffix));
    BATON_RETURN_IF_ERROR(tokenize_into(model, in.prompt, true, prompt));

    const int64_t batch = int64_t(n_batch);
    const size_t keep_prefix = size_t(std::min<int64_t>(int64_t(prefix.size()), 3 * (batch / 4)));
    const size_t keep_suffix = size_t(
        std::min<int64_t>(int64_t(suffix.size()), std::max<int64_t>(0, batch / 4 - (2 + int64_t(prompt.size())))));
    const size_t keep_extra = size_t(std::min<int64_t>(
        int64_t(extra.size()), std::max<int64_t>(0, int64_t(n_ctx) - batch - 2 * int64_t(n_predict))));

    std::vector<token_id> out(extra.end() - ptrdiff_t(keep_extra), extra.end());
    if (sp.bos_added >= 0) out.push_back(sp.bos_added);
    out.push_back(sp.fim_pre);
    out.insert(out.end(), prefix.end() - ptrdiff_t(keep_prefix), prefix.end());
    out.insert(out.end(), prompt.begin(), prompt.end());
    out.push_back(sp.fim_suf);
    out.insert(out.end(), suffix.begin(), suffix.begin() + ptrdiff_t(keep_suffix));
    out.push_back(sp.fim_mid);
    return out;
}

}  // namespace baton
