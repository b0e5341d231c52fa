"""Benchmarks: each figure is a ratio against a floor measured in the same run on the same binaries.

`python -m benchmarks` (`make bench`) runs them; modules by concern:
  floor.py               the floors: raw etcdctl membership changes on plain local etcd processes
  environment.py         the sandbox (started or reused), the deployed operator, a namespace per figure
  clusters.py            EtcdClusters of one namespace and timing until their status says done
  membership_figures.py  bring-up, scaling, replacing a deleted member (operator vs floor)
  idle_figures.py        idle API requests per cluster, operator RSS and threads
  maintenance_figures.py NOSPACE -> writable and one member's defragmentation (operator vs floor)
  maintenance_floor.py   their floor: NOSPACE recovery and `etcdctl defrag` by hand on plain etcd processes
  history_load.py        history that fills a database: the same keys overwritten through the gateway
  apiserver_requests.py  kube-apiserver's own apiserver_request_total, and rates over a window
  process_status.py      VmRSS and Threads from /proc
  results.py             result entries, the printed table, bench-results.json
"""
