"""Writes pickle-corners.json: CPython's own pickles of vLLM block tuples in
the corners hash-vectors.json does not reach (ids >= 2^31, long and huge
strings, a salt that is the LoRA name's object, blocks past one 64 KiB frame,
empty and short tuples, NONE_HASH seeds). Run with the CPython whose pickle
is the reference: python3 make_pickle_corners.py > pickle-corners.json
"""
import hashlib
import json
import pickle
import random
import sys


def fresh(s):
    # A str equal to s but a different object (as a request's JSON and the
    # LoRA registry give); slicing a longer string defeats interning.
    return (s + "#")[:-1] if len(s) > 1 else s


def compact(value):
    # Long runs (huge blocks, huge strings) as {"repeat": item, "count": n}
    # to keep the file small; the test expands them.
    if isinstance(value, str) and len(value) > 1000 and value == value[0] * len(value):
        return {"repeat": value[0], "count": len(value)}
    if isinstance(value, list) and len(value) > 1000 and value == [value[0]] * len(value):
        return {"repeat": value[0], "count": len(value)}
    return value


def block_case(name, tokens, lora=None, salt=None, same_object=False, block_index=0, seed=7):
    rng = random.Random(seed)
    parent = bytes(rng.randrange(256) for _ in range(32))
    keys = []
    if lora is not None:
        lora = fresh(lora)
        keys.append(lora)
    if block_index == 0 and salt:
        keys.append(lora if same_object else fresh(salt))
    extras = tuple(keys) if keys else None
    data = pickle.dumps((parent, tuple(tokens), extras), protocol=5)
    assert pickle.loads(data) == (parent, tuple(tokens), extras)
    case = {
        "name": name, "kind": "block", "parent": parent.hex(), "tokens": compact(tokens),
        "lora_name": compact(lora), "cache_salt": compact(salt), "salt_is_lora_object": same_object,
        "block_index": block_index, "length": len(data), "sha256": hashlib.sha256(data).hexdigest(),
    }
    if len(data) <= 4096:
        case["pickle"] = data.hex()
    return case


def seed_case(name, seed):
    data = pickle.dumps(fresh(seed), protocol=5)
    case = {"name": name, "kind": "seed", "seed": compact(seed), "length": len(data),
            "sha256": hashlib.sha256(data).hexdigest()}
    if len(data) <= 4096:
        case["pickle"] = data.hex()
    return case


def main():
    rng = random.Random(2026)
    big = [2**31 - 1, 2**31, 2**32 - 1, 0, 255, 256, 65535, 65536, 3000000000, 1, 2**31 + 5, 7, 70000, 2, 3, 4]
    cases = [
        block_case("ids_at_every_width_and_past_2_31", big),
        block_case("all_ids_past_2_31", [rng.randrange(2**31, 2**32) for _ in range(64)]),
        block_case("one_token", [5], lora="a"),
        block_case("two_tokens", [5, 70000], salt="s"),
        block_case("three_tokens", [2**32 - 1, 0, 300], lora="l", salt="s"),
        block_case("four_tokens_take_a_mark", [1, 2, 3, 4]),
        block_case("no_tokens", []),
        block_case("no_tokens_with_lora_and_salt", [], lora="x", salt="x", same_object=True),
        block_case("salt_is_the_lora_object", list(range(16)), lora="tenant", salt="tenant", same_object=True),
        block_case("salt_equals_lora_other_object", list(range(16)), lora="tenant", salt="tenant"),
        block_case("salt_only_later_block_is_none", list(range(16)), salt="tenant", block_index=3),
        block_case("lora_and_salt_later_block", list(range(16)), lora="L", salt="S", block_index=1),
        block_case("empty_lora_name", list(range(16)), lora=""),
        block_case("lora_255_bytes", list(range(16)), lora="a" * 255),
        block_case("lora_256_bytes_binunicode", list(range(16)), lora="b" * 256),
        block_case("utf8_lora_past_255_bytes", list(range(16)), lora="适配器" * 90, salt="β" * 200),
        block_case("lora_65535_bytes_in_frame", list(range(16)), lora="c" * 65535),
        block_case("lora_65536_bytes_outside_frames", list(range(16)), lora="d" * 65536),
        block_case("huge_lora_and_salt", list(range(16)), lora="e" * 70000, salt="f" * 70001),
        block_case("huge_salt_is_lora_object", list(range(16)), lora="g" * 70000, salt="g" * 70000,
                   same_object=True),
        block_case("frame_just_under_64k", [70000] * 13099),
        block_case("frame_reaches_64k_on_last_token", [70000] * 13100),
        block_case("frame_reaches_64k_before_last_token", [70000] * 13101),
        block_case("three_frames_of_long1", [2**32 - 1] * 20000, lora="z", salt="y"),
        block_case("frame_full_before_aliased_salt", [70000] * 13090, lora="h" * 60, salt="h" * 60,
                   same_object=True),
        block_case("frame_full_before_salt", [70000] * 13090, lora="h" * 60, salt="i" * 3),
        block_case("random_mixed_block_64", [rng.choice([rng.randrange(256), rng.randrange(65536),
                                                         rng.randrange(2**31), rng.randrange(2**32)])
                                             for _ in range(64)], lora="lora-7", salt="salt-7"),
        seed_case("seed_empty", ""),
        seed_case("seed_0", "0"),
        seed_case("seed_12345", "12345"),
        seed_case("seed_300_bytes", "s" * 300),
        seed_case("seed_70000_bytes", "t" * 70000),
    ]
    json.dump({"generator": "CPython %s pickle protocol 5 (make_pickle_corners.py)" % sys.version.split()[0],
               "cases": cases}, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
