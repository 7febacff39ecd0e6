"""PD-SSM's one-hot times diagonal transitions: its reference and its scan."""
