//! `sqfs completions SHELL`: clap_complete's scripts, with files offered
//! where a command takes files. clap's bash script offers the options
//! (`-h --json --help`) where `sqfs check <TAB>` or `sqfs diff a.sqfs
//! <TAB>` expects an image, so bash never fell back to file names; a
//! wrapper registered after it offers the files and directories there.
//! zsh's and fish's scripts offer files for paths already (`_files`, and
//! fish's default).

use clap_complete::Shell;

/// Registered in place of clap's `_sqfs`: clap's answer, except where it
/// offers only options for a word that does not start with '-' after a
/// command: there, file and directory names (directories with a '/', as
/// bash's own file completion does).
const BASH_FILES: &str = r#"
# sqfs: file names where a command takes a path (clap's function above
# offers only the options there).
_sqfs_with_files() {
    _sqfs "$@"
    local cur="${COMP_WORDS[COMP_CWORD]}" word only_options=1
    [[ ${COMP_CWORD} -ge 2 && ${cur} != -* ]] || return 0
    [[ ${COMP_WORDS[1]} == help ]] && return 0
    for word in "${COMPREPLY[@]}"; do
        [[ ${word} == -* ]] || only_options=0
    done
    if (( only_options )); then
        compopt -o filenames 2>/dev/null
        mapfile -t COMPREPLY < <(compgen -f -- "${cur}")
    fi
    return 0
}
complete -F _sqfs_with_files -o bashdefault -o default sqfs
"#;

/// The completion script for `shell`.
pub(crate) fn script(shell: Shell, cmd: &mut clap::Command) -> Vec<u8> {
    // Into memory first: clap_complete panics on a failed write.
    let mut script = Vec::new();
    clap_complete::generate(shell, cmd, "sqfs", &mut script);
    if shell == Shell::Bash {
        script.extend_from_slice(BASH_FILES.as_bytes());
    }
    script
}
