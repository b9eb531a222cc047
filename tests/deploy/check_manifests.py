#!/usr/bin/env python3
"""Render Baton's Kubernetes manifests and check them against what the binaries accept.

    python3 tests/deploy/check_manifests.py --baton build/apps/baton --kubectl kubectl --root .

Renders deploy/k8s (the base) and every overlay under deploy/k8s/overlays/ with `kubectl kustomize`
(offline: nothing is applied, no cluster is needed), parses every document and checks, per render:

  * every container that runs baton: its subcommand exists, every -f/--flag in its args is listed by
    `baton SUB --help` (run here), every option the help marks REQUIRED is given, every $(VAR) in its
    command/args is defined by its env (Kubernetes passes an undefined one through literally), its --host
    is not loopback, its --port is a containerPort and --advertise names that port, its -m file lies on a
    volume mount, and the etcd URLs resolve to a Service of the render (the base) with that port;
  * all nodes and routers of a render share one --etcd and one --cluster, and the prefill nodes agree with
    the decode nodes on the KV layout a blob must match (-fa, cache types, --kv-unified) and do not have a
    larger per-slot context (-c / -np) than the decode nodes;
  * every Deployment container has readiness and liveness probes (httpGet /health on the container's port);
    baton serve containers also a startup probe and a preStop hook; terminationGracePeriodSeconds is larger
    than the preStop sleep plus --drain; liveness tolerates 503 for longer than --drain;
  * every container of every workload sets resources.requests (cpu and memory);
  * every Service selects some workload's pods and its targetPorts are ports of those pods' containers, and
    some Service selects the router pods; every PersistentVolumeClaim a pod uses exists in the render;
  * etcd containers use only flags `etcd --help` lists (when an etcd binary is found, --etcd-bin).

Flags another issue adds (PENDING below; none at present) are tolerated in overlays only while
`baton serve --help` does not list them, with a NOTE. The one-letter forms a subcommand's --help footer lists
("Short forms: -m = --model, ...") count as the long options they stand for. Every violation is printed as one FAIL line; the exit status is 1 if there is any.
"""

import argparse
import ipaddress
import os
import re
import shlex
import shutil
import subprocess
import sys
from urllib.parse import urlsplit

import yaml

# Flags of `baton serve` that overlays may ask for before the binary has them. Once `baton serve --help`
# lists them they are checked like any other flag. (The GPU overlay's -ngl/-fa came with issue 11.)
PENDING = {}

BATON_SUBCOMMANDS = {"serve", "route", "demo", "generate", "prefill", "decode", "blob", "mkmodel"}
SHELLS = {"sh", "bash", "dash"}
WORKLOAD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}

# What a blob must match between a prefill and a decode node (docs/cluster.md, "Groups"): option names that
# are one setting, and the boolean pair --kv-unified / --no-kv-unified.
KV_LAYOUT_OPTIONS = [("-fa", "--flash-attn"), ("-ctk", "--cache-type-k"), ("-ctv", "--cache-type-v")]


class Report:
    def __init__(self):
        self.violations = 0
        self.notes = 0

    def fail(self, where, msg):
        self.violations += 1
        print(f"FAIL {where}: {msg}")

    def note(self, where, msg):
        self.notes += 1
        print(f"NOTE {where}: {msg}")


# ---- the binaries' --help ---------------------------------------------------------------------------------

class HelpInfo:
    """The options one `PROGRAM [SUB] --help` lists: names, which are REQUIRED, and printed defaults."""

    OPTION_NAMES = re.compile(r"((?:--?[A-Za-z][\w-]*(?:\{[^}]*\})?(?:,\s*|\s+))+)")
    NAME = re.compile(r"--?[A-Za-z][\w-]*")

    def __init__(self, text):
        self.names = set()
        self.required = []  # [set of alternative names]
        self.defaults = {}  # name -> default string
        for line in text.splitlines():
            s = line.strip()
            if not s.startswith("-"):
                continue
            m = self.OPTION_NAMES.match(s + " ")
            if not m:
                continue
            names = self.NAME.findall(m.group(1))
            rest = s[m.end():] if m.end() <= len(s) else ""
            self.names.update(names)
            if re.search(r"\bREQUIRED\b", rest):
                self.required.append(set(names))
            d = re.match(r"\S+\s+\[([^\]]*)\]", rest)  # CLI11: "TYPE [DEFAULT]"
            if d:
                for n in names:
                    self.defaults[n] = d.group(1)

        # "Short forms: -m = --model, -c = --ctx-size." (serve, generate, prefill, decode)
        for short, long in re.findall(r"(-\w)\s*=\s*(--[\w-]+)", "\n".join(
                l for l in text.splitlines() if l.strip().startswith("Short forms:"))):
            if long in self.names:
                self.names.add(short)
                for alts in self.required:
                    if long in alts:
                        alts.add(short)

    def default(self, names, fallback=None):
        for n in names:
            if n in self.defaults:
                return self.defaults[n]
        return fallback


