#include "vllm/block_hash.h"

#include <algorithm>
#include <bit>
#include <cstring>

// The low-level SHA256_* calls, deprecated by OpenSSL 3 but exported and the
// fastest interface it has for short messages, with the context on the stack
// (src/sglang/page_hash.cpp has the measurements).
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

namespace sci::vllm {
namespace {

// Pickle opcodes (CPython Lib/pickle.py).
constexpr uint8_t kProto = 0x80;
constexpr uint8_t kFrame = 0x95;
constexpr uint8_t kShortBinBytes = 0x43;
constexpr uint8_t kMemoize = 0x94;
constexpr uint8_t kMark = 0x28;
constexpr uint8_t kTuple = 0x74;
constexpr uint8_t kTuple1 = 0x85;
constexpr uint8_t kTuple3 = 0x87;
constexpr uint8_t kEmptyTuple = 0x29;
constexpr uint8_t kNone = 0x4E;
constexpr uint8_t kShortBinUnicode = 0x8C;  // u8 length
constexpr uint8_t kBinUnicode = 0x58;       // 'X', u32 length (not 0x8D: that is BINUNICODE8, u64)
constexpr uint8_t kBinUnicode8 = 0x8D;
constexpr uint8_t kBinGet = 0x68;
constexpr uint8_t kLongBinGet = 0x6A;
constexpr uint8_t kStop = 0x2E;

// CPython's C framer (Modules/_pickle.c), which pickle.dumps uses: before
// each object is saved, a frame holding >= 64 KiB is committed and the next
// write opens a new one; a committed frame under 4 bytes loses its FRAME
// header; a bytes/str payload of >= 64 KiB is written outside any frame,
// opcode and length included. Only huge blocks or huge strings get past the
// first frame, but they hash as CPython would, not as a guess.
constexpr size_t kFrameSizeTarget = 64 * 1024;
constexpr size_t kFrameSizeMin = 4;
constexpr size_t kFrameHeaderSize = 9;

// A token is at most 7 pickle bytes (LONG1) and 5 CBOR bytes; the encoders
// store a whole 8-byte word per token and advance by its length, so what
// they reserve has 8 bytes of slack.
constexpr size_t kTokensPerChunk = 64;
constexpr size_t kChunkReserve = kTokensPerChunk * 7 + 8;

inline void StoreLE64(uint8_t* out, uint64_t v) {
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(out, &v, 8);
  } else {
    for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
  }
}

// One token as CPython pickles an int in 0..2^32-1: BININT1 (< 2^8),
// BININT2 (< 2^16), BININT (< 2^31: it is signed), else LONG1 with 5
// little-endian two's-complement bytes (the top byte 0 keeps it positive).
// Branch-free: ids of a real vocabulary mix the first three widths.
constexpr uint8_t kPickleIntBytes[4] = {2, 3, 5, 7};
constexpr uint8_t kPickleIntShift[4] = {8, 8, 8, 16};
constexpr uint16_t kPickleIntOpcode[4] = {0x4B, 0x4D, 0x4A, 0x058A};  // LONG1 is 8A 05

inline unsigned PickleIntClass(uint32_t v) {
  return static_cast<unsigned>(v >= 0x100u) + static_cast<unsigned>(v >= 0x10000u) +
         static_cast<unsigned>(v >= 0x80000000u);
}

inline uint8_t* PutPickleInt(uint8_t* out, uint32_t v) {
  const unsigned c = PickleIntClass(v);
  StoreLE64(out, (uint64_t{v} << kPickleIntShift[c]) | kPickleIntOpcode[c]);
  return out + kPickleIntBytes[c];
}

// One unsigned int as canonical CBOR (major type 0, shortest argument),
// built big-endian in the top bytes of a word.
constexpr uint8_t kCborIntBytes[4] = {1, 2, 3, 5};
constexpr uint8_t kCborIntShift[4] = {56, 48, 40, 24};
constexpr uint64_t kCborIntPrefix[4] = {0, 0x18ull << 8, 0x19ull << 16, 0x1Aull << 32};

inline uint8_t* PutCborInt(uint8_t* out, uint32_t v) {
  const unsigned c = static_cast<unsigned>(v >= 24u) + static_cast<unsigned>(v >= 0x100u) +
                     static_cast<unsigned>(v >= 0x10000u);
  uint64_t word = (kCborIntPrefix[c] | v) << kCborIntShift[c];
  if constexpr (std::endian::native == std::endian::little) word = __builtin_bswap64(word);
  std::memcpy(out, &word, 8);
  return out + kCborIntBytes[c];
}

// A CBOR head (major type, argument) of any length, shortest form.
size_t CborHead(uint8_t* out, uint8_t major, uint64_t arg) {
  const uint8_t m = static_cast<uint8_t>(major << 5);
  if (arg < 24) {
    out[0] = static_cast<uint8_t>(m | arg);
    return 1;
  }
  const int bytes = arg < 0x100 ? 1 : arg < 0x10000 ? 2 : arg < 0x100000000ull ? 4 : 8;
  out[0] = static_cast<uint8_t>(m | (bytes == 1 ? 24 : bytes == 2 ? 25 : bytes == 4 ? 26 : 27));
  for (int i = 0; i < bytes; ++i) out[1 + i] = static_cast<uint8_t>(arg >> (8 * (bytes - 1 - i)));
  return 1 + static_cast<size_t>(bytes);
}

// Where encodings go: SHA-256 through a stack buffer, or a string.
class ShaStream {
 public:
  ShaStream() { SHA256_Init(&ctx_); }

