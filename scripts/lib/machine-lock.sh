# shellcheck shell=bash
# The machine-wide lock of the privileged suites (crates/test-support/src/lock.rs):
# sourced by the scripts that share the machine's loop devices, image cache,
# test users or setuid files with them. Bash.

# (SQFSMNT_INTEGRATION_LOCK: another lock file, for the tests of these functions.)
LOCK=${SQFSMNT_INTEGRATION_LOCK:-/tmp/sqfsmnt-integration.lock}

# Whether this process or an ancestor holds the lock (`flock $LOCK make
# test`): then it is ours already, and taking it again would wait for
# ourselves.
lock_held_by_ancestor() {
  [ -e "$LOCK" ] || return 1
  local ino holders pid
  ino=$(stat -c %i "$LOCK")
  holders=$(while read -r _ type _ _ pid dev _; do
      [ "$type" = FLOCK ] && [ "${dev##*:}" = "$ino" ] && echo "$pid"
    done < /proc/locks)
  [ -n "$holders" ] || return 1
  pid=$$
  while [ "$pid" -gt 1 ]; do
    grep -qx "$pid" <<<"$holders" && return 0
    pid=$(sed 's/.*) //' "/proc/$pid/stat" | cut -d' ' -f2)
  done
  return 1
}

# Whether a descriptor this shell inherited is the lock file opened by a
# parent script that holds the lock (take_machine_lock below): flock on it
# then succeeds at once, the lock belonging to the open file, not to a
# process. (/proc/locks names the flock(1) process that took it, long gone.)
lock_held_through_inherited_fd() {
  local fd
  for fd in /proc/$$/fd/*; do
    fd=${fd##*/}
    [ "$(readlink "/proc/$$/fd/$fd" 2>/dev/null)" = "$LOCK" ] || continue
    flock -n "$fd" 2>/dev/null && return 0
  done
  return 1
}

# take_machine_lock <who>: holds the lock until this shell exits (on a file
# descriptor of its own, which its children inherit), unless an ancestor
# holds it; waits up to an hour.
take_machine_lock() {
  lock_held_by_ancestor && return 0
  lock_held_through_inherited_fd && return 0
  local fd
  exec {fd}>"$LOCK"
  if ! flock -n "$fd"; then
    printf '%s: waiting for %s\n' "$1" "$LOCK" >&2
    flock -w 3600 "$fd" || { printf '%s: could not take %s within an hour\n' "$1" "$LOCK" >&2; return 1; }
  fi
}
