"""msrun, as `python -m harness.launch.msrun` with msrun's own options, with one difference: a node other than
node 0 never starts the cluster's scheduler.

msrun starts its scheduler on every node whose --master_addr is one of its own addresses. On a cluster that is node 0
alone, and this changes nothing. Where it is not (several nodes on one machine, as the test suite runs them, or a
worker whose master address is its own by mistake) each node would start a scheduler on the same port, and every node
but the first fails with "some processes in the cluster are not successfully spawned" (seen with MindSpore 2.10 on
the 2-core machine). Node 0 hosts the scheduler; the others only connect to it.
"""

from __future__ import annotations

from mindspore.parallel.cluster.process_entity import _ProcessManager
from mindspore.parallel.cluster.run import get_args


def main() -> None:
    args = get_args()
    manager = _ProcessManager(args)
    if args.node_rank > 0:
        manager.is_master = False   # msrun's own flag for "start the scheduler here"
    manager.run()


if __name__ == "__main__":
    main()
