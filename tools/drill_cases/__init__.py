"""The cases of tools/drill, a module per group; common.py is what they share."""
