"""The LibCST codemod: legacy TF1 profiling code to tracebridge calls that run under TF 2.

Passes over one module, each a LibCST ``Codemod`` transformer with fresh name resolution
(:class:`_Pass`), sharing one ``CodemodContext``:

1. :class:`_LegacyIdioms` replaces the legacy idioms in place: imports of ``timeline``,
   ``tfvis``, tftracer's ``Timeline`` and ``ProfilerHook`` go to :mod:`tracebridge.compat`;
   ``x.run(..., run_metadata=m)`` becomes ``tracebridge.compat.run_traced(x, ...)`` and
   ``w.add_run_metadata(...)`` ``tracebridge.compat.add_run_metadata(w, ...)``; TF1 names
   TF2 lacks (``tf.Session``, ``tf.RunOptions``, ``gfile``, tfprof's ``tf.profiler.*``)
   become ``tf.compat.v1.*``, and in graph code so do names TF2 changed
   (``tf.summary.scalar``). What TF 2.21 cannot run at all (``tf.contrib``, ``tf.estimator``,
   ...) is listed in the context's scratch (``MISSING``), one line per use.
2. Sessions get a graph, as TF 2 executes eagerly, by one of the :class:`_GraphMode`
   strategies (see :func:`rewrite_module` for which): :class:`_EagerOff` calls
   ``tf.compat.v1.disable_eager_execution()`` after the TensorFlow import;
   :class:`_GraphBlocks` runs the code that builds a session's graph under ``with
   tf.compat.v1.Graph().as_default():``.

LibCST's ``AddImportsVisitor`` then adds the ``import tracebridge.compat`` the new calls need.

Each pass surveys the module it is given (:class:`_Survey`) before changing it. What a pass
changes goes in the report with :meth:`_Pass.report`; what it leaves for a human is a LibCST
warning, :meth:`_Pass.warn_at`. Both carry the line.

Only what is TF1 is touched: a file without sessions or legacy profiling APIs comes out
unchanged, and every rewrite is recognisable on a second run, which changes nothing.
Comments and strings are never edited; LibCST keeps all formatting it is not told to change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst
from libcst.codemod import Codemod, CodemodContext
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import PositionProvider, QualifiedNameProvider, QualifiedNameSource

from .names import (EAGER_SWITCHES, PROFILER_HOOKS, SESSIONS, TF1_DATASET_METHODS, TF2_KEPT, TFTRACER_DROP_INS,
                    TFTRACER_MISSING, api_name, deprecated_advice, is_tfprof, missing_advice, tf1_entry, tfprof_advice)

MARK = "# tracebridge:"
GRAPH_COMMENT = f"{MARK} TF1 graph code runs in a graph (TF 2 executes eagerly)"
EAGER_COMMENT = f"{MARK} the sessions below need graph mode (TF 2 executes eagerly)"
COMPAT = "tracebridge.compat"
REPORT = "tracebridge.migrate.report"  # context.scratch: (line, message) of every change
MISSING = "tracebridge.migrate.missing"  # context.scratch: (line, message) of what TF 2.21 cannot run
MISSING_PREFIX = "not in TF 2.21: "
# TF 2 APIs that make a file mixed TF1/TF2 code: eager execution must stay on there.
TF2_APIS = {"function", "GradientTape"}


@dataclass
class Rewritten:
    """The codemod's output for one module: the new code and a line per change or note."""

    code: str
    report: list[tuple[int, str]] = field(default_factory=list)
    missing: list[tuple[int, str]] = field(default_factory=list)  # also in report


def rewrite_module(code: str, *, notebook: bool = False) -> Rewritten:
    """Rewrite one module's source (raises ``libcst.ParserSyntaxError`` if it is not Python).

    Graph mode, as TF 2 executes eagerly: a file whose TF code is all TF1-style, and a
    notebook (a block cannot span cells), get ``tf.compat.v1.disable_eager_execution()``
    after the TensorFlow import (:class:`_EagerOff`), as TF's own migration guide advises;
    a file that mixes TF1 and TF2 code gets scoped graph blocks (:class:`_GraphBlocks`)."""
    context = CodemodContext()
    idioms = _LegacyIdioms(context, notebook=notebook)
    module = idioms.transform_module(cst.parse_module(code))
    survey = idioms.survey
    if survey.tf1 and not survey.eager_off:
        graph_mode = _EagerOff if survey.graph_everywhere else _GraphBlocks
        module = graph_mode(context, notebook=notebook).transform_module(module)
    # Imports last, so that every pass reports lines of the original code (no pass adds a line
    # before another's). AddImportsVisitor reads no metadata: it visits the module as it is.
    needed = context.scratch.pop(AddImportsVisitor.CONTEXT_KEY, [])
    if needed:
        module = module.visit(_AddImports(context, needed))
    missing = sorted(set(context.scratch.get(MISSING, [])))
    return Rewritten(module.code, sorted(set(_report_lines(context) + missing)), missing)


