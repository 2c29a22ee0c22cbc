//! What a vLLM request adds to its block hashes beyond its tokens.

/// vLLM's extra keys of a text-only request (`docs/vllm-family.md`, "The
/// block-hash chain"): a LoRA adapter's name, hashed into every block, and a
/// cache salt, hashed into the first. `None` is none; `Some("")` is the
/// empty string, which for the salt vLLM also treats as none.
///
/// An SGLang layout's page hashes carry no extras: a request with any
/// answers no hit there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RequestExtras<'a> {
    pub lora_name: Option<&'a str>,
    pub cache_salt: Option<&'a str>,
}

impl<'a> RequestExtras<'a> {
    /// No LoRA, no salt: the request's blocks hash its tokens alone.
    pub fn none() -> RequestExtras<'a> {
        RequestExtras::default()
    }

    pub fn lora(mut self, name: &'a str) -> RequestExtras<'a> {
        self.lora_name = Some(name);
        self
    }

    pub fn salt(mut self, salt: &'a str) -> RequestExtras<'a> {
        self.cache_salt = Some(salt);
        self
    }
}
