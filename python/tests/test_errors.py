"""Errors: each status maps to its exception carrying the C message; bad
input changes nothing; closed handles raise instead of crashing."""

from __future__ import annotations

import ctypes
import gc
import weakref

import pytest

import shared_cache_index as sci
from shared_cache_index import _capi, _library, errors
from shared_cache_index.layout import check_status


def test_every_status_of_the_header_has_its_class() -> None:
    statuses = {name: getattr(_capi, name) for name in dir(_capi) if name.startswith("SCI_ERR_")}
    classes = {s: type(errors.from_status(s, "m")) for s in statuses.values()}
    assert classes == {
        1: sci.InvalidArgument, 2: sci.DecodeError, 3: sci.IOFailure, 4: sci.NoMemory,
        5: sci.BufferTooSmall, 6: sci.InternalError,
    }
    for status, cls in classes.items():
        e = errors.from_status(status, "the message")
        assert isinstance(e, sci.Error) and e.status == status and e.message == "the message" == str(e)
    unknown = errors.from_status(99, "m")
    assert type(unknown) is sci.Error and unknown.status == 99


def test_invalid_argument_carries_the_c_message() -> None:
    with pytest.raises(sci.InvalidArgument) as e:
        sci.Layout(0)
    assert e.value.status == _capi.SCI_ERR_INVALID_ARGUMENT
    assert e.value.message == "sci_layout_new: spec->page_size is 0"
    # The message is sci_last_error() of that call, on this thread.
    assert _library.api().last_error().decode() == e.value.message


def test_a_malformed_message_is_a_decode_error_and_changes_nothing() -> None:
    with sci.Index() as ix:
        ix.apply_events(1, [sci.Event.stored("k")])
        with pytest.raises(sci.DecodeError) as e:
            ix.apply_message([b"", b"\0" * 8, b"\xc1 not msgpack"])
        assert e.value.status == _capi.SCI_ERR_DECODE and e.value.message
        s = ix.stats()
        assert (s["keys"], s["last_sequence"], s["malformed_messages"]) == (1, 1, 1)


def test_a_too_small_buffer_maps_to_buffer_too_small_with_the_c_message() -> None:
    # The package always sizes its buffers, so the status is provoked with a
    # raw call; the package's status check turns it into the exception.
    api = _library.api()
    with sci.Index() as ix, sci.Layout(4) as lay:
        tokens = (ctypes.c_uint32 * 16)()
        hits = (ctypes.c_uint8 * 1)()
        result = _capi.init(_capi.sci_page_result)
        status = api.index_check_pages(ix._handle, lay._handle, ctypes.addressof(tokens), 16, 4,
                                       ctypes.addressof(hits), 1, ctypes.addressof(result))
        assert status == _capi.SCI_ERR_BUFFER_TOO_SMALL
        with pytest.raises(sci.BufferTooSmall) as e:
            check_status(api, status)
        assert e.value.message and "hits" in e.value.message
        # Through the API the same request simply answers.
        assert ix.check_pages(lay, list(range(16))).n_pages == 4


@pytest.mark.parametrize("text, words", [
    ("", "JSON"),
    ("[1, 2]", "object"),
    ('{"tp_size": 2}', "page_size"),
    ('{"page_size": "64"}', "page_size"),
    ('{"page_size": 0}', "page_size"),
    ('{"page_size": 64', ""),
    (b'{"vllm_mooncake_store": {"schema_version": 1}}', ""),
])
def test_bad_layout_json_raises_invalid_argument_naming_the_problem(text: str | bytes, words: str) -> None:
    with pytest.raises(sci.InvalidArgument) as e:
        sci.Layout.from_json(text)
    assert e.value.message.startswith("sci_layout_new_json") or e.value.message
    assert words in e.value.message


