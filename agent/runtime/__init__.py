"""The model runtime: model files prepared once, the embedded llama.cpp server, what every call shares."""
