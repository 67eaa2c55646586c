"""`training-job-exporter backfill`: the history the provider APIs still hold, as an
OpenMetrics file with timestamps for `promtool tsdb create-blocks-from openmetrics`.

- `history`: what a provider's history reader offers (`HistoryReader`), and the series it
  returns; each provider's reader lives in its own folder (`providers/<name>/history.py`).
- `windows`: cutting a job's life into windows whose replies fit, and info series over a span.
- `state`: the resume state beside the output: the run's parameters, its jobs, and each job's
  finished windows, spilled per family so the file can be written sorted in bounded memory.
- `writer`: the OpenMetrics file, families contiguous and every series' samples in time order.
- `progress`: a tqdm bar on a terminal, a plain line every few seconds otherwise.
- `driver`: reads every window of every job under the reader's client, and reports.
- `cli`: the command line, bad input as one line and exit code 2.
"""
