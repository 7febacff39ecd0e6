"""The sLSTM recurrence (xLSTM): a non-linear step loop, its own reference."""
