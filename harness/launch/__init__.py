"""Running cells: the runner (a process per cell, the store), the child that measures one cell, starting and ending
processes, launchers, repeats, turn groups (the protocol: harness.scenarios.operator.turns), faults and live
progress."""
