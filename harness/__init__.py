"""What the tests and the benchmarks share, importing neither: starting servers (ours, llama-server, nginx)
and the test models no one ships small."""
