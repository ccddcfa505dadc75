# tests/: unit tests of the format library, fuzz targets, benchmarks.
