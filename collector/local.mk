# collector: rules (filled in as the part lands)