def _report_lines(context: CodemodContext) -> list[tuple[int, str]]:
    """The report of a run, by line: the changes and the warnings (``"LINE: message"``)."""
    warnings = [(int(line), message) for line, _, message in (w.partition(": ") for w in context.warnings)]
    return sorted(set(context.scratch.get(REPORT, []) + warnings))


# --- helpers ---------------------------------------------------------------------------
def _dotted(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None


def _expression(text: str) -> cst.BaseExpression:
    return cst.parse_expression(text)


def _import_names(node: cst.Import | cst.ImportFrom) -> list[cst.ImportAlias]:
    return [] if isinstance(node.names, cst.ImportStar) else list(node.names)


def _with_alias(alias: cst.ImportAlias, name: str) -> cst.ImportAlias:
    """``import name as <what the old import bound>`` (``import tfvis`` bound ``tfvis``)."""
    bound = alias.asname.name.value if alias.asname else _dotted(alias.name)
    return cst.ImportAlias(name=_expression(name), asname=cst.AsName(name=cst.Name(bound)),
                           comma=alias.comma)


# --- what the module is ------------------------------------------------------------------
class _Survey(cst.CSTVisitor):
    """Facts gathered before a pass changes anything: is this TF1 code (sessions,
    RunOptions, timeline, tfvis, tftracer, ProfilerHook, add_run_metadata, tfprof)? Does it
    also hold TF2 code (``tf.function``, ``GradientTape``, Keras ``fit``, ``.numpy()``)? Is
    eager execution switched off? Which scopes (module, function bodies) create sessions
    without a graph, and which call which? What does TF 2.21 lack? How is TensorFlow
    imported? Is ``tracebridge.compat`` imported (anywhere)?"""

    METADATA_DEPENDENCIES = (QualifiedNameProvider,)

    def __init__(self, notebook: bool):
        super().__init__()
        self.notebook = notebook
        self.tf1 = False
        self.tfprof = False
        self.eager_off = False
        self.imports_compat = False
        self.imports_from_compat = False  # `from tracebridge.compat import ...` among the leading imports, or one to be
        self.tf2_dataset = False  # TF 2's tf.data.Dataset is used (left as it is: names.TF2_KEPT)
        self._leading: set[cst.CSTNode] = set()  # the module's leading import statements
        self.tf2_use: tuple[cst.CSTNode, str] | None = None  # the first TF2 construct met, and what it is
        self.missing: list[tuple[cst.CSTNode, str]] = []     # uses TF 2.21 cannot run, with advice
        self.session_scopes: set[cst.CSTNode] = set()
        self.tf_import: tuple[cst.SimpleStatementLine, str, str] | None = None  # (statement, bound, module)
        self._functions: dict[str, cst.FunctionDef] = {}   # module-level functions by name
        self._calls: dict[cst.CSTNode, set[str]] = {}      # scope -> functions it calls by name
        self._calls_in_graph: set[str] = set()             # functions called inside `with g.as_default()`
        self.graph_scopes: set[cst.CSTNode] = set()       # set when the module is done: see _graph_scopes
        self._needing: set[cst.CSTNode] = set()
        self._keras = self._fit = None
        self._scopes: list[cst.CSTNode] = []
        self._graph_depth = 0
        self._statement: cst.SimpleStatementLine | None = None

    def api(self, node: cst.CSTNode) -> tuple[str, str] | None:
        return _api(self, node)

    @property
    def graph_everywhere(self) -> bool:
        """Eager execution goes off for the whole file: a notebook with sessions, or a file of
        TF1 code only (nothing there needs eager execution, and helpers then build graph
        code wherever they are called from)."""
        return bool(self.session_scopes) and (self.notebook or self.tf2 is None)

    @property
    def tf2(self) -> tuple[cst.CSTNode, str] | None:
        """The first TF2 construct of the file (Keras ``fit`` counts where Keras is used)."""
        if self.tf2_use is None and self._keras is not None and self._fit is not None:
            return self._fit, "Keras fit"
        return self.tf2_use

    def leave_Module(self, node: cst.Module) -> None:
        self.graph_scopes = self._graph_scopes()

    def _graph_scopes(self) -> set[cst.CSTNode]:
        """The scopes whose code builds what their sessions run (for scoped graph blocks):
        a scope that creates a session, or a function that calls (by name) a function that
        needs a graph, needs one; each such chain is wrapped at its outermost function, and a
        function called inside its caller's ``with g.as_default():`` is not wrapped (its
        caller's graph holds the ops). Calls from module level do not make the module need a
        graph: its code (``if __name__ == "__main__":``) may be the file's TF2 part."""
        needing = set(self.session_scopes)
        grown = True
        while grown:
            grown = False
            for scope, names in self._calls.items():
                if scope not in needing and isinstance(scope, cst.FunctionDef) and any(
                        self._functions.get(n) in needing for n in names):
                    needing.add(scope)
                    grown = True
        called = {self._functions[n] for s in needing for n in self._calls.get(s, ()) if n in self._functions}
        covered = {self._functions[n] for n in self._calls_in_graph if n in self._functions}
        # Graph code, where TF1's meaning of a name applies: these scopes and every function
        # they call (helpers that add summaries, build layers), transitively.
        reached, pending = set(), [*needing, *covered]
        while pending:
            scope = pending.pop()
            if scope not in reached:
                reached.add(scope)
                pending += [self._functions[n] for n in self._calls.get(scope, ()) if n in self._functions]
        self._needing = reached
        return needing - called - covered

    def in_graph_code(self, scopes: list[cst.CSTNode], graph_depth: int) -> bool:
        """Code that will run in a graph: TF1's meaning of a name applies there."""
        if graph_depth > 0 or self.eager_off or (self.tf1 and (self.notebook or self.tf2 is None)):
            return True
        return any(scope in self._needing for scope in scopes)

    # scopes and graph contexts
    def visit_Module(self, node: cst.Module) -> None:
        self._scopes.append(node)
        # The imports at the top, where LibCST's AddImportsVisitor adds a name to a from-import.
        for index, statement in enumerate(node.body):
            if not _is_header(statement, docstring_ok=index == 0):
                break
            self._leading.add(statement)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if len(self._scopes) == 1:
            self._functions[node.name.value] = node
        self._scopes.append(node)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scopes.pop()

    def visit_With(self, node: cst.With) -> None:
        self._graph_depth += _is_graph_context(node)

    def leave_With(self, node: cst.With) -> None:
        self._graph_depth -= _is_graph_context(node)

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._statement = node

    # what is used
    def visit_Import(self, node: cst.Import) -> None:
        for alias in _import_names(node):
            name = _dotted(alias.name)
            if name == "tracebridge.compat" and alias.asname is None:
                self.imports_compat = True
            if name in ("tfvis", "tftracer", "tensorflow.python.client.timeline"):
                self.tf1 = True
            self._missing_module(node, name)
            if name in ("tensorflow", "tensorflow.compat.v1") and self.tf_import is None and len(self._scopes) == 1:
                # `import tensorflow.compat.v1` without `as` binds `tensorflow`, not v1.
                if alias.asname is not None or name == "tensorflow":
                    bound = alias.asname.name.value if alias.asname else name
                    self.tf_import = (self._statement, bound, name)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = _dotted(node.module) if node.module is not None and not node.relative else None
        if module is None:
            return
        target = _import_target(module)
        at_module_level = self._statement in self._leading
        if module == COMPAT and at_module_level:
            self.imports_from_compat = True
        for alias in _import_names(node):
            name = _dotted(alias.name)
            if target is not None and target(name) is not None:
                self.tf1 = True
                self.imports_from_compat |= target(name) == COMPAT and at_module_level
            self._missing_module(node, f"{module}.{name}")
            if module == "tensorflow.compat" and name == "v1" and alias.asname is not None \
                    and self.tf_import is None and len(self._scopes) == 1:
                self.tf_import = (self._statement, alias.asname.name.value, "tensorflow.compat.v1")

    def _missing_module(self, node: cst.CSTNode, name: str) -> None:
        if name == "tftracer.TracingServer":
            self.missing.append((node, TFTRACER_MISSING))
            return
        api = api_name(name)
        advice = api and missing_advice(api[1])
        if advice:
            self.tf1 = True
            self.missing.append((node, advice))

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        return self._reference(node)

    def visit_Name(self, node: cst.Name) -> None:
        self._reference(node)

    def _reference(self, node) -> bool:
        """Whether to look inside the reference (not once what it names is known)."""
        qualified = _qualified(self, node)
        if any(is_tfprof(q) for q in qualified):
            self.tfprof = self.tf1 = True
            return True
        if "tftracer.TracingServer" in qualified:
            self.missing.append((node, TFTRACER_MISSING))
            return False
        api = self.api(node)
        if api is None:
            return True
        namespace, name = api
        advice = missing_advice(name)
        if advice is not None:
            self.tf1 = True
            self.missing.append((node, advice))
            return False
        if namespace == "v2" and name in TF2_APIS and self.tf2_use is None:
            self.tf2_use = (node, f"tf.{name}")
        if namespace == "v2" and name in TF2_KEPT:
            self.tf2_dataset = True
        if name.startswith("keras.") and self._keras is None:
            self._keras = node
        entry = tf1_entry(name)
        if name in SESSIONS or name in PROFILER_HOOKS or name in ("RunOptions", "RunMetadata") or (
                namespace == "v2" and entry is not None and entry[1].missing):
            self.tf1 = True
        return True

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute):
            method = node.func.attr.value
            if method == "add_run_metadata":
                self.tf1 = True
            elif method == "numpy" and not node.args and self.tf2_use is None:
                self.tf2_use = (node, "an eager tensor's .numpy()")
            elif method == "fit" and self._fit is None:
                self._fit = node
        elif isinstance(node.func, cst.Name):
            if self._graph_depth:
                self._calls_in_graph.add(node.func.value)
            else:
                self._calls.setdefault(self._scopes[-1], set()).add(node.func.value)
        api = self.api(node.func)
        if api is None:
            return
        if api[1] in EAGER_SWITCHES:
            self.eager_off = True
        elif api[1] in SESSIONS and self._graph_depth == 0 and not any(
                a.keyword is not None and a.keyword.value == "graph" for a in node.args):
            self.session_scopes.add(self._scopes[-1])


