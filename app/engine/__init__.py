"""Everything that touches llama.cpp, and nothing that knows HTTP: requests in, chunks out, cancel.

The views use `Engine.submit`, the `Generation` it returns (iterate for chunks,
`cancel`, `close`), the data types of `types.py` and the exceptions of `errors.py`.
"""
