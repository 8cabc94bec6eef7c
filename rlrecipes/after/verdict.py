"""The verdict of `rlrecipes expect` (rlrecipes.after.expect judges, rlrecipes.after.expect_cost prices): its
checks in two parts, the outcome (decides: met or missed) and the cost (shown; counted only under `--strict`),
and how a terminal shows it -- one line a check, the number that decided it, then the verdict, each line
within the terminal's width."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from rlrecipes.errors import EXIT_FAILED, EXIT_OK
from rlrecipes.reference import same_gpu

MET, MISSED, NOT_MEASURED = "met", "missed", "not measured"
OUTCOME, COST = "outcome", "cost"


@dataclass(frozen=True)
class Check:
    name: str        # what is expected of the run, in words ("accuracy after training")
    metric: str      # what it reads: a logged metric, an eval summary field, or "-"
    expected: str    # the contract's figure
    value: str       # the run's figure (with the evidence behind it), "-" when it has none
    status: str      # met | missed | not measured
    detail: str = ""  # why it was missed or not measured; where the figure comes from
    part: str = OUTCOME  # outcome (decides the verdict) | cost (shown; decides only under --strict)
    required: bool = True  # an outcome the contract requires: not measured is not met
    measured: float | None = None  # the number that decided it (an accuracy, a rise, a step's worst): what
    # benchmarks/seed_bounds.py derives a contract's bounds from, over its seed runs

    @property
    def fails(self) -> bool:
        """Whether this check makes its part missed."""
        return self.status == MISSED or (self.part == OUTCOME and self.required and self.status == NOT_MEASURED)

    @property
    def label(self) -> str:
        """A short name for a line of its own: the name without its explanation in parentheses."""
        if self.metric in _LABELS:
            return _LABELS[self.metric]
        if self.metric.startswith(("training/rollout_", "rollout_corr/")):
            return "rollout " + self.metric.rsplit("/", 1)[-1].removeprefix("rollout_")
        name = self.name.split(" (")[0].split(" on ")[0]
        return _LABELS.get(name, name)

    @property
    def shown_status(self) -> str:
        """The result in one word: a cost that was not compared is `shown`, a check the contract skips is
        `skipped`, a required one without data `no data`."""
        if self.status != NOT_MEASURED:
            return self.status
        if self.part == COST and self.value != "-":
            return "shown"
        return "no data" if self.required else "skipped"

    def as_dict(self) -> dict:
        return asdict(self)


_LABELS = {"merged model scores what the last trained step scored": "merged vs last", "peak memory": "memory",
           "training/rollout_actor_probs_pearson_corr": "rollout correlation",
           "training/rollout_probs_diff_mean": "rollout mean |dp|",
           "training/rollout_probs_diff_max": "rollout max |dp|"}


def _counts(checks: tuple[Check, ...]) -> dict[str, int]:
    return {s: sum(c.status == s for c in checks) for s in (MET, MISSED, NOT_MEASURED)}


@dataclass(frozen=True)
class ExpectResult:
    recipe: str
    profile: str
    checks: tuple[Check, ...]
    logs: tuple[str, ...]
    eval_summary: str | None
    strict: bool = False    # the cost counts in the verdict
    gpu: str | None = None  # the GPU model the run ran on, where known
    reference_gpus: tuple[str, ...] = ()  # the GPU models the contract's cost figures were measured on

    def part(self, part: str) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.part == part)

    @property
    def outcome_status(self) -> str:
        return MISSED if any(c.fails for c in self.part(OUTCOME)) else MET

    @property
    def cost_status(self) -> str:
        cost = self.part(COST)
        if any(c.fails for c in cost):
            return MISSED
        return MET if any(c.status == MET for c in cost) else NOT_MEASURED

    @property
    def status(self) -> str:
        missed = self.outcome_status == MISSED or (self.strict and self.cost_status == MISSED)
        return MISSED if missed else MET

    @property
    def exit_code(self) -> int:
        return EXIT_FAILED if self.status == MISSED else EXIT_OK

    def counts(self) -> dict[str, int]:
        return _counts(self.checks)

    def as_dict(self) -> dict:
        parts = {part: {"status": status, "counts": _counts(self.part(part)),
                        "checks": [c.as_dict() for c in self.part(part)]}
                 for part, status in ((OUTCOME, self.outcome_status), (COST, self.cost_status))}
        return {"recipe": self.recipe, "profile": self.profile, "status": self.status, "strict": self.strict,
                "gpu": self.gpu, "reference_gpus": list(self.reference_gpus), **parts, "counts": self.counts(),
                "checks": [c.as_dict() for c in self.checks],
                "logs": list(self.logs), "eval_summary": self.eval_summary}


@dataclass(frozen=True)
class RunFacts:
    """What the judgement knows about the run beside its metrics."""

    planned_steps: int | None = None  # trainer.total_training_steps of the run (None: unknown)
    planned_from: str = ""            # where that figure comes from, or why it is unknown
    gpu: str | None = None            # the GPU model the run ran on (None: unknown)
    gpu_unknown: str = "the run's GPU is unknown"  # why, when it is
    validates_before: bool = True     # trainer.val_before_train: the log has a step-0 validation
    hf_rollout: bool = False          # an HF rollout logs no rollout log-probs to compare
    verl: str = ""                    # the profile's verl version


# ---------------------------------------------------------------------------------------------- showing
TABLE_HEADER = ["expectation", "reads", "contract", "this run", "result", "note"]


def table_rows(result: ExpectResult) -> list[list[str]]:
    return [[c.name, c.metric, c.expected, c.value, c.status, c.detail] for c in result.checks]


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def check_line(check: Check, width: int) -> str:
    """One check on one line: its result, what it is, the number that decided it; for one not met, why (or
    the contract's figure), where it fits."""
    line = f"  {check.shown_status:<7} {check.label}: " + (check.value if check.value != "-" else check.detail or "-")
    if check.value != "-" and check.status != MET:
        extras = [f" -- {check.detail}" if check.detail else "",
                  f", want {check.expected}" if check.status == MISSED and check.expected != "-" else ""]
        line += next((extra for extra in extras if extra and len(line + extra) <= width), "")
    return _fit(line, width)


def _part_line(name: str, status: str, checks: tuple[Check, ...]) -> str:
    counts = _counts(checks)
    required = sum(c.required and c.status == NOT_MEASURED for c in checks)
    return (f"{name}: {status.upper()} ({counts[MET]} met, {counts[MISSED]} missed, {counts[NOT_MEASURED]} not "
            f"measured{f', {required} of them required' if required else ''})")


def why_not_compared(gpu: str | None, reference_gpus) -> str:
    """Why a cost was not compared, where it is the GPU -- the run's is another model than the references', or
    unknown (`expect --gpu NAME` names it) -- as a parenthesis to follow "not compared"; else empty."""
    if not reference_gpus:
        return ""
    references = ", ".join(reference_gpus)
    if gpu is None:
        return f" (reference GPU {references}; this run's unknown: --gpu NAME)"
    if any(same_gpu(gpu, reference) for reference in reference_gpus):
        return ""
    return f" (reference GPU {references}, this one {gpu})"


def cost_phrase(status: str, strict: bool, gpu: str | None, reference_gpus) -> str:
    """The cost part of a verdict in words: not compared (and why, where it is the GPU), or its status and whether
    it counts."""
    if status == NOT_MEASURED:
        return "not compared" + why_not_compared(gpu, reference_gpus)
    return status + (", counted (--strict)" if strict else ", shown only")


def summary_lines(result: ExpectResult, width: int = 80) -> list[str]:
    """The verdict as a terminal shows it: a title, one line a check (outcome first), the two parts, the
    verdict -- each line at most `width` columns."""
    lines = [_fit(f"{result.recipe} on {result.profile}", width)]
    lines += [check_line(c, width) for c in result.part(OUTCOME) + result.part(COST)]
    lines.append(_fit(_part_line("outcome", result.outcome_status, result.part(OUTCOME)), width))
    cost = result.cost_status
    not_compared = "NOT COMPARED" + why_not_compared(result.gpu, result.reference_gpus)
    lines.append(_fit("cost: " + (not_compared if cost == NOT_MEASURED else
                                  f"{cost.upper()}, counted (--strict)" if result.strict else
                                  f"{cost.upper()}, shown only (--strict makes it count)"), width))
    lines.append(f"verdict: {result.status.upper()}")
    return lines


def verdict_line(result: ExpectResult) -> str:
    """The verdict in one line, both parts: what `rlrecipes report` prints (the checks are in its report.md)."""
    outcome = _part_line("outcome", result.outcome_status, result.part(OUTCOME)).removeprefix("outcome: ")
    cost = cost_phrase(result.cost_status, result.strict, result.gpu, result.reference_gpus)
    return f"{result.recipe} on {result.profile}: {result.status.upper()} -- outcome {outcome.lower()}; cost {cost}"


def print_table(result: ExpectResult) -> None:
    """Print the verdict to fit the terminal (80 columns when it cannot tell)."""
    import shutil

    width = max(40, shutil.get_terminal_size((80, 24)).columns)
    print("\n".join(summary_lines(result, width)))

