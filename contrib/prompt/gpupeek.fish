# gpupeek in the fish right prompt: save as ~/.config/fish/functions/fish_right_prompt.fish
# (or source it from config.fish).
function fish_right_prompt
    printf '%s' (gpupeek --output fish)
end
