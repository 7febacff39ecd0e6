"""The mLSTM recurrence (xLSTM): its reference and its chunked form."""
