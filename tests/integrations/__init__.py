"""Tests against real third-party tools, each in its own environment (`make integrations`)."""
