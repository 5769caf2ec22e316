# bash completion for gpupeek, generated from its flag table by `gpupeek --print-completion bash`.
_gpupeek() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd= i
    if [[ $prev == = && $COMP_CWORD -gt 1 ]]; then prev=${COMP_WORDS[COMP_CWORD-2]}; fi
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in query | metrics | serve | top | history | plot | fleet) cmd=${COMP_WORDS[i]}; break ;; esac
    done
    local flags
    case $cmd in
    '') flags='-c --show-cmd -u --show-user -p --show-pid -F --show-fan-speed --show-fan -f --show-full-cmd --full-process-info --by-user --by-container -V --verdict -e --show-codec -P --show-power -a --show-all --id --no-header --no-processes --json --gpuname-width --force-color --color --no-color --shm -i --watch --interval --format -o --output --follow --asleep --print-completion -v --version -h --help' ;;
    query) flags='--query-gpu --format -i --id --shm --help-query-gpu --query-compute-apps --help-query-compute-apps -L --list-gpus -l --loop --loop-ms -h --help' ;;
    metrics) flags='--names --per-process --per-user --pod-labels --shm -h --help' ;;
    serve) flags='--listen --web.config.file --web.max-streams --node-name --names --per-process --per-user --pod-labels --kubelet.pod-resources-socket --shm -h --help' ;;
    top) flags='--no-color --no-colour -V --version --shm -h --help' ;;
    history) flags='--csv --json --since -i --id --metric --shm -h --help' ;;
    plot) flags='-o --output --term --since -i --id --metric --width --height --no-color --no-colour --shm -h --help' ;;
    fleet) flags='--host --hostfile --prometheus --kubernetes --kubeconfig --context --namespace --service --api-proxy --group-by --json -i --watch --interval --timeout --jobs --tls-ca --insecure --user --password-file --bearer-token-file --header --no-color --no-colour -h --help' ;;
    esac
    case $cmd:$prev in
    :-e | :--show-codec) [[ $cur == -* ]] || { COMPREPLY=($(compgen -W 'enc dec enc,dec' -- "$cur")); return; } ;;
    :-P | :--show-power) [[ $cur == -* ]] || { COMPREPLY=($(compgen -W 'draw limit draw,limit limit,draw' -- "$cur")); return; } ;;
    :--id) { COMPREPLY=(); return; } ;;
    :--gpuname-width) { COMPREPLY=(); return; } ;;
    :--shm) { COMPREPLY=(); return; } ;;
    :-i | :--watch | :--interval) [[ $cur == -* ]] || { COMPREPLY=(); return; } ;;
    :--format) { COMPREPLY=(); return; } ;;
    :-o | :--output) { COMPREPLY=($(compgen -W 'text waybar polybar tmux i3blocks i3status-rust bash zsh fish starship p10k' -- "$cur")); return; } ;;
    :--asleep) { COMPREPLY=(); return; } ;;
    :--print-completion) { COMPREPLY=($(compgen -W 'bash zsh fish' -- "$cur")); return; } ;;
    query:--query-gpu) { COMPREPLY=(); return; } ;;
    query:--format) { COMPREPLY=(); return; } ;;
    query:-i | query:--id) { COMPREPLY=(); return; } ;;
    query:--shm) { COMPREPLY=(); return; } ;;
    query:--query-compute-apps) { COMPREPLY=(); return; } ;;
    query:-l | query:--loop) { COMPREPLY=(); return; } ;;
    query:--loop-ms) { COMPREPLY=(); return; } ;;
    metrics:--names) { COMPREPLY=($(compgen -W 'gpupeek dcgm nvidia_gpu_exporter' -- "$cur")); return; } ;;
    metrics:--shm) { COMPREPLY=(); return; } ;;
    serve:--listen) { COMPREPLY=(); return; } ;;
    serve:--web.config.file) { COMPREPLY=($(compgen -f -- "$cur")); return; } ;;
    serve:--web.max-streams) { COMPREPLY=(); return; } ;;
    serve:--node-name) { COMPREPLY=(); return; } ;;
    serve:--names) { COMPREPLY=($(compgen -W 'gpupeek dcgm nvidia_gpu_exporter' -- "$cur")); return; } ;;
    serve:--kubelet.pod-resources-socket) { COMPREPLY=($(compgen -f -- "$cur")); return; } ;;
    serve:--shm) { COMPREPLY=(); return; } ;;
    top:--shm) { COMPREPLY=(); return; } ;;
    history:--since) { COMPREPLY=(); return; } ;;
    history:-i | history:--id) { COMPREPLY=(); return; } ;;
    history:--metric) { COMPREPLY=(); return; } ;;
    history:--shm) { COMPREPLY=(); return; } ;;
    plot:-o | plot:--output) { COMPREPLY=($(compgen -f -- "$cur")); return; } ;;
    plot:--since) { COMPREPLY=(); return; } ;;
    plot:-i | plot:--id) { COMPREPLY=(); return; } ;;
    plot:--metric) { COMPREPLY=(); return; } ;;
    plot:--width) { COMPREPLY=(); return; } ;;
    plot:--height) { COMPREPLY=(); return; } ;;
    plot:--shm) { COMPREPLY=(); return; } ;;
    fleet:--host) { COMPREPLY=(); return; } ;;
    fleet:--hostfile) { COMPREPLY=($(compgen -f -- "$cur")); return; } ;;
    fleet:--prometheus) { COMPREPLY=(); return; } ;;
    fleet:--kubeconfig) { COMPREPLY=($(compgen -f -- "$cur")); return; } ;;
    fleet:--context) { COMPREPLY=(); return; } ;;
    fleet:--namespace) { COMPREPLY=(); return; } ;;
    fleet:--service) { COMPREPLY=(); return; } ;;
    fleet:--group-by) { COMPREPLY=($(compgen -W 'host user pod job' -- "$cur")); return; } ;;
    fleet:-i | fleet:--watch | fleet:--interval) [[ $cur == -* ]] || { COMPREPLY=(); return; } ;;
    fleet:--timeout) { COMPREPLY=(); return; } ;;
    fleet:--jobs) { COMPREPLY=(); return; } ;;
    fleet:--tls-ca) { COMPREPLY=($(compgen -f -- "$cur")); return; } ;;
    fleet:--user) { COMPREPLY=(); return; } ;;
    fleet:--password-file) { COMPREPLY=($(compgen -f -- "$cur")); return; } ;;
    fleet:--bearer-token-file) { COMPREPLY=($(compgen -f -- "$cur")); return; } ;;
    fleet:--header) { COMPREPLY=(); return; } ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    elif [[ -z $cmd ]]; then
        COMPREPLY=($(compgen -W 'query metrics serve top history plot fleet' -- "$cur"))
    fi
}
complete -F _gpupeek gpupeek
