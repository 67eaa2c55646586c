"""Providers: one folder each (`aihc`, `alaya`), exporting a `ProviderSpec` (`spec`), listed in
`registry`; `base` is what each offers its runner, `kit` what they share."""
