"""The selective scan of a complex diagonal SSM and its readout: its reference, its scan and its C kernel."""
