// json_schema_grammar.h — JSON Schema -> GBNF (libllama's grammar format), Baton's own converter.
//
// A request's response_format {type: json_schema} (or llama-server's "json_schema" field) becomes a grammar
// that the grammar sampler enforces token by token, so every output that ends by end-of-generation is a
// JSON text the schema accepts. The converter is exact or refuses: a keyword it cannot express is an error
// naming the keyword and where it is (a JSON pointer into the schema, "(root)" for the schema itself), never
// a silently looser grammar. Where the grammar is stricter than the schema it is documented here and in
// docs/api.md:
//   - whitespace: no whitespace before or after the value; at most one space or newline between tokens
//     inside arrays and objects (a random-weight model would otherwise emit whitespace forever);
//   - numbers: an integer part of at most 15 digits (no leading zeros), at most 15 fraction digits, an
//     exponent of at most 3 digits; integers are written without fraction or exponent ("1", never "1.0");
//   - strings: escapes are \" \\ \/ \b \f \n \r \t and \uXXXX except surrogates (\uD800-\uDFFF; write
//     the character itself); enum/const values are their compact dump (nlohmann's dump(): no whitespace,
//     that key order and that escaping);
//   - object properties come in the order "properties" lists them (the schema is an ordered_json: the
//     client's order; allOf members merged in their order), required
//     ones always, optional ones each possibly left out; a required name missing from "properties" follows
//     them (its value: the additionalProperties schema, or any value);
//   - additionalProperties absent: no additional properties are generated, unless the object schema has no
//     "properties" either (then it is any object). additionalProperties true or a schema: any number of
//     additional "key": value pairs after the declared ones, whose keys are strings without escapes that are
//     not a declared property name (exact for the exclusion; keys among the additional ones may repeat);
//   - formats: date is YYYY-MM-DD, years 0001..9999, the day bounded by the month (02-29 in leap years only); time is
//     hh:mm:ss[.f{1,9}](Z|+hh:mm|-hh:mm) with hh 00-23, mm and ss 00-59 ("Z" and "T" upper case only);
//     date-time is date "T" time; uuid is 8-4-4-4-12 hex digits;
//   - "type" absent: the types the schema's keywords constrain (properties/required/additionalProperties:
//     object; items/prefixItems/minItems/maxItems: array; minLength/maxLength/format: string), or any value
//     when it has none of them.
// Supported: type (one or a list), properties, required, additionalProperties (bool or schema), enum, const
// (with "type" only: values of other types are dropped), items (schema or bool), prefixItems, minItems,
// maxItems, anyOf, oneOf (as anyOf: the grammar cannot exclude overlaps), allOf (of object schemas with
// type/properties/required: merged; otherwise refused), $ref to "#", "#/$defs/<name>" and
// "#/definitions/<name>" (JSON pointer ~0/~1 and %HH unescaping; recursive references allowed, except a
// cycle that reaches itself before matching any character), string minLength/maxLength, format date, time,
// date-time, uuid; integer minimum/maximum/exclusiveMinimum/exclusiveMaximum (number or draft-4 boolean
// form; exact digit-range rules, clamped to the 15-digit bound); number without bounds. $ref, anyOf and oneOf
// take no sibling keywords except the ignored ones. Ignored because they do not change which values are
// accepted: title, description, $schema, $id, $comment, default, examples, deprecated, readOnly, writeOnly,
// strict, and $defs/definitions (read only as $ref targets of the root). Refused (invalid_argument naming the
// keyword): pattern, patternProperties, propertyNames, dependentRequired, dependentSchemas, if/then/else,
// not, multipleOf, minProperties, maxProperties, uniqueItems, contains, unevaluated*, number bounds, other
// formats, any unknown keyword, $ref outside the document, the schema false (it accepts nothing), and
// schemas over the bounds below (an enum of more than 4096 entries is refused before any is converted).
// Thread-safety: pure functions; a gbnf_builder belongs to one thread.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "baton/base/status.h"
#include "baton/sampling.h"

namespace baton {

// Bounds on what a client may send (each violation is invalid_argument), checked before the work they
// bound: a list's length before its entries are converted, the grammar's size as it grows.
inline constexpr size_t json_schema_depth_max = 32;     // nesting of schemas inside schemas
inline constexpr size_t json_schema_rules_max = 10000;  // rules in one grammar
inline constexpr size_t json_schema_repeat_max = 1000;  // minItems/maxItems/minLength/maxLength values
// enum entries and anyOf/oneOf members: more alternatives at one position than libllama's grammar sampler is
// let expand (grammar_limits::fanout_max's default) would be refused anyway.
inline constexpr size_t json_schema_alternatives_max = 4096;
inline constexpr size_t json_schema_enum_bytes_max = size_t(256) << 10;     // one enum/const's values, as written
inline constexpr size_t json_schema_grammar_bytes_max = grammar_bytes_max;  // the grammar, as the sampler takes it

// gbnf_builder accumulates named GBNF rules; rule names are unique and made of [a-z0-9-].
class gbnf_builder {
  public:
    // add_schema adds the rules that match exactly the JSON values schema accepts (within the documented
    // restrictions) and returns the name of the rule for schema itself. name_hint is a prefix for the new
    // rules' names (sanitized). Refs resolve against schema itself (its $defs/definitions). Errors:
    // invalid_argument "json_schema: /properties/age: 'multipleOf' is not supported".
    Result<std::string> add_schema(const nlohmann::ordered_json & schema, std::string_view name_hint);
    // add_rule adds body under a fresh name derived from name_hint and returns the name used; a rule with an
    // identical body added before is reused.
    std::string add_rule(std::string_view name_hint, const std::string & body);
    // grammar returns the GBNF text: "root ::= <root_rule>" followed by every rule added.
    std::string grammar(std::string_view root_rule) const;
    // literal renders s as a GBNF string literal ("..." with \", \\, \n, \r, \t and \xHH for other control bytes).
    static std::string literal(std::string_view s);

  private:
    std::map<std::string, std::string> rules_;    // name -> body
    std::map<std::string, std::string> by_body_;  // body -> name (reuse)
    std::map<std::string, size_t> name_next_;     // sanitized hint -> next suffix to try
    std::map<std::string, std::string> shared_;   // primitive ("ws", "string", "value", ...) -> rule name
    size_t bytes_ = 0;                            // the grammar's size so far ("name ::= body\n" per rule)

    friend class json_schema_converter;
    // fresh_name returns an unused rule name derived from name_hint and reserves it (empty body until
    // set_rule); never "root".
    std::string fresh_name(std::string_view name_hint);
    // set_rule gives a reserved name its body.
    void set_rule(const std::string & name, const std::string & body);
    // shared_rule returns the rule for a primitive, adding it on first use (json_schema_grammar.cpp).
    std::string shared_rule(const std::string & kind);
};

// json_schema_to_gbnf converts a schema into a complete grammar whose start rule is "root".
Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json & schema);

// json_object_gbnf: the grammar of response_format {type: json_object} (any JSON object, same whitespace
// and number restrictions).
std::string json_object_gbnf();

}  // namespace baton
