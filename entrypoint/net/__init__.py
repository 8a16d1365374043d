"""Downloads shared by taco (the wheel) and fetch (the assets): `source` checks a source and hashes local files
without the HTTP stack (what planning needs); `download` fetches with ranges, retries and progress."""
