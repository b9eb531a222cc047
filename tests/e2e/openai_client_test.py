#!/usr/bin/env python3
"""Drive Baton with the official OpenAI Python client, end to end, on real processes.

    python3 tests/e2e/openai_client_test.py --baton build/apps/baton --models build/test-models

Starts `baton serve` nodes and a `baton route` router on free ports (--port 0; the address is read from the
"listening on http://HOST:PORT" line each prints once ready) and checks what `import openai` sees:

  * SingleNode: one node (-np 2 -c 2048 --temp 0): /v1/models lists the file name; a chat completion has
    the OpenAI shape (assistant role, str content, finish_reason, usage, system_fingerprint "fp_..."); the
    streamed chat and completion equal the non-streamed ones (greedy through the server-wide --temp 0),
    with the role in the first chunk and a final usage chunk; unsupported fields (tools for a template that does not show
    them, a schema keyword Baton cannot express) and a
    malformed request (messages=[]) raise BadRequestError naming the problem; chat_template_kwargs in
    extra_body is accepted (ChatML ignores it).
  * Alias: a node with --alias my-model lists and answers under that name.
  * RouterPD: a prefill node, a decode node and a router with --pd-min-tokens 1: the same requests give
    exactly the single node's content, and X-Baton-Route says "pd".

The single node is the oracle of the PD case, so it lives for the whole module. Every request has a 30 s
timeout and no retries; every process is reaped (SIGTERM, wait, SIGKILL) through unittest cleanups, which
run even when a setUp fails, and dies with this process (PR_SET_PDEATHSIG) if the test itself is killed.
Exits 1 if any case fails.
"""

import argparse
import ctypes
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import openai

MODEL_FILE = "llama-s1-e64-l4.gguf"  # baton mkmodel --arch llama --seed 1 --n-embd 64 --n-layer 4
REQUEST_TIMEOUT_S = 30
START_TIMEOUT_S = 30
STOP_TIMEOUT_S = 10

ARGS = None  # parsed command line (main)
ORACLE = None  # the module's single node (setUpModule)

CHAT_MESSAGES = [
    {"role": "system", "content": "You are a terse assistant."},
    {"role": "user", "content": "Name three colors."},
]
COMPLETION_PROMPT = "Hello"
MAX_TOKENS = 8


def _die_with_parent():
    # preexec_fn: the child gets SIGTERM when this process dies, so a killed test leaves no server behind.
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_PDEATHSIG = 1
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class BatonProcess:
    """One `baton serve|route` child: started, ready (its listening line read) and reaped by stop()."""

    def __init__(self, name, argv):
        self.name = name
        self.argv = argv
        self.url = None
        self.proc = None
        self.stdout_lines = []
        self.stderr_file = tempfile.TemporaryFile()

    def start(self):
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=self.stderr_file, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + START_TIMEOUT_S
        buf = b""
        fd = self.proc.stdout.fileno()
        while b"\n" not in buf or not self._listen_url(buf):
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"{self.name}: not listening after {START_TIMEOUT_S}s{self.logs()}")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError(f"{self.name}: exited ({self.proc.wait(STOP_TIMEOUT_S)}) before listening"
                                   f"{self.logs()}")
            buf += chunk
        self.url = self._listen_url(buf)
        self.stdout_lines.extend(buf.decode(errors="replace").splitlines())
        # Keep draining stdout so a chatty child never blocks on a full pipe.
        threading.Thread(target=self._drain, daemon=True).start()
        return self

    @staticmethod
    def _listen_url(buf):
        for line in buf.decode(errors="replace").splitlines():
            if line.startswith("listening on http://"):
                return line[len("listening on "):].strip()
        return None

    def _drain(self):
        for line in self.proc.stdout:
            self.stdout_lines.append(line.decode(errors="replace").rstrip("\n"))

    def logs(self):
        self.stderr_file.seek(0)
        err = self.stderr_file.read().decode(errors="replace")
        tail = "\n".join(err.splitlines()[-20:])
        return f"\n--- {self.name} stderr (tail) ---\n{tail}" if tail else ""

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(STOP_TIMEOUT_S)
        self.proc.stdout.close()
        self.stderr_file.close()
        self.proc = None


def model_path():
    return os.path.join(ARGS.models, MODEL_FILE)