  void Write(const uint8_t* data, size_t n) {
    if (n > kBufferBytes - used_) Flush();
    if (n >= kBufferBytes) {
      SHA256_Update(&ctx_, data, n);
      return;
    }
    std::memcpy(buffer_ + used_, data, n);
    used_ += n;
  }
  // At least n (<= kChunkReserve) writable bytes; Commit says how many were used.
  uint8_t* Reserve(size_t n) {
    if (n > kBufferBytes - used_) Flush();
    return buffer_ + used_;
  }
  void Commit(size_t n) { used_ += n; }

  BlockDigest Finish() {
    Flush();
    BlockDigest digest;
    SHA256_Final(digest.data(), &ctx_);
    return digest;
  }

 private:
  static constexpr size_t kBufferBytes = 1024;
  static_assert(kChunkReserve <= kBufferBytes);

  void Flush() {
    if (used_ > 0) SHA256_Update(&ctx_, buffer_, used_);
    used_ = 0;
  }

  SHA256_CTX ctx_;
  size_t used_ = 0;
  uint8_t buffer_[kBufferBytes];
};

class StringOut {
 public:
  explicit StringOut(std::string* out) : out_(out) {}
  void Write(const uint8_t* data, size_t n) { out_->append(reinterpret_cast<const char*>(data), n); }
  uint8_t* Reserve(size_t n) {
    reserved_at_ = out_->size();
    out_->resize(reserved_at_ + n);
    return reinterpret_cast<uint8_t*>(out_->data()) + reserved_at_;
  }
  void Commit(size_t n) { out_->resize(reserved_at_ + n); }

