//! [`LayoutBuilder::from_json`]: an SGLang runtime config read into an
//! editable builder, in Rust (serde_json). Behind the crate's `json`
//! feature: without it the crate depends on nothing outside this
//! repository, and [`Layout::from_json`](crate::Layout::from_json) reads
//! the same JSON (and vLLM's descriptor) in the library.

use serde_json::{Map, Value};

use crate::error::{Error, Result, Status};
use crate::layout_builder::{HitPolicy, LayoutBuilder, Pool};

impl LayoutBuilder {
    /// Reads the runtime config an SGLang worker publishes: a JSON object
    /// with `page_size` (required), `tp_size`, `pp_size`, `tp_lcm_size`,
    /// `is_mla_model`, `is_eagle`, `should_split_heads`, `extra_backend_tag`,
    /// `key_prefix`, `tenant_id` and `pools: [{suffixes: [..], hit_policy:
    /// "all_pages" | "trailing_pages", trailing_pages: n}]`. `null` means
    /// unset; fields it does not know are ignored (the workers publish more).
    /// Needs the crate's `json` feature (serde_json); [`Layout::from_json`]
    /// reads the same JSON in the library, with no feature.
    /// A field of the wrong type is an error naming it.
    ///
    /// It reads exactly what the library's own reader
    /// (`src/sglang/runtime_config.cpp`, behind [`Layout::from_json`]) reads,
    /// with the same checks in the same order; only the quoting of values in
    /// messages differs. A vLLM descriptor, which [`Layout::from_json`]
    /// recognises as the library does (`vllm_mooncake_store` at the top, or
    /// no `page_size` and one of `schema_version`, `groups`,
    /// `main_event_block_size`, `hash`, `coordinator`), is refused here: it
    /// has no builder.
    pub fn from_json(json: &str) -> Result<LayoutBuilder> {
        let value: Value =
            serde_json::from_str(json).map_err(|e| invalid(format!("not valid JSON: {}", e)))?;
        let config = value
            .as_object()
            .ok_or_else(|| invalid("expected a JSON object".to_string()))?;
        let descriptor_only = ["schema_version", "groups", "main_event_block_size", "hash", "coordinator"];
        if config.contains_key("vllm_mooncake_store")
            || (!config.contains_key("page_size")
                && descriptor_only.iter().any(|field| config.contains_key(*field)))
        {
            return Err(invalid(
                "a vLLM MooncakeStoreConnector descriptor, not an SGLang runtime config: \
                 build it with Layout::from_json"
                    .to_string(),
            ));
        }
        let page_size = opt_u32(config, "page_size", "page_size")?
            .ok_or_else(|| invalid("page_size is missing".to_string()))?;
        let mut builder = LayoutBuilder::new(page_size);
        if let Some(v) = opt_u32(config, "tp_size", "tp_size")? {
            builder.tp_size = v;
        }
        if let Some(v) = opt_u32(config, "pp_size", "pp_size")? {
            builder.pp_size = v;
        }
        builder.tp_lcm_size = opt_u32(config, "tp_lcm_size", "tp_lcm_size")?.unwrap_or(0);
        builder.is_mla_model = opt_bool(config, "is_mla_model")?;
        builder.is_eagle = opt_bool(config, "is_eagle")?;
        builder.should_split_heads = opt_bool(config, "should_split_heads")?;
        builder.extra_backend_tag = opt_string(config, "extra_backend_tag", "extra_backend_tag")?;
        builder.key_prefix = opt_string(config, "key_prefix", "key_prefix")?;
        builder.tenant_id = opt_string(config, "tenant_id", "tenant_id")?;
        match config.get("pools") {
            None | Some(Value::Null) => {}
            Some(Value::Array(pools)) => {
                for (i, pool) in pools.iter().enumerate() {
                    builder
                        .pools
                        .push(pool_from_json(pool, &format!("pools[{}]", i))?);
                }
            }
            Some(other) => return Err(invalid(format!("pools must be an array, got {}", other))),
        }
        Ok(builder)
    }
}

fn pool_from_json(value: &Value, path: &str) -> Result<Pool> {
    let pool = value
        .as_object()
        .ok_or_else(|| invalid(format!("{} must be an object, got {}", path, value)))?;
    let suffixes = match pool.get("suffixes") {
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, s)| {
                s.as_str().map(str::to_string).ok_or_else(|| {
                    invalid(format!(
                        "{}.suffixes[{}] must be a string, got {}",
                        path, i, s
                    ))
                })
            })
            .collect::<Result<Vec<String>>>()?,
        None | Some(Value::Null) => return Err(invalid(format!("{}.suffixes is missing", path))),
        Some(other) => {
            return Err(invalid(format!(
                "{}.suffixes must be an array of strings, got {}",
                path, other
            )))
        }
    };
    let policy = opt_string(pool, "hit_policy", &format!("{}.hit_policy", path))?;
    let trailing = opt_u32(pool, "trailing_pages", &format!("{}.trailing_pages", path))?;
    let hit_policy = match policy.as_str() {
        "" | "all_pages" => HitPolicy::AllPages,
        "trailing_pages" => HitPolicy::TrailingPages(trailing.ok_or_else(|| {
            invalid(format!(
                "{}.trailing_pages is missing (required by hit_policy \"trailing_pages\")",
                path
            ))
        })?),
        other => {
            return Err(invalid(format!(
                "{}.hit_policy must be \"all_pages\" or \"trailing_pages\", got \"{}\"",
                path, other
            )))
        }
    };
    Ok(Pool {
        suffixes,
        hit_policy,
    })
}

