"""The RunPod template (deploy/runpod/template.json): validate it against RunPod's documented template
fields and print the command that creates it.

Fields are those of RunPod's GraphQL `saveTemplate` input (docs.runpod.io/sdks/graphql/manage-pod-templates):
name, imageName, containerDiskInGb, volumeInGb, volumeMountPath, ports ("8888/http,22/tcp"), env
([{key, value}]), dockerArgs, readme, containerRegistryAuthId (private images); plus dockerStartCmd (a list,
the REST/runpodctl form of the start command). Anything else is an error.

The create command is runpodctl's `template create` (runpodctl 2.x; flags from runpod/runpodctl
cmd/template/create.go: --name --image --container-disk-in-gb --volume-in-gb --volume-mount-path --ports
--docker-start-cmd (comma-separated) --env (JSON object) --readme). `--graphql` prints the documented
GraphQL `saveTemplate` call instead, for runpodctl 1.x (which has no template command) or a private image
(runpodctl has no registry-auth flag).
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlrecipes.errors import RecipeError
from rlrecipes.paths import repo_root

# field -> (required, python type(s))
FIELDS: dict[str, tuple[bool, type | tuple[type, ...]]] = {
    "name": (True, str),
    "imageName": (True, str),
    "containerDiskInGb": (True, int),
    "volumeInGb": (True, int),
    "volumeMountPath": (True, str),
    "ports": (True, str),
    "env": (True, list),
    "dockerArgs": (False, str),
    "dockerStartCmd": (False, list),
    "readme": (False, str),
    "containerRegistryAuthId": (False, str),
}
REQUIRED_PORTS = ("22/tcp", "8888/http")  # SSH and Jupyter, as RunPod's /start.sh serves them
REQUIRED_ENV = ("WANDB_API_KEY", "HF_TOKEN", "RECIPE", "AUTO_TRAIN")
SECRET_ENV = ("WANDB_API_KEY", "HF_TOKEN")
MOUNT = "/workspace"
START_HOOK = "runpod-start.sh"
PLACEHOLDER = re.compile(r"<[^>]*>")
SECRET_REF = re.compile(r"^\{\{\s*RUNPOD_SECRET_[A-Za-z0-9_]+\s*\}\}$")
ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PORT = re.compile(r"^(\d{1,5})/(http|tcp)$")
MAX_ENV = 50  # RunPod: up to 50 environment variables per pod


def default_template() -> Path:
    return repo_root() / "deploy" / "runpod" / "template.json"


@dataclass
class TemplateCheck:
    template: dict[str, Any]
    warnings: list[str] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        return {item["key"]: item["value"] for item in self.template["env"]}

    @property
    def start_args(self) -> list[str]:
        if "dockerStartCmd" in self.template:
            return list(self.template["dockerStartCmd"])
        return shlex.split(self.template["dockerArgs"])


def load_template(path: Path) -> dict[str, Any]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RecipeError("file not found", where=str(path)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecipeError(f"malformed JSON: {exc.msg}", where=f"{path}:{exc.lineno}:{exc.colno}") from None
    if not isinstance(data, dict):
        raise RecipeError("a RunPod template must be a JSON object", where=str(path))
    return data


def _fail(message: str, where: str, hint: str | None = None):
    raise RecipeError(message, where=where, hint=hint)


def validate_template(data: dict[str, Any], where: str = "template.json", image: str | None = None) -> TemplateCheck:
    """Check `data` against RunPod's template fields and this project's needs; `image` replaces imageName."""
    data = dict(data)
    if image is not None:
        data["imageName"] = image
    warnings: list[str] = []
    for key in data:
        if key not in FIELDS:
            close = difflib.get_close_matches(key, list(FIELDS), n=3, cutoff=0.5)
            _fail(f"unknown field '{key}'", f"{where}: {key}",
                  f"did you mean {', '.join(close)}?" if close else f"RunPod template fields: {', '.join(FIELDS)}")
    for key, (required, kind) in FIELDS.items():
        if key not in data:
            if required:
                _fail(f"missing required field '{key}'", where)
            continue
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, kind):
            name = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
            _fail(f"expected {name}, got {type(value).__name__} ({value!r})", f"{where}: {key}")

    if not data["name"].strip():
        _fail("must not be empty", f"{where}: name")
    image_built = _check_image(data["imageName"], f"{where}: imageName", warnings)
    for key, minimum in (("containerDiskInGb", 20), ("volumeInGb", 1)):
        if data[key] < minimum:
            _fail(f"{data[key]} GB is too small (at least {minimum})", f"{where}: {key}")
    if data["volumeMountPath"] != MOUNT:
        _fail(f"must be {MOUNT!r}, got {data['volumeMountPath']!r}", f"{where}: volumeMountPath",
              "the images keep models, data, checkpoints and logs under /workspace, the only part of a pod "
              "that survives a stop")
    _check_ports(data["ports"], f"{where}: ports")
    env = _check_env(data["env"], f"{where}: env")
    _check_start(data, where)
    _check_recipe(env, data, where, warnings, image_built)
    return TemplateCheck(template=data, warnings=warnings)


def _check_image(image: str, where: str, warnings: list[str]):
    """The project image `image` is the RunPod variant of (by its tag), or None with a warning."""
    from rlrecipes.recipe.images import IMAGES, RUNPOD_BASES, RUNPOD_SUFFIX

    if not image.strip():
        _fail("is empty", where, "set it to the RunPod image you pushed (A100 or Hopper), or pass --image REGISTRY/REPO:TAG")
    if PLACEHOLDER.search(image):
        _fail(f"{image!r} still holds a placeholder", where,
              "push the RunPod image (make build-runpod, RUNPOD_IMAGE_FAMILY=hopper for the Hopper one; docker tag "
              "+ docker push) to a registry RunPod can pull, then pass --image REGISTRY/REPO:TAG (or RUNPOD_IMAGE=...) "
              "or edit the file")
    if any(c.isspace() for c in image):
        _fail(f"{image!r} contains whitespace", where)
    tag = image.rsplit("/", 1)[-1].partition(":")[2]
    for name, base in RUNPOD_BASES.items():
        plain = IMAGES[name].tag.rsplit(":", 1)[1]
        if tag == plain:
            _fail(f"{image!r} is the plain {name} image: it has no /start.sh, so the pod would serve neither SSH (22) "
                  "nor Jupyter (8888)", where, f"build the RunPod variant on {base} with `make build-runpod"
                  f"{'' if name == 'a100' else ' RUNPOD_IMAGE_FAMILY=' + name}` and push that (tag ...:{plain}{RUNPOD_SUFFIX})")
        if tag == plain + RUNPOD_SUFFIX:
            return IMAGES[name]
    expected = ", ".join(f"{IMAGES[n].tag.rsplit(':', 1)[1]}{RUNPOD_SUFFIX!s} ({n})" for n in RUNPOD_BASES)
    warnings.append(f"imageName tag {tag or '(none)'!r} is none of the RunPod images' tags ({expected}): make sure "
                    f"the image holds the verl of the recipe's profile, this checkout's scripts and RunPod's /start.sh")
    return None


def _check_ports(ports: str, where: str) -> None:
    seen: list[str] = []
    for item in (p.strip() for p in ports.split(",")):
        match = PORT.match(item)
        if not match or not 0 < int(match.group(1)) < 65536:
            _fail(f"{item!r} is not PORT/http or PORT/tcp", where, 'e.g. "8888/http,22/tcp"')
        if item in seen:
            _fail(f"{item!r} is listed twice", where)
        seen.append(item)
    for port in REQUIRED_PORTS:
        if port not in seen:
            _fail(f"must expose {port} ({'SSH' if port.startswith('22/') else 'Jupyter'}); has {', '.join(seen)}",
                  where, 'use "8888/http,22/tcp"')


def _check_env(items: list, where: str) -> dict[str, str]:
    env: dict[str, str] = {}
    if len(items) > MAX_ENV:
        _fail(f"{len(items)} variables; RunPod allows {MAX_ENV}", where)
    for i, item in enumerate(items):
        at = f"{where}[{i}]"
        if not isinstance(item, dict) or set(item) != {"key", "value"}:
            _fail(f"each entry must be {{\"key\": ..., \"value\": ...}}, got {item!r}", at)
        key, value = item["key"], item["value"]
        if not isinstance(key, str) or not ENV_KEY.match(key):
            _fail(f"{key!r} is not a valid variable name", at)
        if not isinstance(value, str):
            _fail(f"the value of {key} must be a string, got {type(value).__name__}", at)
        if key in env:
            _fail(f"{key} is set twice", at)
        env[key] = value
    for key in REQUIRED_ENV:
        if key not in env:
            _fail(f"missing {key}", where, f"the image reads {', '.join(REQUIRED_ENV)}")
    if not env.get("JUPYTER_PASSWORD"):
        # RunPod's /start.sh starts Jupyter only with a password: 8888/http would be a port nothing serves.
        _fail("JUPYTER_PASSWORD is missing or empty, so nothing would serve 8888/http", where,
              "add {\"key\": \"JUPYTER_PASSWORD\", \"value\": \"{{ RUNPOD_SECRET_JUPYTER_PASSWORD }}\"}")
    for key in SECRET_ENV:
        if env[key] and not SECRET_REF.match(env[key]):
            _fail(f"{key} holds a literal value; a template is shared and shown in the console", f"{where}: {key}",
                  f"create a RunPod secret and use {{{{ RUNPOD_SECRET_{key} }}}} (or leave it empty)")
    if env["AUTO_TRAIN"] not in ("0", "1"):
        _fail(f"AUTO_TRAIN must be \"0\" or \"1\", got {env['AUTO_TRAIN']!r}", f"{where}: AUTO_TRAIN")
    return env


def _check_start(data: dict[str, Any], where: str) -> None:
    if ("dockerArgs" in data) == ("dockerStartCmd" in data):
        _fail("set exactly one of dockerArgs (GraphQL) or dockerStartCmd (REST list)", where,
              f'"dockerArgs": "bash /opt/rlrecipes/scripts/{START_HOOK}"')
    if "dockerStartCmd" in data:
        args = data["dockerStartCmd"]
        if not args or not all(isinstance(a, str) for a in args):
            _fail("must be a non-empty list of strings", f"{where}: dockerStartCmd")
    else:
        args = shlex.split(data["dockerArgs"])
    if not any(a.endswith(START_HOOK) for a in args):
        _fail(f"the start command {' '.join(args)!r} does not run scripts/{START_HOOK}",
              f"{where}: {'dockerStartCmd' if 'dockerStartCmd' in data else 'dockerArgs'}",
              f"without the hook AUTO_TRAIN does nothing; use bash /opt/rlrecipes/scripts/{START_HOOK}")
    if any("," in a for a in args):
        _fail("a start argument contains a comma, which runpodctl's --docker-start-cmd splits on",
              f"{where}: start command")


def _check_recipe(env: dict[str, str], data: dict[str, Any], where: str, warnings: list[str], image=None) -> None:
    from rlrecipes.plan.architectures import arch_for_hub_id, param_count
    from rlrecipes.plan.plan import build_plan
    from rlrecipes.recipe.load import list_recipes, resolve

    recipe = env["RECIPE"]
    if recipe not in list_recipes():
        close = difflib.get_close_matches(recipe, list_recipes(), n=3, cutoff=0.4)
        _fail(f"RECIPE {recipe!r} is not a shipped recipe", f"{where}: env.RECIPE",
              f"did you mean {', '.join(close)}?" if close else f"available: {', '.join(list_recipes())}")
    run = resolve(recipe, profile=env.get("PROFILE") or None, overrides=[], env={})
    from rlrecipes.recipe.images import RUNPOD_BASES

    if run.image.name not in RUNPOD_BASES:
        _fail(f"RECIPE {recipe!r} runs on the {run.image.name} image (profile {run.profile.name}); RunPod templates "
              f"ship the {' or '.join(RUNPOD_BASES)} image", f"{where}: env.RECIPE",
              "set PROFILE to a profile of one of them (rlrecipes recipes lists them)")
    if image is not None and run.image.name != image.name:
        _fail(f"RECIPE {recipe!r} on profile {run.profile.name} runs on the {run.image.name} image, but imageName is "
              f"the {image.name} image", f"{where}: env.PROFILE",
              f"set PROFILE to a profile of the {image.name} image, or push the {run.image.name} RunPod image")
    plan = build_plan(run)
    arch = arch_for_hub_id(run.recipe.model.hub_id)
    # Volume: kept checkpoints + one in flight (the plan), the base model and the merged model (bf16).
    need = (plan.checkpoints.disk_needed_bytes or 0) + (2 * 2 * param_count(arch) if arch else 0)
    if data["volumeInGb"] * 10**9 < need:
        _fail(f"{data['volumeInGb']} GB cannot hold {recipe}: about {need / 10**9:.0f} GB for kept checkpoints, "
              f"the base model and the merged model", f"{where}: volumeInGb",
              "raise volumeInGb or lower trainer.max_actor_ckpt_to_keep")
    if run.profile.n_gpus > 1:
        warnings.append(f"{recipe} on profile {run.profile.name} needs {run.profile.n_gpus} GPUs "
                        f"({run.profile.gpu.name}): pick that many when deploying the pod")


# --------------------------------------------------------------------------------- create command
def runpodctl_command(check: TemplateCheck) -> list[str]:
    t = check.template
    cmd = ["runpodctl", "template", "create", "--name", t["name"], "--image", t["imageName"],
           "--container-disk-in-gb", str(t["containerDiskInGb"]), "--volume-in-gb", str(t["volumeInGb"]),
           "--volume-mount-path", t["volumeMountPath"], "--ports", t["ports"],
           "--docker-start-cmd", ",".join(check.start_args), "--env", json.dumps(check.env, separators=(",", ":"))]
    if t.get("readme"):
        cmd += ["--readme", t["readme"]]
    return cmd


def _graphql_value(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_graphql_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_graphql_value(v) for v in value) + "]"
    return json.dumps(value)  # GraphQL string and int literals share JSON's syntax


def graphql_command(check: TemplateCheck) -> list[str]:
    t = dict(check.template)
    if "dockerStartCmd" in t:
        t["dockerArgs"] = " ".join(shlex.quote(a) for a in t.pop("dockerStartCmd"))
    mutation = (f"mutation {{ saveTemplate(input: {_graphql_value(t)}) "
                f"{{ id name imageName containerDiskInGb volumeInGb volumeMountPath ports }} }}")
    return ["curl", "--request", "POST", "--header", "content-type: application/json",
            "--url", "https://api.runpod.io/graphql?api_key=${RUNPOD_API_KEY}",
            "--data", json.dumps({"query": mutation})]


def shell_line(cmd: list[str]) -> str:
    """One `--flag value` pair per line; the API key stays a shell variable."""
    def quote(arg: str) -> str:
        if "${RUNPOD_API_KEY}" in arg:
            return '"' + arg.replace('"', '\\"') + '"'
        return shlex.quote(arg)

    lines, i = [], 0
    head = []
    while i < len(cmd) and not cmd[i].startswith("--"):
        head.append(quote(cmd[i]))
        i += 1
    lines.append(" ".join(head))
    while i < len(cmd):
        if i + 1 < len(cmd) and not cmd[i + 1].startswith("--"):
            lines.append(f"{cmd[i]} {quote(cmd[i + 1])}")
            i += 2
        else:
            lines.append(cmd[i])
            i += 1
    return " \\\n    ".join(lines)
