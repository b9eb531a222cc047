#!/usr/bin/env python3
"""Structured output and tool calls through the official OpenAI Python client, validated with jsonschema.

    python3 tests/e2e/structured_output_test.py --baton build/apps/baton --models build/test-models

Uses the process helpers of openai_client_test.py (free ports, 30 s request timeouts, every process reaped).
A node (and, for the PD cases, a prefill node, a decode node and a router with --pd-min-tokens 1) serves
Baton's random-weight llama test model with a Hermes-style chat template that shows tools. Checked:

  * JsonSchema: for 20 seeds and three schemas (a nested object with enums and bounded integers, an array
    of objects, an anyOf with a $ref into $defs), the answer to response_format json_schema parses as JSON
    and jsonschema.validate accepts it against the schema the request sent (Draft 2020-12).
  * Tools: with tool_choice "required" (and a named function) for 12 seeds, every choice has
    finish_reason "tool_calls" and well-formed tool_calls whose arguments validate against the function's
    parameters schema; streamed tool_calls deltas add up to the non-streamed calls.
  * Logprobs: top_logprobs are sorted, distinct and their probabilities sum to <= 1.
  * PD: through the router (X-Baton-Route: pd) a schema request, a tool-call request and an n = 3 request
    give the single node's choices (content and tool calls exactly, but their random ids; logprobs: the same
    tokens, the numbers to 1e-4, since the single node has served other requests meanwhile).
Exits 1 if any case fails.
"""

import json
import math
import os
import sys
import unittest

import jsonschema
import openai

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import openai_client_test as base  # noqa: E402  (the process helpers)

# A Hermes-style chat template that shows tools (shared with tests/e2e/serve_structured_test.cpp).
HERMES_TEMPLATE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hermes_tools.jinja")

SCHEMAS = {
    "person": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 10},
            "age": {"type": "integer", "minimum": 18, "maximum": 99},
            "role": {"enum": ["prefill", "decode", "router"]},
            "scores": {"type": "array", "items": {"type": "number"}, "maxItems": 3},
            "address": {"type": "object",
                        "properties": {"zip": {"type": "string", "maxLength": 5},
                                       "floor": {"type": "integer", "minimum": -2, "maximum": 40}},
                        "required": ["zip"], "additionalProperties": False},
            "active": {"type": "boolean"},
        },
        "required": ["name", "age", "role", "address", "active"],
        "additionalProperties": False,
    },
    "items": {
        "type": "array",
        "minItems": 1,
        "maxItems": 3,
        "items": {"type": "object",
                  "properties": {"id": {"type": "integer", "minimum": 1, "maximum": 1000},
                                 "kind": {"const": "item"},
                                 "day": {"type": "string", "format": "date"}},
                  "required": ["id", "kind", "day"], "additionalProperties": False},
    },
    "shape": {
        "$defs": {"point": {"type": "object",
                            "properties": {"x": {"type": "integer", "minimum": 0, "maximum": 9},
                                           "y": {"type": "integer", "minimum": 0, "maximum": 9}},
                            "required": ["x", "y"], "additionalProperties": False}},
        "anyOf": [
            {"type": "object", "properties": {"circle": {"$ref": "#/$defs/point"},
                                              "r": {"type": "integer", "minimum": 1, "maximum": 5}},
             "required": ["circle", "r"], "additionalProperties": False},
            {"type": "array", "items": {"$ref": "#/$defs/point"}, "minItems": 2, "maxItems": 3},
            {"type": "null"},
        ],
    },
}

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Weather in a city",
        "parameters": {"type": "object",
                       "properties": {"city": {"type": "string", "maxLength": 12},
                                      "unit": {"enum": ["c", "f"]},
                                      "days": {"type": "integer", "minimum": 1, "maximum": 7}},
                       "required": ["city", "unit"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the web",
        "parameters": {"type": "object",
                       "properties": {"query": {"type": "string", "maxLength": 16},
                                      "limit": {"type": "integer", "minimum": 1, "maximum": 10}},
                       "required": ["query"], "additionalProperties": False}}},
]
PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
MESSAGES = [{"role": "user", "content": "What is the weather in Oslo?"}]
MODEL = base.MODEL_FILE


