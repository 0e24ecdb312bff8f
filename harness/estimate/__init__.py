"""How long a run takes, said before it starts: the step model from committed runs, the device and framework factors,
and the time on a booked host."""
