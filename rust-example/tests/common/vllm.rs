//! The vLLM family's worked example 1 (docs/vllm-family.md): a descriptor as
//! a worker publishes it and the block-hash chain of tokens 0..63, for the
//! tests that need a vLLM layout (vllm_layouts, tiers).

/// H_0..H_3 of tokens 0..63.
pub const CHAIN: [&str; 4] = [
    "6358e31578a64b75ebe28cdb99d3beae65de82a2087321dc6ec84ae048faaaa6",
    "3c3c50f324aefbdfbb124dfdc541efac3e94e59c40f4be08afe70601eeca92c8",
    "0728d91353ef7b6761329eaaf146e88046d84f6384628314a0a6c35dd9b88e0a",
    "71c151a876275d6b365dfa670e47acb855b683a8880eaf3e31a806c3164561b4",
];

/// A descriptor as Dynamo's worker extension publishes it, with `groups`
/// given (the rest is example 1's: block 16, sha256, seed 0).
pub fn descriptor(lcm_block_size: u32, groups: &str) -> String {
    format!(
        r#"{{"schema_version": 1, "adapter": "vllm-1085b644", "vllm_revision": "1085b644",
 "hash": {{"algorithm": "sha256", "digest_encoding": "hex", "gpu_event_hash": "low64",
          "seed_policy": "pythonhashseed-0", "key_separator": "@"}},
 "input": {{"text_only": true, "normalized_namespaces": true, "lora": true}},
 "main_event_group": 0, "main_event_block_size": 16, "gpu_to_store_group": [0],
 "coordinator": {{"lcm_block_size": {}, "speculative": false, "drop_blocks": false, "partial_hash_hits": false}},
 "groups": [{}]}}"#,
        lcm_block_size, groups
    )
}

pub fn group(id: u32, kind: &str, block_size: u32, prefixes: &[String]) -> String {
    let mamba = if kind == "mamba" { r#""align""# } else { "null" };
    format!(
        r#"{{"group_id": {}, "kind": "{}", "block_size": {}, "hash_block_size": 16,
            "key_prefixes": {}, "sliding_window": null, "mamba_cache_mode": {}}}"#,
        id,
        kind,
        block_size,
        serde_json::to_string(prefixes).unwrap(),
        mamba
    )
}

/// Example 1: Qwen/Qwen3-8B (8 KV heads), TP 2, cache_prefix "prod".
pub fn qwen_prefixes() -> Vec<String> {
    (0..2)
        .map(|rank| format!("prod@Qwen3-8B@tp_rank:{}@pcp0@dcp0@pp_rank:0@group:0", rank))
        .collect()
}

pub fn qwen_descriptor() -> String {
    descriptor(16, &group(0, "full_attention", 16, &qwen_prefixes()))
}
