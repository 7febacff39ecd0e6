"""Training and evaluation of one model under one protocol: the optimiser step (``steps``), the
training loop (``loop``), evaluation by test length (``evaluation``) and failure horizons
(``horizon``), checkpoints, the device and the memory budget."""
