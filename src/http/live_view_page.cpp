// live_view_page.cpp — the live view's page (see live_view.h): one HTML file with its script. It polls
// view/state every second and draws what the state holds: a summary line, the nodes (by pool, with health and
// load), a node's slots, the caches (a node's host prompt cache, parked slots, held states and tier link; the
// router's prefix index by node and the tier's entries by chain key), charts of the series (Chart.js from view/chart.js; without it, a note), and the last
// requests as timelines whose bars are their steps. With an API key on the server the state answers 401: the
// page asks for the key once and keeps it for the tab (sessionStorage), sent as a Bearer token.
#include "baton/http/live_view.h"

namespace baton {

namespace {

constexpr std::string_view k_page = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>Baton — live view</title>
<style>
  :root { --fg:#1d2330; --muted:#6b7280; --line:#e5e7eb; --ok:#15803d; --bad:#b91c1c; --warn:#b45309; }
  body { font: 14px/1.4 system-ui, sans-serif; color: var(--fg); margin: 0; background: #f8fafc; }
  header { display:flex; gap:1em; align-items:baseline; padding: .8em 1.2em; background:#1d2330; color:#fff; }
  header h1 { font-size: 1.2em; margin: 0; }
  header .muted { color:#cbd5e1; }
  main { padding: 0 1.2em 2em; }
  h2 { font-size: 1em; margin: 1.2em 0 .4em; }
  .summary span { display:inline-block; margin-right:1.2em; }
  .summary b { font-variant-numeric: tabular-nums; }
  table { border-collapse: collapse; background:#fff; min-width: 40em; }
  th, td { border-bottom: 1px solid var(--line); padding: .3em .7em; text-align: left; font-variant-numeric: tabular-nums; }
  th { color: var(--muted); font-weight: 600; }
  .up { color: var(--ok); } .down, .gone { color: var(--bad); } .draining, .loading { color: var(--warn); }
  .bar { display:inline-block; height: .7em; background: #93c5fd; vertical-align: middle; }
  .charts { display:flex; flex-wrap:wrap; gap: 1em; }
  .charts > div { background:#fff; border:1px solid var(--line); padding:.5em; width: 34em; height: 14em; }
  .tl { display:grid; grid-template-columns: 22em 1fr; gap: .15em .8em; background:#fff; padding:.5em; border:1px solid var(--line); }
  .tl .label { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; font-size: .9em; }
  .tl .track { position: relative; height: 1.1em; background: #f1f5f9; }
  .tl .step { position: absolute; top: 0; height: 100%; min-width: 2px; opacity: .9; }
  .tl .ttft { position: absolute; top: -2px; width: 2px; height: calc(100% + 4px); background: #111827; }
  .legend span { display:inline-block; margin-right: 1em; font-size: .9em; }
  .legend i { display:inline-block; width: .9em; height: .9em; margin-right: .3em; vertical-align: middle; }
  #error { color: var(--bad); }
  #keybox { margin: 1em 0; }
</style>
<script src="view/chart.js"></script>
</head>
<body>
<header><h1>Baton</h1><span id="kind" class="muted"></span><span id="updated" class="muted"></span></header>
<main>
<form id="keybox" hidden>This server needs its API key:
  <input id="key" type="password" autocomplete="off"> <button id="keybtn" type="submit">Use</button></form>
<p id="error"></p>
<div id="summary" class="summary"></div>
<h2>Nodes</h2>
<table id="nodes"><thead><tr><th>pool</th><th>node</th><th>health</th><th>model</th><th>load</th><th></th></tr></thead><tbody></tbody></table>
<div id="slots-box" hidden><h2>Slots</h2>
<table id="slots"><thead><tr><th>slot</th><th>state</th><th>tokens held</th></tr></thead><tbody></tbody></table></div>
<div id="caches-box" hidden><h2>Caches</h2>
<table id="caches"><thead><tr><th>cache</th><th>where</th><th>entries</th><th>tokens</th><th>bytes</th><th></th></tr></thead><tbody></tbody></table></div>
<h2>Last minutes</h2>
<div class="charts" id="charts"><div><canvas id="c-latency"></canvas></div><div><canvas id="c-load"></canvas></div></div>
<p id="nocharts" hidden>Charts need Chart.js (Debian's libjs-chart.js), which this machine does not have.</p>
<h2>Last requests</h2>
<div class="legend" id="legend"></div>
<div class="tl" id="timeline"></div>
</main>
<script>
"use strict";
const COLORS = { route: "#cbd5e1", prefill: "#f59e0b", transfer: "#a855f7", decode: "#3b82f6",
                 prompt: "#f59e0b", generate: "#3b82f6", send: "#a855f7" };
const el = (id) => document.getElementById(id);
function text(tag, s, cls) { const e = document.createElement(tag); e.textContent = s; if (cls) e.className = cls; return e; }
function ms(v) { if (v == null) return "–"; if (v >= 1000) return (v / 1000).toFixed(2) + " s"; return (v < 10 ? v.toFixed(2) : v.toFixed(1)) + " ms"; }
function bytes(n) { if (!n) return ""; const u = ["B", "KiB", "MiB", "GiB"]; let i = 0; while (n >= 1024 && i < 3) { n /= 1024; ++i; } return n.toFixed(i ? 1 : 0) + " " + u[i]; }
let key = sessionStorage.getItem("baton-key") || "";
let charts = null;

function ensureCharts() {
  if (charts || typeof Chart === "undefined") return charts;
  const opts = (title) => ({ animation: false, responsive: true, maintainAspectRatio: false,
    plugins: { title: { display: true, text: title } }, scales: { y: { beginAtZero: true } },
    elements: { point: { radius: 2 } }, spanGaps: true });
  charts = {
    latency: new Chart(el("c-latency"), { type: "line", data: { labels: [], datasets: [
      { label: "TTFT avg (ms)", data: [], borderColor: "#f59e0b" },
      { label: "TTFT max (ms)", data: [], borderColor: "#b45309", borderDash: [4, 3] },
      { label: "TPOT avg (ms)", data: [], borderColor: "#3b82f6" } ] }, options: opts("Latency") }),
    load: new Chart(el("c-load"), { type: "line", data: { labels: [], datasets: [
      { label: "requests / step", data: [], borderColor: "#15803d" },
      { label: "errors / step", data: [], borderColor: "#b91c1c" },
      { label: "queued (max)", data: [], borderColor: "#a855f7" },
      { label: "busy (max)", data: [], borderColor: "#64748b" } ] }, options: opts("Load") }),
  };
  return charts;
}

function drawCharts(series) {
  if (!ensureCharts()) { el("charts").hidden = true; el("nocharts").hidden = false; return; }
  const labels = series.t.map((t) => new Date(t).toLocaleTimeString());
  const sets = [[charts.latency, ["ttft_avg_ms", "ttft_max_ms", "tpot_avg_ms"]],
                [charts.load, ["requests", "errors", "queue_max", "busy_max"]]];
  for (const [chart, keys] of sets) {
    chart.data.labels = labels;
    keys.forEach((k, i) => { chart.data.datasets[i].data = series[k]; });
    chart.update("none");
  }
}

function drawNodes(nodes) {
  const body = el("nodes").tBodies[0];
  body.replaceChildren();
  const maxCap = Math.max(1, ...nodes.map((n) => n.capacity || n.outstanding || 1));
  for (const n of nodes) {
    const tr = document.createElement("tr");
    tr.className = "node-row";
    tr.dataset.url = n.url;
    tr.dataset.health = n.health;
    tr.dataset.pool = n.pool;
    tr.append(text("td", n.pool), text("td", n.url), text("td", n.health, n.health), text("td", n.model || ""));
    const load = n.capacity ? `${n.outstanding} / ${n.capacity}` : String(n.outstanding);
    tr.append(text("td", load));
    const td = document.createElement("td");
    const bar = document.createElement("span");
    bar.className = "bar";
    bar.style.width = (8 * n.outstanding / maxCap) + "em";
    td.append(bar);
    tr.append(td);
    body.append(tr);
  }
}

function drawSlots(slots) {
  el("slots-box").hidden = !slots;
  if (!slots) return;
  const body = el("slots").tBodies[0];
  body.replaceChildren();
  for (const s of slots) {
    const tr = document.createElement("tr");
    tr.append(text("td", s.id), text("td", s.busy ? "busy" : (s.parked ? "idle (parked)" : "idle")), text("td", s.n_tokens));
    body.append(tr);
  }
}

function drawCaches(rows) {
  el("caches-box").hidden = !rows || rows.length === 0;
  if (!rows) return;
  const body = el("caches").tBodies[0];
  body.replaceChildren();
  const num = (v) => (v == null ? "–" : String(v));
  for (const c of rows) {
    const tr = document.createElement("tr");
    tr.className = "cache-row";
    tr.dataset.cache = c.cache;
    tr.append(text("td", c.cache), text("td", c.where), text("td", num(c.entries)), text("td", num(c.tokens)),
              text("td", c.bytes == null ? "–" : (bytes(c.bytes) || "0 B")), text("td", c.note || ""));
    body.append(tr);
  }
}
function drawTimeline(requests) {
  const box = el("timeline");
  box.replaceChildren();
  const span = Math.max(1, ...requests.map((r) => r.total_ms));
  const seen = new Set();
  for (const r of requests) {
    const what = `${r.path} ${r.route} ${r.status || "—"}${r.stream ? " stream" : ""}`;
    const label = text("div", `${new Date(r.unix_ms).toLocaleTimeString()} ${what} · ${ms(r.total_ms)}`, "label");
    label.title = r.id;
    const track = document.createElement("div");
    track.className = "track";
    track.dataset.id = r.id;
    for (const s of r.steps) {
      seen.add(s.name);
      const d = document.createElement("div");
      d.className = "step";
      d.style.left = (100 * s.start_ms / span) + "%";
      d.style.width = (100 * Math.max(0, s.end_ms - s.start_ms) / span) + "%";
      d.style.background = COLORS[s.name] || "#94a3b8";
      d.title = `${s.name}${s.node ? " on " + s.node : ""}: ${ms(s.end_ms - s.start_ms)}` + (s.bytes ? `, ${bytes(s.bytes)}` : "");
      track.append(d);
    }
    if (r.ttft_ms != null) {
      const t = document.createElement("div");
      t.className = "ttft";
      t.style.left = (100 * r.ttft_ms / span) + "%";
      t.title = `first token after ${ms(r.ttft_ms)}` + (r.tpot_ms != null ? `, then ${ms(r.tpot_ms)} per token` : "");
      track.append(t);
    }
    box.append(label, track);
  }
  const legend = el("legend");
  legend.replaceChildren();
  for (const name of seen) {
    const s = document.createElement("span");
    const i = document.createElement("i");
    i.style.background = COLORS[name] || "#94a3b8";
    s.append(i, name);
    legend.append(s);
  }
  if (seen.size) legend.append(text("span", "| first token"));
}

function drawSummary(st) {
  const box = el("summary");
  box.replaceChildren();
  for (const [k, v] of Object.entries(st.summary || {})) {
    const s = document.createElement("span");
    s.append(k + ": ", text("b", String(v)));
    box.append(s);
  }
}

async function poll() {
  try {
    const headers = key ? { Authorization: "Bearer " + key } : {};
    const res = await fetch("view/state", { headers, cache: "no-store" });
    if (res.status === 401) { el("keybox").hidden = false; el("error").textContent = ""; return; }
    if (!res.ok) { el("error").textContent = `view/state answered ${res.status}`; return; }
    const st = await res.json();
    el("keybox").hidden = true;
    el("error").textContent = "";
    el("kind").textContent = st.title || st.kind;
    el("updated").textContent = "updated " + new Date(st.now_ms).toLocaleTimeString();
    document.body.dataset.kind = st.kind;
    drawSummary(st);
    drawNodes(st.nodes || []);
    drawSlots(st.slots);
    drawCaches(st.caches);
    drawCharts(st.series);
    drawTimeline(st.requests || []);
    document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
  } catch (e) {
    el("error").textContent = "cannot reach the server: " + e.message;
  }
}

el("keybox").addEventListener("submit", (e) => {
  e.preventDefault();
  key = el("key").value;
  sessionStorage.setItem("baton-key", key);
  poll();
});
poll();
setInterval(poll, 1000);
</script>
</body>
</html>
)HTML";

}  // namespace

std::string_view live_view_page() { return k_page; }

}  // namespace baton