def node(name, *extra, cleanup):
    return base.start(name, "serve", "-m", base.model_path(), "--port", "0", "-np", "3", "-c", "4096",
                      "--chat-template-file", HERMES_TEMPLATE_FILE, *extra, cleanup=cleanup)


def schema_request(client, name, seed, **kw):
    fmt = {"type": "json_schema", "json_schema": {"name": name, "schema": SCHEMAS[name], "strict": True}}
    return client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=200, temperature=1.0,
                                          seed=seed, response_format=fmt, **kw)


def tool_request(client, seed, choice="required", **kw):
    return client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=160, temperature=1.0,
                                          seed=seed, tools=TOOLS, tool_choice=choice, **kw)


def calls_of(message):
    return [(c.function.name, c.function.arguments) for c in (message.tool_calls or [])]


def logprobs_of(choice):
    if choice.logprobs is None:
        return None
    return [(t.token, t.logprob, [(x.token, x.logprob) for x in t.top_logprobs]) for t in choice.logprobs.content]


NODE = None


def setUpModule():
    global NODE
    base.ensure_model()
    NODE = node("single node", cleanup=unittest.addModuleCleanup)


class JsonSchema(unittest.TestCase):
    def test_twenty_seeds_validate_for_each_schema(self):
        client = base.client_for(NODE.url)
        for name, schema in SCHEMAS.items():
            for seed in range(1, 21):
                with self.subTest(schema=name, seed=seed):
                    r = schema_request(client, name, seed)
                    self.assertEqual(r.choices[0].finish_reason, "stop", r.choices[0].message.content)
                    value = json.loads(r.choices[0].message.content)
                    jsonschema.validate(value, schema, cls=jsonschema.Draft202012Validator,
                                        format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


class Tools(unittest.TestCase):
    def test_required_and_named_calls_validate_against_the_parameters(self):
        client = base.client_for(NODE.url)
        for seed in range(1, 13):
            choice = {"type": "function", "function": {"name": "search"}} if seed % 4 == 0 else "required"
            with self.subTest(seed=seed, choice=choice):
                r = tool_request(client, seed, choice, parallel_tool_calls=seed % 2 == 0)
                c = r.choices[0]
                # One call: the grammar ends the output after it. Parallel calls: the random model may open
                # another until max_tokens (that unfinished block stays content); the finished ones are whole.
                self.assertIn(c.finish_reason, ("tool_calls", "length") if seed % 2 == 0 else ("tool_calls",))
                self.assertTrue(c.message.tool_calls)
                if seed % 2:
                    self.assertEqual(len(c.message.tool_calls), 1)
                for call in c.message.tool_calls:
                    self.assertTrue(call.id.startswith("call_"))
                    self.assertEqual(call.type, "function")
                    if seed % 4 == 0:
                        self.assertEqual(call.function.name, "search")
                    jsonschema.validate(json.loads(call.function.arguments), PARAMS[call.function.name])

    def test_streamed_tool_call_deltas_add_up_to_the_whole_answer(self):
        client = base.client_for(NODE.url)
        for seed in (3, 8):
            whole = tool_request(client, seed).choices[0]
            calls = {}
            finish = None
            for chunk in tool_request(client, seed, stream=True):
                if not chunk.choices:
                    continue
                d = chunk.choices[0].delta
                for tc in d.tool_calls or []:
                    slot = calls.setdefault(tc.index, {"name": "", "arguments": "", "id": None})
                    if tc.id:
                        slot["id"] = tc.id
                    if tc.function and tc.function.name:
                        slot["name"] = tc.function.name
                    if tc.function and tc.function.arguments:
                        slot["arguments"] += tc.function.arguments
                finish = chunk.choices[0].finish_reason or finish
            streamed = [(calls[i]["name"], calls[i]["arguments"]) for i in sorted(calls)]
            self.assertEqual(streamed, calls_of(whole.message))
            self.assertTrue(all(c["id"] and c["id"].startswith("call_") for c in calls.values()))
            self.assertEqual(finish, "tool_calls")


class Logprobs(unittest.TestCase):
    def test_top_logprobs_are_sorted_distinct_and_sum_to_at_most_one(self):
        client = base.client_for(NODE.url)
        r = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=8, temperature=0,
                                           logprobs=True, top_logprobs=5)
        content = r.choices[0].logprobs.content
        self.assertEqual(len(content), r.usage.completion_tokens)
        for t in content:
            lps = [x.logprob for x in t.top_logprobs]
            self.assertEqual(lps, sorted(lps, reverse=True))
            self.assertEqual(len({x.token + repr(x.bytes) for x in t.top_logprobs}), len(lps))
            self.assertLessEqual(sum(math.exp(x) for x in lps), 1.0 + 1e-6)
            self.assertEqual(t.logprob, lps[0])  # greedy: the chosen token is the most likely


