"""The report: its build (HTML, LaTeX, paper fragments), layout, figures, the companion studies, the profiler's
explanations and measured memory."""
