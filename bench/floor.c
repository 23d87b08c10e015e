/* The floor of a setuid launch (`make bench`, row L0): only what every
 * launch of squashfs-mount must do besides mounting images, and nothing
 * else: a private mount namespace whose mounts are slaves of the host's,
 * the caller's credentials back for good (groups, gid, uid; no_new_privs),
 * exec of the command. Built by bench/run with the system's gcc and
 * installed setuid root next to the tool; not a product, not installed by
 * `make install`.
 *
 * usage: floor <command> [args...]
 */
#define _GNU_SOURCE
#include <grp.h>
#include <sched.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    uid_t uid = getuid();
    gid_t gid = getgid();
    gid_t groups[256];
    int n = getgroups(256, groups);

    if (argc < 2 || n < 0)
        return 2;
    if (unshare(CLONE_NEWNS) != 0) {
        perror("floor: unshare");
        return 1;
    }
    if (mount(NULL, "/", NULL, MS_SLAVE | MS_REC, NULL) != 0) {
        perror("floor: mount");
        return 1;
    }
    /* The caller's own groups, gid and uid, real, effective and saved. */
    if (setgroups(n, groups) != 0 || setresgid(gid, gid, gid) != 0 ||
        setresuid(uid, uid, uid) != 0) {
        perror("floor: dropping privileges");
        return 1;
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        perror("floor: prctl");
        return 1;
    }
    execvp(argv[1], argv + 1);
    perror("floor: exec");
    return 127;
}
