"""The package's answers equal the C functions' answers, field by field, on
indexes a real sci-publish workload filled (SGLang and vLLM layouts, tiers,
extras), whatever the token container."""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np
import pytest

import shared_cache_index as sci
from conftest import SGLANG_TP8_JSON, VLLM_JSON, published_world


def requests(prompts: list[list[int]], block: int) -> list[tuple[str, list[int]]]:
    """What a router is asked: the published prompts, an edit, the shared
    prefix with a new question, a stranger, a tail, a short and an empty one."""
    first = prompts[0]
    edited = list(first)
    edited[len(first) * 3 // 4] ^= 0x5A5A
    return [
        *[(f"published {i}", p) for i, p in enumerate(prompts)],
        ("edited", edited),
        ("shared prefix + new", first[: 10 * block] + [31_000 - t % 1000 for t in range(7 * block)]),
        ("unrelated", list(range(len(first)))),
        ("not whole pages", first[: 5 * block + block // 2]),
        ("shorter than a page", first[: block - 1]),
        ("empty", []),
    ]


def containers(tokens: list[int]) -> list[Any]:
    return [tokens, tuple(tokens), array("I", tokens), np.array(tokens, dtype=np.uint32),
            np.array(tokens, dtype=np.int64)]


def assert_pages_equal(raw_c: Any, ix: sci.Index, lay: sci.Layout, tokens: list[int], block: int,
                       extras: sci.RequestExtras | None = None) -> sci.PageResult:
    # Twice first: a query may verify groups, changing the next fast_path.
    for _ in range(2):
        ix.check_pages(lay, tokens, block, extras)
    status, c, c_hits = raw_c.check_pages(ix, lay, tokens, block, extras)
    assert status == 0
    for container in containers(tokens):
        r = ix.check_pages(lay, container, block, extras)
        assert (r.n_pages, r.total_hits, r.prefix_hits, r.fast_path, r.prefix_tokens) == (
            c.n_pages, c.total_hits, c.prefix_hits, c.fast_path, c.prefix_tokens), type(container)
        assert r.hits_bytes == c_hits
        assert r.hits == [b == 1 for b in c_hits]
        assert len(r.hits) == r.n_pages
        assert sum(r.hits) == r.total_hits
        assert ix.check_prefix(lay, container, block, extras) == raw_c.check_prefix(ix, lay, tokens, block, extras)
        both = ix.check_prefix_tokens(lay, container, block, extras)
        assert both == raw_c.check_prefix_tokens(ix, lay, tokens, block, extras)
        assert both[0] == ix.check_prefix(lay, container, block, extras)
        assert both[1] == r.prefix_tokens or r.prefix_hits != both[0]
    return r


def test_sglang_answers_equal_the_c_answers(sglang_world: Any, raw_c: Any) -> None:
    ix, prompts = sglang_world
    lay = sci.Layout(64, tp_size=8)
    json_lay = sci.Layout.from_json(SGLANG_TP8_JSON)
    assert (lay.family, lay.block_size, json_lay.family, json_lay.block_size) == ("sglang", 64, "sglang", 64)
    seen = {}
    for what, tokens in requests(prompts, 64):
        for layout in (lay, json_lay):
            seen[what] = assert_pages_equal(raw_c, ix, layout, tokens, 64)
    # The answers themselves (not only their agreement with C).
    assert [(seen[f"published {i}"].n_pages, seen[f"published {i}"].total_hits) for i in range(3)] == [(40, 40)] * 3
    assert seen["published 0"].fast_path == 40
    assert seen["edited"].prefix_hits == 30 and seen["edited"].ranges() == [(0, 30)]  # page hashes chain
    assert seen["shared prefix + new"].prefix_hits == 10 and seen["shared prefix + new"].n_pages == 17
    assert seen["unrelated"].total_hits == 0
    assert (seen["not whole pages"].n_pages, seen["not whole pages"].total_hits) == (5, 5)
    assert seen["empty"].n_pages == 0 and seen["empty"].hits == []
    # A prompt of exactly 40 pages: SGLang computes its last token, so its
    # last page does not load (39 pages of tokens, though 40 pages hit).
    assert seen["published 0"].prefix_tokens == 39 * 64
    assert seen["edited"].prefix_tokens == 30 * 64
    assert seen["not whole pages"].prefix_tokens == 5 * 64
    assert ix.check_prefix_tokens(lay, prompts[0]) == (40, 39 * 64)
    assert ix.check_prefix_tokens(lay, requests(prompts, 64)[3][1]) == (30, 30 * 64)


def test_a_block_size_mismatch_answers_no_page_and_is_counted(sglang_world: Any, raw_c: Any) -> None:
    ix, prompts = sglang_world
    lay = sci.Layout(64, tp_size=8)
    before = ix.stats()["block_size_mismatches"]
    r = assert_pages_equal(raw_c, ix, lay, prompts[0], 32)
    assert (r.n_pages, r.hits) == (0, [])
    assert ix.check_prefix(lay, prompts[0], block_size=32) == 0
    assert ix.stats()["block_size_mismatches"] > before


def test_sglang_request_with_extras_has_no_hit(sglang_world: Any, raw_c: Any) -> None:
    ix, prompts = sglang_world
    lay = sci.Layout(64, tp_size=8)
    r = assert_pages_equal(raw_c, ix, lay, prompts[0], 64, sci.RequestExtras(lora_name="x"))
    assert (r.n_pages, r.total_hits) == (40, 0)


def test_vllm_answers_equal_the_c_answers(vllm_world: Any, raw_c: Any) -> None:
    ix, prompts = vllm_world
    lay = sci.Layout.from_json(VLLM_JSON)
    assert (lay.family, lay.block_size) == ("vllm", 16)
    seen = {}
    for what, tokens in requests(prompts, 16):
        for label, extras in (("none", None), ("lora", sci.RequestExtras(lora_name="sql-adapter")),
                              ("salt", sci.RequestExtras(cache_salt="s1")), ("empty salt", sci.RequestExtras(cache_salt=""))):
            seen[(what, label)] = assert_pages_equal(raw_c, ix, lay, tokens, 16, extras)
    published = seen[("published 0", "none")]
    assert (published.n_pages, published.total_hits, published.prefix_hits) == (48, 48, 48)
    assert published.fast_path == 0  # no vLLM answer trusts a group
    # Requests with a LoRA or a salt were never stored; an empty salt is none (vLLM's rule).
    assert seen[("published 0", "lora")].total_hits == seen[("published 0", "salt")].total_hits == 0
    assert seen[("published 0", "empty salt")].total_hits == 48
    assert ix.check_prefix(lay, prompts[0]) == 48
    assert ix.check_prefix(lay, prompts[0], extras=sci.RequestExtras(lora_name="sql-adapter")) == 0
    # Full attention alone: credit past the last whole block is possible,
    # the last token never; a stored prompt loads all its whole blocks.
    assert published.prefix_tokens >= published.prefix_hits * 16
    assert ix.check_prefix_tokens(lay, prompts[0])[0] == 48
    assert 48 * 16 <= ix.check_prefix_tokens(lay, prompts[0])[1] < len(prompts[0])
    for what, tokens in requests(prompts, 16):
        pages, credited = ix.check_prefix_tokens(lay, tokens)
        assert credited >= pages * 16 and (credited < len(tokens) or not tokens), what


def test_vllm_refuses_page_hashes(vllm_world: Any) -> None:
    ix, _ = vllm_world
    lay = sci.Layout.from_json(VLLM_JSON)
    with pytest.raises(sci.InvalidArgument) as e:
        ix.check_page_hashes(lay, ["0" * 64])
    assert e.value.message and e.value.status == 1


def test_block_hashes_take_exactly_one_kind(vllm_world: Any) -> None:
    ix, _ = vllm_world
    lay = sci.Layout.from_json(VLLM_JSON)
    with pytest.raises(sci.InvalidArgument):
        ix.check_block_hashes(lay)
    with pytest.raises(sci.InvalidArgument):
        ix.check_block_hashes(lay, digests=b"\0" * 32, event_hashes=[1])
    # Unknown hashes: no prefix; the C call accepted both forms.
    assert ix.check_block_hashes(lay, event_hashes=[1, 2, 3]) == 0
    assert ix.check_block_hashes(lay, digests=[b"\1" * 32, b"\2" * 32]) == 0
    with pytest.raises(sci.InvalidArgument):
        ix.check_block_hashes(lay, digests=b"\0" * 31)
    with pytest.raises(sci.InvalidArgument) as e:  # the library's own check: n_tokens too short
        ix.check_block_hashes(lay, event_hashes=[1, 2, 3], n_tokens=5)
    assert "n_tokens" in e.value.message


def test_sglang_page_hashes_query(sglang_world: Any) -> None:
    ix, _ = sglang_world
    lay = sci.Layout(64, tp_size=8)
    r = ix.check_page_hashes(lay, ["ab" * 32, "cd" * 32])
    assert (r.n_pages, r.total_hits, r.hits) == (2, 0, [False, False])
    with pytest.raises(sci.InvalidArgument) as e:
        ix.check_page_hashes(lay, ["ab" * 32, "XYZ"])
    assert "1" in e.value.message or "hash" in e.value.message


@pytest.fixture(scope="module")
def tiered_world() -> Any:
    """Second-generation (per-medium) events: pages on cpu, on disk, moved."""
    return published_world(SGLANG_TP8_JSON, prompts=2, pages=24, shared=4, seed=77,
                           extra=("--generation", "2"),
                           index_options={"residency": "per-medium", "medium_tiers": "cpu=0,disk=1"})


def test_tiers_equal_the_c_answers(tiered_world: Any, raw_c: Any) -> None:
    ix, prompts = tiered_world
    lay = sci.Layout(64, tp_size=8)
    distinct_tiers = set()
    for what, tokens in requests(prompts, 64):
        for extras in (None, sci.RequestExtras(cache_salt="s")):
            ix.check_tiers(lay, tokens, extras=extras)
            c, c_tiers = raw_c.check_tiers(ix, lay, tokens, 64, extras)
            for container in containers(tokens):
                t = ix.check_tiers(lay, container, extras=extras)
                n = c.n_tiers
                assert (t.n_tiers, t.n_pages) == (c.n_tiers, c.n_pages)
                assert t.prefix_pages == list(c.prefix_pages)[:n]
                assert t.pages_at == list(c.pages_at)[:n]
                assert t.prefix_tokens == list(c.prefix_tokens)[:n]
                assert t.page_tier == [None if b == 0xFF else b for b in c_tiers]
            distinct_tiers.update(t.page_tier)
            if t.n_pages:
                assert t.prefix_pages[-1] == ix.check_prefix(lay, tokens, extras=extras)
                assert t.prefix_pages == sorted(t.prefix_pages)
    # The generation-2 workload leaves pages on each tier and deletes some.
    assert {0, 1, None} <= distinct_tiers
    t = ix.check_tiers(lay, prompts[0])
    assert t.prefix_tokens == [p * 64 for p in t.prefix_pages]


def test_contains_and_stats_follow_apply_events() -> None:
    ix = sci.Index(residency="per-medium")
    ix.apply_events(7, [sci.Event.stored("k1", "g", medium="cpu"), sci.Event.stored("k1", "g", medium="disk"),
                        sci.Event.stored(b"k2", tenant="t2")])
    assert (ix.contains("k1"), ix.contains("k2"), ix.contains("k2", tenant="t2")) == (True, False, True)
    ix.apply_events(8, [sci.Event.removed("k1", "g", medium="cpu")])
    assert ix.contains("k1")  # still on disk
    s = ix.stats()
    assert (s["keys"], s["last_sequence"], s["has_sequence"], s["medium_removals_kept"]) == (2, 8, 1, 1)
    ix.apply_events(9, [sci.Event.tenant_cleared("t2")])
    assert not ix.contains("k2", tenant="t2")
    ix.apply_events(10, [sci.Event.all_cleared()])
    assert ix.stats()["keys"] == 0
    ix.apply_events(10, [sci.Event.stored("dup")])  # same sequence: a duplicate
    assert not ix.contains("dup") and ix.stats()["duplicate_batches"] == 1
    ix.apply_events(12, [sci.Event.stored("after-gap")])
    assert ix.contains("after-gap") and ix.stats()["sequence_gaps"] == 1
    ix.clear()
    assert ix.stats()["has_sequence"] == 0
    ix.close()


def test_stats_has_every_c_field_by_name() -> None:
    from shared_cache_index import _capi

    with sci.Index() as ix:
        stats = ix.stats()
    names = [n for n, _ in _capi.sci_stats._fields_ if n != "struct_size"]
    assert list(stats) == names
    assert all(isinstance(v, int) for v in stats.values())


def test_prometheus_text_and_labels() -> None:
    with sci.Index() as ix:
        ix.apply_events(1, [sci.Event.stored("a"), sci.Event.stored("b")])
        text = ix.prometheus('pool="mooncake-a",model="llama"')
        assert 'sci_keys{pool="mooncake-a",model="llama"} 2' in text.splitlines()
        assert "sci_sequence_gaps_total" in text
        assert "sci_keys 2" in ix.prometheus().splitlines()
        with pytest.raises(sci.InvalidArgument) as e:
            ix.prometheus("not a label list")
        assert e.value.message


def test_index_options_reach_the_library() -> None:
    with sci.Index(max_entries=3) as ix:
        ix.apply_events(1, [sci.Event.stored(f"k{i}") for i in range(10)])
        s = ix.stats()
        assert s["keys"] <= 3 and s["capacity_refusals"] > 0
    with sci.Index(medium_tiers="hbm=0,cpu=1,disk=2") as ix:
        assert ix.check_tiers(sci.Layout(4), [1, 2, 3, 4]).n_tiers == 3
    with pytest.raises(sci.InvalidArgument) as e:
        sci.Index(medium_tiers="cpu=7")
    assert "cpu" in e.value.message
    with pytest.raises(sci.InvalidArgument):
        sci.Index(residency="sometimes")


def test_layout_spec_fields_reach_the_library() -> None:
    a = sci.Layout(64, tp_size=2, key_prefix="m", pools=[sci.Pool(["__k", "__v"]), sci.Pool(["__swa"], 4)])
    b = sci.Layout(64, tp_size=2, is_mla_model=True, pp_size=2, tenant_id="t", extra_backend_tag="x")
    assert (a.block_size, b.block_size, a.family) == (64, 64, "sglang")
    with pytest.raises(sci.InvalidArgument) as e:
        sci.Layout(64, pools=[sci.Pool([])])
    assert "pool" in e.value.message
    with pytest.raises(TypeError):
        sci.Layout(64, tp=2)
    with pytest.raises(sci.InvalidArgument) as e:
        sci.Layout(64, tp_size=2000)
    assert "tp_size" in e.value.message
