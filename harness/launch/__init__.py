"""Running cells: the runner (a process per cell, the store), the child that measures one cell, starting and ending
processes, launchers, repeats, timing by turns, faults and live progress."""