def _qualified(provider: cst.MetadataDependent, node: cst.CSTNode) -> list[str]:
    names = provider.get_metadata(QualifiedNameProvider, node, set())
    return sorted(n.name for n in names if n.source == QualifiedNameSource.IMPORT)


def _api(provider: cst.MetadataDependent, node: cst.CSTNode) -> tuple[str, str] | None:
    for name in _qualified(provider, node):
        api = api_name(name)
        if api is not None:
            return api
    return None


# --- the passes ---------------------------------------------------------------------------
class _Pass(Codemod, cst.CSTTransformer):
    """One pass over a module: it surveys the module it is given (fresh name resolution),
    then, if :meth:`applies`, rewrites it. The report and the warnings go to the context;
    the imports it asks LibCST's ``AddImportsVisitor`` for are added after the last pass, as
    LibCST's ``CodemodCommand`` does after its transform.

    This is LibCST's ``ContextAwareTransformer`` without the matcher decorators, which
    this codemod does not use and whose set-up (a look at each of a transformer's thousand
    methods, 7 ms per instance) would make a small file's run several times as long."""

    METADATA_DEPENDENCIES = (QualifiedNameProvider, PositionProvider)

    def __init__(self, context: CodemodContext, *, notebook: bool):
        Codemod.__init__(self, context)
        cst.CSTTransformer.__init__(self)
        self.notebook = notebook
        self.survey: _Survey | None = None  # the survey of the module the pass was given

    def applies(self) -> bool:
        return True

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        self.survey = _Survey(self.notebook)
        self.context.wrapper.visit(self.survey)
        return tree.visit(self) if self.applies() else tree

    def report(self, node: cst.CSTNode, message: str) -> None:
        """A change made at ``node``."""
        self.context.scratch.setdefault(REPORT, []).append((self._line(node), message))

    def warn_at(self, node: cst.CSTNode, message: str) -> None:
        """Something at ``node`` left for a human."""
        self.warn(f"{self._line(node)}: {message}")

    def _line(self, node: cst.CSTNode) -> int:
        return self.get_metadata(PositionProvider, node).start.line


