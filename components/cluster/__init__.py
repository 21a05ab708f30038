"""The cluster layer (stage 5, first half): a Kubernetes cluster with tainted GPU pools and a bucket.

Owns: `interface` (what every cloud hands the later stages: a provider, one `GpuPlacement` per
pool, the `ModelBucket`), `common` (what the clouds share), `aws/` (EKS), `gcp/` (GKE),
`existing` (a cluster reached through a kubeconfig) and `select` (`create_cluster`, by cloud).
May import: `common`, `stack_config`, `planner`.
Imported by: the add-ons, the operators, the model store, serving, `__main__.py`.
"""
