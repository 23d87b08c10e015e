//! The usage text of `squashfs-mount --help`.

pub const USAGE: &str = "\
Usage: squashfs-mount [OPTIONS] <image>:<mountpoint> [<image>:<mountpoint>...] -- <command> [args...]
       squashfs-mount [OPTIONS] -s|--sqfs=<image>:<mountpoint>[,<image>:<mountpoint>...] -- <command> [args...]
       squashfs-mount [OPTIONS] [-r] --bind-mount=<source>:<destination>[,...] [<image>:<mountpoint>...] -- <command> [args...]
       squashfs-mount --gc [--all | --expired | <image>]
       squashfs-mount --cache-status [--json]
       squashfs-mount --policy [--json] [<image>...]

Mounts each SquashFS <image> read-only (nosuid, nodev) on <mountpoint> in a
private mount namespace, drops all privileges and runs <command> as you.
Images are opened with your own permissions. The site policy decides which
images the kernel mounts (by default those only root can change); the
others, your own images among them, are served by a FUSE server running as
you. 'squashfs-mount --policy IMAGE' says which way, and whether you can use
FUSE here. -r makes missing mount points and bind destinations (e.g.
/user-environment) in the command's view only.

Options:
  -s, --sqfs=<image>:<mountpoint>[,...]
                                      images to mount (comma-separated list)
  --bind-mount=<source>:<destination>[,...]
                                      show the directory <source> (looked up
                                      as you) also at <destination>: nosuid,
                                      nodev, with its submounts, writable
                                      where <source> is; repeatable
  -r, --mutable-root                  create mount points and bind
                                      destinations that do not exist, in the
                                      command's view only (the directory
                                      that gets them is read-only at its top
                                      level for the command)
  --union=<image>,<image>[,...]:<mountpoint>
                                      stack several images at one mount point
                                      (overlayfs, read-only; the first image
                                      named is on top); repeatable
  --writable[=SIZE]                   give every mount a private writable layer
                                      on a fresh tmpfs (SIZE: 512M, 2G, 2GiB,
                                      1.5G... or N% of RAM; default 50%);
                                      changes vanish at exit
  --writable=DIR, --writable DIR      (a value with a '/') give every mount a
                                      writable layer kept in your directory
                                      DIR (created 0700; on a local disk),
                                      mounted as you in a user namespace;
                                      changes stay for the next launch with
                                      DIR and the same images
  --no-cache                          mount private instances; do not use or
                                      fill the image cache
  --prefetch, --no-prefetch           read the files an image lists in
                                      /.squashfs-mount/hot.list (as sqfs
                                      pack stores it) in the background
                                      while the command starts (default: on)
  --join                              tasks of a Slurm step on a node share one
                                      mount (uenv's; run as srun's task)
  --fuse-single                       accepted (uenv's), ignored
  -v, --verbose                       say which way each image was mounted
                                      (kernel or FUSE, and why) and whether
                                      a cached instance was reused or made;
                                      given twice: also where each mount
                                      point resolved; three times: also how
                                      long each step took
  --verbose=N                         as -v given N times (0 to 3)
  -q, --quiet                         no note when running without setuid
  --gc                                evict unused cached instances you
                                      created (root: all unused ones); with
                                      an <image>: that image's instance;
                                      --expired: only what has expired (idle
                                      too long, deleted, beyond the limits);
                                      --all (root only): every instance
  --cache-status                      list your cached instances (root: all);
                                      --json for a machine-readable list
  --policy [--json] [<image>...]      print the site policy in force, whether
                                      you can use FUSE, and for each <image>
                                      which way it would be mounted and why
  -h, --help                          print this help and exit
  -V, --version                       print the version and exit

Environment:
  SQFSMNT_FWD_<NAME>=<value>  passed to <command> as <NAME>=<value>
                              (e.g. SQFSMNT_FWD_LD_LIBRARY_PATH)
  UENV_MOUNT_LIST             set for <command>: <image>:<mountpoint>,... in
                              mount order, absolute paths

The image's programs are under its mount point: run them by their path
(/user-environment/bin/python3), or put its bin/ on PATH inside the command.
Every option, the site policy and examples: the squashfs-mount(1) manual.
";