 private:
  std::string* out_;
  size_t reserved_at_ = 0;
};

const uint8_t* Bytes(std::string_view s) { return reinterpret_cast<const uint8_t*>(s.data()); }

// Block i's extra keys: None (count 0) or a tuple of up to two strings.
struct BlockKeys {
  size_t count = 0;
  std::string_view keys[2];
  bool salt_is_lora_object = false;  // keys[1] is keys[0]'s str object
};

BlockKeys KeysOf(const RequestExtras& extras, size_t block_index) {
  BlockKeys k;
  if (extras.has_lora) k.keys[k.count++] = extras.lora_name;
  if (block_index == 0 && extras.has_salt && !extras.cache_salt.empty()) {
    // Only an equal string can be the same object; a flag contradicting the
    // values is ignored rather than hashed into a pickle CPython never writes.
    k.salt_is_lora_object =
        extras.has_lora && extras.salt_is_lora_object && extras.cache_salt == extras.lora_name;
    k.keys[k.count++] = extras.cache_salt;
  }
  return k;
}

// ---- pickle ---------------------------------------------------------------

// What a pickle is of: the block tuple (parent set) or the seed str alone.
struct PickleSubject {
  const BlockDigest* parent = nullptr;
  std::span<const uint32_t> tokens;
  BlockKeys keys;
  std::string_view seed;
};

// Walks the pickle as CPython's C pickler writes it, handing a sink:
//   Raw(p, n)         bytes before framing starts (PROTO)
//   Boundary()        the start of saving an object (where frames commit)
//   Put(p, n)         bytes inside the current frame
//   Large(h, hn, p, n) a >= 64 KiB str written outside any frame
//   Tokens(tokens)    the ints of the token tuple, a Boundary before each
//   End()
template <typename Sink>
void WalkPickle(const PickleSubject& s, Sink& sink) {
  static constexpr uint8_t kHeader[2] = {kProto, 5};
  sink.Raw(kHeader, 2);
  size_t memo = 0;  // the next MEMOIZE's index
  static constexpr uint8_t kMemo[1] = {kMemoize};

  // Returns the memo index the str took.
  auto save_str = [&](std::string_view str) {
    sink.Boundary();
    uint8_t head[9];
    size_t head_len;
    if (str.size() < 0x100) {
      head[0] = kShortBinUnicode;
      head[1] = static_cast<uint8_t>(str.size());
      head_len = 2;
    } else if (str.size() <= 0xFFFFFFFFu) {
      head[0] = kBinUnicode;
      for (int i = 0; i < 4; ++i) head[1 + i] = static_cast<uint8_t>(str.size() >> (8 * i));
      head_len = 5;
    } else {
      head[0] = kBinUnicode8;
      for (int i = 0; i < 8; ++i) head[1 + i] = static_cast<uint8_t>(uint64_t{str.size()} >> (8 * i));
      head_len = 9;
    }
    if (str.size() >= kFrameSizeTarget) {
      sink.Large(head, head_len, Bytes(str), str.size());
    } else {
      sink.Put(head, head_len);
      sink.Put(Bytes(str), str.size());
    }
    sink.Put(kMemo, 1);
    return memo++;
  };

  if (s.parent == nullptr) {
    save_str(s.seed);
  } else {
    sink.Boundary();  // the outer tuple (nothing framed yet)
    sink.Boundary();  // its parent bytes
    static constexpr uint8_t kBytesHead[2] = {kShortBinBytes, 32};
    sink.Put(kBytesHead, 2);
    sink.Put(s.parent->data(), 32);
    sink.Put(kMemo, 1);
    ++memo;

    sink.Boundary();  // the token tuple
    const size_t n = s.tokens.size();
    if (n == 0) {
      // The empty tuple is a singleton CPython never memoizes.
      static constexpr uint8_t kEmpty[1] = {kEmptyTuple};
      sink.Put(kEmpty, 1);
    } else {
      static constexpr uint8_t kMarkOp[1] = {kMark};
      if (n > 3) sink.Put(kMarkOp, 1);
      sink.Tokens(s.tokens);
      // TUPLE1..3 for short tuples, no MARK; TUPLE after a MARK otherwise.
      const uint8_t close[2] = {n > 3 ? kTuple : static_cast<uint8_t>(kTuple1 + n - 1), kMemoize};
      sink.Put(close, 2);
      ++memo;
    }

    sink.Boundary();  // the extra keys
    if (s.keys.count == 0) {
      static constexpr uint8_t kNoneOp[1] = {kNone};
      sink.Put(kNoneOp, 1);
    } else {
      const size_t lora_memo = save_str(s.keys.keys[0]);
      if (s.keys.count == 2) {
        if (s.keys.salt_is_lora_object) {
          sink.Boundary();  // save() is entered before the memo is consulted
          uint8_t get[5];
          if (lora_memo < 0x100) {
            get[0] = kBinGet;
            get[1] = static_cast<uint8_t>(lora_memo);
            sink.Put(get, 2);
          } else {  // unreachable with these shapes; for completeness
            get[0] = kLongBinGet;
            for (int i = 0; i < 4; ++i) get[1 + i] = static_cast<uint8_t>(lora_memo >> (8 * i));
            sink.Put(get, 5);
          }
        } else {
          save_str(s.keys.keys[1]);
        }
      }
      const uint8_t close[2] = {static_cast<uint8_t>(kTuple1 + s.keys.count - 1), kMemoize};
      sink.Put(close, 2);
      ++memo;
    }
    static constexpr uint8_t kOuterClose[2] = {kTuple3, kMemoize};
    sink.Put(kOuterClose, 2);
  }
  static constexpr uint8_t kStopOp[1] = {kStop};
  sink.Put(kStopOp, 1);
  sink.End();
}

// Frames as the C framer cuts them, for a sink that tracks them.
class FrameTracker {
 public:
  bool open() const { return open_; }
  size_t index() const { return index_; }
  size_t length() const { return length_; }
  void Open() {
    open_ = true;
    length_ = 0;
  }
  void Add(size_t n) { length_ += n; }
  bool ShouldCommit() const { return open_ && length_ >= kFrameSizeTarget; }
  void Commit() {
    open_ = false;
    ++index_;
  }

