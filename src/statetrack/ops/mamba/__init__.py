"""Mamba's selective scan (Delta A formed inside): its reference, its scan and its C kernel."""
