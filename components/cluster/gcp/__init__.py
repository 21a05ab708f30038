"""GKE: the cluster, its network (`network`: VPC-native subnet, Cloud NAT for private nodes), the
Google APIs it uses (`apis`), its GPU and system node pools and the GCS model bucket."""
