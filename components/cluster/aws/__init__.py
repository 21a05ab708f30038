"""EKS: the cluster, its network (`network`: VPC, subnets, NAT), its GPU pools (`eks`: always-on
managed node groups; `karpenter` and `karpenter_iam`: Karpenter for the nodes above minNodes), the
system node group, EFA, EFS and the S3 model bucket."""