 private:
  bool open_ = false;
  size_t index_ = 0;
  size_t length_ = 0;
};

// Measures one frame (by index) of a pickle.
class FrameMeasure {
 public:
  explicit FrameMeasure(size_t target) : target_(target) {}
  size_t result() const { return result_; }

  void Raw(const uint8_t*, size_t) {}
  void Boundary() {
    if (frames_.ShouldCommit()) Commit();
  }
  void Put(const uint8_t*, size_t n) {
    if (!frames_.open()) frames_.Open();
    frames_.Add(n);
  }
  void Large(const uint8_t*, size_t, const uint8_t*, size_t) {
    if (frames_.open()) Commit();
  }
  void Tokens(std::span<const uint32_t> tokens) {
    for (uint32_t v : tokens) {
      Boundary();
      Put(nullptr, kPickleIntBytes[PickleIntClass(v)]);
    }
  }
  void End() {
    if (frames_.open()) Commit();
  }

 private:
  void Commit() {
    if (frames_.index() == target_) result_ = frames_.length();
    frames_.Commit();
  }
  size_t target_;
  size_t result_ = 0;
  FrameTracker frames_;
};

// Writes a pickle of any size, measuring each frame when it opens (one more
// walk per frame: only pickles past 64 KiB have a second).
template <typename Out>
class FramedWriter {
 public:
  FramedWriter(const PickleSubject& subject, Out* out) : subject_(subject), out_(out) {}

  void Raw(const uint8_t* p, size_t n) { out_->Write(p, n); }
  void Boundary() {
    if (frames_.ShouldCommit()) frames_.Commit();
  }
  void Put(const uint8_t* p, size_t n) {
    if (!frames_.open()) Open();
    frames_.Add(n);
    out_->Write(p, n);
  }
  void Large(const uint8_t* head, size_t head_len, const uint8_t* p, size_t n) {
    if (frames_.open()) frames_.Commit();
    out_->Write(head, head_len);
    out_->Write(p, n);
  }
  void Tokens(std::span<const uint32_t> tokens) {
    for (uint32_t v : tokens) {
      Boundary();
      uint8_t word[8];
      const uint8_t* end = PutPickleInt(word, v);
      Put(word, static_cast<size_t>(end - word));
    }
  }
  void End() {}

 private:
  void Open() {
    FrameMeasure measure(frames_.index());
    WalkPickle(subject_, measure);
    if (measure.result() >= kFrameSizeMin) {
      uint8_t head[kFrameHeaderSize] = {kFrame};
      for (int i = 0; i < 8; ++i) head[1 + i] = static_cast<uint8_t>(uint64_t{measure.result()} >> (8 * i));
      out_->Write(head, kFrameHeaderSize);
    }
    frames_.Open();
  }

  const PickleSubject& subject_;
  Out* out_;
  FrameTracker frames_;
};

// Everything after PROTO, summed; a pickle under 64 KiB of it is one frame.
class FramedLength {
 public:
  size_t total() const { return total_; }
  void Raw(const uint8_t*, size_t) {}
  void Boundary() {}
  void Put(const uint8_t*, size_t n) { total_ += n; }
  void Large(const uint8_t*, size_t head_len, const uint8_t*, size_t n) { total_ += head_len + n; }
  void Tokens(std::span<const uint32_t> tokens) {
    size_t sum = 0;
    for (uint32_t v : tokens) {
      sum += 2 + static_cast<size_t>(v >= 0x100u) + 2 * static_cast<size_t>(v >= 0x10000u) +
             2 * static_cast<size_t>(v >= 0x80000000u);
    }
    total_ += sum;
  }
  void End() {}