def ensure_model():
    # The C++ tests generate their models on first use (mkmodel_ensure); do the same, atomically (mkmodel
    # writes a temporary file and renames it), so this test also runs first or alone.
    if os.path.exists(model_path()):
        return
    os.makedirs(ARGS.models, exist_ok=True)
    subprocess.run([ARGS.baton, "mkmodel", "--arch", "llama", "--seed", "1", "--n-embd", "64", "--n-layer", "4",
                    "-o", model_path()], check=True, timeout=120, stdin=subprocess.DEVNULL)


def start(name, *args, cleanup):
    """Starts `baton ARGS...`; its stop is registered with cleanup before it starts, so it is always reaped."""
    p = BatonProcess(name, [ARGS.baton, *args])
    cleanup(p.stop)
    return p.start()


def serve(name, *extra, cleanup):
    return start(name, "serve", "-m", model_path(), "--port", "0", "-np", "2", "-c", "2048", "--temp", "0",
                 *extra, cleanup=cleanup)


def client_for(url):
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", timeout=REQUEST_TIMEOUT_S, max_retries=0)


def chat(client, **kw):
    return client.chat.completions.create(model=MODEL_FILE, messages=CHAT_MESSAGES, max_tokens=MAX_TOKENS, **kw)


def completion(client, **kw):
    return client.completions.create(model=MODEL_FILE, prompt=COMPLETION_PROMPT, max_tokens=MAX_TOKENS, **kw)


def stream_chat(client, chunks_out=None):
    chunks = list(chat(client, stream=True, stream_options={"include_usage": True}))
    if chunks_out is not None:
        chunks_out.extend(chunks)
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def stream_completion(client):
    chunks = list(completion(client, stream=True))
    return "".join(c.choices[0].text or "" for c in chunks if c.choices)


class Oracle:
    """The single node's answers, asked once: what every other path must reproduce."""

    def __init__(self, node):
        self.node = node
        self.client = client_for(node.url)
        self._chat = None
        self._completion = None

    def chat(self):
        if self._chat is None:
            self._chat = chat(self.client)
        return self._chat

    def completion(self):
        if self._completion is None:
            self._completion = completion(self.client)
        return self._completion


def setUpModule():
    global ORACLE
    ensure_model()
    ORACLE = Oracle(serve("single node", cleanup=unittest.addModuleCleanup))


