"""tests/sql/harness.py FILE.py - run the test_* functions of one SQL-level
test file and print PASS/FAIL/SKIP per test (tests/run.sh counts them).

Runs under /usr/bin/python3, whose sqlite3 module can load extensions.
Helpers for the tests live here too: connect() loads build/csq.so."""
import importlib.util
import os
import sqlite3
import sys
import tempfile
import traceback

EXT = os.environ.get("CSQ_EXT", os.path.join(os.path.dirname(__file__), "..", "..", "build", "csq.so"))


class Skip(Exception):
    pass


def connect(path=":memory:", **kw):
    """A connection with csq loaded; autocommit unless told otherwise."""
    kw.setdefault("isolation_level", None)
    con = sqlite3.connect(path, **kw)
    con.enable_load_extension(True)
    con.load_extension(EXT)
    return con


def tmpdir():
    return tempfile.mkdtemp(prefix="csq-test-")


def stats(con):
    return dict(con.execute("SELECT name, value FROM csq_stats").fetchall())


def expect_error(fn, *fragments):
    """fn() must raise sqlite3.Error whose message contains every fragment."""
    try:
        fn()
    except sqlite3.Error as e:
        msg = str(e)
        for f in fragments:
            assert f.lower() in msg.lower(), "error %r lacks %r" % (msg, f)
        return msg
    raise AssertionError("no error raised (expected %r)" % (fragments,))


def same_rows(a, b, what=""):
    assert len(a) == len(b), "%s: %d rows vs %d" % (what, len(a), len(b))
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            raise AssertionError("%s: row %d differs: %r vs %r" % (what, i, x, y))


def main(path):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.spec_from_file_location("t", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    base = os.path.basename(path)[:-3]
    bad = 0
    for name in sorted(n for n in dir(mod) if n.startswith("test_")):
        fn = getattr(mod, name)
        try:
            fn()
            print("PASS %s.%s" % (base, name), flush=True)
        except Skip as e:
            print("SKIP %s.%s: %s" % (base, name, e), flush=True)
        except Exception:
            bad += 1
            print("FAIL %s.%s" % (base, name), flush=True)
            traceback.print_exc(file=sys.stdout)
    return 0


if __name__ == "__main__":
    # tests import this file as "harness": let them share this module (its
    # Skip is the one main() catches)
    sys.modules["harness"] = sys.modules["__main__"]
    sys.exit(main(sys.argv[1]))
