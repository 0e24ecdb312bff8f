"""The host: which accelerators and frameworks it has, its environment record, its memory allocator and that
allocator's measured effect, how its configuration differs from the expected run, and what it can run (plan)."""
