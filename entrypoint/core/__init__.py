"""The foundation every other package builds on: host, settings, messages, findings, errors, masking.

Imports nothing else of ours.
"""
