# SPDX-License-Identifier: Apache-2.0
"""scripts/bench's parts (the command itself is scripts/bench.py):

  harness   running and timing children, CPU and memory of a process, cache
            dropping, medians of repeats, the FUSE mounts and their reads
  data      the workloads and their generated datasets
  peers     the floors, ceilings and peers batchfs is measured against
  report    the printed lines and tables, ratio figures and verdicts, the
            header, the saved results and the charts (scripts/benchchart.py)
  suites/   one module per part of a run: workload (the local workloads),
            photo, compressed, scale, shards, remote, bucket; each has
            run() and prints or returns what its ratio lines need

How to read the output: docs/benchmark.md.
"""
