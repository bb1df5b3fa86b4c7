"""What operators run beside it: metrics, traces, pages, nginx, the image, manifests, benchmarks."""
