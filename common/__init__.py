"""What every part of Refinery shares and that belongs to none: config machinery (YAML -> typed
config -> flags: `settings`), the version, and the shard layout and manifest that the job writes and
training reads (`shards`). Imports nothing from pipeline/, stages/ or training/, nor Beam or torch."""
