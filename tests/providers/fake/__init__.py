"""A third provider, all of it in this folder: the proof that a provider plugs in through its
`ProviderSpec` and an entry point, with no edit to the exporter (`test_fake_provider.py`)."""