def test_bad_input_changes_nothing() -> None:
    with sci.Index() as ix:
        ix.apply_events(1, [sci.Event.stored("a")])
        with pytest.raises(TypeError):
            ix.apply_events(2, [sci.Event.stored("b"), "not an event"])  # type: ignore[list-item]
        with pytest.raises(sci.InvalidArgument):
            ix.apply_events(-1, [sci.Event.stored("b")])
        s = ix.stats()
        assert (s["keys"], s["last_sequence"], ix.contains("b")) == (1, 1, False)
        with pytest.raises(TypeError):
            ix.apply_message(["not bytes"])  # type: ignore[list-item]
        with pytest.raises(sci.InvalidArgument):
            ix.check_pages(sci.Layout(4), [1, 2, 3, 4], block_size=-1)
        assert ix.stats()["queries"] == 0


def test_closed_handles_raise_and_never_crash() -> None:
    ix = sci.Index()
    lay = sci.Layout(4)
    ix.close()
    ix.close()  # twice: nothing
    assert ix.closed
    calls = [
        lambda: ix.apply_events(1, [sci.Event.stored("a")]), lambda: ix.apply_message([b""]),
        lambda: ix.contains("a"), ix.stats, ix.prometheus, ix.clear, ix.note_reconnect,
        lambda: ix.check_pages(lay, [1, 2, 3, 4]), lambda: ix.check_prefix(lay, [1]),
        lambda: ix.check_tiers(lay, [1]), lambda: ix.check_page_hashes(lay, []),
        lambda: ix.check_block_hashes(lay, event_hashes=[1]), lambda: sci.Subscriber(ix, "tcp://127.0.0.1:1"),
    ]
    for call in calls:
        with pytest.raises(sci.Error) as e:
            call()
        assert "Index is closed" in e.value.message

    live = sci.Index()
    lay.close()
    lay.close()
    for call in (lambda: live.check_pages(lay, [1]), lambda: live.check_prefix(lay, [1]),
                 lambda: live.check_tiers(lay, [1]), lambda: lay.block_size, lambda: lay.family,
                 lambda: live.check_page_hashes(lay, [])):
        with pytest.raises(sci.Error) as e:
            call()
        assert "Layout is closed" in e.value.message
    with sci.Layout(4) as inside:
        pass
    assert inside.closed
    for call in (lambda: live.check_pages(None, [1]), lambda: live.check_prefix("layout", [1]),  # type: ignore
                 lambda: live.check_tiers(object(), [1])):  # type: ignore
        with pytest.raises(TypeError):
            call()
    live.close()


def test_a_stopped_subscriber_refuses_retarget() -> None:
    with sci.Index() as ix:
        sub = sci.Subscriber(ix, "tcp://127.0.0.1:9")
        sub.stop()
        sub.stop()
        assert not sub.running
        with pytest.raises(sci.Error) as e:
            sub.retarget("tcp://127.0.0.1:10")
        assert "Subscriber is closed" in e.value.message


def test_subscriber_errors_carry_the_c_message() -> None:
    with sci.Index() as ix:
        with pytest.raises(sci.InvalidArgument) as e:
            sci.Subscriber(ix, "127.0.0.1:5557")
        assert "127.0.0.1:5557" in e.value.message
        with pytest.raises(sci.InvalidArgument) as e:
            sci.Subscriber(ix, "tcp://127.0.0.1:9", snapshot_url="ftp://x/y")
        assert e.value.message
        with pytest.raises(sci.InvalidArgument) as e:
            sci.Subscriber(ix, "tcp://127.0.0.1:9", reconnect_policy=7)
        assert "reconnect_policy" in e.value.message
        with pytest.raises(TypeError):
            sci.Subscriber(ix, "tcp://127.0.0.1:9", reconnect_msec=5)
        with sci.Subscriber(ix, "tcp://127.0.0.1:9"):
            with pytest.raises(sci.InvalidArgument) as e:  # one subscriber per index
                sci.Subscriber(ix, "tcp://127.0.0.1:10")
            assert e.value.message
        with sci.Subscriber(ix, "tcp://127.0.0.1:10"):  # after stop the index takes a new one
            pass


