"""Starting a run: the staged reproduction, Ray clusters, RunPod templates."""
