"""What the paper compared, as the matrix needs it to repeat and order a profile's cells (`claim_repeats`, claims
first): the paper's models, each framework's fair baseline setting, its AMP levels, and from them the settings the
model and scaling claims compare. The claims (harness.claims) read these same facts from here, so that the matrix
needs nothing from above it; tests/test_repeats.py checks that the settings the claims' own rows compare are these.
"""

from __future__ import annotations

# The paper's models (C1-C5): the companion studies' models serve S1-S4, and no verdict rests on them.
PAPER_MODELS = ("resnet50", "gcn", "gru")
# The fair default setting of each framework: (mode, amp), 1 device.
BASELINE = {"pytorch": ("eager", "off"), "mindspore": ("graph", "off")}
# C3: each framework's AMP levels, against its baseline with AMP off.
AMP_LEVELS = {"pytorch": ("O2",), "mindspore": ("O2", "O3")}
# C4: MindSpore's PyNative mode, AMP off, against each framework's baseline.
PYNATIVE = ("mindspore", "pynative", "off")


def compared_settings() -> frozenset[tuple[str, str, str]]:
    """(framework, mode, amp) of the 1-device model cells C1-C4 compare: each framework's baseline (C1, C2, the time
    to target, C4), its AMP levels in the baseline's mode (C3), MindSpore's PyNative (C4)."""
    base = {(fw, mode, amp) for fw, (mode, amp) in BASELINE.items()}
    amp = {(fw, BASELINE[fw][0], level) for fw, levels in AMP_LEVELS.items() for level in levels}
    return frozenset(base | amp | {PYNATIVE})


def scaled_settings() -> frozenset[tuple[str, str]]:
    """(framework, mode) of the scaling cells C5 compares: each framework's baseline mode, at any AMP level."""
    return frozenset((fw, mode) for fw, (mode, _) in BASELINE.items())