def test_handles_are_freed_exactly_once() -> None:
    api = _library.api()
    real = {"index_free": api.index_free, "layout_free": api.layout_free}
    freed: list[tuple[str, int]] = []
    for name, function in real.items():
        setattr(api, name, lambda h, name=name, function=function: (freed.append((name, h)), function(h)))
    try:  # the handles below capture the counting functions at creation
        closed_ix, closed_lay = sci.Index(), sci.Layout(4)
        handles = [("index_free", closed_ix._handle), ("layout_free", closed_lay._handle)]
        closed_ix.close(), closed_lay.close(), closed_ix.close(), closed_lay.close()
        del closed_ix, closed_lay
        gc.collect()
        assert freed == handles
        freed.clear()
        dropped_ix, dropped_lay = sci.Index(), sci.Layout(4)
        handles = [("index_free", dropped_ix._handle), ("layout_free", dropped_lay._handle)]
        refs = [weakref.ref(dropped_ix), weakref.ref(dropped_lay)]
        del dropped_ix, dropped_lay
        gc.collect()
        assert [r() for r in refs] == [None, None]
        assert sorted(freed) == sorted(handles)
    finally:
        for name, function in real.items():
            setattr(api, name, function)


def test_handles_left_open_are_freed_once_at_interpreter_exit() -> None:
    import subprocess
    import sys

    from conftest import PYTHON_DIR

    program = """
import shared_cache_index as sci
from shared_cache_index import _library
api = _library.api()
real_index, real_layout, real_stop = api.index_free, api.layout_free, api.subscriber_stop
api.index_free = lambda h: (print("index_free", flush=True), real_index(h))
api.layout_free = lambda h: (print("layout_free", flush=True), real_layout(h))
api.subscriber_stop = lambda h: (print("subscriber_stop", flush=True), real_stop(h))
ix = sci.Index()
lay = sci.Layout(4)
sub = sci.Subscriber(ix, "tcp://127.0.0.1:9")
keep = [ix, lay, sub]
print("exiting", flush=True)
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60,
                          cwd=str(PYTHON_DIR))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "exiting"
    # Each once; the subscriber (newer) stopped before its index is freed.
    assert sorted(lines[1:]) == ["index_free", "layout_free", "subscriber_stop"]
    assert lines.index("subscriber_stop") < lines.index("index_free")


def test_an_index_and_its_subscriber_collected_in_one_cycle_stop_before_free() -> None:
    """An Index and its running Subscriber that become garbage together in a
    reference cycle: the gc runs their finalizers in an order of its own,
    yet the subscriber must be stopped before the index is freed (the C
    contract of sci_index_free), each exactly once. The C calls are
    recorded in order; several rounds, so either finalizer order occurs."""
    api = _library.api()
    real_free, real_stop = api.index_free, api.subscriber_stop
    calls: list[tuple[str, int]] = []
    api.index_free = lambda h: (calls.append(("index_free", h)), real_free(h))
    api.subscriber_stop = lambda h: (calls.append(("subscriber_stop", h)), real_stop(h))

    class Holder:  # any user object holding both, in a cycle
        pass

    try:  # the objects below capture the recording functions at creation
        for _ in range(4):
            calls.clear()
            holder = Holder()
            holder.index = sci.Index()  # type: ignore[attr-defined]
            holder.sub = sci.Subscriber(holder.index, "tcp://127.0.0.1:9")  # type: ignore[attr-defined]
            holder.me = holder  # type: ignore[attr-defined]
            index_handle, sub_handle = holder.index._handle, holder.sub._handle  # type: ignore[attr-defined]
            del holder
            gc.collect()
            assert calls == [("subscriber_stop", sub_handle), ("index_free", index_handle)]
        # A stopped subscriber is not stopped again by the index's finalizer.
        calls.clear()
        ix = sci.Index()
        sub = sci.Subscriber(ix, "tcp://127.0.0.1:9")
        sub.stop()
        sub.stop()
        ix.close()
        assert [name for name, _ in calls] == ["subscriber_stop", "index_free"]
    finally:
        api.index_free, api.subscriber_stop = real_free, real_stop
