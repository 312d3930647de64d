"""bench/sweep's pieces: the sweep file (spec), the machine a worker is (machine), one job's
steps as subprocesses (jobs), the append-only result store (store), where jobs run (execute:
Dask or in this process) and the merged table (merge). Nothing here imports Dask at module level,
so `bench/sweep run --local-serial` works on a host that has only python3."""
