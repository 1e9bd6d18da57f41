// Fuzz target: profile::parseGguf, the GGUF header reader, and profile::shapeFromGguf, the
// architecture metadata the KV-cache estimate reads. Each input is parsed as a whole file and
// as the start of a file 1 MiB longer (the header may then be "truncated" in the bytes given
// but not in the file).
//
// Checks beyond "no crash, no sanitizer report, no huge allocation" (the counts and lengths
// in the input are unchecked 64-bit numbers): an accepted header has version 2 or 3, a
// power-of-two alignment, a data section inside the file, every tensor's size equal to its
// element count / block size × bytes per block of its ggml type, inside the data section at
// an aligned offset, no two tensors overlapping; a shape read from it passes checkShape and
// its KV elements per token are positive for every tensor-parallel degree; errors are valid
// UTF-8.

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_check.h"
#include "profile/gguf.h"
#include "profile/model_shape.h"

namespace {

void checkUtf8(const std::string& message) {
  try {
    (void)nlohmann::json(message).dump();
  } catch (const nlohmann::json::exception&) {
    tessera::fuzz::checkFailed("valid UTF-8", "error message: " + message, __FILE__, __LINE__);
  }
}

void check(std::string_view bytes, std::uint64_t fileSize) {
  auto r = tessera::profile::parseGguf(bytes, fileSize);
  if (!r) {
    TESSERA_FUZZ_CHECK(!r.error().message.empty(), "empty error");
    checkUtf8(r.error().message);
    return;
  }
  const tessera::profile::GgufFile& f = *r;
  const std::string what = "file of " + std::to_string(fileSize) + " bytes";
  TESSERA_FUZZ_CHECK(f.version == 2 || f.version == 3, what);
  TESSERA_FUZZ_CHECK(f.alignment > 0 && (f.alignment & (f.alignment - 1)) == 0, what);
  TESSERA_FUZZ_CHECK(f.dataOffset <= fileSize, what);
  std::vector<const tessera::profile::GgufTensor*> order;
  for (const auto& t : f.tensors) {
    const std::string tw = what + ", tensor " + t.name;
    const auto type = tessera::profile::findGgmlType(t.type);
    TESSERA_FUZZ_CHECK(type.has_value() && type->name == t.typeName, tw);
    TESSERA_FUZZ_CHECK(t.dims.size() <= tessera::profile::kMaxGgufDims, tw);
    std::uint64_t n = 1;
    for (auto d : t.dims) n *= d;  // checked not to overflow by the parser
    TESSERA_FUZZ_CHECK(n == t.elements, tw + ": elements");
    TESSERA_FUZZ_CHECK(n % type->blockSize == 0, tw + ": whole blocks");
    TESSERA_FUZZ_CHECK(t.bytes == n / type->blockSize * type->typeSize, tw + ": bytes");
    TESSERA_FUZZ_CHECK(t.offset % f.alignment == 0, tw + ": alignment");
    TESSERA_FUZZ_CHECK(
        t.offset <= fileSize - f.dataOffset && t.bytes <= fileSize - f.dataOffset - t.offset,
        tw + ": inside the file");
    order.push_back(&t);
  }
  std::sort(order.begin(), order.end(),
            [](const auto* a, const auto* b) { return a->offset < b->offset; });
  std::uint64_t end = 0;
  for (const auto* t : order) {
    if (t->bytes == 0) continue;
    TESSERA_FUZZ_CHECK(t->offset >= end, what + ": tensor " + t->name + " overlaps");
    end = t->offset + t->bytes;
  }

  auto shape = tessera::profile::shapeFromGguf(f);
  if (!shape) {
    checkUtf8(shape.error().message);
    return;
  }
  if (!*shape) return;
  const auto& s = **shape;
  TESSERA_FUZZ_CHECK(tessera::profile::checkShape(s).has_value(), what + ": shape");
  for (int tp = 1; tp <= 16; ++tp) {
    const std::uint64_t kv = s.kvElementsPerToken(tp);
    const bool someHeads =
        s.perLayerKvHeads.empty() || std::any_of(s.perLayerKvHeads.begin(), s.perLayerKvHeads.end(),
                                                 [](auto h) { return h > 0; });
    TESSERA_FUZZ_CHECK(kv > 0 || !someHeads, what + ": no KV elements at tp " + std::to_string(tp));
    TESSERA_FUZZ_CHECK(kv <= (1ull << 60), what + ": KV elements " + std::to_string(kv));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  check(bytes, size);
  check(bytes, size + (1u << 20));
  return 0;
}
