//! The hand-written shell completions of squashfs-mount
//! (packaging/completions/) against the options of `cli::USAGE`: every
//! option must be in each file, and, where the shell is installed, what the
//! shell offers for `squashfs-mount -` must be exactly those options. Runs
//! as any user (no root, no mounts).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use sqfsmnt_test_support::cmd::run;
use sqfsmnt_test_support::{have, loud_skip};
use squashfs_mount::USAGE;

fn completions_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/completions")
}

fn read(name: &str) -> String {
    let path = completions_dir().join(name);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The options `squashfs-mount --help` lists: words starting with `-` or
/// `--` followed by a letter, at the start of a word.
fn usage_options() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = USAGE.as_bytes();
    for i in 0..b.len() {
        let starts_word = i == 0 || matches!(b[i - 1], b' ' | b'\n' | b'[' | b'|' | b',' | b'(');
        if !starts_word || b[i] != b'-' {
            continue;
        }
        let dashes = if b.get(i + 1) == Some(&b'-') { 2 } else { 1 };
        let mut j = i + dashes;
        if !b.get(j).is_some_and(u8::is_ascii_alphabetic) {
            continue;
        }
        j += 1;
        while b
            .get(j)
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        {
            j += 1;
        }
        out.insert(USAGE[i..j].to_string());
    }
    out
}

/// Whether `text` has `word` not followed by another option character.
fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().last();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
            && !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
    })
}

#[test]
fn usage_lists_the_options() {
    let opts = usage_options();
    for o in [
        "-s",
        "--sqfs",
        "--bind-mount",
        "-r",
        "--mutable-root",
        "--verbose",
        "-V",
        "--union",
        "--writable",
        "--no-cache",
        "--prefetch",
        "--no-prefetch",
        "--gc",
        "--all",
        "--cache-status",
        "-h",
        "--help",
        "-v",
        "--version",
    ] {
        assert!(opts.contains(o), "{o} not found in USAGE: {opts:?}");
    }
    assert!(
        !opts.iter().any(|o| o == "--" || o.contains("only")),
        "{opts:?}"
    );
}

#[test]
fn every_option_is_in_each_completion_file() {
    let opts = usage_options();
    let bash = read("squashfs-mount.bash");
    let zsh = read("_squashfs-mount");
    let fish = read("squashfs-mount.fish");
    for o in &opts {
        assert!(
            has_word(&bash, o),
            "packaging/completions/squashfs-mount.bash lacks {o}"
        );
        assert!(
            has_word(&zsh, o),
            "packaging/completions/_squashfs-mount lacks {o}"
        );
        let fish_form = match o.strip_prefix("--") {
            Some(long) => format!("-l {long}"),
            None => format!("-s {}", &o[1..]),
        };
        assert!(
            has_word(&fish, &fish_form),
            "packaging/completions/squashfs-mount.fish lacks {fish_form} ({o})"
        );
    }
}

/// A directory with an image file and two directories, to complete in.
fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("sqfsmnt-completions-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("dir1")).unwrap();
    fs::create_dir_all(dir.join("dir2")).unwrap();
    fs::write(dir.join("img.sqfs"), b"").unwrap();
    dir
}