fn invalid(why: String) -> Error {
    Error::new(
        Status::InvalidArgument,
        format!("LayoutBuilder::from_json: {}", why),
    )
}

fn opt_u32(object: &Map<String, Value>, name: &str, path: &str) -> Result<Option<u32>> {
    match object.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| {
                invalid(format!(
                    "{} must be an unsigned 32-bit integer, got {}",
                    path, v
                ))
            }),
    }
}

fn opt_bool(object: &Map<String, Value>, name: &str) -> Result<bool> {
    match object.get(name) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(invalid(format!(
            "{} must be true or false, got {}",
            name, v
        ))),
    }
}

fn opt_string(object: &Map<String, Value>, name: &str, path: &str) -> Result<String> {
    match object.get(name) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(v) => Err(invalid(format!("{} must be a string, got {}", path, v))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_field_of_the_runtime_config() {
        let builder = LayoutBuilder::from_json(
            r#"{"page_size": 64, "tp_size": 8, "pp_size": 2, "tp_lcm_size": 16,
                "is_mla_model": false, "is_eagle": true, "should_split_heads": true,
                "extra_backend_tag": "tag", "key_prefix": "kp", "tenant_id": "t1",
                "model_path": "ignored/unknown", "pools": [
                  {"suffixes": ["__k", "__v"]},
                  {"suffixes": ["__swa"], "hit_policy": "trailing_pages", "trailing_pages": 4},
                  {"suffixes": ["__x"], "hit_policy": "all_pages", "trailing_pages": null}]}"#,
        )
        .unwrap();
        let expected = LayoutBuilder::new(64)
            .tp_size(8)
            .pp_size(2)
            .tp_lcm_size(16)
            .eagle(true)
            .split_heads(true)
            .extra_backend_tag("tag")
            .key_prefix("kp")
            .tenant_id("t1")
            .pool(Pool::all_pages(["__k", "__v"]))
            .pool(Pool::trailing_pages(4, ["__swa"]))
            .pool(Pool::all_pages(["__x"]));
        assert_eq!(builder, expected);
    }

    #[test]
    fn nulls_and_absent_fields_mean_unset() {
        let builder = LayoutBuilder::from_json(
            r#"{"page_size": 16, "tp_lcm_size": null, "extra_backend_tag": null, "pools": null}"#,
        )
        .unwrap();
        assert_eq!(builder, LayoutBuilder::new(16));
    }

    fn error_of(json: &str) -> Error {
        LayoutBuilder::from_json(json).unwrap_err()
    }

    #[test]
    fn bad_json_and_bad_fields_are_invalid_arguments_naming_the_field() {
        let cases = [
            ("{\"page_size\": 64", "not valid JSON"),
            ("[64]", "expected a JSON object"),
            ("{}", "page_size is missing"),
            ("{\"page_size\": -1}", "page_size must be an unsigned 32-bit integer, got -1"),
            ("{\"page_size\": 4294967296}", "page_size must be an unsigned 32-bit integer"),
            ("{\"page_size\": 1.5}", "page_size must be an unsigned 32-bit integer"),
            ("{\"page_size\": 64, \"tp_size\": \"8\"}", "tp_size must be an unsigned 32-bit integer, got \"8\""),
            ("{\"page_size\": 64, \"is_mla_model\": 1}", "is_mla_model must be true or false, got 1"),
            ("{\"page_size\": 64, \"key_prefix\": 7}", "key_prefix must be a string, got 7"),
            ("{\"page_size\": 64, \"pools\": {}}", "pools must be an array"),
            ("{\"page_size\": 64, \"pools\": [3]}", "pools[0] must be an object, got 3"),
            ("{\"page_size\": 64, \"pools\": [{}]}", "pools[0].suffixes is missing"),
            ("{\"page_size\": 64, \"pools\": [{\"suffixes\": [\"a\", 2]}]}", "pools[0].suffixes[1] must be a string"),
            (
                "{\"page_size\": 64, \"pools\": [{\"suffixes\": [\"a\"]}, {\"suffixes\": [\"b\"], \"hit_policy\": \"some\"}]}",
                "pools[1].hit_policy must be \"all_pages\" or \"trailing_pages\", got \"some\"",
            ),
            (
                "{\"page_size\": 64, \"pools\": [{\"suffixes\": [\"a\"], \"hit_policy\": \"trailing_pages\"}]}",
                "pools[0].trailing_pages is missing",
            ),
        ];
        for (json, expected) in cases {
            let error = error_of(json);
            assert_eq!(error.status(), Status::InvalidArgument, "{}", json);
            assert!(
                error.message().starts_with("LayoutBuilder::from_json: "),
                "{}",
                error
            );
            assert!(error.message().contains(expected), "{} -> {}", json, error);
        }
    }
}
