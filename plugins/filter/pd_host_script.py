# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_host_script
short_description: A script the roles run on hosts with C(python3 -c), with the module_utils it imports
version_added: "1.1.0"
description:
  - The scripts in C(roles/*/files) import the collection's parsers (C(plugins/module_utils/common), such as the env
    file reader and the Prometheus text parser) instead of keeping copies. On a host the collection is not on the
    path, so this filter puts the sources of the modules the script imports (read from its import statements,
    transitively, as C(guard_files.closure) finds the start guard's) in front of the script, served by an
    import hook, so that the script's imports resolve to exactly the controller's files.
  - The script's text is unchanged, so it runs as it is in the unit tests (where the collection is importable).
options:
  _input:
    description: The text of the script (C(lookup('ansible.builtin.file', 'NAME.py'))).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Run a host script with the parsers it imports
  ansible.builtin.command:
    argv: ["/usr/bin/python3", "-c", "{{ lookup('ansible.builtin.file', 'probe_ready.py') | vllm_pd.ascend.pd_host_script }}"]
"""

RETURN = r"""
_value:
  description: The program for C(python3 -c); the script itself when it imports nothing of the collection.
  type: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.vllm_pd.ascend.plugins.module_utils.guard.guard_files import PREFIX, closure, imported_modules
from ansible_collections.vllm_pd.ascend.plugins.module_utils.guard.guard_files import read_source as read

# Python 3 only (the hosts' /usr/bin/python3); every name starts with _pd_ so the script's own stay free.
_PRELUDE = '''import importlib.abc as _pd_abc, importlib.util as _pd_util, sys as _pd_sys
_PD_SOURCES = %r


class _PdSources(_pd_abc.MetaPathFinder, _pd_abc.Loader):
    """The collection's module_utils the script below imports, from the sources above (filter pd_host_script)."""

    def find_spec(self, name, path=None, target=None):
        if name in _PD_SOURCES:
            return _pd_util.spec_from_loader(name, self, is_package=_PD_SOURCES[name][0].endswith('__init__.py'))
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        path, source = _PD_SOURCES[module.__name__]
        module.__file__ = path
        exec(compile(source, path, 'exec'), module.__dict__)


_pd_sys.meta_path.insert(0, _PdSources())
'''


def sources(entries):
    """{dotted module name: (path, source)} of the module_utils ENTRIES and what they import, with every package above."""
    out = {}
    parts = PREFIX.split('.')
    for depth in range(1, len(parts) + 1):
        name = '.'.join(parts[:depth])
        out[name] = (name.replace('.', '/') + '/__init__.py', '')
    for path in closure(entries, read):
        name = PREFIX + '.' + path[:-len('.py')].replace('/', '.')
        if name.endswith('.__init__'):
            name = name[:-len('.__init__')]
        out[name] = ('plugins/module_utils/' + path, read(path))
    return out


def pd_host_script(script):
    if not isinstance(script, str):
        raise AnsibleFilterError('pd_host_script: the script must be text, not %s' % type(script).__name__)
    try:
        entries = sorted(imported_modules(script, read, '<script>'))
        return _PRELUDE % (sources(entries),) + '\n' + script if entries else script
    except (ValueError, SyntaxError) as exc:
        raise AnsibleFilterError('pd_host_script: %s' % exc)


class FilterModule(object):
    def filters(self):
        return {"pd_host_script": pd_host_script}
