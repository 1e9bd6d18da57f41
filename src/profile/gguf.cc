#include "profile/gguf.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <system_error>

#include "profile/json_util.h"

namespace tessera::profile {
namespace {

using internal::printable;

// ggml.h's enum ggml_type, with ggml.c's type_traits block sizes and bytes per block
// (ggml-common.h's block structs, QK_K = 256). Ids 4, 5 (Q4_2, Q4_3) and 31–33, 36–38 (the
// repacked Q4_0_x_y and IQ4_NL_x_y layouts) were removed from the format and are refused.
constexpr std::array<GgmlType, 34> kGgmlTypes{{
    {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},
    {3, "Q4_1", 32, 20},      {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 36},      {10, "Q2_K", 256, 84},
    {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66},
    {17, "IQ2_XS", 256, 74},  {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
    {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},  {22, "IQ2_S", 256, 82},
    {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},         {25, "I16", 1, 2},
    {26, "I32", 1, 4},        {27, "I64", 1, 8},        {28, "F64", 1, 8},
    {29, "IQ1_M", 256, 56},   {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},
    {35, "TQ2_0", 256, 66},   {39, "MXFP4", 32, 17},
}};

// Bytes of one scalar of a metadata type (0 for string and array).
std::uint64_t scalarSize(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool:
      return 1;
    case GgufType::kUint16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64:
      return 8;
    case GgufType::kString:
    case GgufType::kArray:
      return 0;
  }
  return 0;
}

bool validType(std::uint32_t t) {
  return t <= static_cast<std::uint32_t>(GgufType::kFloat64);
}

// Where the header bytes come from: memory (parseGguf) or the file, read in windows.
class Source {
 public:
  virtual ~Source() = default;
  // Bytes [offset, offset + n), which the caller has checked lie inside the file. The view
  // is valid until the next call.
  virtual Result<std::string_view> read(std::uint64_t offset, std::size_t n) = 0;
};

class MemorySource final : public Source {
 public:
  explicit MemorySource(std::string_view bytes) : bytes_(bytes) {}
  Result<std::string_view> read(std::uint64_t offset, std::size_t n) override {
    if (offset > bytes_.size() || n > bytes_.size() - offset) {
      return fail(Error::invalid("truncated: the header continues past the " +
                                 std::to_string(bytes_.size()) + " bytes given"));
    }
    return bytes_.substr(offset, n);
  }

 private:
  std::string_view bytes_;
};

class FileSource final : public Source {
 public:
  FileSource(std::ifstream& in, std::uint64_t fileSize) : in_(in), fileSize_(fileSize) {}
  Result<std::string_view> read(std::uint64_t offset, std::size_t n) override {
    if (offset >= windowStart_ && offset - windowStart_ <= window_.size() &&
        n <= window_.size() - (offset - windowStart_)) {
      return std::string_view(window_).substr(offset - windowStart_, n);
    }
    const std::uint64_t want = std::max<std::uint64_t>(n, kWindow);
    const std::uint64_t size = std::min<std::uint64_t>(want, fileSize_ - offset);
    window_.resize(size);
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(offset));
    in_.read(window_.data(), static_cast<std::streamsize>(size));
    if (static_cast<std::uint64_t>(in_.gcount()) != size) {
      window_.clear();
      return fail(Error::invalid("read failed at byte " + std::to_string(offset)));
    }
    windowStart_ = offset;
    return std::string_view(window_).substr(0, n);
  }

 private:
  static constexpr std::uint64_t kWindow = 1 << 20;
  std::ifstream& in_;
  std::uint64_t fileSize_;
  std::string window_;
  std::uint64_t windowStart_ = 0;
};

class Cursor {
 public:
  Cursor(Source& source, std::uint64_t fileSize) : source_(source), fileSize_(fileSize) {}
  std::uint64_t pos() const { return pos_; }
  std::uint64_t left() const { return fileSize_ - pos_; }

