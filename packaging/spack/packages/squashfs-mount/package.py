# squashfs-mount's own Spack recipe (packaging/spack/README.md).
# SPDX-License-Identifier: BSD-3-Clause

import os
import sys

from spack.package import *

try:  # Spack 1.x exports tty from spack.package; 0.2x does not
    tty
except NameError:
    import llnl.util.tty as tty


class SquashfsMount(CargoPackage):
    """Runs commands with SquashFS images mounted read-only in a private
    mount namespace, without root: a small setuid-root program that opens
    images with the caller's permissions, mounts them (kernel squashfs, or
    its own FUSE server for images it does not trust), drops every privilege
    for good and runs the command. Also sqfs (pack and inspect images) and,
    with +slurm, a Slurm SPANK plugin (srun --squashfs=IMG:MNT).

    Spack cannot make a program setuid root. After installing, an
    administrator reads and runs, as root, the script the package installs:
    <prefix>/libexec/spack_perms_fix.sh. Until then squashfs-mount runs in
    its rootless mode (user namespaces and FUSE only)."""

    homepage = "https://a-seed-4104af43.example/squashfs-mount"
    # No public download: `make dist` writes the tarball (vendored crates,
    # builds offline) into a Spack source mirror, build/dist/spack-mirror/
    # (README.md here).
    url = "https://a-seed-4104af43.example/squashfs-mount/squashfs-mount-2.0.0.tar.gz"

    license("BSD-3-Clause")

    # The versions: `make dist` (packaging/spack/for-tarball) writes a copy
    # of this recipe into build/dist/spack/ with the version of the tarball
    # it made, <version>-g<commit>, and its sha256, on the line below. This
    # file itself names no version: no checksum here can be that of a
    # tarball made from the commit that holds it.
    # @VERSIONS@

    variant("fuse", default=True, description="the FUSE server (rootless mode, images not trusted)")
    variant("slurm", default=False, description="the Slurm SPANK plugin (srun --squashfs)")

    depends_on("rust@1.89:", type="build")
    depends_on("c", type="build")
    # The plugin is built against the Slurm headers of the release series
    # that will load it (Slurm refuses another series' plugin).
    depends_on("slurm", type="build", when="+slurm")

    # The setuid program, and the files it runs or loads as root.
    setuid_program = "bin/squashfs-mount"
    helper_dir = "lib/squashfs-mount"

    def setup_build_environment(self, env):
        if self.spec.satisfies("+slurm"):
            env.set("SLURM_INCLUDE_DIR", self.spec["slurm"].prefix.include)

    def build(self, spec, prefix):
        # The tarball's .cargo/config.toml replaces crates.io with vendor/.
        cargo = self.module.cargo
        common = ["--locked", "--offline", "-j", str(make_jobs)]
        crates = ["-p", "squashfs-mount", "-p", "sqfs"]
        if spec.satisfies("+fuse"):
            crates += ["-p", "squashfs-mount-fuse"]
        cargo("build", "--release", *common, *crates)
        if spec.satisfies("+slurm"):
            # Its own profile: panic = "unwind" inside slurmstepd.
            cargo("build", "--profile", "spank", *common, "-p", "spank-squashfs-mount")

    def install(self, spec, prefix):
        release = join_path(self.stage.source_path, "target", "release")
        mkdirp(prefix.bin, join_path(prefix, self.helper_dir), prefix.share.man.man1)
        # Not setuid here: spack_perms_fix.sh makes it 4755 root.
        install(join_path(release, "squashfs-mount"), prefix.bin)
        install(join_path(release, "sqfs"), prefix.bin)
        helpers = join_path(prefix, self.helper_dir)
        install(join_path(release, "squashfs-mount-layer"), helpers)
        if spec.satisfies("+fuse"):
            install(join_path(release, "squashfs-mount-fuse"), helpers)
        if spec.satisfies("+slurm"):
            so = join_path(self.stage.source_path, "target", "spank", "libspank_squashfs_mount.so")
            install(so, join_path(helpers, "spank_squashfs_mount.so"))
        install("doc/squashfs-mount.1", prefix.share.man.man1)
        install("doc/sqfs.1", prefix.share.man.man1)
        # The site configuration is read from /etc/squashfs-mount.conf only
        # (never from a prefix a user may own): the documented file is an
        # example to copy there.
        docs = prefix.share.doc.join("squashfs-mount")
        mkdirp(docs)
        install("etc/squashfs-mount.conf", docs)
        for doc in ["README.md", "doc/policy.md", "doc/cache.md", "doc/threat-model.md"]:
            install(doc, docs)
        # The packages' timer for `squashfs-mount --gc --expired`, for this
        # prefix: an administrator links and enables it (README.md here).
        units = join_path(prefix, "lib", "systemd", "system")
        mkdirp(units)
        service = join_path(units, "squashfs-mount-gc.service")
        with open("packaging/systemd/squashfs-mount-gc.service") as f:
            text = f.read()
        with open(service, "w") as f:
            f.write(text.replace("/usr/bin/squashfs-mount ", join_path(prefix.bin, "squashfs-mount") + " "))
        install("packaging/systemd/squashfs-mount-gc.timer", units)

    @run_after("install")
    def perms_fix_script(self):
        script = join_path(self.prefix.libexec, "spack_perms_fix.sh")
        mkdirp(self.prefix.libexec)
        with open(script, "w") as f:
            f.write(self._perms_fix_text())
        os.chmod(script, 0o755)
        units = join_path(self.prefix, "lib", "systemd", "system")
        # Spack writes a build's output only to its log (unless -v); the
        # lines between XON and XOFF (its own `force_echo` markers) also
        # reach the terminal of `spack install`.
        sys.stdout.write("\x11\n")
        sys.stdout.flush()
        tty.warn(
            f"""squashfs-mount is installed without its setuid bit (Spack cannot set it):
until an administrator runs the script below as root, it runs in its rootless
mode only. Read the script, then run it as root:

    {script}

It makes {self.setuid_program} setuid root (4755) and gives the installation's
directories and the programs it starts to root (not writable by others).
The timer that evicts expired cached instances hourly, as the packages'
does: systemctl link {units}/squashfs-mount-gc.service {units}/squashfs-mount-gc.timer
and systemctl enable --now squashfs-mount-gc.timer (as root, after the script)."""
        )
        sys.stderr.flush()
        sys.stdout.write("\x13\n")
        sys.stdout.flush()

    def _perms_fix_text(self):
        prefix = str(self.prefix)
        program = join_path(prefix, self.setuid_program)
        helpers = join_path(prefix, self.helper_dir)
        units = join_path(prefix, "lib", "systemd", "system")
        # Everything the setuid program runs or reads from its prefix, and
        # every directory down to them: root's, not writable by others.
        dirs = [prefix, join_path(prefix, "bin"), join_path(prefix, "lib"), helpers]
        lines = [
            "#!/bin/sh",
            "# Written by the squashfs-mount Spack recipe: makes the installation",
            f"# in {prefix} usable as the setuid program. Run as root.",
            "set -eu",
            'if [ "$(id -u)" -ne 0 ]; then',
            '  echo "spack_perms_fix.sh: run me as root" >&2',
            "  exit 1",
            "fi",
        ]
        for d in dirs:
            lines.append(f"chown root:root {shell_quote(d)}")
            lines.append(f"chmod 0755 {shell_quote(d)}")
        # chmod 0755 keeps a directory's set-group-ID bit (which Spack's
        # install tree may give): none stays anywhere in the prefix.
        lines.append(f"find {shell_quote(prefix)} -type d -perm -2000 -exec chmod g-s {{}} +")
        lines.append(f"for f in {shell_quote(helpers)}/*; do")
        lines.append('  chown root:root "$f"; chmod go-w "$f"')
        lines.append("done")
        lines.append(f"chown root:root {shell_quote(program)}")
        lines.append(f"chmod 4755 {shell_quote(program)}")
        # A directory above the prefix that another user may change lets
        # that user move the installation away: say so (the program still
        # refuses to start a FUSE server as root from such a place).
        lines += [
            f"d={shell_quote(prefix)}",
            'while [ "$d" != / ]; do',
            '  d=$(dirname "$d")',
            "  if [ \"$(stat -c %u \"$d\")\" != 0 ] || [ -n \"$(find \"$d\" -maxdepth 0 -perm /022 ! -perm -1000)\" ]; then",
            '    echo "spack_perms_fix.sh: warning: $d is not root\'s alone; its owner can move this installation" >&2',
            "  fi",
            "done",
            f'echo "spack_perms_fix.sh: {program} is setuid root (4755)"',
            f'echo "To evict expired cached instances hourly: systemctl link {units}/squashfs-mount-gc.service {units}/squashfs-mount-gc.timer && systemctl enable --now squashfs-mount-gc.timer"',
            "",
        ]
        return "\n".join(lines)


def shell_quote(s):
    return "'" + str(s).replace("'", "'\"'\"'") + "'"
