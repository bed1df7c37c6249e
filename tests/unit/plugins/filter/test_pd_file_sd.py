# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""pd_file_sd: every P, D and proxy endpoint of the plan, labelled, in files promtool accepts."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import shutil
import subprocess

import pytest
import yaml

from ansible_collections.vllm_pd.ascend.plugins.filter.pd_file_sd import pd_file_sd
from ansible_collections.vllm_pd.ascend.plugins.filter.pd_instances import engine_instances


def _hostvars():
    def host(cluster, address, prefill=None, decode=None):
        return {'vllm_pd_cluster': cluster, 'vllm_pd_address': {'address': address, 'interface': 'ens1f0'},
                'vllm_pd_instances': {'prefill': prefill or [], 'decode': decode or []}}
    ext = engine_instances('prefill', 4, dp_size=2, dp_ranks=[0, 1], api_port=8100, kv_port=28000)
    return {
        # the proxy tier: HAProxy's exporter at its default port (p1), at the role variable's (p2); d1 runs no proxy
        'p1': dict(host('a', '10.0.30.10', prefill=engine_instances('prefill', 8, api_port=8100, kv_port=28000)),
                   vllm_pd_proxy_front='haproxy'),
        'd1': dict(host('a', '10.0.30.11', decode=engine_instances('decode', 8, api_port=8200, kv_port=28100)),
                   vllm_pd_proxy_front='haproxy'),
        'p2': dict(host('b', 'fd00::10', prefill=ext), vllm_pd_proxy_port=9000, proxy_front='haproxy',
                   proxy_front_metrics_port=9405),
        'd2': host('b', 'fd00::11', decode=engine_instances('decode', 8, api_port=8200, kv_port=28100)),
        'gone': {'vllm_pd_cluster': 'c'},  # not in this run: no plan, left out
    }


def test_every_endpoint_with_its_labels():
    t = pd_file_sd(_hostvars(), ['p1', 'd1', 'p2', 'd2', 'gone'], ['p1', 'p2'])
    assert sorted(t) == ['vllm_pd_decode', 'vllm_pd_front', 'vllm_pd_prefill', 'vllm_pd_proxy']
    assert t['vllm_pd_prefill'] == [
        {'targets': ['10.0.30.10:8100'], 'labels': {'cluster': 'a', 'role': 'prefill', 'instance': 'prefill', 'host': 'p1'}},
        {'targets': ['[fd00::10]:8100'], 'labels': {'cluster': 'b', 'role': 'prefill', 'instance': 'prefill-dp0', 'host': 'p2'}},
        {'targets': ['[fd00::10]:8101'], 'labels': {'cluster': 'b', 'role': 'prefill', 'instance': 'prefill-dp1', 'host': 'p2'}}]
    assert [e['targets'][0] for e in t['vllm_pd_decode']] == ['10.0.30.11:8200', '[fd00::11]:8200']
    assert t['vllm_pd_proxy'] == [
        {'targets': ['10.0.30.10:8000'], 'labels': {'cluster': 'a', 'role': 'proxy', 'instance': 'proxy', 'host': 'p1'}},
        {'targets': ['[fd00::10]:9000'], 'labels': {'cluster': 'b', 'role': 'proxy', 'instance': 'proxy', 'host': 'p2'}}]
    assert t['vllm_pd_front'] == [
        {'targets': ['10.0.30.10:8405'], 'labels': {'cluster': 'a', 'role': 'proxy', 'instance': 'front', 'host': 'p1'}},
        {'targets': ['[fd00::10]:9405'], 'labels': {'cluster': 'b', 'role': 'proxy', 'instance': 'front', 'host': 'p2'}}]


def test_no_exporter_target_without_the_tier_or_with_port_0():
    hv = _hostvars()
    hv['p1']['vllm_pd_proxy_front'] = 'none'
    hv['p2']['proxy_front_metrics_port'] = 0
    assert pd_file_sd(hv, ['p1', 'd1', 'p2', 'd2'], ['p1', 'p2'])['vllm_pd_front'] == []


def _promtool(tmp_path, targets):
    for job, entries in targets.items():
        (tmp_path / ('%s.yml' % job)).write_text(yaml.safe_dump(entries, sort_keys=False))
    config = {'scrape_configs': [{'job_name': job, 'file_sd_configs': [{'files': [str(tmp_path / ('%s.yml' % job))]}]}
                                 for job in targets]}
    (tmp_path / 'prometheus.yml').write_text(yaml.safe_dump(config))
    return subprocess.run(['promtool', 'check', 'config', str(tmp_path / 'prometheus.yml')],
                          capture_output=True, text=True, check=False)


@pytest.mark.skipif(shutil.which('promtool') is None, reason='promtool (Debian package prometheus, scripts/lib.sh)')
def test_promtool_accepts_the_files(tmp_path):
    r = _promtool(tmp_path, pd_file_sd(_hostvars(), ['p1', 'd1', 'p2', 'd2'], ['p1', 'p2']))
    assert r.returncode == 0, r.stdout + r.stderr
    # promtool reads the file_sd files: a target that is no host:port fails (the check above can fail)
    bad = _promtool(tmp_path, {'vllm_pd_prefill': [{'targets': ['10.0.30.10:8100/metrics'], 'labels': {}}]})
    assert bad.returncode != 0 and 'is not a valid hostname' in bad.stdout + bad.stderr