  Result<std::string_view> take(std::uint64_t n, const std::string& what) {
    if (n > left()) {
      return fail(Error::invalid(what + " at byte " + std::to_string(pos_) + " needs " +
                                 std::to_string(n) + " bytes, past the end of the file (" +
                                 std::to_string(fileSize_) + " bytes)"));
    }
    auto bytes = source_.read(pos_, static_cast<std::size_t>(n));
    if (!bytes) return fail(Error::invalid(what + ": " + bytes.error().message));
    pos_ += n;
    return bytes;
  }
  Result<void> skip(std::uint64_t n, const std::string& what) {
    if (n > left()) {
      return fail(Error::invalid(what + " at byte " + std::to_string(pos_) + " needs " +
                                 std::to_string(n) + " bytes, past the end of the file (" +
                                 std::to_string(fileSize_) + " bytes)"));
    }
    pos_ += n;
    return {};
  }
  Result<std::uint32_t> u32(const std::string& what) {
    auto b = take(4, what);
    if (!b) return fail(std::move(b.error()));
    return internal::readLe32(b->data());
  }
  Result<std::uint64_t> u64(const std::string& what) {
    auto b = take(8, what);
    if (!b) return fail(std::move(b.error()));
    return internal::readLe64(b->data());
  }
  // A string: u64 length, then the bytes; at most `max` of them.
  Result<std::string> string(const std::string& what, std::uint64_t max) {
    auto n = u64(what + " length");
    if (!n) return fail(std::move(n.error()));
    if (*n > max) {
      return fail(Error::invalid(what + " at byte " + std::to_string(pos_ - 8) + ": length " +
                                 std::to_string(*n) + " exceeds the limit of " +
                                 std::to_string(max) + " bytes"));
    }
    auto b = take(*n, what);
    if (!b) return fail(std::move(b.error()));
    return std::string(*b);
  }
  // Skips a string, checking its length against the file only.
  Result<void> skipString(const std::string& what) {
    auto n = u64(what + " length");
    if (!n) return fail(std::move(n.error()));
    return skip(*n, what);
  }

 private:
  Source& source_;
  std::uint64_t fileSize_;
  std::uint64_t pos_ = 0;
};

Result<GgufValue> readScalar(Cursor& c, GgufType type, const std::string& what) {
  GgufValue v;
  v.type = type;
  if (type == GgufType::kString) {
    auto s = c.string(what, kMaxGgufStringBytes);
    if (!s) return fail(std::move(s.error()));
    v.scalar = std::move(*s);
    return v;
  }
  auto b = c.take(scalarSize(type), what);
  if (!b) return fail(std::move(b.error()));
  const auto* p = reinterpret_cast<const unsigned char*>(b->data());
  std::uint64_t raw = 0;
  for (std::size_t i = b->size(); i-- > 0;) raw = (raw << 8) | p[i];
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kUint16:
    case GgufType::kUint32:
    case GgufType::kUint64:
      v.scalar = raw;
      break;
    case GgufType::kInt8:
      v.scalar = static_cast<std::int64_t>(static_cast<std::int8_t>(raw));
      break;
    case GgufType::kInt16:
      v.scalar = static_cast<std::int64_t>(static_cast<std::int16_t>(raw));
      break;
    case GgufType::kInt32:
      v.scalar = static_cast<std::int64_t>(static_cast<std::int32_t>(raw));
      break;
    case GgufType::kInt64:
      v.scalar = static_cast<std::int64_t>(raw);
      break;
    case GgufType::kBool:
      v.scalar = raw != 0;
      break;
    case GgufType::kFloat32: {
      float f;
      const auto bits = static_cast<std::uint32_t>(raw);
      std::memcpy(&f, &bits, 4);
      v.scalar = static_cast<double>(f);
      break;
    }
    case GgufType::kFloat64: {
      double d;
      std::memcpy(&d, &raw, 8);
      v.scalar = d;
      break;
    }
    default:
      break;
  }
  return v;
}

Result<GgufValue> readValue(Cursor& c, GgufType type, const std::string& what, int depth);

