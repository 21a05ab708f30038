"""EKS: the cluster, its GPU and system node groups, EFA, EFS and the S3 model bucket."""
