"""fusionlint: find and fix PyTorch code patterns that break kernel fusion in lazy backends."""
__version__ = "0.1.0"