Result<GgufValue> readArray(Cursor& c, const std::string& what, int depth) {
  if (depth >= kMaxGgufArrayDepth) {
    return fail(
        Error::invalid(what + ": arrays nested deeper than " + std::to_string(kMaxGgufArrayDepth)));
  }
  auto elemType = c.u32(what + " element type");
  if (!elemType) return fail(std::move(elemType.error()));
  if (!validType(*elemType)) {
    return fail(Error::invalid(what + ": unknown array element type " + std::to_string(*elemType)));
  }
  auto count = c.u64(what + " count");
  if (!count) return fail(std::move(count.error()));
  GgufValue v;
  v.type = GgufType::kArray;
  v.elementType = static_cast<GgufType>(*elemType);
  v.count = *count;
  // Each element takes at least this many bytes: a lying count fails here, not in a loop.
  const std::uint64_t minBytes = v.elementType == GgufType::kString  ? 8
                                 : v.elementType == GgufType::kArray ? 12
                                                                     : scalarSize(v.elementType);
  if (v.count > c.left() / minBytes) {
    return fail(
        Error::invalid(what + ": array of " + std::to_string(v.count) + " " +
                       ggufTypeName(v.elementType) + " needs at least " +
                       (v.count > UINT64_MAX / minBytes ? std::string("2^64")
                                                        : std::to_string(v.count * minBytes)) +
                       " bytes, more than the " + std::to_string(c.left()) + " left in the file"));
  }
  const GgufType t = v.elementType;
  const bool integer = t != GgufType::kString && t != GgufType::kArray && t != GgufType::kBool &&
                       t != GgufType::kFloat32 && t != GgufType::kFloat64;
  if (integer && v.count <= kMaxGgufKeptArrayItems) {
    v.intsKept = true;
    v.ints.reserve(v.count);
    for (std::uint64_t i = 0; i < v.count; ++i) {
      auto item = readScalar(c, t, what);
      if (!item) return fail(std::move(item.error()));
      const auto n = item->asInt();
      if (!n) {  // a uint64 beyond int64: not kept
        v.intsKept = false;
        v.ints.clear();
        v.ints.shrink_to_fit();
        TESSERA_RETURN_IF_ERROR(c.skip((v.count - i - 1) * scalarSize(t), what));
        break;
      }
      v.ints.push_back(*n);
    }
  } else if (t == GgufType::kString) {
    for (std::uint64_t i = 0; i < v.count; ++i) {
      TESSERA_RETURN_IF_ERROR(c.skipString(what + "[" + std::to_string(i) + "]"));
    }
  } else if (t == GgufType::kArray) {
    for (std::uint64_t i = 0; i < v.count; ++i) {
      auto item = readArray(c, what + "[" + std::to_string(i) + "]", depth + 1);
      if (!item) return fail(std::move(item.error()));
    }
  } else {
    TESSERA_RETURN_IF_ERROR(c.skip(v.count * scalarSize(t), what));
  }
  return v;
}

Result<GgufValue> readValue(Cursor& c, GgufType type, const std::string& what, int depth) {
  if (type == GgufType::kArray) return readArray(c, what, depth);
  return readScalar(c, type, what);
}

