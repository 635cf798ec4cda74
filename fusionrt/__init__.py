"""fusionrt: run PyTorch code through a lazy fusing Triton backend and report every global write."""
