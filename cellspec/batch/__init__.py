"""Batches on Dask distributed: many layouts against one cell, and rule-file tests, on an
embedded LocalCluster, an existing cluster (``--scheduler``) or in process (``--serial``).

``inputs`` reads the layouts lazily, ``work`` is what runs on a worker (the cell cached per
worker), ``cluster`` opens the Dask client, ``stream`` maps chunks over it and hands results
back in input order with bounded memory. Nothing here schedules work by itself: Dask does.
"""
