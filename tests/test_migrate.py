"""The codemod (``tracebridge migrate``): one golden test per idiom and per way of importing
TensorFlow, notebooks, code it must leave alone, stability (a second run changes nothing) and
the command line. The migrated scripts really running under TF 2.21 is
tests/test_migration_examples.py."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.conftest import run_cli

pytest.importorskip("libcst")

from tracebridge.errors import MigrationError  # noqa: E402
from tracebridge.migrate import migrate_path, migrate_source  # noqa: E402

GRAPH = "# tracebridge: TF1 graph code runs in a graph (TF 2 executes eagerly)"
EAGER_OFF = ("tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode "
             "(TF 2 executes eagerly)")


def _code(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# (name, before, after): each idiom, and each way TF and its modules get imported.
CASES = [
    ("classic_timeline_snippet", """
        import tensorflow as tf
        from tensorflow.python.client import timeline

        x = tf.random_normal([1000, 1000])
        z = tf.matmul(x, x)

        run_options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
        run_metadata = tf.RunMetadata()

        with tf.Session() as sess:
            sess.run(z, options=run_options, run_metadata=run_metadata)
            trace = timeline.Timeline(run_metadata.step_stats)
            with open("timeline.json", "w") as handle:
                handle.write(trace.generate_chrome_trace_format())
        """, """
        import tensorflow as tf
        from tracebridge.compat import run_traced, timeline
        tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)

        x = tf.compat.v1.random_normal([1000, 1000])
        z = tf.matmul(x, x)

        run_options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
        run_metadata = tf.compat.v1.RunMetadata()

        with tf.compat.v1.Session() as sess:
            run_traced(sess, z, options=run_options, run_metadata=run_metadata)
            trace = timeline.Timeline(run_metadata.step_stats)
            with open("timeline.json", "w") as handle:
                handle.write(trace.generate_chrome_trace_format())
        """),
    ("compat_v1_alias_and_timeline_alias", """
        import tensorflow.compat.v1 as tf
        from tensorflow.python.client import timeline as tl

        z = tf.constant(1.0) + 2.0
        md = tf.RunMetadata()
        sess = tf.Session()
        sess.run(z, None, tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE), md)
        text = tl.Timeline(md.step_stats).generate_chrome_trace_format(show_memory=True)
        """, """
        import tensorflow.compat.v1 as tf
        from tracebridge.compat import run_traced, timeline as tl
        tf.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)

        z = tf.constant(1.0) + 2.0
        md = tf.RunMetadata()
        sess = tf.Session()
        run_traced(sess, z, None, tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE), md)
        text = tl.Timeline(md.step_stats).generate_chrome_trace_format(show_memory=True)
        """),
    ("timeline_imported_three_ways", """
        import tensorflow.python.client.timeline as tl1
        from tensorflow.python.client.timeline import Timeline
        from tensorflow.python.client import timeline
        """, """
        import tracebridge.compat.timeline as tl1
        from tracebridge.compat.timeline import Timeline
        from tracebridge.compat import timeline
        """),
    ("tfvis_monitored_session", """
        import tensorflow as tf
        from tfvis import Timeline

        step = tf.train.get_or_create_global_step()
        train_op = tf.assign_add(step, 1)
        with tf.train.MonitoredTrainingSession() as sess:
            with Timeline(horovod=True) as timeline:
                sess.run(train_op, **timeline.kwargs)
            timeline.to_pickle("example.pickle")
        Timeline.from_pickle("example.pickle").visualize("example.html")
        """, """
        import tensorflow as tf
        from tracebridge.compat.tfvis import Timeline
        tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)

        step = tf.compat.v1.train.get_or_create_global_step()
        train_op = tf.compat.v1.assign_add(step, 1)
        with tf.compat.v1.train.MonitoredTrainingSession() as sess:
            with Timeline(horovod=True) as timeline:
                sess.run(train_op, **timeline.kwargs)
            timeline.to_pickle("example.pickle")
        Timeline.from_pickle("example.pickle").visualize("example.html")
        """),
    ("import_tfvis", """
        import tfvis
        import os, tfvis as tv
        """, """
        import tracebridge.compat.tfvis as tfvis
        import os, tracebridge.compat.tfvis as tv
        """),
    ("profiler_hook_in_a_function", """
        import tensorflow as tf


        def train(output_dir):
            \"\"\"Train with a profiler hook.\"\"\"
            step = tf.train.get_or_create_global_step()
            hook = tf.train.ProfilerHook(save_steps=10, output_dir=output_dir)  # every 10 steps
            with tf.train.MonitoredTrainingSession(hooks=[hook]) as sess:
                sess.run(tf.assign_add(step, 1))
        """, """
        import tensorflow as tf
        import tracebridge.compat
        tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)


        def train(output_dir):
            \"\"\"Train with a profiler hook.\"\"\"
            step = tf.compat.v1.train.get_or_create_global_step()
            hook = tracebridge.compat.ProfilerHook(save_steps=10, output_dir=output_dir)  # every 10 steps
            with tf.compat.v1.train.MonitoredTrainingSession(hooks=[hook]) as sess:
                sess.run(tf.compat.v1.assign_add(step, 1))
        """),
    ("profiler_hook_imported_by_name", """
        from tensorflow.compat.v1.train import ProfilerHook
        from tensorflow.estimator import ProfilerHook as Hook

        hooks = [ProfilerHook(save_secs=30), Hook(save_steps=5)]
        """, """
        from tracebridge.compat import ProfilerHook
        from tracebridge.compat import ProfilerHook as Hook

        hooks = [ProfilerHook(save_secs=30), Hook(save_steps=5)]
        """),
    ("add_run_metadata_with_eager_off", """
        import tensorflow as tf

        tf.compat.v1.disable_eager_execution()

        with tf.compat.v1.Session() as sess:
            c = tf.constant([1.0]) + tf.constant([2.0])
            run_metadata = tf.compat.v1.RunMetadata()
            options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
            sess.run(c, options=options, run_metadata=run_metadata)
            writer = tf.compat.v1.summary.FileWriter('./logs', graph=sess.graph)
            writer.add_run_metadata(run_metadata, 'run_1')
            tf.summary.scalar("c", c[0])
        """, """
        import tensorflow as tf
        import tracebridge.compat

        tf.compat.v1.disable_eager_execution()

        with tf.compat.v1.Session() as sess:
            c = tf.constant([1.0]) + tf.constant([2.0])
            run_metadata = tf.compat.v1.RunMetadata()
            options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
            tracebridge.compat.run_traced(sess, c, options=options, run_metadata=run_metadata)
            writer = tf.compat.v1.summary.FileWriter('./logs', graph=sess.graph)
            tracebridge.compat.add_run_metadata(writer, run_metadata, 'run_1')
            tf.compat.v1.summary.scalar("c", c[0])
        """),
    ("changed_names_only_in_graph_code", """
        import tensorflow as tf

        @tf.function
        def tf2_part():
            tf.summary.scalar("loss", 1.0, step=0)
            return tf.constant([1.0], dtype=tf.float32)

        def tf1_part():
            a = tf.constant([1.0], verify_shape=True)
            b = tf.constant([2.0], tf.float32)
            with tf.Session() as sess:
                return sess.run(tf.summary.scalar("a", a[0] + b[0]))
        """, f"""
        import tensorflow as tf

        @tf.function
        def tf2_part():
            tf.summary.scalar("loss", 1.0, step=0)
            return tf.constant([1.0], dtype=tf.float32)

        def tf1_part():
            with tf.compat.v1.Graph().as_default():  {GRAPH}
                a = tf.compat.v1.constant([1.0], verify_shape=True)
                b = tf.constant([2.0], tf.float32)
                with tf.compat.v1.Session() as sess:
                    return sess.run(tf.compat.v1.summary.scalar("a", a[0] + b[0]))
        """),
    ("session_with_its_own_graph", """
        import tensorflow as tf

        graph = tf.Graph()
        with graph.as_default():
            x = tf.placeholder(tf.float32)
        sess = tf.Session(graph=graph)
        """, """
        import tensorflow as tf

        graph = tf.Graph()
        with graph.as_default():
            x = tf.compat.v1.placeholder(tf.float32)
        sess = tf.compat.v1.Session(graph=graph)
        """),
    ("import_added_before_code_right_after_the_imports", """
        import tensorflow as tf
        md = tf.RunMetadata()
        with tf.Session() as sess:
            sess.run(1, run_metadata=md)
        """, """
        import tensorflow as tf
        import tracebridge.compat
        tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)
        md = tf.compat.v1.RunMetadata()
        with tf.compat.v1.Session() as sess:
            tracebridge.compat.run_traced(sess, 1, run_metadata=md)
        """),
    ("tfprof_renamed_to_compat_v1", """
        import tensorflow as tf

        with tf.Session() as sess:
            profiler = tf.profiler.Profiler(sess.graph)
            tf.profiler.advise(sess.graph)
        """, """
        import tensorflow as tf
        tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)

        with tf.compat.v1.Session() as sess:
            profiler = tf.compat.v1.profiler.Profiler(sess.graph)
            tf.compat.v1.profiler.advise(sess.graph)
        """),
    ("tftracer_timeline", """
        import tensorflow as tf
        from tftracer import Timeline
        import tftracer

        y = tf.random_normal([4, 4])
        with tf.Session() as sess:
            with Timeline() as tl:
                sess.run(y, **tl.kwargs)
        tl.visualize("tftracer.html")
        """, """
        import tensorflow as tf
        from tracebridge.compat.tfvis import Timeline
        import tracebridge.compat.tfvis as tftracer
        tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)

        y = tf.compat.v1.random_normal([4, 4])
        with tf.compat.v1.Session() as sess:
            with Timeline() as tl:
                sess.run(y, **tl.kwargs)
        tl.visualize("tftracer.html")
        """),
    ("gfile_queue_runners_string_handle", """
        import tensorflow as tf
        from tensorflow import gfile

        name = tf.train.string_input_producer(["a"]).dequeue()
        handle = tf.placeholder(tf.string, [])
        value = tf.data.Iterator.from_string_handle(handle, tf.int64).get_next()
        with tf.Session() as sess:
            threads = tf.train.start_queue_runners(sess=sess)
            gfile.MakeDirs("out")
        """, """
        import tensorflow as tf
        from tensorflow.compat.v1 import gfile
        tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)

        name = tf.compat.v1.train.string_input_producer(["a"]).dequeue()
        handle = tf.compat.v1.placeholder(tf.string, [])
        value = tf.compat.v1.data.Iterator.from_string_handle(handle, tf.int64).get_next()
        with tf.compat.v1.Session() as sess:
            threads = tf.compat.v1.train.start_queue_runners(sess=sess)
            gfile.MakeDirs("out")
        """),
    ("mixed_file_session_in_callee", """
        import tensorflow as tf


        @tf.function
        def tf2_step(x):
            return x * 2


        def run(fetch):
            with tf.Session() as sess:
                return sess.run(fetch)


        def main():
            a = tf.random_normal([2, 2])
            return run(a)


        if __name__ == "__main__":
            print(tf2_step(tf.constant(1.0)).numpy(), main())
        """, """
        import tensorflow as tf


        @tf.function
        def tf2_step(x):
            return x * 2


        def run(fetch):
            with tf.compat.v1.Session() as sess:
                return sess.run(fetch)


        def main():
            with tf.compat.v1.Graph().as_default():  # tracebridge: TF1 graph code runs in a graph (TF 2 executes eagerly)
                a = tf.compat.v1.random_normal([2, 2])
                return run(a)


        if __name__ == "__main__":
            print(tf2_step(tf.constant(1.0)).numpy(), main())
        """),
    ("mixed_file_caller_entered_its_graph", """
        import tensorflow as tf


        def run(fetch):
            return tf.Session().run(fetch)


        def build():
            graph = tf.Graph()
            with graph.as_default():
                return run(tf.random_normal([2, 2]))


        print(tf.constant(1.0).numpy(), build())
        """, """
        import tensorflow as tf


        def run(fetch):
            return tf.compat.v1.Session().run(fetch)


        def build():
            graph = tf.Graph()
            with graph.as_default():
                return run(tf.compat.v1.random_normal([2, 2]))


        print(tf.constant(1.0).numpy(), build())
        """),
    ("environ_set_before_the_import", """
        import os
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
        import tensorflow as tf
        from tensorflow.python.client import timeline

        md = tf.RunMetadata()
        tf.Session().run(tf.ones([2]), options=tf.RunOptions(trace_level=3), run_metadata=md)
        """, """
        import os
        import tracebridge.compat
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
        import tensorflow as tf
        from tracebridge.compat import timeline
        tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)

        md = tf.compat.v1.RunMetadata()
        tracebridge.compat.run_traced(tf.compat.v1.Session(), tf.ones([2]), options=tf.compat.v1.RunOptions(trace_level=3), run_metadata=md)
        """),
    ("added_import_after_a_pylint_pair", """
        # pylint: disable=g-import-not-at-top
        import tensorflow as tf
        # pylint: enable=g-import-not-at-top
        md = tf.RunMetadata()
        tf.Session().run(tf.ones([2]), run_metadata=md)
        """, """
        # pylint: disable=g-import-not-at-top
        import tensorflow as tf
        # pylint: enable=g-import-not-at-top
        import tracebridge.compat
        tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)
        md = tf.compat.v1.RunMetadata()
        tracebridge.compat.run_traced(tf.compat.v1.Session(), tf.ones([2]), run_metadata=md)
        """),
    ("mixed_file_summary_in_a_helper", """
        import tensorflow as tf


        @tf.function
        def tf2_step(x):
            tf.summary.scalar("x", x, step=0)


        def add_summaries(tensor):
            tf.summary.histogram("h", tensor)


        def main():
            x = tf.placeholder(tf.float32)
            add_summaries(x)
            with tf.Session() as sess:
                sess.run(tf.summary.merge_all(), {x: 1.0})
        """, """
        import tensorflow as tf


        @tf.function
        def tf2_step(x):
            tf.summary.scalar("x", x, step=0)


        def add_summaries(tensor):
            tf.compat.v1.summary.histogram("h", tensor)


        def main():
            with tf.compat.v1.Graph().as_default():  # tracebridge: TF1 graph code runs in a graph (TF 2 executes eagerly)
                x = tf.compat.v1.placeholder(tf.float32)
                add_summaries(x)
                with tf.compat.v1.Session() as sess:
                    sess.run(tf.compat.v1.summary.merge_all(), {x: 1.0})
        """),
]


@pytest.mark.parametrize("name,before,after", CASES, ids=[c[0] for c in CASES])
def test_golden(name, before, after):
    result = migrate_source(_code(before))
    assert result.code == _code(after)
    assert result.changed and result.report  # every change is reported
    # Stable: the output migrated again is the same, and says nothing more.
    again = migrate_source(result.code)
    assert again.code == result.code and not again.changed


LEFT_ALONE = {
    "tf2_profiler_and_function": """
        import tensorflow as tf

        @tf.function
        def step(x):
            return tf.reduce_sum(x * 2)

        tf.profiler.experimental.start("logdir")
        step(tf.constant([1.0, 2.0]))
        tf.profiler.experimental.stop()
        tf.summary.scalar("x", 1.0, step=0)
        """,
    "keras_profile_batch": """
        import tensorflow as tf
        callback = tf.keras.callbacks.TensorBoard(log_dir="logs", profile_batch=(2, 4))
        """,
    "strings_and_comments_mention_legacy_apis": '''
        """Docs: call tf.Session().run(x, options=tf.RunOptions(), run_metadata=md)."""
        # from tensorflow.python.client import timeline
        text = "sess.run(z, run_metadata=md); writer.add_run_metadata(md, 'x')"
        ''',
    "already_migrated_by_hand": """
        import tensorflow.compat.v1 as tf
        tf.disable_v2_behavior()
        import tracebridge.compat
        x = tf.placeholder(tf.float32)
        md = tf.RunMetadata()
        with tf.Session() as sess:
            tracebridge.compat.run_traced(sess, x, {x: 1.0}, tf.RunOptions(trace_level=3), md)
        """,
    "shadowed_tf_name": """
        def f(tf):
            return tf.Session().run(1, run_metadata=None) if tf else tf.RunOptions
        """,
}


@pytest.mark.parametrize("name", sorted(LEFT_ALONE))
def test_left_alone(name):
    result = migrate_source(_code(LEFT_ALONE[name]))
    assert not result.changed, result.code
    assert result.report == []


def test_comments_strings_and_formatting_are_kept():
    before = _code('''
        import tensorflow as tf   # the TF1 API
        from tensorflow.python.client import timeline

        # Build the graph.  Two spaces after the period, on purpose.
        x = tf.random_normal([3,3])   # random_normal is TF1-only
        LABEL = "tf.random_normal stays in strings"
        y = tf.matmul( x , x )  # odd spacing stays

        sess = tf.Session()
        md = tf.RunMetadata()
        sess.run(y,
                 options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),  # trace it
                 run_metadata=md)
        ''')
    code = migrate_source(before).code
    for kept in ("import tensorflow as tf   # the TF1 API",
                 "\n# Build the graph.  Two spaces after the period, on purpose.\nx = ",
                 "   # random_normal is TF1-only",
                 'LABEL = "tf.random_normal stays in strings"',
                 "y = tf.matmul( x , x )  # odd spacing stays",
                 "run_traced(sess, y,\n"
                 "           options=tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE),  # trace it\n"
                 "           run_metadata=md)"):  # continuation lines stay aligned after the parenthesis
        assert kept in code
    compile(code, "<migrated>", "exec")


def test_a_traced_run_reads_as_a_user_would_write_it():
    """Issue 34: continuation lines align under the first argument after the new call's
    parenthesis (not 6 columns past it, under the argument that was first before); one
    import of tracebridge.compat, not a second ``import tracebridge.compat`` after ``from
    tracebridge.compat import timeline``; and ``tf.data.Dataset``, which TF 2 has and runs
    in graph mode too, is left as TF2 code."""
    before = _code("""
        import tensorflow as tf
        from tensorflow.python.client import timeline

        dataset = tf.data.Dataset.from_tensor_slices([1.0, 2.0, 3.0]).batch(1)
        value = tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()
        train_op = value * 2.0
        sess = tf.Session()
        run_options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
        run_metadata = tf.RunMetadata()
        sess.run(train_op,
                 options=run_options,
                 run_metadata=run_metadata)
        tl = timeline.Timeline(run_metadata.step_stats)
        """)
    code = migrate_source(before).code
    lines = code.splitlines()
    call = next(i for i, line in enumerate(lines) if "run_traced(sess, train_op," in line)
    column = lines[call].index("(") + 1
    assert lines[call + 1] == " " * column + "options=run_options,", code
    assert lines[call + 2] == " " * column + "run_metadata=run_metadata)", code
    assert [line for line in lines if "tracebridge" in line and "import" in line] == \
        ["from tracebridge.compat import run_traced, timeline"], code
    assert "dataset = tf.data.Dataset.from_tensor_slices([1.0, 2.0, 3.0]).batch(1)" in code
    assert "compat.v1.data.Dataset" not in code
    compile(code, "<migrated>", "exec")
    assert not migrate_source(code).changed  # stable
    # TF1's own Dataset methods, which TF 2's Dataset lacks, are named with their replacement
    legacy = migrate_source(before.replace("tf.compat.v1.data.make_one_shot_iterator(dataset)",
                                           "dataset.make_one_shot_iterator()"))
    assert any("dataset.make_one_shot_iterator() is TF1's Dataset method" in message and
               "tf.compat.v1.data.make_one_shot_iterator(dataset)" in message for _, message in legacy.report)


def _notebook(*cells: tuple[str, str]) -> str:
    return json.dumps({"cells": [
        {"cell_type": kind, "metadata": {}, "source": textwrap.dedent(src).lstrip("\n").splitlines(keepends=True),
         **({"outputs": [], "execution_count": None} if kind == "code" else {})}
        for kind, src in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"


def test_notebook_cells_resolve_across_cells_and_keep_magics(tmp_path):
    path = tmp_path / "profile.ipynb"
    path.write_text(_notebook(
        ("markdown", "# Profiling with tf.Session\n"),
        ("code", """
            %matplotlib inline
            import tensorflow as tf
            from tensorflow.python.client import timeline as tl
            """),
        ("code", """
            x = tf.random_normal([10, 10])
            md = tf.RunMetadata()
            """),
        ("code", """
            sess = tf.Session()
            sess.run(tf.matmul(x, x), options=tf.RunOptions(trace_level=3), run_metadata=md)
            !ls -l
            tl.Timeline(md.step_stats).generate_chrome_trace_format()
            """),
        ("code", "print('untouched cell')\n"),
    ))
    result = migrate_path(path)
    cells = ["".join(c["source"]) for c in json.loads(result.code)["cells"]]
    assert cells[0] == "# Profiling with tf.Session\n"
    assert cells[1] == _code("""
        %matplotlib inline
        import tensorflow as tf
        from tracebridge.compat import run_traced, timeline as tl
        tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)
        """)
    assert cells[2] == "x = tf.compat.v1.random_normal([10, 10])\nmd = tf.compat.v1.RunMetadata()\n"
    assert "run_traced(sess, tf.matmul(x, x), options=tf.compat.v1.RunOptions(" in cells[3]
    assert "\n!ls -l\n" in cells[3]
    assert cells[4] == "print('untouched cell')\n"
    assert any(line.startswith(f"{path}: cell 4, line 2: sess.run") for line in result.report_lines())
    # Written and migrated again: nothing changes.
    path.write_text(result.code)
    assert not migrate_path(path).changed


def test_notebook_imports_cell_keeps_its_last_line(tmp_path):
    """The import added at the end of a cell of imports ends the cell as its last line
    did: without a newline (a notebook cell's last line has none)."""
    path = tmp_path / "imports.ipynb"
    path.write_text(_notebook(("code", "import tensorflow as tf"),
                              ("code", "sess = tf.Session()\nsess.run(1, run_metadata=md)")))
    cells = [c["source"] for c in json.loads(migrate_path(path).code)["cells"]]
    assert cells[0][-1] == EAGER_OFF
    assert cells[1] == ["sess = tf.compat.v1.Session()\n", "tracebridge.compat.run_traced(sess, 1, run_metadata=md)"]


def test_cli_diff_check_write(tmp_path):
    script = tmp_path / "legacy.py"
    script.write_text("import tensorflow as tf\nmd = tf.RunMetadata()\n")
    modern = tmp_path / "modern.py"
    modern.write_text("import tensorflow as tf\nprint(tf.constant(1))\n")
    script.chmod(0o755)

    diff = run_cli("migrate", str(tmp_path))
    assert diff.returncode == 0
    assert "-md = tf.RunMetadata()" in diff.stdout and "+md = tf.compat.v1.RunMetadata()" in diff.stdout
    assert f"{script}:2: tf.RunMetadata -> tf.compat.v1.RunMetadata" in diff.stderr
    assert script.read_text() == "import tensorflow as tf\nmd = tf.RunMetadata()\n"  # --diff writes nothing

    assert run_cli("migrate", "--check", str(tmp_path)).returncode == 1
    written = run_cli("migrate", "--write", str(tmp_path))
    assert written.returncode == 0 and "rewrote 1 file" in written.stderr
    assert script.read_text() == "import tensorflow as tf\nmd = tf.compat.v1.RunMetadata()\n"
    assert script.stat().st_mode & 0o777 == 0o755
    assert modern.read_text() == "import tensorflow as tf\nprint(tf.constant(1))\n"
    check = run_cli("migrate", "--check", str(tmp_path))
    assert check.returncode == 0, check.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["legacy.py", "modern.py"]  # no temp files


def test_cli_bad_input_one_line_each_and_exit_2(tmp_path):
    good = tmp_path / "good.py"
    good.write_text("import tensorflow as tf\nsess = tf.Session()\n")
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"# caf\xe9\n")
    notebook = tmp_path / "bad.ipynb"
    notebook.write_text("{not json")
    result = run_cli("migrate", "--write", str(tmp_path))
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 3 and "Traceback" not in result.stderr
    assert any(f"{broken}:1:" in e and "not valid Python" in e for e in errors)
    assert any(f"{latin}: byte 5: not UTF-8" in e for e in errors)
    assert any(f"{notebook}: not a Jupyter notebook" in e for e in errors)
    assert "tf.compat.v1.Session()" in good.read_text()  # the good file is still migrated
    assert broken.read_text() == "def f(:\n"
    missing = run_cli("migrate", str(tmp_path / "nope"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1


def test_unparseable_source_is_a_migration_error():
    with pytest.raises(MigrationError, match=r"x\.py:1:\d+: not valid Python"):
        migrate_source("def f(:\n", "x.py")


MISSING_SCRIPT = _code("""
    import tensorflow as tf
    import tensorflow.contrib.slim as slim
    from tensorflow.examples.tutorials.mnist import input_data
    from tftracer import TracingServer

    x = tf.placeholder(tf.float32, [None, 4])
    y = slim.fully_connected(tf.layers.dense(x, 3), 2)
    estimator = tf.estimator.Estimator(model_fn=None)
    with tf.Session() as sess:
        sess.run(y, **run_kwargs)
    """)


def test_what_tf_2_21_lacks_is_named_line_by_line():
    result = migrate_source(MISSING_SCRIPT, "lacking.py")
    lines = result.report_lines()
    missing = [line for line in lines if ": not in TF 2.21: " in line]
    for line, what in [(2, "tf.contrib.slim was removed in TF 2.0: `pip install tf-slim`"),
                       (3, "tensorflow.examples (tutorials' input_data) is not installed"),
                       (4, "tftracer's TracingServer (a live HTTP trace viewer) has no equivalent"),
                       (7, "tf.contrib.slim"), (7, "needs `pip install tf_keras` and TF_USE_LEGACY_KERAS=1"),
                       (8, "tf.estimator was removed in TF 2.16")]:
        assert any(entry.startswith(f"lacking.py:{line}: not in TF 2.21: ") and what in entry
                   for entry in missing), (line, what, missing)
    assert {line for line, _ in result.missing} == {2, 3, 4, 7, 8}
    assert any(entry.startswith("lacking.py:10: sess.run(..., **kwargs) left as it is") and "local CPU" in entry
               for entry in lines)


def test_check_fails_on_what_tf_2_21_lacks_even_when_nothing_changes(tmp_path):
    lacking = tmp_path / "lacking.py"
    lacking.write_text("import tensorflow.contrib.slim as slim\n")
    assert not migrate_path(lacking).changed
    check = run_cli("migrate", "--check", str(lacking))
    assert check.returncode == 1
    assert f"{lacking}:1: not in TF 2.21: tf.contrib.slim" in check.stderr
    assert "1 file uses what TF 2.21 lacks" in check.stderr
    assert run_cli("migrate", str(lacking)).returncode == 0  # only --check gates


def test_syntax_error_points_at_its_own_line():
    with pytest.raises(MigrationError, match=r"^x\.py:2:6: not valid Python: '\(' was never closed"):
        migrate_source("x = 1\ny = f(1,\n", "x.py")


def test_tfprof_report_offers_tracebridge_equivalents():
    result = migrate_source(_code("""
        import tensorflow as tf
        from tensorflow.python.profiler import model_analyzer

        with tf.Session() as sess:
            profiler = tf.profiler.Profiler(sess.graph)
            model_analyzer.profile(sess.graph, cmd="op")
        """))
    messages = [message for _, message in result.report]
    assert "tf.profiler.Profiler -> tf.compat.v1.profiler.Profiler" in messages
    assert any(m.startswith("tfprof's Profiler runs under TF 2.21 in graph mode (tf.compat.v1.profiler); "
                            "tracebridge's equivalent: trace the steps with tracebridge.trace(session)")
               for m in messages)
    assert any(m.startswith("tfprof's profile") and "summary(top=N)" in m for m in messages)
    assert "model_analyzer.profile(sess.graph" in result.code  # TF's own module, still there in 2.21
