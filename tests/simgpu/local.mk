# tests/simgpu: rules (filled in as the part lands)
