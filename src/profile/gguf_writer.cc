#include "profile/gguf_writer.h"

#include <algorithm>
#include <cstring>
#include <fstream>

namespace tessera::profile {
namespace {

void putU32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i, v >>= 8) out += static_cast<char>(v & 0xff);
}
void putU64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i, v >>= 8) out += static_cast<char>(v & 0xff);
}
void putString(std::string& out, const std::string& s) {
  putU64(out, s.size());
  out += s;
}

using Scalar = std::variant<std::uint64_t, std::int64_t, double, bool, std::string>;

void putScalar(std::string& out, GgufType type, const Scalar& v) {
  std::uint64_t raw = 0;
  if (const auto* u = std::get_if<std::uint64_t>(&v)) raw = *u;
  if (const auto* i = std::get_if<std::int64_t>(&v)) raw = static_cast<std::uint64_t>(*i);
  if (const auto* b = std::get_if<bool>(&v)) raw = *b ? 1 : 0;
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool:
      out += static_cast<char>(raw & 0xff);
      break;
    case GgufType::kUint16:
    case GgufType::kInt16:
      out += static_cast<char>(raw & 0xff);
      out += static_cast<char>((raw >> 8) & 0xff);
      break;
    case GgufType::kUint32:
    case GgufType::kInt32:
      putU32(out, static_cast<std::uint32_t>(raw));
      break;
    case GgufType::kUint64:
    case GgufType::kInt64:
      putU64(out, raw);
      break;
    case GgufType::kFloat32: {
      const auto* d = std::get_if<double>(&v);
      const float f = d ? static_cast<float>(*d) : 0.0f;
      std::uint32_t bits;
      std::memcpy(&bits, &f, 4);
      putU32(out, bits);
      break;
    }
    case GgufType::kFloat64: {
      const auto* d = std::get_if<double>(&v);
      const double f = d ? *d : 0.0;
      std::uint64_t bits;
      std::memcpy(&bits, &f, 8);
      putU64(out, bits);
      break;
    }
    case GgufType::kString: {
      const auto* s = std::get_if<std::string>(&v);
      putString(out, s ? *s : std::string());
      break;
    }
    case GgufType::kArray:
      break;
  }
}

}  // namespace

GgufSpecValue GgufSpecValue::stringArray(std::vector<std::string> v) {
  GgufSpecValue out = scalarOf(GgufType::kArray, std::uint64_t{0});
  out.elementType = GgufType::kString;
  for (auto& s : v) out.items.emplace_back(std::move(s));
  return out;
}

GgufSpecValue GgufSpecValue::intArray(GgufType elementType, std::vector<std::int64_t> v) {
  GgufSpecValue out = scalarOf(GgufType::kArray, std::uint64_t{0});
  out.elementType = elementType;
  for (const auto i : v) out.items.emplace_back(i);
  return out;
}

Result<std::string> ggufBytes(const GgufSpec& spec) {
  if (spec.alignment == 0) return fail(Error::invalid("alignment must be > 0"));
  std::string out = "GGUF";
  putU32(out, spec.version);
  putU64(out, spec.tensors.size());
  putU64(out, spec.metadata.size());
  for (const auto& [key, value] : spec.metadata) {
    putString(out, key);
    putU32(out, static_cast<std::uint32_t>(value.type));
    if (value.type == GgufType::kArray) {
      putU32(out, static_cast<std::uint32_t>(value.elementType));
      putU64(out, value.items.size());
      for (const Scalar& item : value.items) putScalar(out, value.elementType, item);
    } else {
      putScalar(out, value.type, value.scalar);
    }
  }
  std::uint64_t offset = 0;
  std::uint64_t dataBytes = 0;
  for (const GgufSpecTensor& t : spec.tensors) {
    const auto type = findGgmlType(t.type);
    if (!type) return fail(Error::invalid("tensor " + t.name + ": unknown ggml type"));
    std::uint64_t elements = 1;
    for (const auto d : t.dims) elements *= d;
    const std::uint64_t bytes = elements / type->blockSize * type->typeSize;
    putString(out, t.name);
    putU32(out, static_cast<std::uint32_t>(t.dims.size()));
    for (const auto d : t.dims) putU64(out, d);
    putU32(out, t.type);
    const std::uint64_t at = t.offset.value_or(offset);
    putU64(out, at);
    offset = at + bytes;
    offset += (spec.alignment - offset % spec.alignment) % spec.alignment;
    dataBytes = std::max(dataBytes, offset);
  }
  out.append((spec.alignment - out.size() % spec.alignment) % spec.alignment, '\0');
  out.append(dataBytes, '\0');
  return out;
}

Result<void> writeGguf(const std::string& path, const GgufSpec& spec) {
  auto bytes = ggufBytes(spec);
  if (!bytes) return fail(std::move(bytes.error()));
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return fail(Error::invalid(path + ": cannot create"));
  f.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  if (!f) return fail(Error::internal(path + ": write failed"));
  return {};
}

}  // namespace tessera::profile
