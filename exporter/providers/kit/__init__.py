"""What every provider shares, so that a provider is only a client, its models and a mapping.

- `decode`: model validation where any exception is `InvalidReply` (the body cap and JSON
  decoding are the transport's: `exporter.transport.reply`).
- `numbers`: one rule set for upstream numbers and one set of drop reasons.
- `labels`: label values made valid and bounded without two upstream strings colliding.
- `wire`: upstream strings sent back as the bytes they came as.
- `states`: the state sets of job statuses and pod phases.
- `paging`: job-list pages that must make progress.
"""
