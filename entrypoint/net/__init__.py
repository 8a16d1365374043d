"""HTTP downloads with ranges, retries and progress, shared by taco (the wheel) and fetch (the assets)."""
