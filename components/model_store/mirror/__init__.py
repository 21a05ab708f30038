"""The script the model store's mirror Job runs (shipped to the Job in a ConfigMap)."""

from pathlib import Path

SCRIPT = Path(__file__).with_name("mirror.py")
SCRIPT_NAME = SCRIPT.name
