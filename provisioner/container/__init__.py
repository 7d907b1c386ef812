"""Container stacks: image references, the registry client (manifest + config, no layers) and the
facts an image's config carries (CUDA, cuDNN, NCCL, framework versions, arch list)."""
