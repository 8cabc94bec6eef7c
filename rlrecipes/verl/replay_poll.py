"""verl 0.9.1's sync replay buffer with a poll interval of the run's choosing (the Hopper image's verl).

verl 0.9.1's V1 trainer times a step's generation around `ReplayBuffer.sample`, which asks TransferQueue for
finished trajectories, and while too few are finished sleeps `poll_interval` before asking again. The interval
is a constructor argument, 2.0 s, that verl's `PPOTrainer._build_replay_buffer` never sets. So a generation
that takes 0.3 s is timed 2.0 s, and one of 2.1 s is timed 4.0 s: every generation on the Hopper stack on
record is a multiple of 2 s plus 0.04-0.56 s (docs/bench/gpu-overhead.md, "Generation waits for a 2-second
poll"). For the canary, whose generation is a fraction of a second of GPU work, that is most of its step.

verl's own way to change the sampler is a custom sampler class, loaded by `trainer.v1.sampler.custom_sampler.
{path,name}` and given `trainer.v1.sampler.sampler_kwargs`. This is one: verl's `ReplayBuffer` itself, with
`poll_interval` taken from `sampler_kwargs.poll_interval`:

    trainer.v1.sampler.custom_sampler.path=pkg://rlrecipes.verl.replay_poll
    trainer.v1.sampler.custom_sampler.name=PollReplayBuffer
    +trainer.v1.sampler.sampler_kwargs.poll_interval=0.1

Each poll is one metadata read from TransferQueue's controller. verl builds a custom sampler without DAPO's
group filtering and failed-group refill (it passes those only to its own class), so `rlrecipes validate`
refuses either beside a custom sampler (rlrecipes/verl/check.py). Only the sync trainer is served: its async
modes build `ReplayBufferAsync`.

Imported only inside a verl 0.9 interpreter (verl loads it); nothing else in rlrecipes imports it. The bound on
the interval is rlrecipes/verl/specs.py's `poll_seconds`, which `plan` reads too.
"""

from __future__ import annotations

from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

from rlrecipes.verl.specs import POLL_INTERVAL_KEY as KEY
from rlrecipes.verl.specs import poll_seconds


class PollReplayBuffer(ReplayBuffer):
    """verl's sync `ReplayBuffer`, polling every `sampler_kwargs.poll_interval` seconds."""

    def __init__(self, *, trainer_mode: str, sampler_kwargs, **kwargs):
        if trainer_mode != "sync":
            raise ValueError(f"trainer.v1.trainer_mode={trainer_mode}: PollReplayBuffer serves the sync trainer "
                             "only (verl builds ReplayBufferAsync for the others); drop "
                             "trainer.v1.sampler.custom_sampler")
        interval = (sampler_kwargs or {}).get("poll_interval")
        seconds = poll_seconds(interval)
        if seconds is None:
            raise ValueError(f"{KEY}={interval!r}: PollReplayBuffer needs seconds between TransferQueue polls, "
                             "a number in (0, 10] (verl's own is 2.0)")
        super().__init__(trainer_mode=trainer_mode, sampler_kwargs=sampler_kwargs, poll_interval=seconds, **kwargs)
