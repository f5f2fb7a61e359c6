#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""contrib/kubernetes/check_manifests.py: check the manifests of this folder
without a cluster.

    check_manifests.py [HIPD_BINARY]

Parses hipd-daemonset.yaml and example-pod.yaml (PyYAML) and checks what
README.md claims of them: the objects' required fields; the DaemonSet's
container is not privileged, cannot gain privileges, drops every
capability and adds back exactly those the systemd unit keeps
(systemd/hipd.service.in's CapabilityBoundingSet), runs without the node's
PID, IPC or network namespaces; the socket's directory is the same hostPath
in both, and the pod's HIPD_SOCKET is in it; the pod runs as a non-root
uid that the ConfigMap's hipd.conf admits, and hipd.conf does not admit
root implicitly (strict-allow); with HIPD_BINARY, every key of hipd.conf is
an option of that hipd (--list-options). Exit 0, or 1 with the problems.
No API server is involved: this is no admission or schema check.
"""
import os
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
problems = []


def need(cond, what):
    if not cond:
        problems.append(what)
    return cond


def load(name):
    with open(os.path.join(HERE, name), encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    for d in docs:
        for k in ("apiVersion", "kind", "metadata"):
            need(k in d, f"{name}: a document without {k}")
        need("name" in d.get("metadata", {}), f"{name}: {d.get('kind')} without a name")
    return docs


def unit_caps():
    path = os.path.join(TOP, "systemd", "hipd.service.in")
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("CapabilityBoundingSet="):
                return {c.removeprefix("CAP_") for c in line.split("=", 1)[1].split()}
    problems.append(f"{path}: no CapabilityBoundingSet")
    return set()


def hipd_conf(text):
    conf = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        k, _, v = line.partition("=")
        conf[k.strip()] = v.strip()
    return conf


ds_docs = load("hipd-daemonset.yaml")
pod_docs = load("example-pod.yaml")
by_kind = {d["kind"]: d for d in ds_docs}
for kind in ("Namespace", "ConfigMap", "DaemonSet"):
    need(kind in by_kind, f"hipd-daemonset.yaml: no {kind}")
ds = by_kind.get("DaemonSet", {})
cm = by_kind.get("ConfigMap", {})
pod = pod_docs[0] if pod_docs else {}
need(pod.get("kind") == "Pod", "example-pod.yaml: not a Pod")

spec = ds.get("spec", {})
tmpl = spec.get("template", {})
need(spec.get("selector", {}).get("matchLabels", {}).items()
     <= tmpl.get("metadata", {}).get("labels", {}).items(),
     "DaemonSet: the selector does not match the template's labels")
ps = tmpl.get("spec", {})
for ns in ("hostPID", "hostIPC", "hostNetwork"):
    need(ps.get(ns) is not True, f"DaemonSet: {ns} is on")
need(ps.get("automountServiceAccountToken") is False,
     "DaemonSet: a service account token is mounted")
containers = ps.get("containers", [])
need(len(containers) == 1, "DaemonSet: not one container")
c = containers[0] if containers else {}
sc = c.get("securityContext", {})
need(sc.get("privileged") is False, "hipd container: privileged is not false")
need(sc.get("allowPrivilegeEscalation") is False,
     "hipd container: allowPrivilegeEscalation is not false (no-new-privileges)")
need(sc.get("readOnlyRootFilesystem") is True, "hipd container: writable root")
caps = sc.get("capabilities", {})
need(caps.get("drop") == ["ALL"], "hipd container: does not drop ALL capabilities")
want = unit_caps()
need(set(caps.get("add", [])) == want,
     f"hipd container adds {sorted(caps.get('add', []))}, the unit keeps {sorted(want)}")
need(sc.get("seccompProfile", {}).get("type") in ("RuntimeDefault", "Localhost"),
     "hipd container: no seccomp profile")

vols = {v["name"]: v for v in ps.get("volumes", [])}
mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
cmd = c.get("command", [])
sock = cmd[cmd.index("--socket") + 1] if "--socket" in cmd else "/run/hipd/hipd.sock"
sock_dir = os.path.dirname(sock)
need(sock_dir in mounts, f"hipd container: {sock_dir} is not a mount")
host_dir = vols.get(mounts.get(sock_dir, ""), {}).get("hostPath", {}).get("path")
need(host_dir is not None, "the socket's directory is not a hostPath")

pspec = pod.get("spec", {})
pvols = {v["name"]: v for v in pspec.get("volumes", [])}
pc = (pspec.get("containers") or [{}])[0]
env = {e["name"]: e.get("value") for e in pc.get("env", [])}
need(env.get("HIPD_SOCKET") is not None, "the pod sets no HIPD_SOCKET")
pmounts = {m["mountPath"]: m["name"] for m in pc.get("volumeMounts", [])}
pdir = os.path.dirname(env.get("HIPD_SOCKET") or "")
need(pdir in pmounts, f"pod: {pdir} (HIPD_SOCKET's directory) is not a mount")
need(pvols.get(pmounts.get(pdir, ""), {}).get("hostPath", {}).get("path") == host_dir,
     "the pod's socket directory is not hipd's hostPath")
need(os.path.basename(env.get("HIPD_SOCKET") or "") == os.path.basename(sock),
     "the pod's HIPD_SOCKET names another socket")
psc = pspec.get("securityContext", {})
uid = psc.get("runAsUser")
need(psc.get("runAsNonRoot") is True and isinstance(uid, int) and uid > 0,
     "pod: not runAsNonRoot with a uid")

conf = hipd_conf(cm.get("data", {}).get("hipd.conf", ""))
need(conf.get("strict-allow") in ("true", "yes", "1"),
     "hipd.conf: without strict-allow root (a root pod) is admitted and an admin")
allowed = conf.get("allow-users", "").split(",")
need(str(uid) in allowed, f"hipd.conf: allow-users {allowed} does not admit the pod's uid {uid}")
need("0" not in allowed and "root" not in allowed, "hipd.conf admits root")

if len(sys.argv) > 1:
    out = subprocess.run([sys.argv[1], "--list-options"], check=True,
                         capture_output=True, text=True).stdout
    known = {line.split()[0] for line in out.splitlines() if line.strip()}
    for k in conf:
        need(k in known, f"hipd.conf: '{k}' is no option of {sys.argv[1]}")

for p in problems:
    print(f"check_manifests: {p}")
print(f"check_manifests: {'FAIL' if problems else 'OK'}: "
      f"{len(ds_docs) + len(pod_docs)} objects, {len(problems)} problems")
sys.exit(1 if problems else 0)
