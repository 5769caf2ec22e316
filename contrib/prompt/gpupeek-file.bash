# gpupeek in the bash prompt without a single fork: gpupeekd writes one line each tick to
# its --prompt-file (e.g. gpupeekd --prompt-file /run/gpupeek/prompt), and the prompt
# reads it with bash's `read` builtin. Paste into ~/.bashrc after setting your own PS1.
# (`$(<file)` forks a subshell in bash before 5.2, and `$(gpupeek --output bash)` forks
# and runs gpupeek on every prompt; `read` never forks.)
: "${GPUPEEK_PROMPT_FILE:=/run/gpupeek/prompt}"
__gpupeek_prompt() {
    GPUPEEK_LINE=
    { read -r GPUPEEK_LINE <"$GPUPEEK_PROMPT_FILE"; } 2>/dev/null
}
PROMPT_COMMAND="__gpupeek_prompt${PROMPT_COMMAND:+; $PROMPT_COMMAND}"
PS1='${GPUPEEK_LINE:+$GPUPEEK_LINE }'"$PS1"
