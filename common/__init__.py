"""What every stage of the serving path agrees on, decided once.

Owns: `contract` (the taint, label and annotation keys, the model mount path, the server port),
`gpus` (the GPU catalog: CUDA totals, cloud machines, MIG profiles), `engine` (the pinned vLLM
release and image), `engine_metrics` (the metric names that release exports), `gpu_driver`
(who installs the NVIDIA driver on each cloud) and `untrusted` (the limits every reader of input
from outside applies: file sizes, regular files only, bounded JSON, quoting a bad value).
May import: the standard library only, so the endpoint tools and the policy pack can use it alone.
Imported by: everything else.
"""
