"""Seeded fuzzers and the crash-resilient worker pool they share (tests only, not the package)."""
