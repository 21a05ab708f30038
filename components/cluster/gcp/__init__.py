"""GKE: the cluster, its GPU and system node pools and the GCS model bucket."""
