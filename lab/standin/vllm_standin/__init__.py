"""A `vllm serve` stand-in that behaves like vLLM-Ascend where the field report's faults live.

Only the lab installs it (/opt/vllm-lab). Facts it imitates are cited as [facts §N] from
shared/docs/vllm-ascend-facts.md.
"""
