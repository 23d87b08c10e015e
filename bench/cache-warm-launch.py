#!/usr/bin/env python3
"""Warm launches with and without the image cache (cache helper).

For each workload, as an unprivileged user (setpriv), compares:
  dir     the image's tree as a plain directory
  fresh   squashfs-mount --no-cache: a new loop device and superblock per launch
          (the image file itself stays in the page cache: loop I/O is buffered)
  cached  squashfs-mount: a clone of the kept instance
after one warm-up launch of each. Variants are interleaved round by round;
median and min are reported. Workloads: `find` over the tree, and Python
importing eight stdlib packages from the image's python3.11 (.pyc and C
extensions read from the image).

Usage (root): bench/cache-warm-launch.py <squashfs-mount> <image.sqfs> <tree-dir> <mountpoint> <user> [rounds]
"""
import statistics, subprocess, sys, time

bin_, img, tree, mnt, user = sys.argv[1:6]
rounds = int(sys.argv[6]) if len(sys.argv) > 6 else 15
as_user = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"]
imports = "json, email.parser, http.client, asyncio, decimal, xml.dom.minidom, unittest, argparse"

def find(root):
    return ["sh", "-c", f"find {root} -type f | wc -l"]

def python(root):
    return ["python3", "-S", "-B", "-c",
            f"import sys; sys.path[:0] = ['{root}/usr/lib/python3.11', '{root}/usr/lib/python3.11/lib-dynload']; "
            f"import {imports}; assert json.__file__.startswith('{root}'), json.__file__"]

workloads = {"find": find, "python imports": python}
variants = {
    "dir": lambda w: as_user + w(tree),
    "fresh (--no-cache)": lambda w: as_user + [bin_, "--no-cache", f"{img}:{mnt}", "--"] + w(mnt),
    "cached": lambda w: as_user + [bin_, f"{img}:{mnt}", "--"] + w(mnt),
}

def run(cmd):
    t = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dt = (time.perf_counter() - t) * 1000
    if p.returncode != 0 or p.stderr:
        sys.exit(f"{cmd}: exit {p.returncode}: {p.stderr.decode()}")
    return dt

for wname, w in workloads.items():
    times = {v: [] for v in variants}
    for v, mk in variants.items():
        run(mk(w))
    for _ in range(rounds):
        for v, mk in variants.items():
            times[v].append(run(mk(w)))
    base = statistics.median(times["dir"])
    print(f"{wname}: {rounds} rounds, median (min) ms")
    for v, t in times.items():
        m = statistics.median(t)
        print(f"  {v:<20} {m:8.1f} ({min(t):7.1f})  {m / base:4.2f}x dir")
