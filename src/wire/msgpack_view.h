// A bounded pull reader over msgpack bytes that come from the network.
//
// Why not msgpack::unpack: it builds an object tree and allocates
// `n * sizeof(msgpack::object)` for a claimed array of n elements before it
// checks that the bytes exist, so five hostile bytes can ask for gigabytes.
// This reader allocates nothing at all: strings are views into the input,
// containers are only headers whose element counts are checked against the
// bytes that remain (every element takes at least one byte), and Skip()
// walks nested values with a counter instead of recursion, so nesting depth
// costs neither stack nor heap.
//
// Why not msgpack-cxx's visitor API either (msgpack::parse, v2; 4.1 here),
// though it builds no tree:
//   - it is not allocation-free: every call's context reserves a std::vector
//     of MSGPACK_EMBED_STACK_SIZE container entries and grows it by one per
//     nesting level, so a hostile payload of nested one-byte arrays still
//     makes it allocate in proportion to its length;
//   - it pushes values to callbacks in document order, while the decoder
//     pulls them: it reads a map key, then asks for the type that key must
//     hold and says what it found instead ("event 3 field object_key is
//     uint, expected str or nil"). As callbacks, every field would become a
//     state of a hand-written state machine, which is harder to read and to
//     get right than the bounded pull reader below.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace sci {

// The msgpack type families a reader distinguishes. Integers are split by
// sign the way msgpack encodes them: kUint for the positive-fixint and
// uint8..64 encodings, kInt for the negative-fixint and int8..64 encodings
// (which may still hold non-negative values).
enum class MsgpackType : uint8_t {
  kNil,
  kBool,
  kUint,
  kInt,
  kFloat,
  kStr,
  kBin,
  kArray,
  kMap,
  kExt,
  kEnd,       // no bytes left
  kReserved,  // 0xc1, never valid
};

std::string_view MsgpackTypeName(MsgpackType type);

// Why the last Read*/Skip call failed.
enum class MsgpackError : uint8_t {
  kNone,
  kTruncated,  // the value (or its length prefix) runs past the end
  kWrongType,  // the next value is of another type than asked for
  kTooLong,    // a length or element count exceeds the bytes that remain
  kOutOfRange, // an integer does not fit the asked type
  kReserved,   // the reserved byte 0xc1
};

std::string_view MsgpackErrorName(MsgpackError error);

namespace msgpack_internal {
// The type family of every marker byte, computed at compile time.
constexpr MsgpackType TypeOfMarker(uint8_t b) {
  if (b <= 0x7f) return MsgpackType::kUint;
  if (b <= 0x8f) return MsgpackType::kMap;
  if (b <= 0x9f) return MsgpackType::kArray;
  if (b <= 0xbf) return MsgpackType::kStr;
  if (b >= 0xe0) return MsgpackType::kInt;
  switch (b) {
    case 0xc0: return MsgpackType::kNil;
    case 0xc1: return MsgpackType::kReserved;
    case 0xc2: case 0xc3: return MsgpackType::kBool;
    case 0xc4: case 0xc5: case 0xc6: return MsgpackType::kBin;
    case 0xc7: case 0xc8: case 0xc9: return MsgpackType::kExt;
    case 0xca: case 0xcb: return MsgpackType::kFloat;
    case 0xcc: case 0xcd: case 0xce: case 0xcf: return MsgpackType::kUint;
    case 0xd0: case 0xd1: case 0xd2: case 0xd3: return MsgpackType::kInt;
    case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8: return MsgpackType::kExt;
    case 0xd9: case 0xda: case 0xdb: return MsgpackType::kStr;
    case 0xdc: case 0xdd: return MsgpackType::kArray;
    default: return MsgpackType::kMap;  // 0xde, 0xdf
  }
}

inline constexpr auto kMarkerTypes = [] {
  std::array<MsgpackType, 256> table{};
  for (int b = 0; b < 256; ++b) table[b] = TypeOfMarker(static_cast<uint8_t>(b));
  return table;
}();

// Values that are their own one-byte marker: fixints, nil, bools, and the
// empty fixmap / fixarray / fixstr.
constexpr bool IsOneByteValue(uint8_t b) {
  return b <= 0x80 || b == 0x90 || b == 0xa0 || b == 0xc0 || b == 0xc2 || b == 0xc3 || b >= 0xe0;
}
}  // namespace msgpack_internal

class MsgpackReader {
 public:
  explicit MsgpackReader(std::span<const uint8_t> bytes) : data_(bytes.data()), size_(bytes.size()) {}

  size_t offset() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  bool AtEnd() const { return pos_ == size_; }

  // The type of the next value, without consuming it.
  MsgpackType PeekType() const {
    return pos_ < size_ ? msgpack_internal::kMarkerTypes[data_[pos_]] : MsgpackType::kEnd;
  }

  // Each Read* consumes the next value when it has the asked type and
  // returns true; otherwise it consumes nothing, records error() and
  // returns false.
  bool ReadNil();
  bool ReadArrayHeader(uint32_t* count);
  bool ReadMapHeader(uint32_t* count);  // count of key/value pairs
  bool ReadStr(std::string_view* value) {
    // Inline fast path: a fixstr that is all there (field names, most values).
    if (pos_ < size_ && (data_[pos_] & 0xe0) == 0xa0) {
      const size_t length = data_[pos_] & 0x1fu;
      if (length < size_ - pos_) {
        *value = std::string_view(reinterpret_cast<const char*>(data_ + pos_ + 1), length);
        pos_ += 1 + length;
        return true;
      }
    }
    return ReadStrSlow(value);
  }
  bool ReadBin(std::span<const uint8_t>* value);
  bool ReadUint64(uint64_t* value);  // any integer encoding of a value >= 0
  bool ReadInt64(int64_t* value);    // any integer encoding of a value that fits int64
  bool ReadDouble(double* value);    // float32 or float64

  // Consumes the next value whole, containers included. Iterative: depth is
  // bounded only by the input's length, and costs no stack.
  bool Skip() {
    // Inline fast path: the nils and empty lists most skipped fields hold.
    if (pos_ < size_ && msgpack_internal::IsOneByteValue(data_[pos_])) {
      ++pos_;
      return true;
    }
    return SkipSlow();
  }

  MsgpackError error() const { return error_; }

 private:
  bool ReadStrSlow(std::string_view* value);
  bool SkipSlow();
  bool Fail(MsgpackError error) {
    error_ = error;
    return false;
  }
  // Reads a container header at pos_ (already known to be an array or map
  // marker) without checking the count against the remaining bytes.
  bool ReadContainerHeader(bool map, uint32_t* count, size_t* header_size) const;
  // Parses the integer at pos_ without consuming it: *bits holds its
  // two's-complement bits, *negative says it is below 0, *size its length.
  bool PeekInteger(uint64_t* bits, bool* negative, size_t* size);

  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  MsgpackError error_ = MsgpackError::kNone;
};

}  // namespace sci
