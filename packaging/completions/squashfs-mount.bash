# bash completion for squashfs-mount                       -*- shell-script -*-
#
# Hand-written: squashfs-mount's argument parser (crates/squashfs-mount/src/
# cli.rs) has no completion generator. The test crates/squashfs-mount/tests/
# completions.rs checks that every option of `squashfs-mount --help` is here.

_squashfs_mount()
{
    local cur prev words cword
    _init_completion -n =: || return

    # After "--": the command to run and its own arguments.
    local i
    for ((i = 1; i < COMP_CWORD; i++)); do
        if [[ ${COMP_WORDS[i]} == -- ]]; then
            _command_offset $((i + 1))
            return
        fi
    done

    # --gc [--all | --expired | IMAGE], --cache-status [--json] and
    # --policy [IMAGE...] stand alone.
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
            --gc)
                if [[ " ${words[*]} " != *" --all "* && " ${words[*]} " != *" --expired "* ]]; then
                    COMPREPLY=($(compgen -W '--all --expired' -- "$cur"))
                    [[ $cur == -* ]] || _filedir
                fi
                return
                ;;
            --cache-status)
                [[ " ${words[*]} " == *" --json "* ]] || COMPREPLY=($(compgen -W '--json' -- "$cur"))
                return
                ;;
            --policy)
                _filedir
                return
                ;;
            -h | --help | -V | --version) return ;;
        esac
    done

    # An option's value: --sqfs=<image>:<mountpoint>[,...] (or -s/--sqfs
    # <list> as the next word), --union=<image>[,...]:<mountpoint>,
    # --bind-mount=<source>:<destination>[,...], or a bare
    # <image>:<mountpoint>. Images are files, mount points and bind
    # sources and destinations directories; the part after the last ','
    # or ':' is completed.
    local opt= value= in_value=
    case $prev in
        -s | --sqfs | --union | --bind-mount) opt=$prev value=$cur in_value=1 ;;
    esac
    if [[ -z $in_value ]]; then
        case $cur in
            --writable=*/*) COMPREPLY=($(compgen -d -P --writable= -- "${cur#--writable=}")); compopt -o nospace 2>/dev/null; return ;; # DIR: a kept layer
            --writable=*) return ;; # SIZE: 512M, 2G, 2GiB, 1.5G... or N% of RAM
            -*=*) opt=${cur%%=*} value=${cur#*=} in_value=1 ;;
            [!-]*:*) value=$cur in_value=1 ;;
        esac
    fi
    if [[ -n $in_value ]]; then
        case $opt in
            '' | -s | --sqfs | --union | --bind-mount) ;;
            *) return ;;
        esac
        local last=${value##*[,:]} sep=${value: -${#last}-1:1}
        # readline's word starts after the last '=' or ':' (both are in
        # COMP_WORDBREAKS): the replies leave out what comes before.
        local head=${value%"$last"} IFS=$'\n' f
        [[ $value == "$last" ]] && sep=
        COMPREPLY=()
        if [[ $sep == : || $opt == --bind-mount ]]; then
            for f in $(compgen -d -- "$last"); do COMPREPLY+=("$head$f/"); done
        else
            for f in $(compgen -f -- "$last"); do
                [[ -d $f ]] && f+=/
                COMPREPLY+=("$head$f")
            done
        fi
        compopt -o nospace
        __ltrim_colon_completions "$value"
        return
    fi

    case $cur in
        -*)
            COMPREPLY=($(compgen -W '-s --sqfs= --bind-mount= -r --mutable-root --union= --writable --writable=
                --no-cache --prefetch --no-prefetch --join --fuse-single -v --verbose -q --quiet --gc --all --expired --cache-status
                --json --policy -h --help -V --version --' -- "$cur"))
            [[ ${COMPREPLY-} == *= ]] && compopt -o nospace
            return
            ;;
    esac

    # <image>:<mountpoint>: image files, then "--".
    _filedir
    [[ -z $cur ]] && COMPREPLY+=(--)
}
complete -F _squashfs_mount squashfs-mount

# ex: filetype=sh
