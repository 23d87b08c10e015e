//! A Python virtual environment packed into an image, and a small local
//! wheel to `pip install` into it (the kept writable layer's tests and
//! benchmark): no network, Debian's /usr/bin/python3 and its venv module.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cmd::run;

/// The interpreter the venvs are made with.
pub const PYTHON: &str = "/usr/bin/python3";

/// The module the wheel installs, and what `VALUE` it holds.
pub const DEMO_MODULE: &str = "sqfsmnt_demo";
pub const DEMO_VALUE: &str = "42";

/// Whether /usr/bin/python3 can make venvs with pip (python3-venv).
pub fn available() -> bool {
    run(Command::new(PYTHON).args(["-c", "import ensurepip, venv"])).success()
}

/// True (after a loud skip naming `what`) when venvs cannot be made.
pub fn skipped_without_venv(what: &str) -> bool {
    let skip = !available();
    if skip {
        crate::skip::loud_skip(&format!(
            "{what}: {PYTHON} cannot make venvs (python3-venv)"
        ));
    }
    skip
}

/// The command that installs `wheel` with the venv's `python`, offline
/// and quietly: `python -m pip install -q --no-index --no-deps wheel`.
pub fn pip_install(python: &Path, wheel: &Path) -> Vec<String> {
    let mut args = vec![python.to_string_lossy().into_owned()];
    args.extend(["-m", "pip", "install", "-q", "--no-index", "--no-deps"].map(String::from));
    args.push(wheel.to_string_lossy().into_owned());
    args
}

/// Writes `sqfsmnt_demo-1.0-py3-none-any.whl` (one module, `VALUE = 42`)
/// into `dir` (mode 0644), made by hand with Python's zipfile (no build
/// backend needed). Returns its path.
pub fn demo_wheel(dir: &Path) -> PathBuf {
    wheel(dir, DEMO_MODULE)
}

/// Writes `<module>-1.0-py3-none-any.whl` (the module `module`, `VALUE =
/// 42`; `module` a Python identifier) into `dir`, as [`demo_wheel`] does.
pub fn wheel(dir: &Path, module: &str) -> PathBuf {
    let wheel = dir.join(format!("{module}-1.0-py3-none-any.whl"));
    let script = r#"
import base64, hashlib, sys, zipfile
name, ver = sys.argv[2], '1.0'
files = {
    f'{name}/__init__.py': b'VALUE = 42\n',
    f'{name}-{ver}.dist-info/METADATA': f'Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n'.encode(),
    f'{name}-{ver}.dist-info/WHEEL': b'Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n',
}
record = []
for path, data in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()
    record.append(f'{path},sha256={digest},{len(data)}')
record.append(f'{name}-{ver}.dist-info/RECORD,,')
files[f'{name}-{ver}.dist-info/RECORD'] = ('\n'.join(record) + '\n').encode()
with zipfile.ZipFile(sys.argv[1], 'w') as z:
    for path, data in files.items():
        z.writestr(zipfile.ZipInfo(path, (1980, 1, 1, 0, 0, 0)), data)
"#;
    let r = run(Command::new(PYTHON)
        .args(["-c", script])
        .arg(&wheel)
        .arg(module));
    assert!(r.success(), "making the wheel: {}", r.stderr());
    fs::set_permissions(&wheel, fs::Permissions::from_mode(0o644)).expect("chmod wheel");
    wheel
}

/// Makes `<tree>/venv` (with pip), owned by `uid`:`gid` (a user's own
/// tree, as `sqfs pack` of a directory of theirs keeps it), and packs the
/// tree into `image` (root's, 0644). Built once: an existing image is
/// kept.
pub fn venv_image(tree: &Path, image: &Path, uid: u32, gid: u32) {
    if image.exists() {
        return;
    }
    let _ = fs::remove_dir_all(tree);
    fs::create_dir_all(tree).expect("mkdir tree");
    let r = run(Command::new(PYTHON)
        .args(["-m", "venv"])
        .arg(tree.join("venv")));
    assert!(r.success(), "python3 -m venv: {}", r.stderr());
    let r = run(Command::new("chown")
        .args(["-R", &format!("{uid}:{gid}")])
        .arg(tree));
    assert!(r.success(), "chown: {}", r.stderr());
    crate::image::build(tree, image, &[], "", &["-comp", "zstd"]);
}
