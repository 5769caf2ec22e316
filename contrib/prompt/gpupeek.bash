# gpupeek in the bash prompt: source this from ~/.bashrc (after your own PS1).
# Colours are wrapped in readline's invisible-text markers, so line editing stays right.
PS1='$(gpupeek --output bash) '"$PS1"
