# fish completion for squashfs-mount
#
# Hand-written: squashfs-mount's argument parser (crates/squashfs-mount/src/
# cli.rs) has no completion generator. The test crates/squashfs-mount/tests/
# completions.rs checks that every option of `squashfs-mount --help` is here.

# Whether "--" (the start of the command to run) is already on the line.
function __squashfs_mount_has_command
    set -l tokens (commandline -opc)
    contains -- -- $tokens[2..-1]
end

# Whether --gc, --cache-status or --policy (which stand alone) is on the line.
function __squashfs_mount_maintenance
    set -l tokens (commandline -opc)
    contains -- --gc $tokens; or contains -- --cache-status $tokens; or contains -- --policy $tokens
end

# The command after "--" and its arguments.
function __squashfs_mount_complete_command
    set -l tokens (commandline -opc)
    set -l at (contains -i -- -- $tokens)
    set -l command $tokens[(math $at + 1)..-1] (commandline -ct)
    complete -C (string join -- ' ' (string escape -- $command[1..-2]) $command[-1])
end

# --bind-mount=<source>:<destination>[,...]: directories on both sides.
function __squashfs_mount_binds
    set -l value $argv[1]
    set -l head (string match -r -- '^.*[,:]' $value)
    set -l last (string replace -r -- '^.*[,:]' '' $value)
    for d in (__fish_complete_directories $last '')
        printf '%s%s\n' "$head" (string split -m1 -- \t $d)[1]
    end
end

# <image>:<mountpoint>, --sqfs=<image>:<mountpoint>[,...] and
# --union=<image>[,...]:<mountpoint>: image files, then the mount point (a
# directory) after ':'. $argv[1]: the text typed so far (option value).
function __squashfs_mount_pairs
    set -l value $argv[1]
    set -l last (string split -r -m1 -- , $value)[-1]
    if string match -q -- '*:*' $last; or string match -q -- '--union=*:*' (commandline -ct)
        set -l parts (string split -r -m1 -- : $value)
        for d in (__fish_complete_directories $parts[2] '')
            printf '%s:%s\n' $parts[1] (string split -m1 -- \t $d)[1]
        end
    else
        set -l parts (string split -r -m1 -- , $value)
        set -l head ''
        test (count $parts) -eq 2; and set head $parts[1],
        for f in (__fish_complete_path $parts[-1])
            printf '%s%s\n' $head $f
        end
    end
end

complete -c squashfs-mount -f
complete -c squashfs-mount -n '__squashfs_mount_has_command' -x -a '(__squashfs_mount_complete_command)'

set -l plain 'not __squashfs_mount_has_command; and not __squashfs_mount_maintenance'
complete -c squashfs-mount -n $plain -s s -l sqfs -x -a '(__squashfs_mount_pairs (string replace -r -- "^(--sqfs=|-s)" "" (commandline -ct)))' -d 'Images to mount: image:mountpoint[,...]'
complete -c squashfs-mount -n $plain -l bind-mount -x -a '(__squashfs_mount_binds (string replace -r -- "^--bind-mount=" "" (commandline -ct)))' -d 'Show a directory also at another place: source:destination[,...]'
complete -c squashfs-mount -n $plain -s r -l mutable-root -d "Create missing mount points in the command's view only"
complete -c squashfs-mount -n $plain -l union -x -a '(__squashfs_mount_pairs (string replace -r -- "^--union=" "" (commandline -ct)))' -d 'Stack images at one mount point: image,image[,...]:mountpoint'
complete -c squashfs-mount -n $plain -l writable -d 'Writable layer: on a fresh tmpfs (--writable=SIZE: 512M, 2G, 2GiB... or N% of RAM), or kept in a directory (--writable=DIR, a value with a /)'
complete -c squashfs-mount -n $plain -l no-cache -d 'Mount private instances; do not use or fill the image cache'
complete -c squashfs-mount -n $plain -l prefetch -d 'Read the files images list in /.squashfs-mount/hot.list while the command starts (default)'
complete -c squashfs-mount -n $plain -l no-prefetch -d 'Do not prefetch the hot lists images carry'
complete -c squashfs-mount -n $plain -l join -d 'Tasks of a Slurm step on a node share one mount (srun task)'
complete -c squashfs-mount -n $plain -l fuse-single -d 'Accepted for uenv, ignored'
complete -c squashfs-mount -n $plain -s h -l help -d 'Print the help and exit'
complete -c squashfs-mount -n $plain -s V -l version -d 'Print the version and exit'
complete -c squashfs-mount -n $plain -s v -l verbose -d 'Say which way each image was mounted and why (-vv, -vvv: more)'
complete -c squashfs-mount -n $plain -s q -l quiet -d 'No note when running without setuid'
complete -c squashfs-mount -n $plain -l gc -d 'Evict unused cached instances you created (root: all unused)'
complete -c squashfs-mount -n $plain -l cache-status -d 'List your cached instances (root: all)'
complete -c squashfs-mount -n $plain -l policy -d 'Print the site policy and which way each image would be mounted'
complete -c squashfs-mount -n '__fish_seen_argument -l gc; and not __fish_seen_argument -l all -l expired' -l all -d 'With --gc, root only: evict every cached instance'
complete -c squashfs-mount -n '__fish_seen_argument -l gc; and not __fish_seen_argument -l all -l expired' -l expired -d 'With --gc: evict only what has expired'
complete -c squashfs-mount -n '__fish_seen_argument -l cache-status; and not __fish_seen_argument -l json' -l json -d 'With --cache-status: as JSON'
complete -c squashfs-mount -n '__fish_seen_argument -l gc -l policy' -F
complete -c squashfs-mount -n $plain -a '(__squashfs_mount_pairs (commandline -ct))' -d 'image:mountpoint'
complete -c squashfs-mount -n 'not __squashfs_mount_has_command; and not __squashfs_mount_maintenance; and test -z (commandline -ct)' -a '--' -d 'Then the command to run'
