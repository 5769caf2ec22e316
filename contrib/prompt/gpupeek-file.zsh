# gpupeek in the zsh prompt without a single fork: gpupeekd writes one line each tick to
# its --prompt-file (e.g. gpupeekd --prompt-file /run/gpupeek/prompt), and a precmd hook
# reads it with zsh's `read` builtin. Paste into ~/.zshrc. (zsh's own `$(<file)` does not
# fork either; `$(gpupeek --output zsh)` forks and runs gpupeek on every prompt.)
: ${GPUPEEK_PROMPT_FILE:=/run/gpupeek/prompt}
__gpupeek_prompt() {
    GPUPEEK_LINE=
    { read -r GPUPEEK_LINE <$GPUPEEK_PROMPT_FILE } 2>/dev/null
}
precmd_functions+=(__gpupeek_prompt)
setopt prompt_subst
# `%` is doubled so that the line's "45%" is not read as a prompt escape.
RPROMPT='${GPUPEEK_LINE//\%/%%}'
