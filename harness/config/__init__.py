"""The matrix and its cells: the matrix file, its validation, the cell type, cell ids and each kind's typed settings
(whether every model and dataset it names is whole: harness.conformance)."""
