"""Opt-outs from text and data mining: robots.txt rules, page-level signals, licences."""
