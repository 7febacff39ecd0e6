"""The diagonal linear recurrence h_t = a_t h_{t-1} + b_t (real or complex a): its reference and its scans."""
