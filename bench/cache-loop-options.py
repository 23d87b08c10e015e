#!/usr/bin/env python3
"""Loop device options for squashfs images (cache helper).

Compares direct I/O on/off and logical block size 512/4096 for `find`
(metadata) and `tar` (all data) over an image, in three cache states:
  cold   drop_caches before the run
  fresh  a new squashfs superblock (umount + mount), the image file's page
         cache left as it is: what every launch without the image cache sees
  kept   the same mount again: what the image cache gives
Configurations are interleaved round by round and medians reported, so that
load from other processes spreads over all of them. Also reports, after one
cold tar, how much of the image file (compressed data) and of the files in
the mount (decompressed data) sit in the page cache (fincore), which no
other process can disturb.

Usage (root): bench/cache-loop-options.py <image.sqfs> [rounds]
"""
import os, statistics, subprocess, sys, tempfile, time

img = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
configs = [("off", 512), ("off", 4096), ("on", 512), ("on", 4096)]
mnt = tempfile.mkdtemp(prefix="loopopt.")
work = {
    "find": f"find {mnt} -type f | wc -l",
    "tar": f"tar cf - -C {mnt} . | cat > /dev/null",
}

def sh(cmd, **kw):
    return subprocess.run(cmd, shell=True, check=True, **kw)

def drop():
    sh("sync; echo 3 > /proc/sys/vm/drop_caches")

def timed(cmd):
    t = time.perf_counter()
    sh(cmd, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - t) * 1000

def attach(dio, bs):
    dev = subprocess.run(["losetup", "--find", "--show", "--read-only", f"--direct-io={dio}",
                          "--sector-size", str(bs), img], check=True, capture_output=True, text=True).stdout.strip()
    sh(f"mount -t squashfs -o ro {dev} {mnt}")
    return dev

def detach(dev):
    sh(f"umount {mnt}")
    sh(f"losetup -d {dev}")

def cached_bytes(paths):
    total = 0
    for i in range(0, len(paths), 500):
        out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES"] + paths[i:i + 500],
                             capture_output=True, text=True).stdout
        total += sum(int(x) for x in out.split())
    return total

results = {}
for r in range(rounds):
    for dio, bs in configs:
        dev = attach(dio, bs)
        try:
            for w, cmd in work.items():
                drop()
                results.setdefault((dio, bs, w, "cold"), []).append(timed(cmd))
                sh(f"umount {mnt}; mount -t squashfs -o ro {dev} {mnt}")
                results.setdefault((dio, bs, w, "fresh"), []).append(timed(cmd))
                results.setdefault((dio, bs, w, "kept"), []).append(timed(cmd))
        finally:
            detach(dev)
    print(f"round {r + 1}/{rounds} done", file=sys.stderr)

print(f"image {img} ({os.path.getsize(img) / 2**20:.0f} MiB), {rounds} rounds, median (min) in ms")
print(f"{'config':<18}" + "".join(f"{w + ' ' + s:>20}" for w in work for s in ("cold", "fresh", "kept")))
for dio, bs in configs:
    row = f"dio={dio} bs={bs:<5}   "
    for w in work:
        for s in ("cold", "fresh", "kept"):
            v = results[(dio, bs, w, s)]
            row += f"{statistics.median(v):>12.0f} ({min(v):>5.0f})"
    print(row)

print("page cache after one cold tar (fincore):")
for dio, bs in configs:
    dev = attach(dio, bs)
    try:
        drop()
        sh(work["tar"], stdout=subprocess.DEVNULL)
        files = subprocess.run(f"find {mnt} -type f", shell=True, capture_output=True, text=True).stdout.split("\n")
        files = [f for f in files if f]
        print(f"dio={dio} bs={bs:<5} image file (compressed): {cached_bytes([img]) / 2**20:6.0f} MiB   "
              f"files in the mount (decompressed): {cached_bytes(files) / 2**20:6.0f} MiB")
    finally:
        detach(dev)
os.rmdir(mnt)
