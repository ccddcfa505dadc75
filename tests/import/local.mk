# tests/import: rules (filled in as the part lands)
