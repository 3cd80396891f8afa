"""The LibCST codemod: legacy TF1 profiling code to tracebridge calls that run under TF 2.

Passes over one module, each a LibCST ``Codemod`` transformer with fresh name resolution
(:class:`_Pass`), sharing one ``CodemodContext``:

1. :class:`_LegacyIdioms` replaces the legacy idioms in place: imports of ``timeline``,
   ``tfvis`` and ``ProfilerHook`` go to :mod:`tracebridge.compat`; ``x.run(...,
   run_metadata=m)`` becomes ``tracebridge.compat.run_traced(x, ...)`` and
   ``w.add_run_metadata(...)`` ``tracebridge.compat.add_run_metadata(w, ...)``; TF1 names
   TF2 lacks (``tf.Session``, ``tf.RunOptions``) become ``tf.compat.v1.*``, and in graph code
   so do names TF2 changed (``tf.summary.scalar``). tfprof gets a ``# tracebridge:`` comment,
   not a rewrite. LibCST's ``AddImportsVisitor`` then adds the ``import tracebridge.compat``
   the new calls need.
2. Sessions get a graph, as TF 2 executes eagerly, by one of the :class:`_GraphMode`
   strategies: :class:`_GraphBlocks` runs graph code under ``with
   tf.compat.v1.Graph().as_default():``; in a notebook, where a block cannot span cells,
   :class:`_EagerOff` calls ``tf.compat.v1.disable_eager_execution()`` after the TensorFlow
   import.

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

from .names import EAGER_SWITCHES, PROFILER_HOOKS, SESSIONS, api_name, is_tfprof, tf1_entry, tfprof_advice

MARK = "# tracebridge:"
GRAPH_COMMENT = f"{MARK} TF1 graph code runs in a graph (TF 2 executes eagerly)"
EAGER_COMMENT = f"{MARK} the sessions below need graph mode (TF 2 executes eagerly)"
REPORT = "tracebridge.migrate.report"  # context.scratch: (line, message) of every change


@dataclass
class Rewritten:
    """The codemod's output for one module: the new code and a line per change or note."""

    code: str
    report: list[tuple[int, str]] = field(default_factory=list)


def rewrite_module(code: str, *, notebook: bool = False) -> Rewritten:
    """Rewrite one module's source (raises ``libcst.ParserSyntaxError`` if it is not Python).
    ``notebook``: the module is a notebook's cells joined, so graph code cannot be wrapped in
    a block; eager execution is switched off after the TensorFlow import instead."""
    context = CodemodContext()
    idioms = _LegacyIdioms(context, notebook=notebook)
    module = idioms.transform_module(cst.parse_module(code))
    if idioms.survey.tf1 and not idioms.survey.eager_off:
        graph_mode = _EagerOff if notebook else _GraphBlocks
        module = graph_mode(context, notebook=notebook).transform_module(module)
    return Rewritten(module.code, _report_lines(context))


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


def _comment_line(text: str) -> cst.EmptyLine:
    return cst.EmptyLine(comment=cst.Comment(f"{MARK} {text}"))


