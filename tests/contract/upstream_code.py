"""Reading facts out of upstream Python source without importing it (no torch here): AST helpers."""
import ast
import re
from pathlib import Path


def parse(path):
    return ast.parse(Path(path).read_text(encoding='utf-8'), str(path))


def call_name(node):
    """'add_argument' for x.add_argument(...), 'f' for f(...), else None."""
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute):
            return node.func.attr
        if isinstance(node.func, ast.Name):
            return node.func.id
    return None


def add_argument_flags(*paths):
    """Every option string ('--x', '-x') given to an add_argument(...) call in PATHS.

    A frontend dataclass (vLLM's FrontendArgs) registers its fields as f"--{key.replace('_', '-')}":
    where a file has that loop, the annotated fields of its *Args classes count as options too."""
    flags = set()
    for path in paths:
        if not Path(path).exists():
            continue
        text = Path(path).read_text(encoding='utf-8')
        tree = ast.parse(text, str(path))
        for node in ast.walk(tree):
            if call_name(node) == 'add_argument':
                flags.update(a.value for a in node.args
                             if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith('-'))
        if re.search(r'''f["']--\{key\.replace\(["']_["'], ["']-["']\)\}["']''', text):
            for cls in ast.walk(tree):
                if isinstance(cls, ast.ClassDef) and cls.name.endswith('Args'):
                    flags.update('--' + s.target.id.replace('_', '-') for s in cls.body
                                 if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name))
    return flags


def add_argument_spellings(*paths):
    """The option strings of each add_argument(...) call in PATHS, one set per call (an option and its aliases)."""
    out = []
    for path in paths:
        if Path(path).exists():
            for node in ast.walk(parse(path)):
                if call_name(node) == 'add_argument':
                    out.append({a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
                                and a.value.startswith('-')})
    return out


def str_constants(tree, pattern):
    return {n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and re.fullmatch(pattern, n.value)}


def parents(tree):
    out = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            out[child] = node
    return out


def is_self_attr(node, attr):
    return (isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.value, ast.Name)
            and node.value.id == 'self')


class Strict(object):
    """An attribute namespace that names what the upstream expression asked for and we did not provide."""

    def __init__(self, label, **values):
        self.__dict__['_label'] = label
        self.__dict__.update(values)

    def __getattr__(self, name):
        raise AttributeError('the upstream expression reads %s.%s, which the contract test does not model: '
                             'extend its namespace' % (self._label, name))


def evaluate(expr, namespace):
    return eval(compile(ast.Expression(expr), '<upstream>', 'eval'), {'__builtins__': {}}, dict(namespace))


def module_of_class(vllm_root, class_name):
    """The file under VLLM_ROOT that defines CLASS_NAME at top level."""
    pattern = re.compile(r'^class %s\b' % re.escape(class_name), re.M)
    for path in sorted(Path(vllm_root).rglob('*.py')):
        if pattern.search(path.read_text(encoding='utf-8', errors='replace')):
            return path
    return None


class _Stub(object):
    """Stands for a module the extracted code imports but never needs here (regex -> re below)."""

    def __getattr__(self, name):
        return _Stub()

    def __call__(self, *args, **kwargs):
        return _Stub()


def load_classes(path, names):
    """Exec the top-level classes NAMES of PATH (and the top-level classes, functions and assignments they
    name, transitively) with the module's imports; an import that fails here is a stub. `regex` is `re`."""
    tree = parse(path)
    defs = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            defs[node.name] = node
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            defs.setdefault(node.targets[0].id, node)
    wanted, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in wanted or name not in defs:
            continue
        wanted.add(name)
        todo.extend(n.id for n in ast.walk(defs[name]) if isinstance(n, ast.Name))
    namespace = {'__name__': 'upstream_' + Path(path).stem}
    # imports at top level and under `if TYPE_CHECKING:` (annotations are evaluated when a def runs)
    top = list(tree.body) + [n for s in tree.body if isinstance(s, ast.If) and getattr(s.test, 'id', '') == 'TYPE_CHECKING'
                             for n in s.body]
    for node in top:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                local = (alias.asname or alias.name).split('.')[0]
                module = ast.Module(body=[type(node)(**dict(ast.iter_fields(node), names=[alias]))], type_ignores=[])
                try:
                    if getattr(node, 'module', None) == 'regex' or alias.name == 'regex':
                        namespace[local] = re
                    else:
                        exec(compile(ast.fix_missing_locations(module), str(path), 'exec'), namespace)
                except Exception:  # pylint: disable=broad-except
                    namespace[local] = _Stub()
    body = [n for n in tree.body if n in [defs[w] for w in wanted]]
    exec(compile(ast.Module(body=body, type_ignores=[]), str(path), 'exec'), namespace)
    return namespace