fn set(text: &str, sep: char) -> BTreeSet<String> {
    text.split(sep)
        .map(|s| s.trim_end_matches('=').to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

const BASH_HARNESS: &str = r#"
source /usr/share/bash-completion/bash_completion || exit 3
source "$1" || exit 3
shift
for line in "$@"; do
  COMP_LINE=$line COMP_POINT=${#line}
  # readline's split: '=' and ':' (in COMP_WORDBREAKS) are words of their own.
  read -ra COMP_WORDS <<< "$(sed 's/\([=:]\)/ \1 /g' <<< "$line")"
  [[ $line == *" " ]] && COMP_WORDS+=("")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMPREPLY=()
  _squashfs_mount squashfs-mount "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}" 2>/dev/null
  printf '%s|' "${COMPREPLY[@]}"; echo
done
"#;

#[test]
fn bash_offers_exactly_the_options() {
    if !have("bash") || !Path::new("/usr/share/bash-completion/bash_completion").exists() {
        return loud_skip("bash completion test: bash or bash-completion is not installed (scripts/deps test installs them)");
    }
    let dir = scratch("bash");
    let lines = [
        "squashfs-mount -",
        "squashfs-mount --gc ",
        "squashfs-mount i",
        "squashfs-mount img.sqfs:d",
        "squashfs-mount --sqfs=img.sqfs:dir1,i",
        "squashfs-mount --union=img.sqfs,img.sqfs:d",
        "squashfs-mount img.sqfs:dir1 -- ech",
        "squashfs-mount -s img.sqfs:d",
        "squashfs-mount --bind-mount=d",
        "squashfs-mount --bind-mount dir1:d",
        "squashfs-mount --bind-mount=dir1:dir2,d",
    ];
    let out = run(Command::new("bash")
        .arg("-c")
        .arg(BASH_HARNESS)
        .arg("harness")
        .arg(completions_dir().join("squashfs-mount.bash"))
        .args(lines)
        .current_dir(&dir));
    let _ = fs::remove_dir_all(&dir);
    let text = out.ok().stdout();
    let got: Vec<&str> = text.lines().collect();
    assert_eq!(got.len(), lines.len(), "{text}");
    let mut want = usage_options();
    want.insert("--".into());
    assert_eq!(set(got[0], '|'), want, "squashfs-mount -<TAB>");
    assert_eq!(
        set(got[1].replace('/', "").as_str(), '|'),
        set("--all|--expired|img.sqfs|dir1|dir2", '|'),
        "--gc <TAB>: --all, --expired or an image"
    );
    assert_eq!(got[2], "img.sqfs|");
    assert_eq!(got[3], "dir1/|dir2/|");
    assert_eq!(got[4], "dir1,img.sqfs|");
    assert_eq!(got[5], "dir1/|dir2/|");
    assert!(
        got[6].split('|').any(|c| c == "echo"),
        "the command after -- is completed: {}",
        got[6]
    );
    assert_eq!(got[7], "dir1/|dir2/|", "-s <image>:<TAB>");
    assert_eq!(got[8], "dir1/|dir2/|", "--bind-mount=<TAB>: directories");
    assert_eq!(got[9], "dir1/|dir2/|", "--bind-mount <source>:<TAB>");
    assert_eq!(got[10], "dir2,dir1/|dir2,dir2/|", "--bind-mount=...,<TAB>");
}

#[test]
fn fish_offers_exactly_the_options() {
    if !have("fish") {
        return loud_skip(
            "fish completion test: fish is not installed (scripts/deps test installs it)",
        );
    }
    let dir = scratch("fish");
    let file = completions_dir().join("squashfs-mount.fish");
    let query = |line: &str| -> BTreeSet<String> {
        run(Command::new("fish")
            .arg("-c")
            .arg(format!("source {}; complete -C '{line}'", file.display()))
            .current_dir(&dir))
        .quiet()
        .stdout()
        .lines()
        .map(|l| l.split('\t').next().unwrap().to_string())
        .collect()
    };
    let mut want = usage_options();
    // --all and --expired go with --gc only, --json with --cache-status.
    for only_after in ["--all", "--expired", "--json"] {
        want.remove(only_after);
    }
    assert_eq!(query("squashfs-mount -"), want, "squashfs-mount -<TAB>");
    assert_eq!(
        query("squashfs-mount --gc --"),
        BTreeSet::from(["--all".to_string(), "--expired".to_string()])
    );
    assert_eq!(
        query("squashfs-mount --cache-status --"),
        BTreeSet::from(["--json".to_string()])
    );
    assert_eq!(
        query("squashfs-mount img.sqfs:d"),
        set("img.sqfs:dir1/|img.sqfs:dir2/", '|')
    );
    assert_eq!(
        query("squashfs-mount --sqfs=img.sqfs:dir1,i"),
        set("--sqfs=img.sqfs:dir1,img.sqfs", '|')
    );
    assert!(query("squashfs-mount img.sqfs:dir1 -- ech").contains("echo"));
    assert_eq!(
        query("squashfs-mount --bind-mount=dir1:d"),
        set("--bind-mount=dir1:dir1/|--bind-mount=dir1:dir2/", '|')
    );
    assert_eq!(
        query("squashfs-mount -simg.sqfs:d"),
        set("-simg.sqfs:dir1/|-simg.sqfs:dir2/", '|')
    );
    let _ = fs::remove_dir_all(&dir);
}

/// Drives an interactive zsh through a pseudo-terminal (zsh/zpty): the
/// completion widget records every match added, in a file.
const ZSH_HARNESS: &str = r#"
zmodload zsh/zpty || exit 3
fpath_dir=$1 dir=$2 out=$3; shift 3
zpty z zsh -f -i
zpty -w z "fpath=($fpath_dir \$fpath); autoload -U compinit; compinit -u -D; PROMPT='> '; LISTMAX=100000; unsetopt auto_list list_beep"
zpty -w z "_capture() { compadd() { local -a m; builtin compadd -O m \"\$@\"; print -rl -- \${^m} >> \$CAPTURE; builtin compadd \"\$@\" }; _main_complete; unfunction compadd; print -r -- END >> \$CAPTURE }"
zpty -w z 'zle -C capture complete-word _capture; bindkey "^T" capture'
zpty -w z "cd $dir"
n=0
for line in "$@"; do
  n=$((n + 1))
  zpty -w z "CAPTURE=$out.$n"
  zpty -n -w z "$line"$'\x14'
  # (until the capture ends: a minute at most, only a hang reaches it)
  for i in {1..1200}; do
    [[ -e $out.$n ]] && grep -q '^END$' $out.$n && break
    sleep 0.05
  done
  zpty -w z $'\x03'
done
zpty -d z
"#;

#[test]
fn zsh_offers_exactly_the_options() {
    if !have("zsh") {
        return loud_skip(
            "zsh completion test: zsh is not installed (scripts/deps test installs it)",
        );
    }
    let dir = scratch("zsh");
    let out = dir.join("capture");
    let lines = [
        "squashfs-mount -",
        "squashfs-mount --gc -",
        "squashfs-mount img.sqfs:d",
        "squashfs-mount --sqfs=img.sqfs:dir1,i",
        "squashfs-mount img.sqfs:dir1 -- ech",
        "squashfs-mount --bind-mount=dir1:d",
        "squashfs-mount -s img.sqfs:d",
    ];
    run(Command::new("zsh")
        .arg("-f")
        .arg("-c")
        .arg(ZSH_HARNESS)
        .arg("harness")
        .arg(completions_dir())
        .arg(&dir)
        .arg(&out)
        .args(lines))
    .ok();
    let got: Vec<BTreeSet<String>> = (1..=lines.len())
        .map(|n| {
            let text = fs::read_to_string(format!("{}.{n}", out.display())).unwrap_or_default();
            assert!(
                text.ends_with("END\n"),
                "zsh did not complete '{}': {text:?}",
                lines[n - 1]
            );
            text.lines()
                .filter(|l| *l != "END")
                .map(|l| l.trim_end_matches('=').to_string())
                .filter(|l| !l.is_empty())
                .collect()
        })
        .collect();
    let _ = fs::remove_dir_all(&dir);
    assert_eq!(got[0], usage_options(), "squashfs-mount -<TAB>");
    assert_eq!(got[1], set("--all|--expired", '|'), "--gc -<TAB>");
    assert_eq!(got[2], set("dir1|dir2", '|'));
    assert_eq!(got[3], set("img.sqfs", '|'));
    assert!(got[4].contains("echo"), "{:?}", got[4]);
    assert_eq!(got[5], set("dir1|dir2", '|'), "--bind-mount=<source>:<TAB>");
    assert_eq!(got[6], set("dir1|dir2", '|'), "-s <image>:<TAB>");
}