 private:
  size_t total_ = 0;
};

// The hot path: a pickle known to be one frame, streamed into SHA-256.
class SingleFrameWriter {
 public:
  SingleFrameWriter(size_t frame_length, ShaStream* out) : frame_length_(frame_length), out_(out) {}

  void Raw(const uint8_t* p, size_t n) {
    out_->Write(p, n);
    uint8_t head[kFrameHeaderSize] = {kFrame};
    for (int i = 0; i < 8; ++i) head[1 + i] = static_cast<uint8_t>(uint64_t{frame_length_} >> (8 * i));
    out_->Write(head, kFrameHeaderSize);
  }
  void Boundary() {}
  void Put(const uint8_t* p, size_t n) { out_->Write(p, n); }
  void Large(const uint8_t*, size_t, const uint8_t*, size_t) {}  // not under 64 KiB
  void Tokens(std::span<const uint32_t> tokens) {
    for (size_t i = 0; i < tokens.size(); i += kTokensPerChunk) {
      const size_t n = std::min(kTokensPerChunk, tokens.size() - i);
      uint8_t* const start = out_->Reserve(kChunkReserve);
      uint8_t* p = start;
      for (size_t j = 0; j < n; ++j) p = PutPickleInt(p, tokens[i + j]);
      out_->Commit(static_cast<size_t>(p - start));
    }
  }
  void End() {}

 private:
  size_t frame_length_;
  ShaStream* out_;
};

// The hot path's common case, in one pass: a pickle that fits a stack
// buffer is written whole and its FRAME length patched in afterwards, so the
// tokens' widths need no pass of their own. Anything larger overflows, and
// HashBlock measures first (FramedLength) and streams instead.
class BufferedPickle {
 public:
  bool overflowed() const { return overflowed_; }
  const uint8_t* data() const { return buffer_; }
  size_t size() const { return used_; }

  void Raw(const uint8_t* p, size_t n) {  // PROTO, then room for FRAME
    std::memcpy(buffer_, p, n);
    used_ = n + kFrameHeaderSize;
  }
  void Boundary() {}
  void Put(const uint8_t* p, size_t n) {
    if (n > kCapacity - used_) {
      overflowed_ = true;
      return;
    }
    std::memcpy(buffer_ + used_, p, n);
    used_ += n;
  }
  void Large(const uint8_t*, size_t, const uint8_t*, size_t) { overflowed_ = true; }
  void Tokens(std::span<const uint32_t> tokens) {
    if (overflowed_ || tokens.size() > (kCapacity - used_) / 7) {
      overflowed_ = true;
      return;
    }
    uint8_t* p = buffer_ + used_;
    for (uint32_t v : tokens) p = PutPickleInt(p, v);
    used_ = static_cast<size_t>(p - buffer_);
  }
  void End() {
    if (overflowed_) return;
    const size_t frame = used_ - 2 - kFrameHeaderSize;  // >= 4 and < 64 KiB: always framed, once
    buffer_[2] = kFrame;
    for (int i = 0; i < 8; ++i) buffer_[3 + i] = static_cast<uint8_t>(uint64_t{frame} >> (8 * i));
  }

 private:
  static constexpr size_t kCapacity = 2048;  // a 256-token block of LONG1s, short extras
  static_assert(kCapacity < kFrameSizeTarget);
  bool overflowed_ = false;
  size_t used_ = 0;
  uint8_t buffer_[kCapacity + 8];  // + the 8-byte stores' slack
};

// ---- CBOR -----------------------------------------------------------------

template <typename Out>
void PutCborText(Out* out, std::string_view s) {
  uint8_t head[9];
  out->Write(head, CborHead(head, 3, s.size()));
  out->Write(Bytes(s), s.size());
}

// cbor2.dumps(x, canonical=True) of the block tuple: tuples are arrays,
// ints and lengths take their shortest heads.
template <typename Out>
void WriteCborBlock(Out* out, const BlockDigest& parent, std::span<const uint32_t> tokens,
                    const BlockKeys& keys) {
  uint8_t head[12] = {0x83, 0x58, 32};  // array(3), bytes(32)
  out->Write(head, 3);
  out->Write(parent.data(), 32);
  out->Write(head, CborHead(head, 4, tokens.size()));
  for (size_t i = 0; i < tokens.size(); i += kTokensPerChunk) {
    const size_t n = std::min(kTokensPerChunk, tokens.size() - i);
    uint8_t* const start = out->Reserve(kChunkReserve);
    uint8_t* p = start;
    for (size_t j = 0; j < n; ++j) p = PutCborInt(p, tokens[i + j]);
    out->Commit(static_cast<size_t>(p - start));
  }
  if (keys.count == 0) {
    head[0] = 0xF6;  // null
    out->Write(head, 1);
    return;
  }
  out->Write(head, CborHead(head, 4, keys.count));
  for (size_t k = 0; k < keys.count; ++k) PutCborText(out, keys.keys[k]);
}

}  // namespace

