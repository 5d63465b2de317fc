"""Replay: a Reverb-like `table.Table` over a numpy `sum_tree.SumTree`."""