class _AddImports(AddImportsVisitor):
    """LibCST's ``AddImportsVisitor`` (the imports go after the module's leading imports,
    and none that is there already), without the blank line it puts between them and the
    code that follows: in a notebook that code starts the next cell, so the blank line
    would end the imports' cell."""

    def _insert_empty_line(self, statements: Sequence[cst.BaseStatement]) -> list[cst.BaseStatement]:
        return list(statements)

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        """An import added inside a ``# pylint: disable``/``enable`` pair goes after the pair:
        the pair exempts the imports that were there, not ours."""
        module = super().leave_Module(original, updated)
        body = list(module.body)
        empty = cst.Module([])
        there = {empty.code_for_node(statement) for statement in original.body}
        for index, statement in enumerate(body[:-1]):
            if index > 0 and empty.code_for_node(statement) not in there:
                body[index:index + 2] = _after_pylint_pair(module.header, body[:index], statement, body[index + 1])
        return module.with_changes(body=body)


def _after_pylint_pair(header: Sequence[cst.EmptyLine], before: Sequence[cst.BaseStatement],
                       added: cst.BaseStatement, following: cst.BaseStatement) -> list[cst.BaseStatement]:
    """``added`` (a statement put before ``following``), moved out of a ``# pylint:
    disable``/``enable`` pair that ``following``'s leading comments close: the pair
    exempts the code that was there, not ours."""
    lines = following.leading_lines
    closing = next((k for k, line in enumerate(lines)
                    if line.comment is not None and "pylint: enable" in line.comment.value), None)
    if closing is None or not _pylint_open([*header, *(line for s in before for line in s.leading_lines)]):
        return [added, following]
    return [added.with_changes(leading_lines=[*lines[:closing + 1], *added.leading_lines]),
            following.with_changes(leading_lines=lines[closing + 1:])]


