# gpupeek in the zsh prompt: source this from ~/.zshrc (after your own PROMPT).
setopt prompt_subst
RPROMPT='$(gpupeek --output zsh)'