Result<GgufFile> parse(Source& source, std::uint64_t fileSize) {
  Cursor c(source, fileSize);
  GgufFile file;
  file.fileSize = fileSize;
  if (fileSize < 4) {
    return fail(Error::invalid("file is " + std::to_string(fileSize) +
                               " bytes, too short for the GGUF magic"));
  }
  auto magic = c.take(4, "magic");
  if (!magic) return fail(std::move(magic.error()));
  if (*magic != "GGUF") {
    return fail(
        Error::invalid("bad magic " + printable(*magic) + ", expected \"GGUF\" (not a GGUF file)"));
  }
  auto version = c.u32("version");
  if (!version) return fail(std::move(version.error()));
  file.version = *version;
  if (file.version == 1) {
    return fail(Error::invalid("GGUF version 1 is not supported (only 2 and 3)"));
  }
  if (file.version != 2 && file.version != 3) {
    const bool swapped = (file.version & 0xffff) == 0 && file.version != 0;
    return fail(Error::invalid("unsupported GGUF version " + std::to_string(file.version) +
                               (swapped ? " (a big-endian file?)" : "") + "; only 2 and 3"));
  }
  auto tensorCount = c.u64("tensor count");
  if (!tensorCount) return fail(std::move(tensorCount.error()));
  auto kvCount = c.u64("metadata count");
  if (!kvCount) return fail(std::move(kvCount.error()));
  // Smallest possible entries: a key/value pair is 8 (key length) + 4 (type) + 1 (a u8)
  // bytes; a tensor info 8 (name length) + 4 (n_dims) + 4 (type) + 8 (offset).
  if (*kvCount > c.left() / 13) {
    return fail(Error::invalid("metadata count " + std::to_string(*kvCount) +
                               " cannot fit in the " + std::to_string(c.left()) +
                               " bytes left in the file"));
  }
  if (*tensorCount > (c.left() - *kvCount * 13) / 24) {
    return fail(Error::invalid("tensor count " + std::to_string(*tensorCount) +
                               " cannot fit in the " + std::to_string(c.left()) +
                               " bytes left in the file"));
  }

  for (std::uint64_t i = 0; i < *kvCount; ++i) {
    auto key = c.string("metadata key #" + std::to_string(i), kMaxGgufKeyBytes);
    if (!key) return fail(std::move(key.error()));
    const std::string what = "metadata " + printable(*key);
    if (key->empty())
      return fail(Error::invalid("metadata key #" + std::to_string(i) + " is empty"));
    auto type = c.u32(what + " type");
    if (!type) return fail(std::move(type.error()));
    if (!validType(*type)) {
      return fail(Error::invalid(what + ": unknown value type " + std::to_string(*type)));
    }
    auto value = readValue(c, static_cast<GgufType>(*type), what, 0);
    if (!value) return fail(std::move(value.error()));
    if (!file.metadata.emplace(std::move(*key), std::move(*value)).second) {
      return fail(Error::invalid(what + ": duplicate key"));
    }
  }

  if (const GgufValue* a = file.find("general.alignment")) {
    const auto n = a->asInt();
    if (!n || *n <= 0 || *n > (1 << 30) || (*n & (*n - 1)) != 0) {
      return fail(Error::invalid("general.alignment must be a power of two up to 2^30"));
    }
    file.alignment = static_cast<std::uint64_t>(*n);
  }

  std::map<std::string, std::size_t> names;
  for (std::uint64_t i = 0; i < *tensorCount; ++i) {
    auto name = c.string("tensor #" + std::to_string(i) + " name", kMaxGgufKeyBytes);
    if (!name) return fail(std::move(name.error()));
    GgufTensor t;
    t.name = std::move(*name);
    const std::string what = "tensor " + printable(t.name);
    if (!names.emplace(t.name, i).second) return fail(Error::invalid(what + ": duplicate name"));
    auto nDims = c.u32(what + " n_dims");
    if (!nDims) return fail(std::move(nDims.error()));
    if (*nDims > kMaxGgufDims) {
      return fail(Error::invalid(what + ": " + std::to_string(*nDims) + " dimensions, more than " +
                                 std::to_string(kMaxGgufDims)));
    }
    std::uint64_t elements = 1;
    bool overflow = false;
    for (std::uint32_t d = 0; d < *nDims; ++d) {
      auto dim = c.u64(what + " dimension");
      if (!dim) return fail(std::move(dim.error()));
      if (*dim > static_cast<std::uint64_t>(INT64_MAX)) overflow = true;
      if (*dim != 0 && elements > static_cast<std::uint64_t>(INT64_MAX) / *dim) overflow = true;
      if (!overflow) elements *= *dim;
      t.dims.push_back(*dim);
    }
    if (overflow) return fail(Error::invalid(what + ": element count overflows"));
    auto type = c.u32(what + " type");
    if (!type) return fail(std::move(type.error()));
    const auto ggml = findGgmlType(*type);
    if (!ggml) {
      return fail(Error::invalid(what + ": unknown ggml type " + std::to_string(*type)));
    }
    t.type = *type;
    t.typeName = std::string(ggml->name);
    auto offset = c.u64(what + " offset");
    if (!offset) return fail(std::move(offset.error()));
    t.offset = *offset;
    const std::uint64_t ne0 = t.dims.empty() ? 1 : t.dims[0];
    if (ne0 % ggml->blockSize != 0) {
      return fail(Error::invalid(what + ": first dimension " + std::to_string(ne0) +
                                 " is not a multiple of the " + t.typeName + " block size " +
                                 std::to_string(ggml->blockSize)));
    }
    t.elements = elements;
    const std::uint64_t blocks = elements / ggml->blockSize;
    if (blocks > UINT64_MAX / ggml->typeSize) {
      return fail(Error::invalid(what + ": byte size overflows"));
    }
    t.bytes = blocks * ggml->typeSize;
    if (t.offset % file.alignment != 0) {
      return fail(Error::invalid(what + ": offset " + std::to_string(t.offset) +
                                 " is not a multiple of the alignment " +
                                 std::to_string(file.alignment)));
    }
    file.tensors.push_back(std::move(t));
  }

  const std::uint64_t headerEnd = c.pos();
  const std::uint64_t pad = (file.alignment - headerEnd % file.alignment) % file.alignment;
  file.dataOffset = headerEnd + pad;
  if (file.tensors.empty()) {
    file.dataOffset = std::min(file.dataOffset, fileSize);
    return file;
  }
  if (file.dataOffset > fileSize) {
    return fail(Error::invalid("the data section (at byte " + std::to_string(file.dataOffset) +
                               ") starts past the end of the file (" + std::to_string(fileSize) +
                               " bytes)"));
  }
  const std::uint64_t dataBytes = fileSize - file.dataOffset;
  std::vector<const GgufTensor*> order;
  order.reserve(file.tensors.size());
  for (const GgufTensor& t : file.tensors) {
    if (t.offset > dataBytes || t.bytes > dataBytes - t.offset) {
      return fail(Error::invalid("tensor " + printable(t.name) + ": " + std::to_string(t.bytes) +
                                 " bytes at offset " + std::to_string(t.offset) +
                                 " run past the end of the file (the data section has " +
                                 std::to_string(dataBytes) + " bytes)"));
    }
    order.push_back(&t);
  }
  std::sort(order.begin(), order.end(), [](const GgufTensor* a, const GgufTensor* b) {
    return a->offset != b->offset ? a->offset < b->offset : a->bytes < b->bytes;
  });
  std::uint64_t covered = 0;
  const GgufTensor* last = nullptr;
  for (const GgufTensor* t : order) {
    if (t->bytes == 0) continue;
    if (last != nullptr && t->offset < covered) {
      return fail(Error::invalid("tensors " + printable(last->name) + " and " + printable(t->name) +
                                 " overlap"));
    }
    covered = t->offset + t->bytes;
    last = t;
  }
  return file;
}

}  // namespace