def _pylint_open(lines: Sequence[cst.EmptyLine]) -> bool:
    """Whether a ``# pylint: disable`` comment among these comment lines is still open."""
    depth = 0
    for line in lines:
        text = line.comment.value if line.comment is not None else ""
        depth += ("pylint: disable" in text) - ("pylint: enable" in text)
    return depth > 0


# --- pass 1: the idioms -------------------------------------------------------------------
class _LegacyIdioms(_Pass):
    """The legacy profiling idioms and TF1 names, rewritten in place (see the module's
    docstring)."""

    def __init__(self, context: CodemodContext, *, notebook: bool):
        super().__init__(context, notebook=notebook)
        self._statements: list[cst.CSTNode] = []
        self._tfprof: dict[cst.CSTNode, list[str]] = {}  # statement -> the tfprof names used in it
        self._scopes: list[cst.CSTNode] = []
        self._graph_depth = 0

    def applies(self) -> bool:
        return self.survey.tf1 or self.survey.tfprof

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        result = super().transform_module_impl(tree)
        for node, advice in self.survey.missing:
            self.context.scratch.setdefault(MISSING, []).append((self._line(node), MISSING_PREFIX + advice))
        return result

    def _compat(self, name: str) -> cst.BaseExpression:
        """``tracebridge.compat.<name>``, for which the module needs ``import
        tracebridge.compat`` (added after this pass unless the module has it); or, in a
        module that imports from tracebridge.compat (``from tracebridge.compat import
        timeline``, as its timeline import becomes), ``<name>`` added to that import: one
        import of tracebridge.compat, not a second one beside it."""
        if self.survey.imports_compat or not self.survey.imports_from_compat:
            if not self.survey.imports_compat:
                AddImportsVisitor.add_needed_import(self.context, COMPAT)
            return _expression(f"{COMPAT}.{name}")
        AddImportsVisitor.add_needed_import(self.context, COMPAT, name)
        return cst.Name(name)

    # where we are: statement, scope, graph context
    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            self._statements.append(node)
        if isinstance(node, (cst.Module, cst.FunctionDef)):
            self._scopes.append(node)
        if isinstance(node, cst.With):
            self._graph_depth += _is_graph_context(node)
        return super().on_visit(node)

    def on_leave(self, original: cst.CSTNode, updated):
        result = super().on_leave(original, updated)
        if isinstance(original, cst.With):
            self._graph_depth -= _is_graph_context(original)
        if isinstance(original, cst.FunctionDef):
            self._scopes.pop()
        if isinstance(original, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            self._statements.pop()
            names = self._tfprof.pop(original, None)
            if names:  # one report line per statement, for its most specific tfprof name
                self.warn_at(original, tfprof_advice(max(names, key=len)))
        return result

    # imports
    def leave_Import(self, original: cst.Import, updated: cst.Import):
        aliases = []
        changed = False
        for alias in _import_names(updated):
            name = _dotted(alias.name)
            if name in ("tfvis", "tftracer"):
                alias = _with_alias(alias, "tracebridge.compat.tfvis")
                changed = True
            elif name == "tensorflow.python.client.timeline" and alias.asname is not None:
                alias = _with_alias(alias, "tracebridge.compat.timeline")
                changed = True
            aliases.append(alias)
        if not changed:
            return updated
        self.report(original, "import of a legacy profiling module -> tracebridge.compat")
        return updated.with_changes(names=_fix_commas(aliases))

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom):
        module = _dotted(updated.module) if updated.module is not None and not updated.relative else None
        target = None if module is None else _import_target(module)
        if target is None:
            return updated
        names = _import_names(updated)
        targets = {target(_dotted(a.name)) for a in names} if names else {None}
        if targets == {None}:
            return updated
        if len(targets) != 1:
            self.warn_at(original, f"from {module} import ...: mixes legacy profiling names with others; "
                                   "split it by hand")
            return updated
        new_module = targets.pop()
        self.report(original, f"from {module} import ... -> from {new_module} import ...")
        return updated.with_changes(module=_expression(new_module))

    # references
    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute):
        return self._reference(original, updated)

    def leave_Name(self, original: cst.Name, updated: cst.Name):
        return self._reference(original, updated)

    def _reference(self, original, updated):
        tfprof = [q for q in _qualified(self, original) if is_tfprof(q)]
        if tfprof and self._statements:
            self._tfprof.setdefault(self._statements[-1], []).extend(tfprof)
        api = _api(self, original)
        if api is None or not isinstance(original, cst.Attribute):
            return updated
        namespace, name = api
        if name in PROFILER_HOOKS:
            self.report(original, f"{_dotted(original)} -> tracebridge.compat.ProfilerHook")
            return self._compat("ProfilerHook")
        if not self.survey.tf1 or namespace != "v2":
            return updated
        return self._compat_v1(original, updated, name, call=None)

    def _compat_v1(self, original: cst.Attribute, updated: cst.BaseExpression, name: str,
                   call: cst.Call | None) -> cst.BaseExpression:
        """``tf.<name>`` -> ``tf.compat.v1.<name>`` where TF1's meaning needs it: always for
        names TF2 lacks; in graph code for names TF2 changed (for calls TF2 would read
        differently, when TF2's parameters are the first of TF1's)."""
        found = tf1_entry(name)
        if found is None or found[0] != name or name in TF2_KEPT:
            return updated
        entry = found[1]
        if not entry.missing:
            if not self.survey.in_graph_code(self._scopes, self._graph_depth):
                return updated
            if entry.shared is not None and (call is None or _call_fits(call, entry.shared)):
                return updated
        root = _root_name(original)
        if root is None or _dotted(original) != f"{root}.{name}":
            return updated  # `from tensorflow import summary; summary.scalar`: left as written
        self.report(original, f"{root}.{name} -> {root}.compat.v1.{name}")
        advice = deprecated_advice(name)
        if advice is not None:
            self.warn_at(original, advice)
        return _expression(f"{root}.compat.v1.{name}")

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if not self.survey.tf1 or not isinstance(original.func, cst.Attribute):
            return updated
        result = self._rewritten_call(original, updated)
        if not original.args:
            return result
        # Continuation lines aligned under the first argument stay aligned after the
        # parenthesis, which moves with the call's name (an argument put first, the
        # session of run_traced(sess, ...), does not move them further).
        empty = cst.Module([])
        shift = len(empty.code_for_node(result.func)) - len(empty.code_for_node(original.func))
        added = len(result.args) - len(updated.args)
        return result.with_changes(args=[*result.args[:added],
                                         *self._realigned(original, list(result.args[added:]), shift)])

    def _realigned(self, original: cst.Call, args: list[cst.Arg], shift: int) -> list[cst.Arg]:
        if shift == 0:
            return args
        first = self.get_metadata(PositionProvider, original.args[0]).start
        if first.line != self.get_metadata(PositionProvider, original.func).end.line:
            return args  # a hanging indent: the arguments start on a line of their own
        for index in range(1, len(original.args)):
            start = self.get_metadata(PositionProvider, original.args[index]).start
            whitespace = args[index - 1].comma.whitespace_after if args[index - 1].comma else None
            if start.column != first.column or not isinstance(whitespace, cst.ParenthesizedWhitespace):
                continue
            last = whitespace.last_line.value
            moved = last + " " * shift if shift > 0 else last[:shift] if last[shift:].strip() == "" and \
                len(last) >= -shift else last
            args[index - 1] = args[index - 1].with_changes(comma=args[index - 1].comma.with_changes(
                whitespace_after=whitespace.with_changes(last_line=cst.SimpleWhitespace(moved))))
        return args

    def _rewritten_call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        api = _api(self, original.func)
        if api is not None and api[0] == "v2":
            found = tf1_entry(api[1])
            if found is not None and found[0] == api[1] and found[1].shared is not None:
                updated = updated.with_changes(func=self._compat_v1(original.func, updated.func, api[1], original))
        func = updated.func
        if not isinstance(func, cst.Attribute):
            return updated
        if any(q.startswith("tracebridge") for q in _qualified(self, original.func.value)):
            return updated  # already migrated
        method = func.attr.value
        if method in TF1_DATASET_METHODS and not original.args and self.survey.tf2_dataset:
            self.warn_at(original, f"{_dotted(func.value) or 'dataset'}.{method}() is TF1's Dataset method, which "
                                   f"TF 2's tf.data.Dataset lacks: {TF1_DATASET_METHODS[method]}")
        if method == "run" and any(a.star == "**" and not _is_kwargs_attribute(a.value) for a in updated.args):
            # `**tl.kwargs` is tfvis's and tftracer's own idiom, which tracebridge.compat.tfvis serves.
            self.warn_at(original, f"{_dotted(func.value) or 'session'}.run(..., **kwargs) left as it is: if the "
                                   "kwargs hold options/run_metadata, it still traces on a local CPU session; "
                                   "tracebridge.compat.run_traced(session, ...) also traces under a TF2 profiler")
        if method == "run" and _traced_run(updated):
            self.report(original, f"{_dotted(func.value) or 'session'}.run(..., run_metadata=...) -> "
                                  "tracebridge.compat.run_traced(...)")
            return updated.with_changes(func=self._compat("run_traced"), args=[cst.Arg(func.value), *updated.args])
        if method == "add_run_metadata":
            self.report(original, f"{_dotted(func.value) or 'writer'}.add_run_metadata(...) -> "
                                  "tracebridge.compat.add_run_metadata(...)")
            return updated.with_changes(func=self._compat("add_run_metadata"),
                                        args=[cst.Arg(func.value), *updated.args])
        return updated


