"""What every stage of the serving path agrees on, decided once.

Owns: `contract` (the taint, label and annotation keys, the model mount path, the server port),
`gpus` (the GPU catalog: CUDA totals, cloud machines, MIG profiles), `engine` (the pinned vLLM
release and image, and the CUDA it was built with), `engine_metrics` (the metric names that release
exports), `gpu_metrics` (the DCGM exporter's names and counters file), `alerting` (how every alert
is written and where its runbook entry is; the SLO burn-rate windows), `gpu_driver` (who installs
the NVIDIA driver on each cloud), `driver_versions` (which driver that yields: the pinned EKS AMI
release, the GPU Operator's default, GKE's) `facts` (an outside fact with its source and, if
unsettled, the command that settles it), `pod_security` (the hardened pod shape, the waiver
annotation, Pod Security Admission levels and labels) and `untrusted` (the limits every reader of input from
outside applies: file sizes, regular files only, bounded JSON, quoting a bad value).
May import: the standard library only, so the endpoint tools and the policy pack can use it alone.
Imported by: everything else.
"""
