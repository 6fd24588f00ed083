"""The business Brisk answers for, as data: one YAML file (``BRISK_BUSINESS``) read into typed
models (``model.py``), from which the system prompt is generated (``prompt.py``). The shipped
example is Harbor Lane Bikes (``harbor_lane_bikes.yaml``)."""