def _import_target(module: str):
    """For ``from MODULE import ...``: a function giving each imported name's new module
    (None: the name stays), or None when MODULE has nothing to move."""
    if module == "tensorflow.python.client":
        return lambda name: "tracebridge.compat" if name == "timeline" else None
    if module == "tensorflow.python.client.timeline":
        return lambda name: "tracebridge.compat.timeline"
    if module == "tfvis":
        return lambda name: "tracebridge.compat.tfvis"
    if module == "tftracer":  # tfvis's sibling: the same Timeline (its TracingServer has no equivalent)
        return lambda name: "tracebridge.compat.tfvis" if name in TFTRACER_DROP_INS else None
    if module == "tensorflow":  # `from tensorflow import gfile`: TF1 modules TF 2 lacks
        return lambda name: "tensorflow.compat.v1" if _tf1_only(name) else None
    api = api_name(module + ".ProfilerHook")
    if api is not None and api[1] in PROFILER_HOOKS:
        return lambda name: "tracebridge.compat" if name == "ProfilerHook" else None
    return None


def _tf1_only(name: str) -> bool:
    found = tf1_entry(name)
    return found is not None and found[0] == name and found[1].missing


def _fix_commas(aliases: list[cst.ImportAlias]) -> list[cst.ImportAlias]:
    """The last alias of an import carries no comma."""
    return [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) if i == len(aliases) - 1 else a
            for i, a in enumerate(aliases)]


