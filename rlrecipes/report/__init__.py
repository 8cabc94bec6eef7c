"""A run's plots and one-page report (Markdown + single-file HTML), built from its logs (`rlrecipes report`).

Built after the run from the files verl wrote (nothing is threaded through training): the JSONL of
verl 0.8's file logger or the console log of verl 0.5 (see `rlrecipes.verl.run_metrics`), plus the
`rlrecipes eval` summary when one is given. plots.py draws the panels; writer.py writes the pages.
"""
