"""The matrix and its cells: the matrix file, its validation, the cell type, cell ids, each kind's typed settings, and
whether every model and dataset it names is whole."""
