// test_templates.h — chat templates the template tests and the template fuzzer share.
#pragma once

#include <string_view>

namespace baton::test_templates {

// Llama 3 style: a header per turn, trimmed content, <|eot_id|>; bos_token first.
inline constexpr std::string_view k_llama3_template = R"({{- bos_token -}}
{%- for message in messages -%}
    {%- set content = message['content'] | trim -%}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + content + '<|eot_id|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
{%- endif -%}
)";

}  // namespace baton::test_templates
