"""The one place that makes and parses cell ids. Everyone else reads a result's fields (model, framework,
devices...) or calls these; nobody splits an id on '/' or rebuilds one by string surgery.

    model/<model>/<framework>/<mode>/amp-<amp>/1dev          one process
    scaling/<model>/<framework>/<mode>/amp-<amp>/<n>dev      n data-parallel processes on one host
    scaling/<model>/<framework>/<mode>/amp-<amp>/<k>x<n>dev  k hosts (nodes) of n processes each, k*n in all
    operator/<op>/<framework>/<mode>/<dtype>/<direction>/<shape tag>
    inference/<net>/<framework>/<mode>/amp-<amp>/batch<b>    a companion study (companion_matrix.py)
    passes/<model>/<framework>/<mode>/threads<t>             a companion study; t a number or `all`
    describe/<model>/<framework>                             built by describe.py to count parameters, never run
 `parse` reads the first three kinds (the ones the claims compare); it refuses the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CellId:
    kind: str
    framework: str
    mode: str
    model: str | None = None      # model and scaling cells
    amp: str | None = None
    devices: int = 1              # every process of the cell, over all its nodes
    nodes: int = 1                # hosts the cell's processes run on (devices // nodes on each)
    op: str | None = None         # operator cells
    dtype: str | None = None
    direction: str | None = None
    shape: str | None = None      # the shape tag, e.g. batch16-in_channels64

    def __str__(self) -> str:
        if self.kind == "operator":
            return f"operator/{self.op}/{self.framework}/{self.mode}/{self.dtype}/{self.direction}/{self.shape}"
        return model_id(self.model or "", self.framework, self.mode, self.amp or "off", self.devices, self.nodes)


def model_id(model: str, framework: str, mode: str, amp: str, devices: int = 1, nodes: int = 1) -> str:
    """The id of a model cell (1 device) or of its scaling cell (devices > 1, or over several nodes): `devices`
    counts every process of the cell, over all its `nodes`."""
    if nodes < 1 or devices % nodes:
        raise ValueError(f"{devices} devices do not split evenly over {nodes} nodes")
    kind = "model" if devices == 1 and nodes == 1 else "scaling"
    return f"{kind}/{model}/{framework}/{mode}/amp-{amp}/{devices_tag(devices, nodes)}"


def devices_tag(devices: int, nodes: int = 1) -> str:
    """`2dev` for 2 processes on one host, `2x1dev` for 2 nodes of 1 process each (nodes x devices per node)."""
    return f"{devices}dev" if nodes == 1 else f"{nodes}x{devices // nodes}dev"


def devices_label(devices: int, nodes: int = 1) -> str:
    """How the report writes a cell's devices: `2`, or `4 (2 nodes x 2)`."""
    return str(devices) if nodes == 1 else f"{devices} ({nodes} nodes x {devices // nodes})"


def shape_tag(shape: dict[str, Any]) -> str:
    return "-".join(f"{n}{v}" for n, v in shape.items())


def operator_id(op: str, framework: str, mode: str, dtype: str, direction: str, shape: dict[str, Any]) -> str:
    return f"operator/{op}/{framework}/{mode}/{dtype}/{direction}/{shape_tag(shape)}"


def configuration(cell_id: str) -> tuple[str, str, str, str]:
    """An operator cell's configuration, what its cells in every framework and mode share: (op, dtype, direction,
    shape tag)."""
    c = parse(cell_id)
    if c.kind != "operator":
        raise ValueError(f"'{cell_id}' is not an operator cell id")
    return c.op or "", c.dtype or "", c.direction or "", c.shape or ""


def inference_id(net: str, framework: str, mode: str, amp: str, batch: int) -> str:
    return f"inference/{net}/{framework}/{mode}/amp-{amp}/batch{batch}"


def passes_id(model: str, framework: str, mode: str, threads: int | str) -> str:
    return f"passes/{model}/{framework}/{mode}/threads{threads}"


def describe_id(model: str, framework: str) -> str:
    return f"describe/{model}/{framework}"


def single_device(cell_id: str) -> str:
    """The 1-device model cell a scaling cell's efficiency is measured against."""
    c = parse(cell_id)
    return model_id(c.model or "", c.framework, c.mode, c.amp or "off", 1)


def parse(cell_id: str) -> CellId:
    """A cell id back into its fields; ValueError for a string that is not one."""
    parts = cell_id.split("/")
    if parts[0] in ("model", "scaling") and len(parts) == 6 and parts[4].startswith("amp-") \
            and parts[5].endswith("dev"):
        nodes, x, per_node = parts[5][:-3].rpartition("x")
        if per_node.isdigit() and (not x or nodes.isdigit() and int(nodes) > 1):
            k = int(nodes) if x else 1
            return CellId(parts[0], parts[2], parts[3], model=parts[1], amp=parts[4][4:],
                          devices=k * int(per_node), nodes=k)
    if parts[0] == "operator" and len(parts) == 7:
        return CellId("operator", parts[2], parts[3], op=parts[1], dtype=parts[4], direction=parts[5], shape=parts[6])
    raise ValueError(f"'{cell_id}' is not a cell id (model/..., scaling/... or operator/...)")
