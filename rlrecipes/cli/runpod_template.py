"""`rlrecipes runpod-template`: the RunPod template checked, and the commands that create it
(rlrecipes/launch/runpod.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rlrecipes.launch.runpod import (default_template, graphql_command, load_template, runpodctl_command, shell_line,
                                     validate_template)


def runpod_template_arguments(parser: argparse.ArgumentParser) -> None:
    import os

    parser.add_argument("--template", type=Path, default=None,
                        help="template file (default: deploy/runpod/template.json)")
    parser.add_argument("--image", default=os.environ.get("RUNPOD_IMAGE") or None,
                        help="image RunPod pulls, replacing imageName (default: $RUNPOD_IMAGE)")
    parser.add_argument("--graphql", action="store_true",
                        help="print RunPod's GraphQL saveTemplate call (curl) instead of runpodctl")
    parser.add_argument("--json", action="store_true", help="print the validated template as JSON")


def runpod_template(args) -> int:
    path = args.template or default_template()
    check = validate_template(load_template(path), where=str(path), image=args.image)
    for warning in check.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        json.dump(check.template, sys.stdout, indent=2)
        print()
        return 0
    print(f"# {path}: valid RunPod template ({check.template['name']}, image {check.template['imageName']})",
          file=sys.stderr)
    if args.graphql:
        print("# RunPod GraphQL API (docs.runpod.io/sdks/graphql/manage-pod-templates); needs RUNPOD_API_KEY",
              file=sys.stderr)
        print(shell_line(graphql_command(check)))
    else:
        print("# runpodctl >= 2 (`runpodctl template create`; configure it with `runpodctl config --apiKey ...`)",
              file=sys.stderr)
        if check.template.get("containerRegistryAuthId"):
            print("# runpodctl has no registry-auth flag: use --graphql for a private image", file=sys.stderr)
        print(shell_line(runpodctl_command(check)))
    return 0
