#!/bin/sh
# Measures loop device options for squashfs images (cache helper):
# direct I/O on/off and logical block size 512/4096, for find (metadata)
# and tar (all data) over an image, in three cache states:
#   cold   - echo 3 > drop_caches before each run
#   fresh  - a new squashfs superblock each run (umount + mount), page cache
#            of the image file left as it is (what every launch without the
#            image cache sees)
#   kept   - the same mount kept between runs (what the image cache gives)
# Also reports how much page cache one full read leaves behind.
# Usage (root): bench/cache-loop-options.sh <image.sqfs> [runs]
set -eu
img=$1
runs=${2:-5}
mnt=$(mktemp -d /tmp/loopopt.XXXXXX)
dev=""
cleanup() {
  umount "$mnt" 2>/dev/null || true
  [ -n "$dev" ] && losetup -d "$dev" 2>/dev/null || true
  rmdir "$mnt"
}
trap cleanup EXIT INT TERM
cached_kb() { awk '/^Cached:/ {print $2}' /proc/meminfo; }
for dio in off on; do
  for bs in 512 4096; do
    dev=$(losetup --find --show --read-only --direct-io=$dio --sector-size $bs "$img")
    got_dio=$(cat /sys/block/${dev#/dev/}/loop/dio)
    mount -t squashfs -o ro "$dev" "$mnt"
    name="dio=$dio bs=$bs"
    echo "== $name (sysfs dio=$got_dio)"
    remount="umount $mnt; mount -t squashfs -o ro $dev $mnt"
    for w in find tar; do
      if [ $w = find ]; then cmd="find $mnt -type f | wc -l"; else cmd="tar cf - -C $mnt . | cat > /dev/null"; fi
      hyperfine -N --style basic --runs "$runs" --export-json "/tmp/loopopt-$dio-$bs-$w-cold.json" \
        --prepare "sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'" "sh -c '$cmd'" >/dev/null
      hyperfine -N --style basic --runs "$runs" --warmup 1 --export-json "/tmp/loopopt-$dio-$bs-$w-fresh.json" \
        --prepare "sh -c '$remount'" "sh -c '$cmd'" >/dev/null
      hyperfine -N --style basic --runs "$runs" --warmup 1 --export-json "/tmp/loopopt-$dio-$bs-$w-kept.json" \
        "sh -c '$cmd'" >/dev/null
      for s in cold fresh kept; do
        python3 -c "import json,sys; r=json.load(open('/tmp/loopopt-$dio-$bs-$w-$s.json'))['results'][0]; print('%-18s %-5s %-6s mean %7.1f ms  sd %6.1f ms' % ('$name', '$w', '$s', r['mean']*1000, r['stddev']*1000))"
      done
    done
    sync; echo 3 > /proc/sys/vm/drop_caches; before=$(cached_kb)
    sh -c "tar cf - -C $mnt . | cat > /dev/null"
    after=$(cached_kb)
    echo "$name: page cache after one cold tar: +$(( (after - before) / 1024 )) MiB"
    umount "$mnt"; losetup -d "$dev"; dev=""
  done
done