const char* ggufTypeName(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
      return "uint8";
    case GgufType::kInt8:
      return "int8";
    case GgufType::kUint16:
      return "uint16";
    case GgufType::kInt16:
      return "int16";
    case GgufType::kUint32:
      return "uint32";
    case GgufType::kInt32:
      return "int32";
    case GgufType::kFloat32:
      return "float32";
    case GgufType::kBool:
      return "bool";
    case GgufType::kString:
      return "string";
    case GgufType::kArray:
      return "array";
    case GgufType::kUint64:
      return "uint64";
    case GgufType::kInt64:
      return "int64";
    case GgufType::kFloat64:
      return "float64";
  }
  return "unknown";
}

std::optional<std::int64_t> GgufValue::asInt() const {
  if (const auto* u = std::get_if<std::uint64_t>(&scalar)) {
    if (*u <= static_cast<std::uint64_t>(INT64_MAX)) return static_cast<std::int64_t>(*u);
    return std::nullopt;
  }
  if (const auto* i = std::get_if<std::int64_t>(&scalar)) return *i;
  return std::nullopt;
}

std::optional<GgmlType> findGgmlType(std::uint32_t id) {
  for (const GgmlType& t : kGgmlTypes) {
    if (t.id == id) return t;
  }
  return std::nullopt;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  const auto it = metadata.find(std::string(key));
  return it == metadata.end() ? nullptr : &it->second;
}

std::optional<std::int64_t> GgufFile::getInt(std::string_view key) const {
  const GgufValue* v = find(key);
  return v ? v->asInt() : std::nullopt;
}

std::optional<std::string> GgufFile::getString(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || v->asString() == nullptr) return std::nullopt;
  return *v->asString();
}

std::uint64_t GgufFile::tensorBytes() const {
  std::uint64_t sum = 0;
  for (const GgufTensor& t : tensors) sum += t.bytes;
  return sum;
}

Result<GgufFile> parseGguf(std::string_view bytes, std::uint64_t fileSize) {
  MemorySource source(bytes);
  return parse(source, fileSize);
}

Result<GgufFile> readGguf(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) return fail(Error::invalid(path + ": no such file"));
  if (!std::filesystem::is_regular_file(status)) {
    return fail(Error::invalid(path + ": not a regular file"));
  }
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return fail(Error::invalid(path + ": " + ec.message()));
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(Error::invalid(path + ": cannot open"));
  FileSource source(in, size);
  auto file = parse(source, size);
  if (!file) return fail(Error{file.error().code, path + ": " + file.error().message});
  file->path = path;
  return file;
}

}  // namespace tessera::profile
