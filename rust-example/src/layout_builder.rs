//! How one model's SGLang workers name their pages: built field by field, or
//! read from the JSON runtime config the workers publish
//! (`docs/sglang-hicache.md`). The library validates the result in
//! [`LayoutBuilder::build`]; this module only checks what JSON can get wrong
//! (types, names of hit policies).

use crate::error::Result;
use crate::Layout;

/// Which pages of a request a pool covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HitPolicy {
    /// Every page (`"all_pages"`, the default).
    AllPages,
    /// Only the last `n` pages (`"trailing_pages"` with `trailing_pages: n`).
    TrailingPages(u32),
}

/// An advertised object pool: each page it covers needs `<logical><suffix>`
/// for every suffix (suffixes carry their own separators, e.g. `"__swa"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    pub(crate) suffixes: Vec<String>,
    pub(crate) hit_policy: HitPolicy,
}

impl Pool {
    pub fn all_pages<S: Into<String>>(suffixes: impl IntoIterator<Item = S>) -> Pool {
        Pool {
            suffixes: suffixes.into_iter().map(Into::into).collect(),
            hit_policy: HitPolicy::AllPages,
        }
    }

    pub fn trailing_pages<S: Into<String>>(
        pages: u32,
        suffixes: impl IntoIterator<Item = S>,
    ) -> Pool {
        Pool {
            suffixes: suffixes.into_iter().map(Into::into).collect(),
            hit_policy: HitPolicy::TrailingPages(pages),
        }
    }

    pub fn suffixes(&self) -> &[String] {
        &self.suffixes
    }

    pub fn hit_policy(&self) -> HitPolicy {
        self.hit_policy
    }
}

/// The fields of an SGLang HiCache layout, plus the Mooncake tenant its pages
/// are stored under. Empty strings mean unset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutBuilder {
    pub(crate) page_size: u32,
    pub(crate) tp_size: u32,
    pub(crate) pp_size: u32,
    pub(crate) tp_lcm_size: u32,
    pub(crate) is_mla_model: bool,
    pub(crate) is_eagle: bool,
    pub(crate) should_split_heads: bool,
    pub(crate) extra_backend_tag: String,
    pub(crate) key_prefix: String,
    pub(crate) tenant_id: String,
    pub(crate) pools: Vec<Pool>,
}

impl LayoutBuilder {
    /// A layout of `page_size` tokens per page, tp 1, pp 1, MHA, no pools.
    pub fn new(page_size: u32) -> LayoutBuilder {
        LayoutBuilder {
            page_size,
            tp_size: 1,
            pp_size: 1,
            tp_lcm_size: 0,
            is_mla_model: false,
            is_eagle: false,
            should_split_heads: false,
            extra_backend_tag: String::new(),
            key_prefix: String::new(),
            tenant_id: String::new(),
            pools: Vec::new(),
        }
    }

    pub fn tp_size(mut self, tp_size: u32) -> Self {
        self.tp_size = tp_size;
        self
    }
    pub fn pp_size(mut self, pp_size: u32) -> Self {
        self.pp_size = pp_size;
        self
    }
    /// 0 = unset; used with `should_split_heads`.
    pub fn tp_lcm_size(mut self, tp_lcm_size: u32) -> Self {
        self.tp_lcm_size = tp_lcm_size;
        self
    }
    pub fn mla(mut self, is_mla_model: bool) -> Self {
        self.is_mla_model = is_mla_model;
        self
    }
    pub fn eagle(mut self, is_eagle: bool) -> Self {
        self.is_eagle = is_eagle;
        self
    }
    pub fn split_heads(mut self, should_split_heads: bool) -> Self {
        self.should_split_heads = should_split_heads;
        self
    }
    pub fn extra_backend_tag(mut self, tag: impl Into<String>) -> Self {
        self.extra_backend_tag = tag.into();
        self
    }
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }
    /// Mooncake tenant of the pages; empty = `"default"`.
    pub fn tenant_id(mut self, tenant: impl Into<String>) -> Self {
        self.tenant_id = tenant.into();
        self
    }
    pub fn pool(mut self, pool: Pool) -> Self {
        self.pools.push(pool);
        self
    }

    pub fn page_size(&self) -> u32 {
        self.page_size
    }

    /// Validates the fields (in the library) and builds the layout.
    pub fn build(&self) -> Result<Layout> {
        Layout::new(self)
    }
}

