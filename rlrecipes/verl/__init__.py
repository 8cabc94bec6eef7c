"""Everything rlrecipes knows about verl, and the only place that knows it.

- specs.py        one VerlSpec per pinned verl version: config keys that moved between versions, verl's
                  defaults the planner reads, capabilities (rollout engines, file logger, ...)
- checkpoints.py  the checkpoint layout on disk: step directories, tracker, shards, completeness
- logs.py         verl's console and file-logger formats, one parser
- check.py        validation inside a verl interpreter (`python -m rlrecipes.verl.check`)
- schema.py       verl's config keys without verl (`plan`), from snapshots of each pinned verl (schema/)
- env.py          finding an interpreter with a given verl
- stopguard.py    runs the launch so that a stop lets a checkpoint save finish
- replay_poll.py  verl 0.9's sync replay buffer with a chosen poll interval (a custom sampler verl loads by name)

Everything here but check.py's verl calls and replay_poll.py (imported only by verl) is standard library only:
the watchdog image imports it.
"""
