# gpupeek segment for powerlevel10k: source this from ~/.zshrc after p10k's config
# (~/.p10k.zsh), then add "gpupeek" to POWERLEVEL9K_RIGHT_PROMPT_ELEMENTS, e.g.
#   typeset -g POWERLEVEL9K_RIGHT_PROMPT_ELEMENTS+=(gpupeek)
function prompt_gpupeek() {
  local out
  out=$(gpupeek --output p10k)
  [[ -n $out ]] && p10k segment -f 208 -t "$out"
}
