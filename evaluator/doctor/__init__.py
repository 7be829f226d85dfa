"""``evaluator doctor``: why a host would not start a judge, one check per line.

Each check (Python and the packages against the install's lock, torch's CUDA build against
the NVIDIA driver, the GPUs and their memory, vLLM's import and platform, the judge's
folder against its weight list, the judge's estimated memory against what is free, disk
for outputs, the offline switches) is a pure function of what the probes found, and says
ok, warning or failed with what to do. Every probe that touches the system (nvidia-smi,
libcuda, torch and vLLM imported in a subprocess with a timeout, disk, memory, the
environment, installed package metadata) is one small function in :mod:`probes`, bundled in
:class:`~evaluator.doctor.probes.Probes` so that tests replace any of them.

A server judge (its backend record says ``server``) gets the checks of
:mod:`evaluator.doctor.server` instead of torch, the GPUs, the weights and memory: its model
runs on its server.

Sits above ``run`` (it reuses the run's model-folder check): it may import common, judges,
run and itself; nothing imports it but the CLI. No torch or vLLM is imported in this
process.
"""
