"""Stage 3 of ANCHOR: turning elicited factor and latent parameters into outcome probabilities."""
