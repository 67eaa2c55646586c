"""What the soak checks, each printed as a figure beside its goal: `Checks` runs every check,
in the order they print.

The checks are in modules by what they check: bench/soak/checks_steady.py (the clocks,
memory, steadiness), bench/soak/checks_faults.py (`up`, the budget and connections, the
status pages, the lifecycle) and bench/soak/checks_output.py (the series, the secrets, the
logs); what they all read, and the fault windows they skip or not, is bench/soak/evidence.py.
"""

from __future__ import annotations

from bench.soak.checks_faults import FaultChecks
from bench.soak.checks_output import OutputChecks
from bench.soak.checks_steady import SteadyChecks
from bench.soak.evidence import Check


class Checks(SteadyChecks, FaultChecks, OutputChecks):
    def all(self) -> list[Check]:
        return [
            *self.clocks(),
            *self.memory(),
            *self.series(),
            *self.up(),
            *self.budget(),
            *self.connections(),
            self.secrets(),
            *self.logs(),
            *self.steadiness(),
            *self.status_pages(),
            *self.lifecycle(),
        ]
