# tests/optimizer: rules (filled in as the part lands)
