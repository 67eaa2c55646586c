"""The benchmarks' GPU age: the longest stretch without a read within the phase measured."""

from __future__ import annotations

from bench.budget import longest_gaps


def test_reads_after_the_phase_do_not_make_a_gap_in_it() -> None:
    # bench.scale stops the simulator after its steady phase: the reads it served once it went
    # on came a minute later, and the gap up to them was counted as GPU data age (5.0 x 15 s).
    reads = [100.0, 118.0, 136.0, 154.0, 206.0]
    assert longest_gaps(reads, since=110.0, end=160.0) == 18.0


def test_a_job_not_read_since_before_the_phase_is_as_old_as_its_last_read() -> None:
    assert longest_gaps([100.0], since=110.0, end=160.0) == 60.0
