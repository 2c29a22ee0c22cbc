// Why a reader of our own rather than msgpack-cxx's unpack or its visitor
// (msgpack::parse): see msgpack_view.h.
#include "wire/msgpack_view.h"

#include <bit>
#include <cstring>
#include <limits>

namespace sci {
namespace {

template <typename T>
T LoadBigEndian(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof value);
  if constexpr (std::endian::native == std::endian::little) {
    if constexpr (sizeof(T) == 2) value = static_cast<T>(__builtin_bswap16(static_cast<uint16_t>(value)));
    if constexpr (sizeof(T) == 4) value = static_cast<T>(__builtin_bswap32(static_cast<uint32_t>(value)));
    if constexpr (sizeof(T) == 8) value = static_cast<T>(__builtin_bswap64(static_cast<uint64_t>(value)));
  }
  return value;
}

using msgpack_internal::kMarkerTypes;

// The shape of one encoded value: a header of `header` bytes, then either
// `payload` bytes (scalars, strings, bins, exts) or `children` values
// (arrays: its elements; maps: keys and values).
struct Head {
  MsgpackType type = MsgpackType::kEnd;
  size_t header = 0;
  uint64_t payload = 0;
  uint64_t children = 0;
};

// Reads the head of the value at `p` (`available` bytes from p on). Checks
// that the header itself is there; the caller checks payload and children.
bool ParseHead(const uint8_t* p, size_t available, Head* head, MsgpackError* error) {
  if (available == 0) {
    *error = MsgpackError::kTruncated;
    return false;
  }
  const uint8_t b = p[0];
  head->type = kMarkerTypes[b];
  head->header = 1;
  head->payload = 0;
  head->children = 0;
  // Fixed-size markers: the payload size is implied.
  auto sized = [&](size_t length_bytes, uint64_t extra) {
    // A length prefix of `length_bytes` bytes follows the marker; `extra`
    // bytes (an ext's type byte) follow the prefix.
    if (available < 1 + length_bytes) {
      *error = MsgpackError::kTruncated;
      return false;
    }
    uint64_t n = 0;
    if (length_bytes == 1) n = p[1];
    if (length_bytes == 2) n = LoadBigEndian<uint16_t>(p + 1);
    if (length_bytes == 4) n = LoadBigEndian<uint32_t>(p + 1);
    head->header = 1 + length_bytes;
    head->payload = n + extra;
    return true;
  };
  auto counted = [&](size_t length_bytes, uint64_t per_entry) {
    if (!sized(length_bytes, 0)) return false;
    head->children = head->payload * per_entry;
    head->payload = 0;
    return true;
  };
  if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) return true;
  if (b <= 0x8f) {
    head->children = uint64_t{b & 0x0fu} * 2;
    return true;
  }
  if (b <= 0x9f) {
    head->children = b & 0x0fu;
    return true;
  }
  if (b <= 0xbf) {
    head->payload = b & 0x1fu;
    return true;
  }
  switch (b) {
    case 0xc1: *error = MsgpackError::kReserved; return false;
    case 0xc4: return sized(1, 0);
    case 0xc5: return sized(2, 0);
    case 0xc6: return sized(4, 0);
    case 0xc7: return sized(1, 1);
    case 0xc8: return sized(2, 1);
    case 0xc9: return sized(4, 1);
    case 0xca: head->payload = 4; return true;
    case 0xcb: head->payload = 8; return true;
    case 0xcc: case 0xd0: head->payload = 1; return true;
    case 0xcd: case 0xd1: head->payload = 2; return true;
    case 0xce: case 0xd2: head->payload = 4; return true;
    case 0xcf: case 0xd3: head->payload = 8; return true;
    case 0xd4: head->payload = 2; return true;
    case 0xd5: head->payload = 3; return true;
    case 0xd6: head->payload = 5; return true;
    case 0xd7: head->payload = 9; return true;
    case 0xd8: head->payload = 17; return true;
    case 0xd9: return sized(1, 0);
    case 0xda: return sized(2, 0);
    case 0xdb: return sized(4, 0);
    case 0xdc: return counted(2, 1);
    case 0xdd: return counted(4, 1);
    case 0xde: return counted(2, 2);
    default: return counted(4, 2);  // 0xdf
  }
}

}  // namespace

std::string_view MsgpackTypeName(MsgpackType type) {
  switch (type) {
    case MsgpackType::kNil: return "nil";
    case MsgpackType::kBool: return "bool";
    case MsgpackType::kUint: return "uint";
    case MsgpackType::kInt: return "int";
    case MsgpackType::kFloat: return "float";
    case MsgpackType::kStr: return "str";
    case MsgpackType::kBin: return "bin";
    case MsgpackType::kArray: return "array";
    case MsgpackType::kMap: return "map";
    case MsgpackType::kExt: return "ext";
    case MsgpackType::kEnd: return "end of data";
    case MsgpackType::kReserved: return "reserved byte 0xc1";
  }
  return "?";
}

