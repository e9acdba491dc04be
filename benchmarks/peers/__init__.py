"""One module per peer, each run with ``python -m peers.<name>`` from its own venv.

Every module defines a driver.System configured the way the peer's docs
recommend for speed, and hands it to driver.main (roles producer/worker).
"""
