"""Stand-in: model families of the fake `transformers` package."""