std::string_view MsgpackErrorName(MsgpackError error) {
  switch (error) {
    case MsgpackError::kNone: return "no error";
    case MsgpackError::kTruncated: return "truncated";
    case MsgpackError::kWrongType: return "wrong type";
    case MsgpackError::kTooLong: return "length exceeds the remaining bytes (truncated, or an absurd length)";
    case MsgpackError::kOutOfRange: return "integer out of range";
    case MsgpackError::kReserved: return "reserved byte 0xc1";
  }
  return "?";
}

bool MsgpackReader::ReadNil() {
  if (pos_ >= size_) return Fail(MsgpackError::kTruncated);
  if (data_[pos_] != 0xc0) return Fail(MsgpackError::kWrongType);
  ++pos_;
  return true;
}

bool MsgpackReader::ReadContainerHeader(bool map, uint32_t* count, size_t* header_size) const {
  const uint8_t* p = data_ + pos_;
  const size_t available = size_ - pos_;
  const uint8_t b = p[0];
  const uint8_t fix_base = map ? 0x80 : 0x90;
  const uint8_t marker16 = map ? 0xde : 0xdc;
  if ((b & 0xf0) == fix_base) {
    *count = b & 0x0fu;
    *header_size = 1;
    return true;
  }
  if (b == marker16) {
    if (available < 3) return false;
    *count = LoadBigEndian<uint16_t>(p + 1);
    *header_size = 3;
    return true;
  }
  if (b == marker16 + 1) {
    if (available < 5) return false;
    *count = LoadBigEndian<uint32_t>(p + 1);
    *header_size = 5;
    return true;
  }
  return false;
}

bool MsgpackReader::ReadArrayHeader(uint32_t* count) {
  if (pos_ >= size_) return Fail(MsgpackError::kTruncated);
  if (PeekType() != MsgpackType::kArray) return Fail(MsgpackError::kWrongType);
  size_t header = 0;
  if (!ReadContainerHeader(false, count, &header)) return Fail(MsgpackError::kTruncated);
  // Every element takes at least one byte: a larger count is a lie.
  if (*count > size_ - pos_ - header) return Fail(MsgpackError::kTooLong);
  pos_ += header;
  return true;
}

bool MsgpackReader::ReadMapHeader(uint32_t* count) {
  if (pos_ >= size_) return Fail(MsgpackError::kTruncated);
  if (PeekType() != MsgpackType::kMap) return Fail(MsgpackError::kWrongType);
  size_t header = 0;
  if (!ReadContainerHeader(true, count, &header)) return Fail(MsgpackError::kTruncated);
  if (uint64_t{*count} * 2 > size_ - pos_ - header) return Fail(MsgpackError::kTooLong);
  pos_ += header;
  return true;
}

bool MsgpackReader::ReadStrSlow(std::string_view* value) {
  if (pos_ >= size_) return Fail(MsgpackError::kTruncated);
  const uint8_t* p = data_ + pos_;
  const size_t available = size_ - pos_;
  const uint8_t b = p[0];
  size_t header = 1;
  size_t length = 0;
  if ((b & 0xe0) == 0xa0) {
    length = b & 0x1fu;
  } else if (b == 0xd9) {
    if (available < 2) return Fail(MsgpackError::kTruncated);
    length = p[1];
    header = 2;
  } else if (b == 0xda) {
    if (available < 3) return Fail(MsgpackError::kTruncated);
    length = LoadBigEndian<uint16_t>(p + 1);
    header = 3;
  } else if (b == 0xdb) {
    if (available < 5) return Fail(MsgpackError::kTruncated);
    length = LoadBigEndian<uint32_t>(p + 1);
    header = 5;
  } else {
    return Fail(MsgpackError::kWrongType);
  }
  if (length > available - header) return Fail(header == 1 ? MsgpackError::kTruncated : MsgpackError::kTooLong);
  *value = std::string_view(reinterpret_cast<const char*>(p + header), length);
  pos_ += header + length;
  return true;
}

bool MsgpackReader::ReadBin(std::span<const uint8_t>* value) {
  if (pos_ >= size_) return Fail(MsgpackError::kTruncated);
  if (PeekType() != MsgpackType::kBin) return Fail(MsgpackError::kWrongType);
  Head head;
  MsgpackError error = MsgpackError::kNone;
  if (!ParseHead(data_ + pos_, size_ - pos_, &head, &error)) return Fail(error);
  if (head.payload > size_ - pos_ - head.header) return Fail(MsgpackError::kTooLong);
  *value = std::span<const uint8_t>(data_ + pos_ + head.header, head.payload);
  pos_ += head.header + head.payload;
  return true;
}

