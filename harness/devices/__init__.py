"""Devices: how much memory a cell needs and a device has (memory), reading it from the device's own tools (query), and
gradient accumulation when a cell does not fit."""
