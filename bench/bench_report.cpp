// bench_report.cpp — turns the RESULT/FIGURE lines of one bench/run into its outputs (not a benchmark).
//
// Usage: bench_report LINES MACHINE OUT_JSON [--docs MD PLOT_DIR ANALYSIS_MD]
//   LINES      every benchmark's stdout, concatenated (only lines starting "RESULT " or "FIGURE " are read)
//   MACHINE    "key: value" lines describing the machine, build and date (written by bench/run)
//   OUT_JSON   the headline entries, one per figure (bench/results/latest.json or quick.json); next to it,
//              <OUT_JSON without .json>-details.json holds every RESULT
//   --docs     also writes MD (docs/benchmarks.md), gnuplot scripts and data under PLOT_DIR/src (bench/run
//              renders them to PLOT_DIR/*.png) and splices the hand-written ANALYSIS_MD in.
// Figure 4's headline comes from serve_bench (another benchmark's RESULT lines): the worst of its four
// Baton/llama-server ratios. Exit 1 when the inputs are unreadable.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

using json = nlohmann::ordered_json;

namespace {

struct figure_doc {
    int fig;
    const char * title;
    const char * method;
    const char * plot_unit;     // RESULT lines with this unit (and a series) go on the plot
    const char * xlabel;
    const char * ylabel;
    bool categorical;           // x is an index into xtics
    const char * xtics;         // gnuplot xtics for categorical plots
    bool logx, logy;
};

// The figures table keeps its hand layout (one figure per block): clang-format would reflow it whole.
// clang-format off
const std::vector<figure_doc> & figures() {
    static const std::vector<figure_doc> f = {
        {1, "Restore vs recompute",
         "bench/restore_bench.cpp. A 512x8 llama and a 512x8 granitehybrid (attention on odd layers, Mamba-2 elsewhere), "
         "engine in-process, 2 threads. Per run: a cold prefill of a random prompt in one engine (the engine's reported "
         "prompt time), then verify (validated_blob::parse) + apply (the restore routine) of its blob into a second engine. "
         "Ratio restore/prefill per run; median of 5 runs. Headline: the worst median at >= 512 tokens.",
         "% of prefill", "prompt tokens", "restore / prefill (%)", false, "", true, true},
        {2, "PD time-to-first-token overhead (loopback)",
         "bench/pd_ttft_bench.cpp. `baton route` + 1 prefill node + 1 decode node vs one `both` node, every node 2 threads, "
         "1 slot, unpinned, same model (512x8 llama). Streaming /v1/completions with an exact token-array prompt (fresh per "
         "pair, so no prefix cache helps); TTFT = time to the first SSE data chunk. The router relays the blob to the "
         "decode node while it arrives. Per length one unmeasured warm-up pair (first use of KV cells and blob buffers), "
         "then 7 pairs, the order inside a pair alternating (PD first, single first); overhead = TTFT_pd / TTFT_single - 1 "
         "per pair; median of the 7.",
         "ms", "prompt tokens", "TTFT (ms)", false, "", true, true},
        {3, "Blob pipeline throughput vs memcpy",
         "bench/blob_bench.cpp. A 16 MiB blob; per run: serialize (blob_write into a pre-faulted buffer), checksum (XXH3-64 "
         "over every byte), verify (blob_parse, every section checksum), loopback transfer (HTTP POST to an in-process "
         "cpp-httplib server on 127.0.0.1 set up like a node: TCP_NODELAY, body read into a reused buffer) and memcpy of "
         "the same bytes; each divided by that run's memcpy, median of 11 runs. blob_pipeline/transfer/<size>/ rows: raw "
         "TCP over a loopback socket pair (warm buffers, up and down), blob upload (POST) and download (GET) with the "
         "cpp-httplib client and with a minimal raw-socket HTTP client (_rawclient), each divided by raw TCP in the same "
         "direction run by run (_vs_raw_tcp), median of 21 runs; upload_httplib_defaults is the old method (cpp-httplib "
         "defaults: no TCP_NODELAY, so each POST's 100 Continue waits for a delayed ACK).",
         "GB/s", "", "GB/s", true, "(\"serialize\" 0, \"checksum\" 1, \"verify\" 2, \"loopback POST\" 3, \"memcpy\" 4)", false, true},
        {4, "Baton node vs llama-server",
         "bench/serve_bench.cpp (written by the `baton serve` engineer; bench/run only drives it). Same GGUF (512x8 llama), "
         "-t 2, -c 4096, -np 4, -b 512, flash attention off, unified KV on both. c streams started together with distinct "
         "token prompts (256 tokens, 64 generated, ignore_eos); pp tok/s = c x prompt / time to the last first token, "
         "tg tok/s = c x (gen-1) / rest. Runs interleave the servers; ratio = median over runs of Baton / llama-server "
         "in the same run (pair by pair). Both servers keep idle slots' caches (Baton parks them out of the unified KV "
         "cache while another slot works; docs/engine.md). chat ms: the median time of one short chat request (a system "
         "and a user message rendered by each server's Jinja template, minja on both; one generated token; the system "
         "turn from each server's prompt cache), its ratio llama-server's time / Baton's. Headline: the worst of the four "
         "throughput ratios.",
         "x", "", "Baton / llama-server", true, "(\"pp c=1\" 0, \"tg c=1\" 1, \"pp c=4\" 2, \"tg c=4\" 3)", false, false},
        {5, "Router under load",
         "bench/router_load_bench.cpp. Closed-loop clients (1, 4, 16), each sending streaming completions back to back "
         "(fresh 256-token prompt, 32 generated tokens). PD = `baton route` (unpinned) + a prefill node (4 slots, 1 thread, "
         "`taskset -c 0`) + a decode node (16 slots, 1 thread, `taskset -c 1`); single = one `both` node (16 slots, 2 "
         "threads, both cores). TPOT = (last token - first token) / (tokens - 1) per request; percentiles over the requests "
         "of a level (8, 8 and 16 per level and configuration); the two configurations alternate level by level.",
         "ms", "concurrent clients", "P99 latency (ms)", false, "", true, true},
        {6, "Blob size per token vs theoretical KV size",
         "bench/blob_bench.cpp. Real blobs from the engine's prefill of a 512x8 llama (n_head 8, n_head_kv 4, head_dim 64, "
         "f16 K/V): blob bytes / tokens vs 2 x n_layer x n_embd_kv x 2 bytes. The blob also carries the tokens, the last "
         "logits, the request and the framing; that is what the overhead measures.",
         "%", "prompt tokens", "blob bytes per token over KV (%)", false, "", true, false},
        {7, "Interference: decode streams under arriving long prompts",
         "bench/interference_bench.cpp. A fixed, seeded trace: 4 closed-loop streams of short requests (32-token prompt, "
         "64 tokens generated; below the router's --pd-min-tokens so in PD they go straight to the decode node) while 4 "
         "long prompts (768 tokens, 8 generated) arrive at seeded exponential gaps (mean 3 s). Colocated: one `both` "
         "node, 2 threads, both cores. PD: prefill node `taskset -c 0` (1 thread), decode node `taskset -c 1` (1 thread), "
         "router unpinned. TPOT per stream request = (last token - first token) / (tokens - 1); ITL = gaps between token "
         "chunks. Goodput = requests per second meeting their objective (streams: TPOT <= 30 ms; long prompts: TTFT <= "
         "4 s). Configurations alternate run by run on the same trace; ratio of P99 TPOT pair by pair; 5 runs.",
         "ms", "", "ms", true, "(\"TPOT p50\" 0, \"TPOT p99\" 1, \"ITL p99\" 2)", false, false},
        {8, "HTTP edge: a 16 MiB blob through real nodes vs raw TCP",
         "bench/edge_bench.cpp. A real blob: a prefill node's /v1/prefill answer for a 1024-token prompt of a 128x64 llama "
         "(16 KiB of K/V per token). Per run, paired with raw TCP (raw_tcp.h: n bytes one way over a loopback socket pair, "
         "warm buffers) in the same run: upload = POST /v1/decode to a decode node (`-np 1`) of the blob with its first "
         "byte flipped, from a raw-socket client, first byte sent -> response headers: the node reads the whole body "
         "before the handler runs, then refuses the blob at its magic (422; that parse costs microseconds, edge/parse_reject_us; "
         "a valid blob's full verify, edge/parse_valid_ms, is what a real decode adds); download = GET /v1/slots/0/state "
         "from the prefill node holding that state, response headers -> last byte (the node's serialize before the headers: "
         "edge/download_serialize_ms), and with cpp-httplib request -> last byte (serialize included); relay_router_metrics = "
         "a PD completion through `baton route` (same prompt, so the prefill is a cache hit), the deltas of "
         "baton_router_blob_bytes_total / _transfer_seconds_total (prefill headers -> blob's last byte in, at the router); "
         "relay_first_in_last_out = a second router between two in-process fake nodes: the fake prefill node's first "
         "blob byte sent -> the fake decode node's last blob byte received (both hops). Ratios against raw TCP in the same "
         "direction (relays: up), run by run; median of 15 runs after one warm-up. Targets: upload and download >= 0.8x, "
         "relay >= 0.6x; the headline is the one furthest below its target.",
         "GB/s", "", "GB/s", true,
         "(\"raw up\" 0, \"raw down\" 1, \"upload\" 2, \"download\" 3, \"dl httplib\" 4, \"relay metric\" 5, "
         "\"relay in-out\" 6)", false, false},
        {9, "Router overhead: streams through baton route vs straight to the node",
         "bench/router_overhead_bench.cpp. One `baton serve` node (512x8 llama, --role both, 8 slots, -c 4096, 2 threads, "
         "--queue-max 1024 so that every stream sent straight to it is admitted and queued rather than refused with 503) "
         "and `baton route --decode NODE` (--node-queue 4: the node holds 12 of its requests, the rest wait at the router). "
         "Per level N (1, 64, 1,000 concurrent streams), rounds alternate router-first / direct-first; a round opens N "
         "connections at once and sends one streaming completion on each (distinct 16-token prompt, 16 tokens, temperature "
         "0), all driven by one poll()ing client thread. TTFT = request written -> first token event; TPOT = (last - first "
         "token) / (tokens - 1); P50/P99 over every stream of the level (20, 4 and 2 rounds). Router CPU per 1,000 tokens: "
         "utime+stime of the router (/proc/PID/stat) over its rounds / tokens it streamed. RSS per open stream: (router "
         "VmRSS peak during the 1,000-stream round - VmRSS before it) / 1,000. Client, router and node share the 2 cores.",
         "ms", "concurrent streams", "P50 latency (ms)", false, "", true, true},
        {10, "Cluster: joins, kills and a rolling restart through etcd",
         "bench/cluster_bench.cpp. A real single-member etcd on loopback; `baton serve` nodes registered with "
         "--etcd --lease-ttl 2 --drain 10 (1 thread, 4 slots each) and `baton route --etcd --pd-min-tokens 1` with "
         "no static node list; everything shares the 2 cores. Join: a second decode node is started while two "
         "clients send short PD requests back to back; time from its key appearing in etcd (polled every 1 ms, so "
         "+-1-2 ms) to the first response the router got from it (X-Baton-Decode-Node). Leave: that node is kill "
         "-9'd; time to the router's baton_router_nodes{role=\"decode\"} (usable members: the router's health "
         "checks usually eject the node before its lease expires) dropping, polled every 10 ms, and to its key's "
         "lease expiring in etcd; 5 join/leave runs. Rolling restart: 4 closed-loop clients send streaming "
         "completions (a fresh text prompt of 32 random 4-letter words, so prefix affinity spreads them over both "
         "decode nodes; 16 tokens) for 15 s of steady state, then 10 rounds back to back in which each of the 2 "
         "decode nodes in turn gets SIGTERM (drains, must exit 0), is started again on the same port and waited "
         "for until it is back in etcd and in the router's pool and has generated tokens for it again; request "
         "latency (send -> [DONE]) P50/P99 over the requests sent in each phase, and the failed requests (HTTP "
         "error, error event or short completion). Model: 256x4 llama (membership, not compute, is measured). "
         "Headline: failed requests, target 0.",
         "ms", "", "request latency (ms)", true, "(\"P50\" 0, \"P99\" 1)", false, false},
        {11, "Structured output: grammar cost per token, and n = 4 through PD",
         "bench/structured_bench.cpp. Grammar cost: `baton serve` and llama-server on the same 512x8 llama, 2 threads, "
         "1 slot, flash attention off on both (-fa off to each); one streaming /v1/completions at a time (fresh 64-token random prompt, 128 tokens, temperature 0, "
         "end-of-generation tokens forbidden through logit_bias so every run generates 128 tokens), without a grammar and "
         "with a JSON-like grammar that never closes (an array of short strings); tok/s = (tokens - 1) / (last - first "
         "token chunk); ratio = grammar / free per run, median of 5. Baton applies the grammar to every candidate "
         "before sampling (one chain, so a decode node samples exactly as a single node); llama-server samples first "
         "and checks only the chosen token. n = 4 through PD: `baton route` + prefill node + decode node (4 slots), "
         "a fresh 1024-token prompt per run, 16 tokens, temperature 0.8: one n = 4 request vs four concurrent n = 1 "
         "requests with seeds s..s+3; TTFT (the four: the last first chunk), prompt tokens the prefill node computed "
         "and blob MiB it sent, from its /metrics. Headline: Baton's grammar / free tok/s ratio (info).",
         "tok/s", "", "generation tok/s", true, "(\"free\" 0, \"grammar\" 1)", false, false},
        {12, "Realistic shape: a quantized 1024x16 llama vs llama-server at 1, 4 and 16 streams",
         "bench/quant_serve_bench.cpp. A 1024x16 llama (~187M parameters, random weights from `baton mkmodel --wtype`) "
         "in Q8_0 and in Q4_K (file type Q4_K_M); `baton serve` and llama-server on the same GGUF with -t 2 -tb 2, "
         "-c 8192, -np 16, -b 512 -ub 512, -fa on (llama-server's default; Baton's -fa auto is off on the CPU, so it is passed to both), f16 K/V, unified KV; all four servers "
         "start once and stay up. c streams (1, 4, 16) start together with distinct random token prompts of 256, 128 "
         "and 64 tokens (cache_prompt false), 32 generated tokens each (ignore_eos); pp tok/s = c x prompt / time to "
         "the last first token, tg tok/s = c x 31 / the rest. Each run measures every figure twice per server, "
         "interleaved (who goes first alternates) and keeps each server's better attempt (other jobs on the shared "
         "2-core machine stall libgomp's spinning barriers: a disturbed attempt can be 10-20x slower); ratio = median "
         "over runs of Baton / llama-server in the same run; 3-5 runs within a 300 s budget. Headline: the worst of "
         "the twelve ratios.",
         "x", "", "Baton / llama-server", true,
         "(\"pp c=1\" 0, \"tg c=1\" 1, \"pp c=4\" 2, \"tg c=4\" 3, \"pp c=16\" 4, \"tg c=16\" 5)", false, false},
        {13, "KV cache type and device: blob bytes per token, restore into a device-resident cache",
         "bench/device_bench.cpp. Blob bytes per prompt token with an f16 and a q8_0 KV cache (flash attention on for "
         "both, CPU) on a 512x8 llama (64-wide heads) at 512 and 2048 tokens; headline: q8_0 / f16 bytes at 2048 "
         "tokens, target <= 0.56 (q8_0 stores 34 bytes per 32 values, f16 64; cell metadata and the request are the "
         "same). Restore (verify + apply through the one restore routine) of the same 512-token blob into an engine "
         "whose layers and KV cache are on the Vulkan device (Mesa llvmpipe, `GGML_VK_VISIBLE_DEVICES=0`, -ngl all) "
         "vs one on the CPU, median of 3 after a warm-up run; the prefill time on each for scale (llvmpipe is a "
         "software device: its prefill is slower than the CPU backend's, and its device memory is host memory).",
         "bytes/token", "prompt tokens", "blob bytes per token", false, "", false, false},
        {14, "Multi-turn chats: today's routing vs KV-aware routing with deltas",
         "bench/multiturn_bench.cpp. 1 prefill node (-t 2) + 2 decode nodes (-t 1), 8 slots each, 256x4 llama; 16 "
         "conversations of 8 turns run turn by turn (all 16 concurrently, then the next turn 1.5 s later): a 1024-token "
         "first message, then follow-ups of F new tokens (plus 16 standing for the answer), 16 generated per turn, "
         "token-array prompts. today = `baton route` without -m and with --pd-delta false (PD on the whole prompt's "
         "length, decode affinity by request hash, whole states); new = `baton route -m` (KV-event routing, PD only "
         "when the chosen node misses >= --pd-min-tokens, deltas). Fresh nodes per configuration. Per turn: KV bytes "
         "moved node to node per conversation (the router's direct-state bytes), median TTFT, prefill tokens computed "
         "(all nodes' prompt - cached tokens). F = 32 (follow-ups handled locally) and F = 256 (PD with deltas).",
         "", "", "", false, "", false, false},
        {15, "Multi-tenant shared prefixes: precise prefix routing vs affinity vs round-robin",
         "bench/prefix_routing_bench.cpp. 8 tenants x 2048-token system prompts sharing a 150-token preamble, a fresh "
         "32-token question per request, 8 generated; 128 requests, Poisson arrivals at 1/s (seeded, the same trace for "
         "every policy); 4 `both` nodes (-t 1, 4 slots: no node can hold all 8 prefixes, the cluster can), 256x4 llama, "
         "fresh nodes per policy. precise = `baton route -m` (KV events); affinity = `baton route` without -m "
         "(rendezvous hash of the request's first 256 bytes: 64 token ids, inside the shared preamble, so every tenant "
         "has one key, as chat prompts sharing their first 256 bytes do); round-robin = the client rotates over the nodes. TTFT client-side (streaming); "
         "tokens computed = all nodes' prompt - cached tokens. Target: P90 TTFT of round-robin / precise >= 5.",
         "", "", "", false, "", false, false},
        {16, "Scaling past the router's link: direct transfer vs relay over shaped links",
         "bench/shaped_link_bench.cpp. The router and each of 2 prefill and 2 decode nodes run in a network namespace of "
         "their own (made by the benchmark), joined to a bridge by a veth pair whose two ends are both shaped with tc tbf "
         "to the same rate (1000 Mbit/s each way unless noted in shaped_link/link_rate): one full-duplex link per process. "
         "2 pinned pairs: per transfer mode two routers (router i: prefill node i, decode node i), all four router "
         "processes in the router's one namespace, so every relayed byte of both pairs crosses the one router link in "
         "and out; with direct transfer a pair uses only its own nodes' links. A 512x8 llama with an f32 K/V cache, a "
         "fixed 2048-token prompt per pair sent again and again with max_tokens 1 (the prefill node's one slot holds "
         "it: 1 token recomputed, the whole ~34 MB state exported), 3 closed-loop streaming clients per pair, both pairs "
         "at once; a round's aggregate = state bytes the mode's routers report (baton_router_direct_state_bytes_total, "
         "resp. baton_router_blob_bytes_total) / the round's wall time (8 s of sending, then what is in flight). Rounds "
         "alternate the modes (direct, relay, relay, direct, ...), 4 of each, medians; link use = direct / 2 links, "
         "relay / the router's link. Ideal ratio 2.0x; target: direct >= 1.8x the relay's aggregate.",
         "MB/s", "", "aggregate KV MB/s", true, "(\"direct\" 0, \"relay\" 1)", false, false},
        {17, "More conversations than slots: the host prompt cache (--cache-ram) on and off, and llama-server",
         "bench/cache_ram_bench.cpp. One server at a time, 4 slots, -t 2, a 512x8 llama. 16 conversations: a first "
         "message of 1024 tokens each, then 3 rounds in which every conversation returns in turn (its previous prompt, 16 "
         "tokens standing in for the answer, a new 64-token message; 8 generated), one request at a time: 15 others used "
         "the 4 slots since. Token-array prompts, the same for every server. Returning turns: TTFT (client side, "
         "streaming), prompt tokens computed (prompt - usage cached_tokens). Baton --cache-ram 0, Baton's default (8192 "
         "MiB), llama-server's default (--cache-ram 8192, -fa off, -kvu). Then the Valkey tier: node A (--tier-valkey, a "
         "real valkey-server) answers the 16 first messages and stops; a fresh node B on the same tier answers the first "
         "round of follow-ups (baton_tier_fresh), against the first round of the node without a cache (computed). "
         "Targets: Baton's median returning-turn TTFT >= 3x better with the cache than without, >= 1.0x llama-server's, "
         "and a fresh node's follow-ups >= 3x better from the tier than computed.",
         "", "", "", false, "", false, false},
        {18, "The Valkey tier in a PD cluster: a decode node restarts and the pool grows mid-trace",
         "bench/tier_cluster_bench.cpp. 1 prefill node (1 slot), decode nodes D1 and D2 (4 slots each; D2 started mid-trace), "
         "a router with -m (--pd-min-tokens 256), -t 2 each, a 512x8 llama. 8 conversations: a 4096-token first message each "
         "(PD), a round of follow-ups (+16 answer, +64 message, 8 generated: local on D1), then D1 killed and restarted on "
         "its port and D2 added, then the next round: every turn is an existing conversation's first on a restarted or new "
         "node. One request at a time, token arrays. Variants on fresh processes: recompute (no tier, the prefill node's "
         "host cache off) and tier (every node --tier-valkey on a real valkey-server; the router routes on the tier's "
         "entries). TTFT (client side, streaming) median and P90 per round; prompt tokens computed = the nodes' "
         "baton_prompt_tokens_total - baton_cached_tokens_total over the round. Target: the tier's median TTFT after the "
         "restart <= 0.2x the recompute variant's.",
         "", "", "", false, "", false, false},
        {19, "The Valkey tier: fetch and store throughput against raw RESP, and entry size by KV type",
         "bench/tier_bench.cpp. One real valkey-server on loopback, every thread of it pinned to one core and the "
         "benchmark to the other. Entries of 4, 32 and 128 MiB of random bytes: tier_store::get (manifest, then every "
         "part in one pipeline, each part's XXH3-64 and the whole's XXH3-128 checked) and tier_store::put, with parts of "
         "4 MiB (the default) and 16 MiB, against the ceiling: the same bytes as one string from the same server with a "
         "minimal RESP client on a plain socket (GET read straight into a warm buffer, SET written with one writev; no "
         "parts, no checksums). Raw and tier back to back in each of 21 repetitions (order alternating); ratio tier / raw "
         "pair by pair; medians. Target: tier get >= 0.7x raw GET at 128 MiB with the default parts. Then state blobs of "
         "the 512x8 llama from the engine's prefill of 1024 and 4096 tokens with f16, q8_0 and q4_0 K/V caches (flash "
         "attention on): bytes per token with and without the logits section, and the 4096-token entry's MEMORY USAGE "
         "in Valkey summed over its keys, next to the same blob as one raw string.",
         "MB/s", "entry (MiB)", "MB/s", false, "", true, false},
        {20, "Embeddings throughput vs llama-server",
         "bench/embed_bench.cpp. A 512x8 llama served by `baton serve --embedding --pooling mean` (its embedder packs a "
         "request's inputs into one decode) and by `llama-server --embedding --pooling mean -np 32` (a request's inputs "
         "spread over slots that decode together), both 2 threads, -b/-ub 2048, flash attention off. Inputs: random "
         "48-token arrays. Batch 1 (64 requests of one input) and batch 32 (8 requests of 32 inputs), back to back; "
         "inputs/s = inputs / wall time; the servers alternate run by run after a warm-up; ratio Baton / llama-server per "
         "run pair, median of 5. Target: >= 1.0 at both. Rerank beside it (rerank/* lines, run with --rerank-only on "
         "its own): a 512x8 qwen3 reranker from `baton mkmodel --rerank` (a ranking head) served by `baton serve "
         "--rerank` and `llama-server --rerank -np 32`, /v1/rerank requests of one query and 1 or 32 documents of 12 "
         "words (~90 tokens in the test vocabulary), documents/s, interleaved and paired the same way.",
         "inputs/s", "inputs per request", "inputs/s", false, "", true, false},
        {21, "Images and audio: time to first token through PD, vs llama-server, and the decode node's memory",
         "bench/image_bench.cpp. A 512x8 llama and a matching LLaVA-style projector from mkmmproj (a 512-wide, 6-block "
         "vision transformer on 224x224 images in 14-pixel patches: 256 embeddings per image). Three targets, every "
         "server -t 2 -np 1 -c 2048 -fa off, unpinned: one `baton serve --mmproj` node; a router over a prefill node "
         "with the projector and a decode node without it (an image chat always takes PD); Debian's `llama-server "
         "--mmproj` on the same files. A request: one user message, text + one 224x224 BMP (a data: URL; a new image "
         "each run, the same for the three) + text, max_tokens 1, not streamed: its wall time on the client is the "
         "TTFT. The three in rotating order per run after a warm-up; medians of 8 runs; ratios per run. Memory: "
         "VmRSS of the decode node and of the single node after serving, the projector file's size beside it. "
         "Targets: PD TTFT <= 1.10x the single node's; Baton's single-node TTFT <= 1.05x llama-server's; the decode "
         "node's RSS lower than the single node's by >= 0.8x the projector file. Audio (no target, not plotted): the "
         "same three targets with mkmmproj's qwen2a projector (a 512-wide, 4-block Whisper encoder: a clip becomes 750 "
         "embeddings) and a chat with one 1-s WAV (input_audio), medians of 4 runs. M-RoPE images (no target, not "
         "plotted): the same three targets with Qwen2-VL's merger from mkmmproj (512-wide, 6 blocks, 14-pixel patches "
         "merged 2x2) on a 512x8 qwen2vl text model, a 448x448 image (a 16 x 16 grid of 256 embeddings taking 16 "
         "positions), medians of 4 runs.",
         "ms", "", "TTFT (ms)", true, "(\"baton single\" 0, \"baton PD\" 1, \"llama-server\" 2)", false, false},
        {22, "Packed states: size after packing, and the link rate below which packing pays",
         "bench/state_pack_bench.cpp. Real blobs from the engine's prefill of a 2048-token random prompt: a 512x8 llama "
         "with an f16 and with a q8_0 KV cache (flash attention on) and the hybrid lfm2 256x4 (f16 KV, f32 recurrent "
         "state), random weights. Per state and setting (zstd level 1 and 3 over byte planes, level 1 without), "
         "blob_pack and blob_unpack timed in process on one core, median of 5. Plotted: packed bytes / blob bytes. "
         "Break-even link rate = 8 x (blob - packed bytes) / (pack + unpack time): packing pays on slower links. "
         "transfer_packed_over_plain_at_R: (pack + packed bytes / R + unpack) / (blob bytes / R); below 1.0 packing "
         "wins at R. No target: the advice on --state-compress-level rests on it (default 0, off).",
         "x", "", "packed / blob bytes", true, "(\"l1 planes\" 0, \"l3 planes\" 1, \"l1 bytes\" 2)", false, false},
        {23, "Streamed transfer: TTFT with the state sent whole after the prompt vs streamed while it computes",
         "bench/stream_transfer_bench.cpp. Routers, 2 prefill nodes (one sending states whole, one with "
         "--state-stream-tokens 128), a decode node for each and a single node, each in a network namespace behind a "
         "tc tbf link of the same rate each way (no added delay: this kernel has no sch_netem). A 512x8 llama with an "
         "f32 K/V cache (16 KiB per token), every node 1 thread, -b 2048 -ub 128; fresh random prompts (never cached), "
         "max_tokens 1, streamed; client TTFT, one request at a time, the three modes in rotating order per round, "
         "medians. Rates: 1000 Mbit/s, and the matched rate at which the link moves the whole state in the single "
         "node's TTFT. Target: streamed PD's TTFT overhead over the single node <= 15% at the matched rate.",
         "ms", "link rate (Mbit/s)", "TTFT (ms)", false, "", true, false},
        {24, "Live migration: the stall a moved stream shows, vs its time per token and vs token replay",
         "bench/migration_bench.cpp. Two decode nodes (1 thread each, one 8k-token slot, f32 K/V) behind a router on "
         "loopback; a 512x8 llama (16 KiB of state per token). Per round: a fresh random 4000-token prompt generating "
         "200 tokens greedily, streamed through the router; when the node serving it has generated 60 "
         "tokens (baton_generated_tokens_total), POST /admin/migrate on it (stop-and-copy: the whole state moves at the pause). The client "
         "timestamps every token chunk: stall = the longest gap between two tokens, TPOT = the median gap; "
         "stall_export / _fetch / _restore: the source's serialize and the target's fetch and restore seconds from "
         "their /metrics. Token "
         "replay (the baseline: re-prefill on the other node) = that node's TTFT for a fresh prompt of the prompt's "
         "and the 60 tokens' length. Medians over 3 rounds after a warm-up. Target: stall <= 2x TPOT at 4k tokens "
         "(the issue's; stop-and-copy is measured against it as it is: pre-copy is not built).",
         "", "", "", false, "", false, false},
        {25, "Rolling restart of the decode pool under long streaming generations, vs steady state",
         "bench/rolling_restart_bench.cpp. A prefill node and two decode nodes (1 thread each; the decode nodes 4 slots of "
         "1024 tokens, --drain 60) behind a router on loopback; a 512x8 llama, f16 K/V. 3 closed-loop clients, each streaming fresh random 256-token "
         "prompts for 400 tokens (greedy, ignore_eos), prompts seeded by (client, request number) so both phases ask "
         "the same things. Steady: 25 s of that. Rolling: the same clients during 4 rounds in which each decode node in "
         "turn gets SIGTERM (its drain moves every generation to the other node: live migration), exits and starts "
         "again on its port (then 1 s for the router's health check). Per "
         "phase: requests, failed (error or no [DONE]), short streams (fewer tokens than asked), P50/P99 of the "
         "requests' TPOT, P99 and max of the gaps between two tokens; streams moved (the router's resumed "
         "migrations), answers differing from the steady phase's answer to the same prompt. Target: 0 failed or "
         "short, 0 answers differing, the drained nodes exit 0.",
         "", "", "", false, "", false, false},
    };
    return f;
}
// clang-format on

std::string read_file(const std::string & path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::string fmt(double v) {
    char buf[64];
    const double a = std::abs(v);
    if (v == 0) return "0";
    if (a >= 1000) std::snprintf(buf, sizeof buf, "%.0f", v);
    else if (a >= 10) std::snprintf(buf, sizeof buf, "%.1f", v);
    else if (a >= 0.1) std::snprintf(buf, sizeof buf, "%.3f", v);
    else std::snprintf(buf, sizeof buf, "%.4f", v);
    return buf;
}

// serve_bench's lines carry no plot fields: place them on figure 4 and derive its headline.
void adopt_serve_bench(std::vector<json> & results, std::vector<json> & heads) {
    static const std::regex re("serve_(pp|tg)_c(1|4)_ratio");
    json worst;
    for (auto & r : results) {
        std::smatch m;
        const std::string name = r.value("name", "");
        if (!std::regex_match(name, m, re)) continue;
        r["fig"] = 4;
        r["series"] = "Baton / llama-server";
        r["x"] = (m[2] == "1" ? 0 : 2) + (m[1] == "pp" ? 0 : 1);
        if (worst.is_null() || r["value"].get<double>() < worst["value"].get<double>()) worst = r;
    }
    for (auto & r : results) {
        const std::string name = r.value("name", "");
        if (name.rfind("serve_", 0) == 0 && !r.contains("fig")) r["fig"] = 4;
    }
    if (!worst.is_null()) {
        json h = worst;
        h["name"] = "serve_vs_llama_server_worst_ratio (" + worst["name"].get<std::string>() + ")";
        h["target"] = ">= 0.97x on pp and tg at 1 and 4 streams";
        h.erase("series");
        h.erase("x");
        heads.push_back(h);
    }
}

void write_plot(const figure_doc & fd, const std::vector<json> & results, const std::string & plot_dir) {
    std::map<std::string, std::vector<const json *>> series;
    for (const auto & r : results)
        if (r.value("fig", 0) == fd.fig && r.contains("series") && r.value("unit", "") == fd.plot_unit) series[r["series"]].push_back(&r);
    if (series.empty()) return;
    const std::string src = plot_dir + "/src";
    std::filesystem::create_directories(src);
    const std::string base = "fig" + std::to_string(fd.fig);
    std::ofstream gp(src + "/" + base + ".gp");
    gp << "set terminal pngcairo size 900,540 font 'DejaVu Sans,11'\n";
    gp << "set output '" << plot_dir << "/" << base << ".png'\n";
    gp << "set title \"Figure " << fd.fig << ": " << fd.title << "\"\n";
    gp << "set xlabel \"" << fd.xlabel << "\"\nset ylabel \"" << fd.ylabel << "\"\n";
    gp << "set grid\nset bars small\n";
    gp << (fd.categorical ? "set key outside right top\n" : "set key inside top left box opaque\n");
    if (fd.logx) gp << "set logscale x 2\n";
    if (fd.logy) gp << "set logscale y\n";
    if (fd.categorical) {
        gp << "set xtics " << fd.xtics << "\nset xrange [-0.6:" << (std::count(fd.xtics, fd.xtics + std::strlen(fd.xtics), ',') + 0.6) << "]\n";
        gp << "set style fill solid 0.6 border -1\n";
        if (!fd.logy) gp << "set yrange [0:*]\n";
    } else {
        gp << "set offsets graph 0.05, graph 0.05, graph 0.1, graph 0.1\n";
    }
    if (fd.fig == 1) gp << "set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb 'red'\nset label 'target 1%' at graph 0.02, first 1.15 tc rgb 'red'\n";
    if (fd.fig == 4) gp << "set arrow from graph 0, first 0.97 to graph 1, first 0.97 nohead dt 2 lc rgb 'red'\nset label 'target 0.97x' at graph 0.02, first 0.93 tc rgb 'red' front\n";
    if (fd.fig == 12)
        gp << "set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb 'red'\nset label 'target 1.0x' "
              "at graph 0.02, first 0.96 tc rgb 'red' front\n";
    if (fd.fig == 6) gp << "set arrow from graph 0, first 2 to graph 1, first 2 nohead dt 2 lc rgb 'red'\nset label 'target 2%' at graph 0.02, first 2.1 tc rgb 'red'\nset yrange [0:*]\n";
    if (fd.fig == 19) gp << "set offsets graph 0.05, graph 0.05, graph 0.1, 0\nset yrange [0:*]\n";
    const double width = series.size() > 1 ? 0.8 / double(series.size()) : 0.6;
    if (fd.categorical) gp << "set boxwidth " << width << "\n";
    gp << "plot ";
    int k = 0;
    for (auto & [name, pts] : series) {
        std::sort(pts.begin(), pts.end(), [](const json * a, const json * b) { return (*a)["x"].get<double>() < (*b)["x"].get<double>(); });
        const std::string dat = src + "/" + base + "_" + std::to_string(k) + ".dat";
        std::ofstream d(dat);
        for (const json * p : pts) {
            const double value = (*p)["value"], lo = p->value("min", value), hi = p->value("max", value);
            double x = (*p)["x"];
            if (fd.categorical) x += (double(k) - (double(series.size()) - 1) / 2) * width;
            d << x << " " << value << " " << std::min(lo, value) << " " << std::max(hi, value) << "\n";
        }
        if (k) gp << ", \\\n     ";
        if (fd.categorical)
            gp << "'" << dat << "' using 1:2:3:4:(" << width << ") with boxerrorbars title \"" << name
               << "\" noenhanced";
        else if (fd.fig == 5 || fd.fig == 9)
            gp << "'" << dat << "' using 1:2 with linespoints lw 2 pt 7 title \"" << name
               << "\" noenhanced";  // percentiles: no min/max bars
        else gp << "'" << dat << "' using 1:2:3:4 with yerrorlines lw 2 pt 7 title \"" << name << "\" noenhanced";
        ++k;
    }
    gp << "\n";
}

// figure_of: the figure a result line belongs to — its "fig", else (unplotted detail lines) by name prefix; 0: none.
int figure_of(const json & r) {
    const std::string name = r.value("name", "");
    if (const int fig = r.value("fig", 0)) return fig;
    // unplotted detail lines, by name prefix (the first that matches)
    static const std::pair<const char *, int> by_prefix[] = {
        {"router_load", 5},     {"router_overhead", 9}, {"edge", 8},
        {"interference", 7},    {"blob_pipeline", 3},   {"blob_size", 6},
        {"pd_ttft", 2},         {"restore", 1},         {"prefill_ms", 1},
        {"cluster", 10},        {"structured", 11},     {"quant_serve", 12},
        {"device_", 13},        {"blob_bytes", 13},     {"multiturn", 14},
        {"prefix_routing", 15}, {"shaped_link", 16},    {"cache_ram", 17},
        {"tier_cluster", 18},   {"tier_", 19},          {"stream_transfer", 23},
        {"migration", 24},      {"rolling_restart", 25}};
    for (const auto & [prefix, fig] : by_prefix)
        if (name.rfind(prefix, 0) == 0) return fig;
    return 0;
}

std::string md_escape(std::string s) {
    for (size_t i = 0; (i = s.find('|', i)) != std::string::npos; i += 2) s.replace(i, 1, "\\|");
    return s;
}

}  // namespace

int main(int argc, char ** argv) {
    if (argc != 4 && argc != 8) {
        std::fprintf(stderr, "usage: bench_report LINES MACHINE OUT_JSON [--docs MD PLOT_DIR ANALYSIS_MD]\n");
        return 2;
    }
    std::ifstream in(argv[1]);
    if (!in) return std::fprintf(stderr, "bench_report: cannot read %s\n", argv[1]), 1;
    std::vector<json> results, heads;
    std::string line;
    while (std::getline(in, line)) {
        const bool is_result = line.rfind("RESULT ", 0) == 0, is_fig = line.rfind("FIGURE ", 0) == 0;
        if (!is_result && !is_fig) continue;
        json j = json::parse(line.substr(7), nullptr, false);
        if (j.is_discarded()) return std::fprintf(stderr, "bench_report: bad line: %s\n", line.c_str()), 1;
        (is_fig ? heads : results).push_back(j);
    }
    adopt_serve_bench(results, heads);
    std::sort(heads.begin(), heads.end(), [](const json & a, const json & b) { return a.value("fig", 0) < b.value("fig", 0); });
    const std::string out = argv[3];
    {
        std::ofstream o(out);
        o << json(heads).dump(2) << "\n";
        std::string details = out.substr(0, out.size() - (out.ends_with(".json") ? 5 : 0)) + "-details.json";
        std::ofstream d(details);
        d << json(results).dump(1) << "\n";
    }
    std::printf("bench_report: %zu figures, %zu results -> %s\n", heads.size(), results.size(), out.c_str());
    if (argc == 4) return 0;
    const std::string md_path = argv[5], plot_dir = argv[6], analysis = argv[7];
    std::ostringstream md;
    md << "# Baton benchmarks\n\n"
       << "Generated by `scripts/in-root bench/run` (" << "bench/bench_report.cpp" << "); do not edit by hand — the analysis at the end "
       << "comes from bench/analysis.md. Every figure is measured side by side in one run on the machine below; values are "
       << "medians with min and max over n runs (for percentiles: over n requests); ratios are taken pair by pair within the run "
       << "unless the method says otherwise.\n\n## Machine and build\n\n| | |\n|---|---|\n";
    std::istringstream mi(read_file(argv[2]));
    while (std::getline(mi, line)) {
        const size_t c = line.find(": ");
        if (c != std::string::npos) md << "| " << md_escape(line.substr(0, c)) << " | " << md_escape(line.substr(c + 2)) << " |\n";
    }
    md << "\n## Summary (bench/results/latest.json)\n\n| figure | name | value | min | max | n | unit | target | ok |\n|---|---|---|---|---|---|---|---|---|\n";
    for (const auto & h : heads) {
        md << "| " << h.value("fig", 0) << " | " << md_escape(h.value("name", "")) << " | " << fmt(h["value"]) << " | " << fmt(h.value("min", 0.0))
           << " | " << fmt(h.value("max", 0.0)) << " | " << h.value("n", 0) << " | " << md_escape(h.value("unit", "")) << " | "
           << md_escape(h.value("target", "")) << " | " << (h.value("ok", false) ? "yes" : "**NO**") << " |\n";
    }
    for (const auto & fd : figures()) {
        md << "\n## Figure " << fd.fig << ": " << fd.title << "\n\n" << fd.method << "\n\n";
        bool any = false;
        for (const auto & r : results) any = any || figure_of(r) == fd.fig;
        if (!any) {
            md << "_No results in this run._\n";
            continue;
        }
        write_plot(fd, results, plot_dir);
        if (std::filesystem::exists(plot_dir + "/src/fig" + std::to_string(fd.fig) + ".gp"))
            md << "![Figure " << fd.fig << "](bench/fig" << fd.fig << ".png)\n\n";
        md << "| name | median | min | max | n | unit | target | ok |\n|---|---|---|---|---|---|---|---|\n";
        for (const auto & r : results) {
            const std::string name = r.value("name", "");
            if (figure_of(r) != fd.fig) continue;
            md << "| " << md_escape(name) << " | " << fmt(r["value"]) << " | " << fmt(r.value("min", 0.0)) << " | " << fmt(r.value("max", 0.0))
               << " | " << r.value("n", 0) << " | " << md_escape(r.value("unit", "")) << " | " << md_escape(r.value("target", "")) << " | "
               << (r.value("ok", true) ? "yes" : "**NO**") << " |\n";
        }
    }
    // Other benchmarks' lines that belong to no figure (kv_layout_bench, ...).
    bool other = false;
    for (const auto & r : results) {
        const std::string name = r.value("name", "");
        if (figure_of(r) != 0) continue;  // a figure's line, in that figure's table
        if (!other) md << "\n## Other measurements\n\n| name | median | min | max | n | unit |\n|---|---|---|---|---|---|\n";
        other = true;
        md << "| " << md_escape(name) << " | " << fmt(r["value"]) << " | " << fmt(r.value("min", 0.0)) << " | " << fmt(r.value("max", 0.0)) << " | "
           << r.value("n", 0) << " | " << md_escape(r.value("unit", "")) << " |\n";
    }
    md << "\n" << read_file(analysis);
    std::ofstream(md_path) << md.str();
    std::printf("bench_report: wrote %s and plot scripts under %s/src\n", md_path.c_str(), plot_dir.c_str());
    return 0;
}
