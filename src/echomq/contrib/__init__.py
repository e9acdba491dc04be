"""Integrations with other frameworks (each needs its extra, and is never imported
by ``import echomq``)."""
