"""Which cells of a student edition repeat the solution edition's work: the test suite runs both
editions under nbval, and a student-edition cell that is the same as the solution edition's and
depends on no learner's code computes exactly what it computed there (root conftest.py skips it when
the solution edition runs in the same session). A static reading of the cells' Python, erring on
the side of running: anything it cannot follow runs."""

import ast
import builtins

# Methods that change the object they are called on (torch's in-place ops end in "_" too), and module
# functions that change global state: a cell calling one on state another cell made must run.
CHANGES_ITS_OBJECT = {
    "eval", "train", "to", "cuda", "cpu", "half", "float", "double", "requires_grad_", "zero_grad", "step",
    "backward", "load_state_dict", "apply", "register_forward_hook", "register_forward_pre_hook", "register_hook",
    "append", "extend", "insert", "pop", "popitem", "remove", "clear", "update", "setdefault", "add", "discard",
    "sort", "reverse", "write", "close", "seed", "manual_seed", "use_deterministic_algorithms", "observe",
}  # fmt: skip


def _changes_state(name: str) -> bool:
    in_place = name.endswith("_") and not name.startswith("__")  # add_, mul_; not __new__
    return name in CHANGES_ITS_OBJECT or in_place or name.startswith("set")


SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)  # scopes of their own too


def _evaluated_where_defined(node) -> list:
    """What a def, class or lambda evaluates in the scope that defines it: defaults, decorators, bases."""
    parts = list(getattr(node, "decorator_list", [])) + list(getattr(node, "bases", []))
    parts += [k.value for k in getattr(node, "keywords", [])]
    if not isinstance(node, ast.ClassDef):
        parts += node.args.defaults + [d for d in node.args.kw_defaults if d is not None]
    return parts


def _scope_reads(node) -> set:
    """The names a function, lambda, class body or comprehension reads from outside itself. Python's
    rule: a name bound anywhere in a function is its own throughout; a nested function's own names
    are not its parent's, and what the nested one reads from outside comes from the parent or beyond.
    (A class body's names are not seen by its methods.)"""
    own: set = set()
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        own |= {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
    loads: set = set()
    nested: list = []
    if isinstance(node, COMPREHENSIONS):
        todo = list(ast.iter_child_nodes(node))
    else:
        todo = [node.body] if isinstance(node, ast.Lambda) else list(node.body)
    while todo:
        child = todo.pop()
        if isinstance(child, SCOPES + COMPREHENSIONS):
            nested.append(child)
            if isinstance(child, SCOPES):
                todo.extend(_evaluated_where_defined(child))
                if not isinstance(child, ast.Lambda):
                    own.add(child.name)
            continue
        if isinstance(child, ast.Name):
            (loads if isinstance(child.ctx, ast.Load) else own).add(child.id)
        elif isinstance(child, (ast.Import, ast.ImportFrom)):
            own |= {(a.asname or a.name).split(".")[0] for a in child.names}
        todo.extend(ast.iter_child_nodes(child))
    shielded = set() if isinstance(node, ast.ClassDef) else own
    return (loads - own) | {name for inner in nested for name in _scope_reads(inner)} - shielded


def _free_reads(node, bound: set, free: set) -> None:
    """Names `node` reads before binding them itself, in evaluation order (function bodies: every
    name they read that is not their own)."""
    if isinstance(node, ast.Name):
        (free.add(node.id) if node.id not in bound else None) if isinstance(node.ctx, ast.Load) else bound.add(node.id)
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
    elif isinstance(node, SCOPES):
        for part in _evaluated_where_defined(node):
            _free_reads(part, bound, free)
        free |= _scope_reads(node) - bound
        if not isinstance(node, ast.Lambda):
            bound.add(node.name)
    elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
        _free_reads(node.value, bound, free) if node.value else None
        for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
            _free_reads(target, bound, free)
    elif isinstance(node, ast.AugAssign):
        if isinstance(node.target, ast.Name) and node.target.id not in bound:
            free.add(node.target.id)
        _free_reads(node.value, bound, free)
        _free_reads(node.target, bound, free)
    elif isinstance(node, (ast.For, ast.AsyncFor)):
        for part in (node.iter, node.target, *node.body, *node.orelse):
            _free_reads(part, bound, free)
    elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        inner = set(bound)
        for gen in node.generators:
            for part in (gen.iter, gen.target, *gen.ifs):
                _free_reads(part, inner, free)
        for part in (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,):
            _free_reads(part, inner, free)
    else:
        for child in ast.iter_child_nodes(node):
            _free_reads(child, bound, free)


def _parse(source: str) -> ast.Module | None:
    """The cell as Python (IPython's magics and shell lines turned into calls), or None."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        return ast.parse(TransformerManager().transform_cell(source))
    except SyntaxError:
        return None


def _names(tree: ast.Module, modules: set):
    """(names the cell reads before binding them, function bodies included; names it binds; whether it
    changes no state another cell made). A cell changes such state by storing into an attribute or
    item of an object it did not create, calling a method that changes one (`model.eval()`,
    `results.append(...)`), or a setter of a module (`torch.manual_seed`, `torch.set_num_threads`);
    calling a function (`train_adder(...)`) does not."""
    free: set = set()
    bound: set = set()
    for statement in tree.body:
        _free_reads(statement, bound, free)
    self_contained = True
    top: list[ast.AST] = list(tree.body)  # what runs now: the cell less its function and class bodies
    while top:
        node = top.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        store = isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del))
        method = node.func if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) else None
        if store or (method and _changes_state(method.attr)):
            base: ast.AST = method or node
            while isinstance(base, (ast.Attribute, ast.Subscript, ast.Call)):
                base = base.func if isinstance(base, ast.Call) else base.value
            name = base.id if isinstance(base, ast.Name) else ""
            self_contained &= name in bound and name not in free and name not in modules or name == "plt"
        top.extend(ast.iter_child_nodes(node))
    return free, bound, self_contained


def cells_that_repeat_the_solution(student: list, solution: list) -> dict[int, str]:
    """{code cell index: why} for the student edition's cells that compute exactly what the solution
    edition's cell did. A cell depends on the learner when it differs from the solution edition's (a
    stub) or reads a name such a cell bound or read (it may have handed the learner's code to that
    object: a hook registered on the model). A cell must
    run when it depends on the learner, is a check cell, changes state another cell made, or binds
    a name a cell that must run reads. Nothing is skipped in a notebook with a cell that does not parse."""
    if len(student) != len(solution):
        return {}
    maybe = [_parse(cell.source) for cell in student]
    trees = [tree for tree in maybe if tree is not None]
    if len(trees) != len(student):
        return {}
    imports = [n for tree in trees for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    modules = {(a.asname or a.name).split(".")[0] for n in imports for a in n.names}
    parsed = [_names(tree, modules) for tree in trees]
    must: list[bool] = []
    tainted: set[str] = set()
    for cell, original, (read, bound, self_contained) in zip(student, solution, parsed):
        stub = cell.source != original.source
        learner = stub or bool(read & tainted)
        if learner:  # what it binds, and what it reads: it may have handed the learner's code to it
            tainted |= bound | (read - set(vars(builtins)) - modules)  # (adder.model.register_forward_hook(my_hook))
        must.append(learner or "check" in cell.get("metadata", {}).get("tags", []) or not self_contained)
    needed: set = set()
    for i in reversed(range(len(student))):
        read, bound, _ = parsed[i]
        if must[i] or bound & needed:
            must[i] = True
            needed |= read
    return {i: "the solution edition's cell, run in notebooks/ in this session" for i, m in enumerate(must) if not m}
