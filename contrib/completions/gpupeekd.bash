# bash completion for gpupeekd, generated from its flag table by `gpupeekd --print-completion bash`.
_gpupeekd() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd= i
    if [[ $prev == = && $COMP_CWORD -gt 1 ]]; then prev=${COMP_WORDS[COMP_CWORD-2]}; fi
    local flags
    case $cmd in
    '') flags='--shm --interval --process-interval --nvml-lib --nvml-timeout --release --resume --process-info --proc-root --foreground --sysfs-root --release-after --no-runtime-pm --alert-temp --alert-memory --alert-power --alert-throttle --no-alerts --prompt-file --prompt-format --prompt-stopped --state-dir --pod-views --kubelet-socket --pod-log-dir --history-tracks --print-completion --version -h --help' ;;
    esac
    case $cmd:$prev in
    :--shm) { COMPREPLY=(); return; } ;;
    :--interval) { COMPREPLY=(); return; } ;;
    :--process-interval) { COMPREPLY=(); return; } ;;
    :--nvml-lib) { COMPREPLY=($(compgen -f -- "$cur")); return; } ;;
    :--nvml-timeout) { COMPREPLY=(); return; } ;;
    :--process-info) { COMPREPLY=($(compgen -W 'auto full basic none' -- "$cur")); return; } ;;
    :--proc-root) { COMPREPLY=($(compgen -d -- "$cur")); return; } ;;
    :--sysfs-root) { COMPREPLY=($(compgen -d -- "$cur")); return; } ;;
    :--release-after) { COMPREPLY=(); return; } ;;
    :--alert-temp) { COMPREPLY=(); return; } ;;
    :--alert-memory) { COMPREPLY=(); return; } ;;
    :--alert-power) { COMPREPLY=(); return; } ;;
    :--alert-throttle) { COMPREPLY=(); return; } ;;
    :--prompt-file) { COMPREPLY=($(compgen -f -- "$cur")); return; } ;;
    :--prompt-format) { COMPREPLY=(); return; } ;;
    :--state-dir) { COMPREPLY=($(compgen -d -- "$cur")); return; } ;;
    :--pod-views) { COMPREPLY=($(compgen -d -- "$cur")); return; } ;;
    :--kubelet-socket) { COMPREPLY=($(compgen -f -- "$cur")); return; } ;;
    :--pod-log-dir) { COMPREPLY=($(compgen -d -- "$cur")); return; } ;;
    :--history-tracks) { COMPREPLY=(); return; } ;;
    :--print-completion) { COMPREPLY=($(compgen -W 'bash zsh fish' -- "$cur")); return; } ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    fi
}
complete -F _gpupeekd gpupeekd
