"""What a run keeps: the run folder (store), the measurement type with its statistics, the comparison arithmetic,
MLPerf event logs and what they say, and the host noise read from timing groups."""