BlockDigest NoneHash(HashAlgorithm algorithm, std::string_view python_hash_seed) {
  ShaStream sha;
  if (algorithm == HashAlgorithm::kSha256Cbor) {
    PutCborText(&sha, python_hash_seed);
  } else {
    PickleSubject subject;
    subject.seed = python_hash_seed;
    FramedWriter<ShaStream> writer(subject, &sha);
    WalkPickle(subject, writer);
  }
  return sha.Finish();
}

std::string EncodeBlock(HashAlgorithm algorithm, const BlockDigest& parent, std::span<const uint32_t> tokens,
                        const RequestExtras& extras, size_t block_index) {
  std::string bytes;
  StringOut out(&bytes);
  const BlockKeys keys = KeysOf(extras, block_index);
  if (algorithm == HashAlgorithm::kSha256Cbor) {
    WriteCborBlock(&out, parent, tokens, keys);
  } else {
    // The general writer, never the hot path's: tests compare the two.
    const PickleSubject subject{&parent, tokens, keys, {}};
    FramedWriter<StringOut> writer(subject, &out);
    WalkPickle(subject, writer);
  }
  return bytes;
}

BlockDigest HashBlock(HashAlgorithm algorithm, const BlockDigest& parent, std::span<const uint32_t> tokens,
                      const RequestExtras& extras, size_t block_index) {
  const BlockKeys keys = KeysOf(extras, block_index);
  if (algorithm == HashAlgorithm::kSha256Cbor) {
    ShaStream sha;
    WriteCborBlock(&sha, parent, tokens, keys);
    return sha.Finish();
  }
  const PickleSubject subject{&parent, tokens, keys, {}};
  BufferedPickle whole;
  WalkPickle(subject, whole);
  if (!whole.overflowed()) {
    SHA256_CTX ctx;
    SHA256_Init(&ctx);
    SHA256_Update(&ctx, whole.data(), whole.size());
    BlockDigest digest;
    SHA256_Final(digest.data(), &ctx);
    return digest;
  }
  // The FRAME header carries the frame's length, so the tokens' widths are
  // summed first; the walk outside the tokens is a few dozen bytes.
  FramedLength length;
  WalkPickle(subject, length);
  ShaStream sha;
  if (length.total() < kFrameSizeTarget) {
    SingleFrameWriter writer(length.total(), &sha);
    WalkPickle(subject, writer);
  } else {
    FramedWriter<ShaStream> writer(subject, &sha);
    WalkPickle(subject, writer);
  }
  return sha.Finish();
}

uint64_t EventHashOf(const BlockDigest& digest) {
  uint64_t v = 0;
  for (size_t i = 24; i < 32; ++i) v = (v << 8) | digest[i];
  return v;
}

std::vector<BlockDigest> HashChain(HashAlgorithm algorithm, std::string_view python_hash_seed,
                                   std::span<const uint32_t> tokens, uint32_t hash_block_size,
                                   const RequestExtras& extras) {
  std::vector<BlockDigest> chain;
  if (hash_block_size == 0) return chain;
  const size_t blocks = tokens.size() / hash_block_size;
  chain.reserve(blocks);
  BlockDigest parent = NoneHash(algorithm, python_hash_seed);
  for (size_t i = 0; i < blocks; ++i) {
    parent = HashBlock(algorithm, parent, tokens.subspan(i * hash_block_size, hash_block_size), extras, i);
    chain.push_back(parent);
  }
  return chain;
}

}  // namespace sci::vllm
