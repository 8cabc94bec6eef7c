"""Rule-based rewards shared by training (verl's custom_reward_function) and evaluation.

`rlrecipes/rewards/gsm8k.py` must stay loadable as a plain file (verl imports it by path), so it uses
the standard library only; nothing here imports it eagerly.
"""