bool MsgpackReader::PeekInteger(uint64_t* bits, bool* negative, size_t* size) {
  if (pos_ >= size_) return Fail(MsgpackError::kTruncated);
  const uint8_t* p = data_ + pos_;
  const size_t available = size_ - pos_;
  const uint8_t b = p[0];
  *negative = false;
  if (b <= 0x7f) {
    *bits = b;
    *size = 1;
    return true;
  }
  if (b >= 0xe0) {
    *bits = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int8_t>(b)));
    *negative = true;
    *size = 1;
    return true;
  }
  size_t width = 0;
  bool is_signed = false;
  switch (b) {
    case 0xcc: width = 1; break;
    case 0xcd: width = 2; break;
    case 0xce: width = 4; break;
    case 0xcf: width = 8; break;
    case 0xd0: width = 1; is_signed = true; break;
    case 0xd1: width = 2; is_signed = true; break;
    case 0xd2: width = 4; is_signed = true; break;
    case 0xd3: width = 8; is_signed = true; break;
    default: return Fail(MsgpackError::kWrongType);
  }
  if (available < 1 + width) return Fail(MsgpackError::kTruncated);
  int64_t signed_value = 0;
  uint64_t unsigned_value = 0;
  switch (width) {
    case 1:
      unsigned_value = p[1];
      signed_value = static_cast<int8_t>(p[1]);
      break;
    case 2:
      unsigned_value = LoadBigEndian<uint16_t>(p + 1);
      signed_value = LoadBigEndian<int16_t>(p + 1);
      break;
    case 4:
      unsigned_value = LoadBigEndian<uint32_t>(p + 1);
      signed_value = LoadBigEndian<int32_t>(p + 1);
      break;
    default:
      unsigned_value = LoadBigEndian<uint64_t>(p + 1);
      signed_value = LoadBigEndian<int64_t>(p + 1);
      break;
  }
  if (is_signed) {
    *bits = static_cast<uint64_t>(signed_value);
    *negative = signed_value < 0;
  } else {
    *bits = unsigned_value;
  }
  *size = 1 + width;
  return true;
}

bool MsgpackReader::ReadUint64(uint64_t* value) {
  uint64_t bits = 0;
  bool negative = false;
  size_t size = 0;
  if (!PeekInteger(&bits, &negative, &size)) return false;
  if (negative) return Fail(MsgpackError::kOutOfRange);
  *value = bits;
  pos_ += size;
  return true;
}

bool MsgpackReader::ReadInt64(int64_t* value) {
  uint64_t bits = 0;
  bool negative = false;
  size_t size = 0;
  if (!PeekInteger(&bits, &negative, &size)) return false;
  // A non-negative value above INT64_MAX came from a uint64 encoding.
  if (!negative && bits > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return Fail(MsgpackError::kOutOfRange);
  }
  *value = static_cast<int64_t>(bits);
  pos_ += size;
  return true;
}

bool MsgpackReader::ReadDouble(double* value) {
  if (pos_ >= size_) return Fail(MsgpackError::kTruncated);
  const uint8_t* p = data_ + pos_;
  const size_t available = size_ - pos_;
  if (p[0] == 0xca) {
    if (available < 5) return Fail(MsgpackError::kTruncated);
    *value = static_cast<double>(std::bit_cast<float>(LoadBigEndian<uint32_t>(p + 1)));
    pos_ += 5;
    return true;
  }
  if (p[0] == 0xcb) {
    if (available < 9) return Fail(MsgpackError::kTruncated);
    *value = std::bit_cast<double>(LoadBigEndian<uint64_t>(p + 1));
    pos_ += 9;
    return true;
  }
  return Fail(MsgpackError::kWrongType);
}

bool MsgpackReader::SkipSlow() {
  // Values still to consume. Each container's count was checked against the
  // bytes that remain, so this never exceeds twice the input's length.
  uint64_t pending = 1;
  size_t pos = pos_;
  while (pending > 0) {
    Head head;
    MsgpackError error = MsgpackError::kNone;
    if (!ParseHead(data_ + pos, size_ - pos, &head, &error)) return Fail(error);
    const size_t after_header = size_ - pos - head.header;
    if (head.payload > after_header) {
      return Fail(head.header == 1 ? MsgpackError::kTruncated : MsgpackError::kTooLong);
    }
    if (head.children > after_header) return Fail(MsgpackError::kTooLong);
    pos += head.header + static_cast<size_t>(head.payload);
    pending = pending - 1 + head.children;
  }
  pos_ = pos;
  return true;
}

}  // namespace sci