class SingleNode(unittest.TestCase):
    def setUp(self):
        self.client = ORACLE.client

    def test_models_list_names_the_file(self):
        models = self.client.models.list().data
        self.assertEqual([m.id for m in models], [MODEL_FILE])

    def test_chat_completion_has_the_openai_shape(self):
        r = ORACLE.chat()
        self.assertEqual(len(r.choices), 1)
        choice = r.choices[0]
        self.assertEqual(choice.message.role, "assistant")
        self.assertIsInstance(choice.message.content, str)
        self.assertIn(choice.finish_reason, ("length", "stop"))
        self.assertIsNotNone(r.usage)
        self.assertGreater(r.usage.prompt_tokens, 0)
        self.assertLessEqual(r.usage.completion_tokens, MAX_TOKENS)
        self.assertEqual(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens)
        self.assertIsInstance(r.system_fingerprint, str)
        self.assertTrue(r.system_fingerprint.startswith("fp_"), r.system_fingerprint)
        self.assertEqual(r.model, MODEL_FILE)
        self.assertEqual(r.object, "chat.completion")

    def test_chat_stream_equals_the_greedy_answer(self):
        chunks = []
        text = stream_chat(self.client, chunks)
        self.assertEqual(text, ORACLE.chat().choices[0].message.content)
        with_choices = [c for c in chunks if c.choices]
        self.assertTrue(with_choices, "no chunk with choices")
        self.assertEqual(with_choices[0].choices[0].delta.role, "assistant")
        finish = [c.choices[0].finish_reason for c in with_choices if c.choices[0].finish_reason]
        self.assertEqual(finish, [ORACLE.chat().choices[0].finish_reason])
        last = chunks[-1]
        self.assertEqual(last.choices, [], "the usage chunk comes last, without choices")
        self.assertIsNotNone(last.usage)
        self.assertEqual(last.usage.prompt_tokens, ORACLE.chat().usage.prompt_tokens)
        self.assertEqual(last.usage.completion_tokens, ORACLE.chat().usage.completion_tokens)

    def test_completion_stream_equals_the_greedy_answer(self):
        r = ORACLE.completion()
        self.assertIsInstance(r.choices[0].text, str)
        self.assertIn(r.choices[0].finish_reason, ("length", "stop"))
        self.assertLessEqual(r.usage.completion_tokens, MAX_TOKENS)
        self.assertTrue(r.choices[0].text, "an empty answer would make every comparison trivial")
        self.assertEqual(stream_completion(self.client), r.choices[0].text)

    def test_tools_are_refused_by_name(self):
        tools = [{"type": "function", "function": {
            "name": "get_weather", "description": "Weather of a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
        with self.assertRaises(openai.BadRequestError) as cm:
            chat(self.client, tools=tools)
        self.assertIn("tools", str(cm.exception))

    def test_unsupported_schema_keyword_is_refused_by_name(self):
        fmt = {"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "string", "pattern": "^a$"}}}
        with self.assertRaises(openai.BadRequestError) as cm:
            chat(self.client, response_format=fmt)
        self.assertIn("pattern", str(cm.exception))

    def test_empty_messages_are_a_bad_request(self):
        with self.assertRaises(openai.BadRequestError) as cm:
            self.client.chat.completions.create(model=MODEL_FILE, messages=[], max_tokens=MAX_TOKENS)
        self.assertIn("messages", str(cm.exception))

    def test_chat_template_kwargs_are_accepted(self):
        raw = self.client.chat.completions.with_raw_response.create(
            model=MODEL_FILE, messages=CHAT_MESSAGES, max_tokens=MAX_TOKENS,
            extra_body={"chat_template_kwargs": {"enable_thinking": False}})
        self.assertEqual(raw.status_code, 200)
        # ChatML does not read the variable: the answer is the greedy one.
        self.assertEqual(raw.parse().choices[0].message.content, ORACLE.chat().choices[0].message.content)


class Alias(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.node = serve("alias node", "--alias", "my-model", cleanup=cls.addClassCleanup)
        cls.client = client_for(cls.node.url)

    def test_models_list_and_responses_use_the_alias(self):
        self.assertEqual([m.id for m in self.client.models.list().data], ["my-model"])
        r = self.client.chat.completions.create(model="my-model", messages=CHAT_MESSAGES, max_tokens=MAX_TOKENS)
        self.assertEqual(r.model, "my-model")
        self.assertEqual(r.choices[0].message.content, ORACLE.chat().choices[0].message.content)


class Embeddings(unittest.TestCase):
    """The OpenAI client's embeddings call against a node started with --embedding (float and base64)."""

    @classmethod
    def setUpClass(cls):
        cls.node = serve("embedding node", "--embedding", "--pooling", "mean", cleanup=cls.addClassCleanup)
        cls.client = client_for(cls.node.url)

    def test_embeddings_have_the_openai_shape_and_unit_length(self):
        r = self.client.embeddings.create(model="m", input=["hello world", "the quick brown fox"])
        self.assertEqual(len(r.data), 2)
        self.assertEqual([d.index for d in r.data], [0, 1])
        self.assertEqual(len(r.data[0].embedding), 64)
        self.assertAlmostEqual(sum(x * x for x in r.data[0].embedding), 1.0, places=4)
        self.assertNotEqual(r.data[0].embedding, r.data[1].embedding)
        self.assertGreater(r.usage.prompt_tokens, 2)
        # The client asks for base64 by default when numpy is there and decodes it; both give the same vector.
        b = self.client.embeddings.create(model="m", input="hello world", encoding_format="base64")
        f = self.client.embeddings.create(model="m", input="hello world", encoding_format="float")
        if isinstance(b.data[0].embedding, str):
            import base64
            import struct
            raw = base64.b64decode(b.data[0].embedding)
            vec = list(struct.unpack("<%df" % (len(raw) // 4), raw))
        else:
            vec = b.data[0].embedding
        for x, y in zip(vec, f.data[0].embedding):
            self.assertAlmostEqual(x, y, places=6)


class RouterPD(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.prefill = serve("prefill node", "--role", "prefill", cleanup=cls.addClassCleanup)
        cls.decode = serve("decode node", "--role", "decode", cleanup=cls.addClassCleanup)
        cls.router = start("router", "route", "--prefill", cls.prefill.url, "--decode", cls.decode.url,
                           "--pd-min-tokens", "1", "--port", "0", cleanup=cls.addClassCleanup)
        cls.client = client_for(cls.router.url)

    def assert_pd(self, raw):
        self.assertEqual(raw.status_code, 200)
        self.assertEqual(raw.headers.get("X-Baton-Route"), "pd", dict(raw.headers))
        self.assertEqual(raw.headers.get("X-Baton-Decode-Node"), self.decode.url, dict(raw.headers))

    def test_models_list_through_the_router(self):
        self.assertEqual([m.id for m in self.client.models.list().data], [MODEL_FILE])

    def test_chat_matches_the_single_node(self):
        raw = self.client.chat.completions.with_raw_response.create(
            model=MODEL_FILE, messages=CHAT_MESSAGES, max_tokens=MAX_TOKENS)
        self.assert_pd(raw)
        r, want = raw.parse(), ORACLE.chat()
        self.assertEqual(r.choices[0].message.content, want.choices[0].message.content)
        self.assertEqual(r.choices[0].finish_reason, want.choices[0].finish_reason)
        self.assertEqual(r.usage.prompt_tokens, want.usage.prompt_tokens)
        self.assertEqual(r.usage.completion_tokens, want.usage.completion_tokens)
        self.assertEqual(r.model, MODEL_FILE)

    def test_chat_stream_matches_the_single_node(self):
        raw = self.client.chat.completions.with_raw_response.create(
            model=MODEL_FILE, messages=CHAT_MESSAGES, max_tokens=MAX_TOKENS, stream=True,
            stream_options={"include_usage": True})
        self.assert_pd(raw)
        chunks = list(raw.parse())
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        self.assertEqual(text, ORACLE.chat().choices[0].message.content)
        self.assertIsNotNone(chunks[-1].usage)

    def test_completion_matches_the_single_node(self):
        raw = self.client.completions.with_raw_response.create(
            model=MODEL_FILE, prompt=COMPLETION_PROMPT, max_tokens=MAX_TOKENS)
        self.assert_pd(raw)
        self.assertEqual(raw.parse().choices[0].text, ORACLE.completion().choices[0].text)

    def test_completion_stream_matches_the_single_node(self):
        raw = self.client.completions.with_raw_response.create(
            model=MODEL_FILE, prompt=COMPLETION_PROMPT, max_tokens=MAX_TOKENS, stream=True)
        self.assert_pd(raw)
        text = "".join(c.choices[0].text or "" for c in raw.parse() if c.choices)
        self.assertEqual(text, ORACLE.completion().choices[0].text)

    def test_unsupported_field_is_refused_through_the_router(self):
        with self.assertRaises(openai.BadRequestError) as cm:
            chat(self.client, extra_body={"mirostat": 2})
        self.assertIn("mirostat", str(cm.exception))


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def run(doc, add_arguments=None, configure=None):
    """The command line every suite on these helpers takes (--baton, --models, and add_arguments' own), then
    unittest's own arguments; configure(args) runs before the tests. Returns the exit status."""
    global ARGS
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--baton", required=True, help="the baton binary")
    ap.add_argument("--models", required=True, help="directory of the test models (generated if missing)")
    if add_arguments:
        add_arguments(ap)
    ARGS, rest = ap.parse_known_args()
    # BATON_TEST_BIN: another build's baton (scripts/check drives the ASan build's with this suite).
    ARGS.baton = os.path.abspath(os.environ.get("BATON_TEST_BIN") or ARGS.baton)
    ARGS.models = os.path.abspath(ARGS.models)
    if configure:
        configure(ARGS)
    # SIGTERM (ctest's timeout, a CI cancel) unwinds like ^C, so the cleanups reap the children.
    signal.signal(signal.SIGTERM, _interrupt)
    prog = unittest.main(module="__main__", argv=[sys.argv[0], *rest], verbosity=2, exit=False)
    return 0 if prog.result.wasSuccessful() else 1


def main():
    return run(__doc__)


if __name__ == "__main__":
    sys.exit(main())