def _root_name(node: cst.BaseExpression) -> str | None:
    while isinstance(node, cst.Attribute):
        node = node.value
    return node.value if isinstance(node, cst.Name) else None


def _call_fits(call: cst.Call, shared: tuple[str, ...]) -> bool:
    """Whether a call passes only arguments TF2's function takes the same way."""
    if any(a.star for a in call.args):
        return False
    positional = [a for a in call.args if a.keyword is None]
    keywords = [a.keyword.value for a in call.args if a.keyword is not None]
    return len(positional) <= len(shared) and all(k in shared for k in keywords)


def _is_kwargs_attribute(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Attribute) and node.attr.value == "kwargs"


def _traced_run(call: cst.Call) -> bool:
    """``x.run(fetches, feed_dict, options, run_metadata)`` with run metadata requested."""
    if any(a.keyword is not None and a.keyword.value == "run_metadata" for a in call.args):
        return True
    return sum(1 for a in call.args if a.keyword is None and not a.star) >= 4


def _is_header(statement: cst.BaseStatement, docstring_ok: bool) -> bool:
    """An import line (or, where allowed, a docstring)."""
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) or (
            docstring_ok and isinstance(s, cst.Expr) and isinstance(s.value, (cst.SimpleString, cst.ConcatenatedString)))
        for s in statement.body)


