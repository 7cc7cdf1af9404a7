"""The shared core: attention, positional encodings, hook points and the activation cache,
pre-LayerNorm blocks, checkpoints, and device/thread/optimiser helpers."""