def _has_comment(node: cst.CSTNode, text: str) -> bool:
    return any(line.comment is not None and line.comment.value == f"{MARK} {text}"
               for line in getattr(node, "leading_lines", ()))


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
    RunOptions, timeline, tfvis, ProfilerHook, add_run_metadata)? Does it use tfprof? Is
    eager execution switched off? Which scopes (module, function bodies) create sessions
    without a graph? How is TensorFlow imported? Is ``tracebridge.compat`` imported (anywhere)?"""

    METADATA_DEPENDENCIES = (QualifiedNameProvider,)

    def __init__(self, notebook: bool):
        super().__init__()
        self.notebook = notebook
        self.tf1 = False
        self.tfprof = False
        self.eager_off = False
        self.imports_compat = False
        self.session_scopes: set[cst.CSTNode] = set()
        self.tf_import: tuple[cst.SimpleStatementLine, str, str] | None = None  # (statement, bound, module)
        self._scopes: list[cst.CSTNode] = []
        self._graph_depth = 0
        self._statement: cst.SimpleStatementLine | None = None

    def api(self, node: cst.CSTNode) -> tuple[str, str] | None:
        return _api(self, node)

    def in_graph_code(self, scopes: list[cst.CSTNode], graph_depth: int) -> bool:
        """Code that will run in a graph: TF1's meaning of a name applies there."""
        return (graph_depth > 0 or self.eager_off or (self.notebook and bool(self.session_scopes))
                or any(scope in self.session_scopes for scope in scopes))

    # scopes and graph contexts
    def visit_Module(self, node: cst.Module) -> None:
        self._scopes.append(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
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
            if name in ("tfvis", "tensorflow.python.client.timeline"):
                self.tf1 = True
            if name in ("tensorflow", "tensorflow.compat.v1") and self.tf_import is None and len(self._scopes) == 1:
                # `import tensorflow.compat.v1` without `as` binds `tensorflow`, not v1.
                if alias.asname is not None or name == "tensorflow":
                    bound = alias.asname.name.value if alias.asname else name
                    self.tf_import = (self._statement, bound, name)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = _dotted(node.module) if node.module is not None and not node.relative else None
        if module is not None and _import_target(module) is not None:
            self.tf1 = True

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._reference(node)

    def visit_Name(self, node: cst.Name) -> None:
        self._reference(node)

    def _reference(self, node) -> None:
        if any(is_tfprof(q) for q in _qualified(self, node)):
            self.tfprof = True
            return
        api = self.api(node)
        if api is None:
            return
        namespace, name = api
        entry = tf1_entry(name)
        if name in SESSIONS or name in PROFILER_HOOKS or name in ("RunOptions", "RunMetadata") or (
                namespace == "v2" and entry is not None and entry[1].missing):
            self.tf1 = True

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "add_run_metadata":
            self.tf1 = True
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
    the imports it asks LibCST's ``AddImportsVisitor`` for are added after it, as LibCST's
    ``CodemodCommand`` does.

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

    def transform_module(self, tree: cst.Module) -> cst.Module:
        tree = super().transform_module(tree)
        needed = self.context.scratch.pop(AddImportsVisitor.CONTEXT_KEY, [])
        # AddImportsVisitor reads no metadata: it visits the module as it is, uncopied.
        return tree.visit(_AddImports(self.context, needed)) if needed else tree

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


# --- pass 1: the idioms -------------------------------------------------------------------
class _LegacyIdioms(_Pass):
    """The legacy profiling idioms and TF1 names, rewritten in place (see the module's
    docstring)."""

    def __init__(self, context: CodemodContext, *, notebook: bool):
        super().__init__(context, notebook=notebook)
        self._statements: list[cst.CSTNode] = []
        self._tfprof: dict[cst.CSTNode, str] = {}
        self._scopes: list[cst.CSTNode] = []
        self._graph_depth = 0

    def applies(self) -> bool:
        return self.survey.tf1 or self.survey.tfprof

    def _compat(self, name: str) -> cst.BaseExpression:
        """``tracebridge.compat.<name>``, for which the module needs ``import
        tracebridge.compat`` (added after this pass unless the module has it)."""
        if not self.survey.imports_compat:
            AddImportsVisitor.add_needed_import(self.context, "tracebridge.compat")
        return _expression(f"tracebridge.compat.{name}")

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
            comment = self._tfprof.get(original)
            if comment is not None and not _has_comment(result, comment):
                result = result.with_changes(leading_lines=[*result.leading_lines, _comment_line(comment)])
        return result

    # imports
    def leave_Import(self, original: cst.Import, updated: cst.Import):
        aliases = []
        changed = False
        for alias in _import_names(updated):
            name = _dotted(alias.name)
            if name == "tfvis":
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
        targets = {target(_dotted(a.name)) for a in names}
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
        if tfprof:
            # One comment per statement, named after the first tfprof name met in it.
            statement = self._statements[-1] if self._statements else None
            if statement is not None and statement not in self._tfprof:
                comment, line = tfprof_advice(tfprof[0])
                self._tfprof[statement] = comment
                if not _has_comment(statement, comment):
                    self.warn_at(original, line)
            return updated
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
        if found is None or found[0] != name:
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
        return _expression(f"{root}.compat.v1.{name}")

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if not self.survey.tf1 or not isinstance(original.func, cst.Attribute):
            return updated
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
    api = api_name(module + ".ProfilerHook")
    if api is not None and api[1] in PROFILER_HOOKS:
        return lambda name: "tracebridge.compat" if name == "ProfilerHook" else None
    return None


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
        if original not in self.survey.session_scopes:
            return updated
        body = self._wrapped(original, f"{original.name.value}()", list(updated.body.body))
        return updated.with_changes(body=updated.body.with_changes(body=body))

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        if original not in self.survey.session_scopes:
            return updated
        return updated.with_changes(body=self._wrapped(original, "the module", list(updated.body)))

    def _wrapped(self, original: cst.CSTNode, where: str, body: list[cst.BaseStatement]) -> list:
        start = next((i for i, s in enumerate(body) if not isinstance(s, (cst.FunctionDef, cst.ClassDef))
                      and not _is_header(s, docstring_ok=True)), len(body))
        if start == len(body):
            return body
        graph = f"{self._tf()}.Graph().as_default()"
        self.report(original, f"graph code of {where} wrapped in `with {graph}:` (TF 2 executes eagerly)")
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
    """For a notebook, where a block cannot span cells: switch eager execution off after
    the TensorFlow import."""

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
        self.report(found[0], f"notebook: `{switch}` added after the TensorFlow import (TF 2 executes eagerly)")
        statement = cst.SimpleStatementLine(
            [cst.Expr(_expression(switch))],
            trailing_whitespace=cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "),
                                                       comment=cst.Comment(EAGER_COMMENT)))
        body.insert(index, statement)
        return updated.with_changes(body=body)