_help_cache = {}


def program_help(argv):
    """HelpInfo of `argv --help`, or an error string."""
    key = tuple(argv)
    if key not in _help_cache:
        try:
            p = subprocess.run(list(argv) + ["--help"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            _help_cache[key] = f"`{' '.join(argv)} --help` could not run: {e}"
        else:
            if p.returncode != 0:
                _help_cache[key] = (f"`{' '.join(argv)} --help` exited {p.returncode}: "
                                    f"{(p.stderr or p.stdout).strip()[:300]}")
            else:
                _help_cache[key] = HelpInfo(p.stdout + "\n" + p.stderr)
    return _help_cache[key]


# ---- reading the rendered objects ----------------------------------------------------------------------

def render(kubectl, path):
    p = subprocess.run([kubectl, "kustomize", path], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError(f"`{kubectl} kustomize {path}` exited {p.returncode}: {p.stderr.strip()}")
    return [d for d in yaml.safe_load_all(p.stdout) if d]


def pod_template(obj):
    if obj.get("kind") in WORKLOAD_KINDS:
        return (obj.get("spec") or {}).get("template") or {}
    if obj.get("kind") == "CronJob":
        return ((((obj.get("spec") or {}).get("jobTemplate") or {}).get("spec") or {}).get("template")) or {}
    return None


def oname(obj):
    return f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"


def program_argv(c):
    """(program basename, argv from the program on) of a container, or (None, [])."""
    cmd = [str(x) for x in (c.get("command") or [])]
    args = [str(x) for x in (c.get("args") or [])]
    if not cmd:
        # The image's ENTRYPOINT runs; baton's image has ENTRYPOINT ["baton"].
        if args and args[0] in BATON_SUBCOMMANDS:
            return "baton", ["baton"] + args
        return None, []
    argv = cmd + args
    if os.path.basename(argv[0]) in SHELLS and "-c" in argv[1:]:
        i = argv.index("-c")
        if i + 1 >= len(argv):
            return None, []
        try:
            toks = shlex.split(argv[i + 1])
        except ValueError:
            return None, []
        for j, t in enumerate(toks):
            if os.path.basename(t) in ("baton", "etcd"):
                out = []
                for u in toks[j:]:
                    if u in (";", "&&", "||", "|", "&"):
                        break
                    out.append(u)
                return os.path.basename(t), out
        return None, []
    if os.path.basename(argv[0]) == "exec" and len(argv) > 1:
        argv = argv[1:]
    return os.path.basename(argv[0]), argv


def is_flag(tok):
    return len(tok) > 1 and tok.startswith("-") and not re.fullmatch(r"-\d+(\.\d+)?", tok)


def option_values(argv, names):
    """Every value given to one of `names` (`--x V` or `--x=V`), in order."""
    out = []
    i = 0
    while i < len(argv):
        t = argv[i]
        if t in names:
            out.append(argv[i + 1] if i + 1 < len(argv) else "")
            i += 2
            continue
        if "=" in t and t.split("=", 1)[0] in names:
            out.append(t.split("=", 1)[1])
        i += 1
    return out


def option_value(argv, names, default=None):
    v = option_values(argv, names)
    return v[-1] if v else default


def env_values(c, configmaps):
    """(VAR -> value or None when not knowable, envFrom present, [unresolvable reference messages])."""
    out, problems = {}, []
    for e in c.get("env") or []:
        name = e.get("name")
        if "value" in e:
            out[name] = str(e["value"])
            continue
        vf = e.get("valueFrom") or {}
        if "configMapKeyRef" in vf:
            ref = vf["configMapKeyRef"]
            cm = configmaps.get(ref.get("name"))
            if cm is None:
                if not ref.get("optional"):
                    problems.append(f"env {name} reads ConfigMap {ref.get('name')}, which is not in the render")
                out[name] = None
            elif ref.get("key") not in (cm.get("data") or {}):
                problems.append(f"env {name} reads key {ref.get('key')!r} that ConfigMap {ref.get('name')} lacks")
                out[name] = None
            else:
                out[name] = str(cm["data"][ref["key"]])
        elif "fieldRef" in vf:
            path = vf["fieldRef"].get("fieldPath", "")
            out[name] = f"<{path}>"  # known only in the pod; a placeholder keeps URLs parseable
        else:
            out[name] = None  # secretKeyRef, resourceFieldRef: defined, value unknown here
    return out, bool(c.get("envFrom")), problems


def expand(tok, env):
    """Kubernetes' $(VAR) expansion ($$ escapes); returns (expanded, [undefined names])."""
    missing = []

    def sub(m):
        if m.group(0).startswith("$$"):
            return m.group(0)[1:]
        v = m.group(1)
        if v not in env:
            missing.append(v)
            return m.group(0)
        return env[v] if env[v] is not None else f"<{v}>"

    return re.sub(r"\$\$\([A-Za-z_][\w.-]*\)|\$\(([A-Za-z_][\w.-]*)\)", sub, tok), missing


def number(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def container_ports(c):
    """containerPort numbers, and port name -> number."""
    nums, named = set(), {}
    for p in c.get("ports") or []:
        if "containerPort" in p:
            nums.add(int(p["containerPort"]))
            if p.get("name"):
                named[p["name"]] = int(p["containerPort"])
    return nums, named


def resolve_port(port, c):
    nums, named = container_ports(c)
    if isinstance(port, int) or (isinstance(port, str) and port.isdigit()):
        return int(port)
    return named.get(port)


def prestop_seconds(c):
    """(has a preStop hook, seconds it sleeps when that is knowable else 0)."""
    ps = ((c.get("lifecycle") or {}).get("preStop")) or None
    if not ps:
        return False, 0.0
    if "sleep" in ps:
        return True, float((ps["sleep"] or {}).get("seconds", 0))
    cmd = [str(x) for x in ((ps.get("exec") or {}).get("command") or [])]
    if cmd and os.path.basename(cmd[0]) in SHELLS and "-c" in cmd:
        i = cmd.index("-c")
        cmd = shlex.split(cmd[i + 1]) if i + 1 < len(cmd) else []
    total = 0.0
    for i, t in enumerate(cmd):
        if os.path.basename(t) == "sleep" and i + 1 < len(cmd):
            total += number(cmd[i + 1].rstrip("s")) or 0.0
    return True, total


def url_host_port(url):
    try:
        u = urlsplit(url if "://" in url else "http://" + url)
        return u.hostname, (u.port or (443 if u.scheme == "https" else 80))
    except ValueError:
        return None, None


def is_ip(host):
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


# ---- the checks ----------------------------------------------------------------------------------------

class Baton:
    """One container running baton, with its args expanded."""

    def __init__(self, where, obj, spec, c, argv, baton_bin):
        self.where, self.obj, self.spec, self.c, self.argv = where, obj, spec, c, argv
        self.sub = argv[1] if len(argv) > 1 else ""
        self.args = argv[2:]
        self.role = option_value(self.args, ("--role",), "both") if self.sub == "serve" else None
        self.help = program_help([baton_bin, self.sub]) if self.sub else "runs baton without a subcommand"
        self.port = None  # --port, once check_baton_container read it


def check_render(label, docs, args, report, is_base):
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d.get("kind"), []).append(d)
    configmaps = {(d.get("metadata") or {}).get("name"): d for d in by_kind.get("ConfigMap", [])}
    services = by_kind.get("Service", [])
    pvcs = {(d.get("metadata") or {}).get("name") for d in by_kind.get("PersistentVolumeClaim", [])}
    workloads = [d for d in docs if pod_template(d) is not None]
    batons = []

    for obj in workloads:
        tmpl = pod_template(obj)
        spec = tmpl.get("spec") or {}
        for v in spec.get("volumes") or []:
            claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
            if claim and claim not in pvcs:
                report.fail(f"{label} {oname(obj)}",
                            f"volume {v.get('name')} uses PersistentVolumeClaim {claim}, which is not in the render")
        for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
            where = f"{label} {oname(obj)} container {c.get('name')}"
            req = ((c.get("resources") or {}).get("requests")) or {}
            for r in ("cpu", "memory"):
                if r not in req:
                    report.fail(where, f"resources.requests.{r} is not set")
            env, has_env_from, problems = env_values(c, configmaps)
            for p in problems:
                report.fail(where, p)
            prog, argv = program_argv(c)
            expanded = []
            for tok in argv:
                e, missing = expand(tok, env)
                for m in missing:
                    if not has_env_from:
                        report.fail(where, f"$({m}) in command/args is not defined in the container's env "
                                           "(Kubernetes would pass it literally)")
                expanded.append(e)
            if prog == "baton":
                b = Baton(where, obj, spec, c, expanded, args.baton)
                check_baton_flags(b, report, is_base)
                check_baton_container(b, report)
                batons.append(b)
            elif prog == "etcd" and args.etcd_bin:
                check_etcd_flags(where, expanded, args.etcd_bin, report)
            if obj.get("kind") == "Deployment":
                check_probes(where, c, prog == "baton" and len(argv) > 1 and argv[1] == "serve", report,
                             batons[-1] if prog == "baton" else None)

    check_cluster(label, batons, services, report, is_base)
    check_pd_agreement(label, batons, report)
    check_services(label, services, workloads, batons, report)
    return len(batons)


def check_baton_flags(b, report, is_base):
    info = b.help
    if isinstance(info, str):
        report.fail(b.where, info)
        return
    pending_used = set()
    for tok in b.args:
        if not is_flag(tok):
            continue
        flag = tok.split("=", 1)[0]
        if flag in info.names:
            continue
        if not is_base and flag in PENDING.get(b.sub, set()):
            pending_used.add(flag)
            continue
        hint = " (a known pending flag, tolerated in overlays only)" if flag in PENDING.get(b.sub, set()) else ""
        report.fail(b.where, f"`baton {b.sub}` does not accept {flag} (not in `baton {b.sub} --help`){hint}")
    if pending_used:
        report.note(b.where, f"{', '.join(sorted(pending_used))} not in `baton {b.sub} --help` yet: known pending "
                             "(another issue adds them), not counted as a violation")
    for alts in info.required:
        if not any(t.split("=", 1)[0] in alts for t in b.args if is_flag(t)):
            report.fail(b.where, f"`baton {b.sub} --help` marks {'/'.join(sorted(alts))} REQUIRED; the args lack it")


def check_baton_container(b, report):
    info = b.help
    if isinstance(info, str) or b.sub not in ("serve", "route"):
        return
    host = option_value(b.args, ("--host",), info.default(["--host"], "127.0.0.1"))
    if host in ("127.0.0.1", "localhost", "::1") or host.startswith("127."):
        report.fail(b.where, f"--host {host} is loopback: probes and routers reach the pod on its IP (use 0.0.0.0)")
    port = number(option_value(b.args, ("--port",), info.default(["--port"], "8080")))
    nums, _ = container_ports(b.c)
    if port is None or int(port) not in nums:
        report.fail(b.where, f"--port {port and int(port)} is not a containerPort of the container ({sorted(nums)})")
    b.port = int(port) if port is not None else None
    adv = option_value(b.args, ("--advertise",))
    if b.sub == "serve" and option_value(b.args, ("--etcd",)) is not None and adv is None:
        report.fail(b.where, "--etcd without --advertise (docs/cluster.md: required with --etcd)")
    if adv is not None:
        _, aport = url_host_port(adv)
        if aport != b.port:
            report.fail(b.where, f"--advertise {adv} names port {aport}, the node listens on {b.port}")
    model = option_value(b.args, ("-m", "--model"))
    if model:
        mounts = [m.get("mountPath", "").rstrip("/") for m in (b.c.get("volumeMounts") or [])]
        if not any(model.startswith(m + "/") for m in mounts if m):
            report.fail(b.where, f"-m {model} is not on any of the container's volume mounts {mounts}")
    drain = number(option_value(b.args, ("--drain",), info.default(["--drain"], "0"))) or 0.0
    has_prestop, sleep_s = prestop_seconds(b.c)
    if b.sub == "serve" and not has_prestop:
        report.fail(b.where, "no lifecycle.preStop hook (docs/deploy.md, \"Drain\")")
    grace = b.spec.get("terminationGracePeriodSeconds", 30)
    if not grace > sleep_s + drain:
        report.fail(b.where, f"terminationGracePeriodSeconds {grace} is not above preStop {sleep_s:g} s + "
                             f"--drain {drain:g} s: the drain would be cut off by SIGKILL")
    live = b.c.get("livenessProbe")
    if live and drain > 0:
        window = live.get("periodSeconds", 10) * live.get("failureThreshold", 3)
        if not window > drain:
            report.fail(b.where, f"liveness fails after {window} s of 503, not longer than --drain {drain:g}: "
                                 "a draining node (503 \"draining\") would be killed")


def check_probes(where, c, is_serve, report, b):
    nums, _ = container_ports(c)
    want = [("readinessProbe", True), ("livenessProbe", True), ("startupProbe", is_serve)]
    for kind, required in want:
        p = c.get(kind)
        if not p:
            if required:
                report.fail(where, f"no {kind}" + (" (model loading needs one)" if kind == "startupProbe" else ""))
            continue
        hg = p.get("httpGet")
        if not hg:
            report.fail(where, f"{kind} is not an httpGet probe on /health")
            continue
        if hg.get("path") != "/health":
            report.fail(where, f"{kind} probes {hg.get('path')!r}, not /health")
        port = resolve_port(hg.get("port"), c)
        target = b.port if b else None
        if port is None or port not in nums or (target is not None and port != target):
            report.fail(where, f"{kind} port {hg.get('port')!r} is not the container's port "
                               f"({target if target is not None else sorted(nums)})")


def check_etcd_flags(where, argv, etcd_bin, report):
    info = program_help([etcd_bin])
    if isinstance(info, str):
        report.fail(where, info)
        return
    for tok in argv[1:]:
        if is_flag(tok):
            flag = tok.split("=", 1)[0]
            if flag not in info.names:
                report.fail(where, f"etcd does not accept {flag} (not in `{etcd_bin} --help`)")


def check_cluster(label, batons, services, report, is_base):
    clustered = [b for b in batons if b.sub in ("serve", "route")]
    etcds = {option_value(b.args, ("--etcd",)) for b in clustered}
    names = {option_value(b.args, ("--cluster",), "baton") for b in clustered if option_value(b.args, ("--etcd",))}
    if len(etcds) > 1:
        report.fail(label, f"nodes and routers use different --etcd values: {sorted(map(str, etcds))}")
    if len(names) > 1:
        report.fail(label, f"nodes and routers use different --cluster names: {sorted(names)}")
    by_name = {(s.get("metadata") or {}).get("name"): s for s in services}
    seen = set()
    for b in clustered:
        value = option_value(b.args, ("--etcd",))
        if not value or value in seen:
            continue
        seen.add(value)
        external = []
        for url in value.split(","):
            host, port = url_host_port(url.strip())
            if not host:
                report.fail(b.where, f"--etcd {url!r} is not a URL")
                continue
            svc = None if is_ip(host) else by_name.get(host.split(".")[0])
            if svc is None or ("." in host and ".svc" not in host):
                if is_base:
                    report.fail(b.where, f"--etcd {url} does not name a Service of the render "
                                         f"(Services: {sorted(by_name)})")
                else:
                    external.append(url)
                continue
            ports = [p.get("port") for p in (svc.get("spec") or {}).get("ports") or []]
            if port not in ports:
                report.fail(b.where, f"--etcd {url}: Service {host.split('.')[0]} has no port {port} ({ports})")
        if external:
            report.note(label, f"etcd at {','.join(external)} is outside the render (external etcd): not checked")


def check_pd_agreement(label, batons, report):
    pre = [b for b in batons if b.sub == "serve" and b.role == "prefill"]
    dec = [b for b in batons if b.sub == "serve" and b.role == "decode"]
    if not pre or not dec:
        return

    def layout(b):
        out = {}
        for names in KV_LAYOUT_OPTIONS:
            out[names[-1]] = option_value(b.args, names)
        unified = "unified"
        for t in b.args:
            if t == "--no-kv-unified":
                unified = "per-slot"
            elif t == "--kv-unified":
                unified = "unified"
        out["--kv-unified"] = unified
        return out

    def per_slot(b):
        d = b.help if not isinstance(b.help, str) else HelpInfo("")
        c = number(option_value(b.args, ("-c", "--ctx-size"), d.default(["-c", "--ctx-size"], "4096")))
        n = number(option_value(b.args, ("-np", "--parallel"), d.default(["-np", "--parallel"], "1")))
        return c / n if c and n else None

    for p in pre:
        for d in dec:
            lp, ld = layout(p), layout(d)
            for k in lp:
                if lp[k] != ld[k]:
                    report.fail(label, f"{oname(p.obj)} and {oname(d.obj)} differ in {k} ({lp[k]} vs {ld[k]}): "
                                       "decode nodes would reject every blob of these prefill nodes")
            sp, sd = per_slot(p), per_slot(d)
            if sp and sd and sp > sd:
                report.fail(label, f"{oname(p.obj)} has {sp:g} tokens per slot (-c/-np), {oname(d.obj)} only "
                                   f"{sd:g}: long prompts' blobs would find no decode slot large enough")


def check_services(label, services, workloads, batons, report):
    def labels_of(w):
        return ((pod_template(w).get("metadata") or {}).get("labels")) or {}

    router_objs = {id(b.obj) for b in batons if b.sub == "route"}
    router_served = False
    for s in services:
        where = f"{label} {oname(s)}"
        sel = (s.get("spec") or {}).get("selector")
        if not sel:
            continue  # a selector-less Service (manual Endpoints) is not ours to judge
        picked = [w for w in workloads if all(labels_of(w).get(k) == v for k, v in sel.items())]
        if not picked:
            report.fail(where, f"selector {sel} matches no workload's pod labels")
            continue
        for w in picked:
            containers = (pod_template(w).get("spec") or {}).get("containers") or []
            for p in (s.get("spec") or {}).get("ports") or []:
                target = p.get("targetPort", p.get("port"))
                if not any(resolve_port(target, c) in container_ports(c)[0] for c in containers):
                    report.fail(where, f"port {p.get('port')} targets {target!r}, which no container of "
                                       f"{oname(w)} exposes")
            if id(w) in router_objs:
                router_served = True
    if router_objs and not router_served:
        report.fail(label, "no Service selects the router pods (`baton route`)")


# ---- main ----------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baton", required=True, help="the baton binary whose --help the flags are checked against")
    ap.add_argument("--kubectl", default="kubectl", help="kubectl (with kustomize) to render with")
    ap.add_argument("--root", default=".", help="the checkout (holds deploy/k8s)")
    ap.add_argument("--etcd-bin", default=shutil.which("etcd"),
                    help="an etcd binary to check the etcd container's flags against (default: etcd on PATH)")
    args = ap.parse_args()

    report = Report()
    if not (os.path.isfile(args.baton) and os.access(args.baton, os.X_OK)):
        report.fail("--baton", f"{args.baton} is not an executable file")
        return 1
    k8s = os.path.join(args.root, "deploy", "k8s")
    renders = [("deploy/k8s", k8s, True)]
    odir = os.path.join(k8s, "overlays")
    if os.path.isdir(odir):
        for o in sorted(os.listdir(odir)):
            if os.path.isfile(os.path.join(odir, o, "kustomization.yaml")):
                renders.append((f"deploy/k8s/overlays/{o}", os.path.join(odir, o), False))
    if not args.etcd_bin:
        report.note("etcd", "no etcd binary found: the etcd container's flags are not checked")

    containers = 0
    for label, path, is_base in renders:
        try:
            docs = render(args.kubectl, path)
        except (RuntimeError, OSError, subprocess.TimeoutExpired, yaml.YAMLError) as e:
            report.fail(label, str(e))
            continue
        n = check_render(label, docs, args, report, is_base)
        containers += n
        print(f"rendered {label}: {len(docs)} objects, {n} baton containers checked")

    print(f"check_manifests: {len(renders)} renders, {containers} baton containers, "
          f"{report.violations} violations, {report.notes} notes")
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
