# gpupeek in the fish right prompt without running gpupeek: gpupeekd writes one line each
# tick to its --prompt-file (e.g. gpupeekd --prompt-file /run/gpupeek/prompt), read here
# with fish's `read` builtin. Save as ~/.config/fish/functions/fish_right_prompt.fish
# (or paste into config.fish). Set GPUPEEK_PROMPT_FILE for another path.
function fish_right_prompt
    set -l file /run/gpupeek/prompt
    set -q GPUPEEK_PROMPT_FILE; and set file $GPUPEEK_PROMPT_FILE
    if test -r $file; and read -l line <$file
        printf '%s' $line
    end
end