class RouterPD(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.prefill = node("prefill node", "--role", "prefill", cleanup=cls.addClassCleanup)
        cls.decode = node("decode node", "--role", "decode", cleanup=cls.addClassCleanup)
        cls.router = base.start("router", "route", "--prefill", cls.prefill.url, "--decode", cls.decode.url,
                                "--pd-min-tokens", "1", "--port", "0", cleanup=cls.addClassCleanup)
        cls.client = base.client_for(cls.router.url)
        cls.single = base.client_for(NODE.url)

    def assert_same(self, make):
        raw = make(self.client.chat.completions.with_raw_response)
        self.assertEqual(raw.headers.get("X-Baton-Route"), "pd", dict(raw.headers))
        pd, single = raw.parse(), make(self.single.chat.completions)
        self.assertEqual(len(pd.choices), len(single.choices))
        for a, b in zip(pd.choices, single.choices):
            self.assertEqual(a.index, b.index)
            self.assertEqual(a.message.content, b.message.content)
            self.assertEqual(calls_of(a.message), calls_of(b.message))
            self.assertEqual(a.finish_reason, b.finish_reason)
            la, lb = logprobs_of(a), logprobs_of(b)
            self.assertEqual(la is None, lb is None)
            if la is None:
                continue
            # The same tokens; the numbers to 1e-4: the single node has served other requests, and where a
            # sequence sits in the KV cache changes the last bits of its logits (bit-equality needs nodes in
            # the same state: tests/e2e/serve_structured_test.cpp).
            self.assertEqual([(t, [x for x, _ in top]) for t, _, top in la], [(t, [x for x, _ in top]) for t, _, top in lb])
            for (_, pa, ta), (_, pb, tb) in zip(la, lb):
                self.assertAlmostEqual(pa, pb, delta=1e-4)
                for (_, x), (_, y) in zip(ta, tb):
                    self.assertAlmostEqual(x, y, delta=1e-4)

    def test_schema_request_matches_the_single_node(self):
        fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMAS["person"]}}
        self.assert_same(lambda c: c.create(model=MODEL, messages=MESSAGES, max_tokens=200, temperature=1.0,
                                            seed=5, response_format=fmt, logprobs=True, top_logprobs=2))

    def test_tool_call_request_matches_the_single_node(self):
        self.assert_same(lambda c: c.create(model=MODEL, messages=MESSAGES, max_tokens=160, temperature=1.0,
                                            seed=6, tools=TOOLS, tool_choice="required"))

    def test_n3_request_matches_the_single_node(self):
        self.assert_same(lambda c: c.create(model=MODEL, messages=MESSAGES, max_tokens=10, temperature=1.0,
                                            seed=7, n=3, logprobs=True, top_logprobs=1))


def main():
    return base.run(__doc__)


if __name__ == "__main__":
    sys.exit(main())
