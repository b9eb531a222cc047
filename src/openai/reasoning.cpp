// reasoning.cpp — thought/answer split of generated text, one piece at a time (see reasoning.h).
//
// The splitter is a small phase machine over a buffer of held-back bytes (pending_). Each step looks only at
// the bytes not yet decided; what it decides leaves pending_ at once, so the work per piece is linear in the
// piece plus the tag length, even over long runs of whitespace (pending_ws_ and searched_ remember what an
// earlier step already scanned).
#include "baton/openai/reasoning.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <utility>

#include "ascii_space.h"
#include "message_quote.h"

namespace baton {

namespace {

std::string_view trim_right(std::string_view s) {
    while (!s.empty() && is_ascii_space(s.back())) s.remove_suffix(1);
    return s;
}

}  // namespace

Result<reasoning_format> reasoning_format_parse(std::string_view s) {
    if (s == "none") return reasoning_format::none;
    if (s == "deepseek" || s == "auto") return reasoning_format::deepseek;
    if (s == "deepseek-legacy") return reasoning_format::deepseek_legacy;
    return Status(status_code::invalid_argument,
                  "reasoning format " + quoted_for_message(s) + ": must be none, deepseek, deepseek-legacy or auto");
}

const char * reasoning_format_name(reasoning_format f) {
    switch (f) {
        case reasoning_format::none: return "none";
        case reasoning_format::deepseek: return "deepseek";
        case reasoning_format::deepseek_legacy: return "deepseek-legacy";
    }
    return "none";
}

reasoning_tags reasoning_tags_for_template(std::string_view template_source) {
    // The specific families first: their templates may still mention <think> (e.g. to strip it from history).
    static const std::array<reasoning_tags, 3> k_families = {{
        {"[THINK]", "[/THINK]"},                     // Magistral
        {"<|START_THINKING|>", "<|END_THINKING|>"},  // Command R7B
        {"<seed:think>", "</seed:think>"},           // Seed-OSS
    }};
    for (const auto & tags : k_families)
        if (template_source.find(tags.open) != std::string_view::npos) return tags;
    return {"<think>", "</think>"};  // Qwen3, DeepSeek-R1, and the default
}

bool reasoning_prompt_opens(std::string_view rendered_prompt, const reasoning_tags & tags) {
    return !tags.open.empty() && trim_right(rendered_prompt).ends_with(tags.open);
}

reasoning_splitter::reasoning_splitter(reasoning_format f, reasoning_tags tags, bool starts_in_reasoning)
    : format_(f), tags_(std::move(tags)), starts_in_reasoning_(starts_in_reasoning) {}

reasoning_delta reasoning_splitter::feed(std::string_view piece) {
    reasoning_delta out;
    if (format_ == reasoning_format::none) {
        out.content.assign(piece);
        return out;
    }
    if (format_ == reasoning_format::deepseek_legacy) out.content.assign(piece);  // verbatim, never held
    pending_.append(piece);
    step(false, out);
    return out;
}

reasoning_delta reasoning_splitter::finish() {
    reasoning_delta out;
    if (format_ == reasoning_format::none) return out;
    step(true, out);
    pending_.clear();
    phase_ = phase::content;  // anything fed after the end passes through
    return out;
}

void reasoning_splitter::emit_content(std::string_view s, reasoning_delta & out) const {
    if (format_ == reasoning_format::deepseek) out.content.append(s);  // legacy already sent the bytes verbatim
}

void reasoning_splitter::step(bool at_end, reasoning_delta & out) {
    for (;;) {
        switch (phase_) {
            case phase::start:
                if (!step_start(at_end)) return;
                break;
            case phase::reasoning_lead:
            case phase::content_lead: {
                const auto first = std::find_if_not(pending_.begin(), pending_.end(), is_ascii_space);
                pending_.erase(pending_.begin(), first);
                if (pending_.empty()) return;
                phase_ = phase_ == phase::reasoning_lead ? phase::reasoning : phase::content;
                pending_ws_ = 0;
                searched_ = 0;
                break;
            }
            case phase::reasoning:
                if (!step_reasoning(at_end, out)) return;
                break;
            case phase::content:
                emit_content(pending_, out);
                pending_.clear();
                return;
        }
    }
}

bool reasoning_splitter::step_start(bool at_end) {
    if (starts_in_reasoning_) {
        // Leading whitespace is dropped whether or not an open tag follows.
        const auto first = std::find_if_not(pending_.begin(), pending_.end(), is_ascii_space);
        pending_.erase(pending_.begin(), first);
        pending_ws_ = 0;
    }
    size_t i = pending_ws_;
    while (i < pending_.size() && is_ascii_space(pending_[i])) ++i;
    pending_ws_ = i;
    const std::string_view rest = std::string_view(pending_).substr(i);
    if (rest.starts_with(tags_.open)) {
        pending_.erase(0, i + tags_.open.size());
        phase_ = phase::reasoning_lead;
        return true;
    }
    const bool undecided = rest.empty() || std::string_view(tags_.open).starts_with(rest);
    if (undecided && !at_end) return false;
    if (starts_in_reasoning_) {
        phase_ = phase::reasoning;  // pending_ holds no leading whitespace (dropped above)
        pending_ws_ = 0;
        searched_ = 0;
        return true;
    }
    phase_ = phase::content;  // no thought at the start: everything is content, leading whitespace included
    return true;
}

bool reasoning_splitter::step_reasoning(bool at_end, reasoning_delta & out) {
    const std::string_view p = pending_;
    const std::string_view close = tags_.close;
    const size_t at = p.find(close, std::min(searched_, p.size()));
    if (at != std::string_view::npos) {
        out.reasoning.append(trim_right(p.substr(0, at)));
        pending_.erase(0, at + close.size());
        phase_ = phase::content_lead;
        return true;
    }
    if (at_end) {
        out.reasoning.append(trim_right(p));
        pending_.clear();
        return false;
    }
    // Hold the longest suffix that may begin the close tag, and the whitespace run before it (dropped if the
    // tag completes). pending_ never starts with the thought's first byte being whitespace, so any held
    // whitespace follows emitted text and stays interior if the tag does not complete.
    size_t hold = std::min(close.size() - 1, p.size());
    while (hold > 0 && !p.ends_with(close.substr(0, hold))) --hold;
    const size_t tag_at = p.size() - hold;
    size_t cut = tag_at;
    while (cut > 0 && is_ascii_space(p[cut - 1])) {
        if (cut <= pending_ws_) {  // the rest of the run is known to be whitespace
            cut = 0;
            break;
        }
        --cut;
    }
    const size_t searched = p.size() >= close.size() ? p.size() - close.size() + 1 : 0;
    out.reasoning.append(p.substr(0, cut));
    pending_.erase(0, cut);
    pending_ws_ = tag_at - cut;
    searched_ = searched > cut ? searched - cut : 0;
    return false;
}

}  // namespace baton