def _is_graph_context(node: cst.With) -> bool:
    """``with <something>.as_default():`` (a graph made default)."""
    return any(isinstance(item.item, cst.Call) and isinstance(item.item.func, cst.Attribute)
               and item.item.func.attr.value == "as_default" for item in node.items)


def _unindented_blanks(statement: cst.BaseStatement) -> cst.BaseStatement:
    """Blank lines at module level count as indented; moved into a block they would gain
    trailing spaces."""
    lines = [line.with_changes(indent=False) if line.comment is None else line
             for line in statement.leading_lines]
    return statement.with_changes(leading_lines=lines)


# --- pass 2: a graph for the sessions -------------------------------------------------------
class _GraphMode(_Pass):
    """Give the scopes that create sessions a graph (TF 2 executes eagerly). The strategies
    are the subclasses; :func:`rewrite_module` picks one."""

    def _tf(self) -> str:
        """How this file names ``tensorflow.compat.v1``."""
        if self.survey.tf_import is None:
            return "tensorflow.compat.v1"
        _, bound, module = self.survey.tf_import
        return bound if module == "tensorflow.compat.v1" else f"{bound}.compat.v1"


class _GraphBlocks(_GraphMode):
    """Wrap the graph code of each scope that creates sessions in
    ``with tf.compat.v1.Graph().as_default():``."""

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef):
        if original not in self.survey.graph_scopes:
            return updated
        body = self._wrapped(original, f"{original.name.value}()", list(updated.body.body))
        return updated.with_changes(body=updated.body.with_changes(body=body))

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        if original not in self.survey.graph_scopes:
            return updated
        return updated.with_changes(body=self._wrapped(original, "the module", list(updated.body)))

    def _wrapped(self, original: cst.CSTNode, where: str, body: list[cst.BaseStatement]) -> list:
        start = next((i for i, s in enumerate(body) if not isinstance(s, (cst.FunctionDef, cst.ClassDef))
                      and not _is_header(s, docstring_ok=True)), len(body))
        if start == len(body):
            return body
        graph = f"{self._tf()}.Graph().as_default()"
        node, what = self.survey.tf2 or (original, "TF2 code")
        self.report(original, f"graph mode: graph code of {where} wrapped in `with {graph}:`, as this file "
                              f"mixes TF1 and TF2 code ({what} at line {self._line(node)} needs eager execution)")
        first = body[start]
        block = cst.With(
            items=[cst.WithItem(_expression(graph))],
            body=cst.IndentedBlock(
                body=[first.with_changes(leading_lines=[]), *map(_unindented_blanks, body[start + 1:])],
                header=cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "),
                                              comment=cst.Comment(GRAPH_COMMENT))),
            leading_lines=first.leading_lines)
        return [*body[:start], block]


class _EagerOff(_GraphMode):
    """For a file of TF1 code only, and for a notebook, where a block cannot span cells:
    switch eager execution off once, after the TensorFlow import and the imports that follow
    it (up to a comment line: a cell boundary, a ``# pylint: enable``). Nothing else moves,
    so the diff is one line; code before the import (``os.environ[...] = ...``) stays first."""

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        if not self.survey.session_scopes:
            return updated
        switch = f"{self._tf()}.disable_eager_execution()"
        body = list(updated.body)
        found = self.survey.tf_import
        # The survey saw the original nodes; this pass adds no statement before the import.
        index = original.body.index(found[0]) + 1 if found is not None and found[0] in original.body else None
        if index is None:
            self.warn_at(original, f"sessions need graph mode: add `{switch}` after importing TensorFlow")
            return updated
        while index < len(body) and _is_header(body[index], docstring_ok=False) and not any(
                line.comment is not None for line in body[index].leading_lines):
            index += 1
        why = "a block cannot span a notebook's cells" if self.notebook else "all TF code here is TF1-style"
        self.report(found[0], f"graph mode: `{switch}` added after the TensorFlow import, as {why} "
                              "(TF 2 executes eagerly)")
        statement = cst.SimpleStatementLine(
            [cst.Expr(_expression(switch))],
            trailing_whitespace=cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "),
                                                       comment=cst.Comment(EAGER_COMMENT)))
        if index < len(body):
            body[index:index + 1] = _after_pylint_pair(updated.header, body[:index], statement, body[index])
        else:
            body.append(statement)
        return updated.with_changes(body=body)
