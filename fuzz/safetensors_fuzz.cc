// Fuzz target: profile::parseSafetensorsHeader, the safetensors header validator every model
// file goes through before a loader trusts its offsets. Each input is parsed twice: as the
// raw bytes of a whole file, and as the JSON header of a file (its 8-byte length prepended,
// 4 KiB of data after it), so that the driver's JSON-aware mutations of the corpus's
// headers reach the validation beyond the length field.
//
// Checks beyond "no crash, no sanitizer report": an accepted header describes tensors that
// lie inside the data section, in data order, without overlapping, each exactly as many
// bytes as its shape and dtype say; holes and tensors together cover the data section
// exactly; names are unique; a header written back from the result is accepted again with the
// same tensors (a round trip); the result is the same given only the first 8 + N bytes;
// errors are valid UTF-8 (they quote names from the file).

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_check.h"
#include "profile/dtype.h"
#include "profile/safetensors.h"

namespace {

using tessera::profile::SafetensorsFile;
using tessera::profile::TensorInfo;

std::string le64(std::uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i, v >>= 8) s[i] = static_cast<char>(v & 0xff);
  return s;
}

void checkUtf8(const std::string& message) {
  try {
    (void)nlohmann::json(message).dump();
  } catch (const nlohmann::json::exception&) {
    tessera::fuzz::checkFailed("valid UTF-8", "error message: " + message, __FILE__, __LINE__);
  }
}

bool sameTensors(const SafetensorsFile& a, const SafetensorsFile& b) {
  if (a.tensors.size() != b.tensors.size() || a.metadata != b.metadata) return false;
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    const TensorInfo& x = a.tensors[i];
    const TensorInfo& y = b.tensors[i];
    if (x.name != y.name || x.dtype != y.dtype || x.shape != y.shape || x.begin != y.begin ||
        x.end != y.end) {
      return false;
    }
  }
  return true;
}

void check(std::string_view bytes, std::uint64_t fileSize) {
  auto r = tessera::profile::parseSafetensorsHeader(bytes, fileSize);
  if (!r) {
    TESSERA_FUZZ_CHECK(!r.error().message.empty(), "empty error");
    checkUtf8(r.error().message);
    return;
  }
  const SafetensorsFile& f = *r;
  const std::string what = "file of " + std::to_string(fileSize) + " bytes";
  TESSERA_FUZZ_CHECK(f.dataOffset >= 8 && f.dataOffset <= fileSize, what);
  TESSERA_FUZZ_CHECK(f.dataOffset - 8 <= tessera::profile::kMaxSafetensorsHeaderBytes, what);
  const std::uint64_t dataBytes = fileSize - f.dataOffset;
  std::set<std::string> names;
  std::uint64_t covered = 0, lastBegin = 0, lastEnd = 0;
  for (const TensorInfo& t : f.tensors) {
    const std::string tw = what + ", tensor " + t.name;
    TESSERA_FUZZ_CHECK(names.insert(t.name).second, tw + ": duplicate");
    TESSERA_FUZZ_CHECK(t.name != "__metadata__", tw);
    TESSERA_FUZZ_CHECK(t.begin <= t.end && t.end <= dataBytes, tw);
    TESSERA_FUZZ_CHECK(t.begin >= lastBegin, tw + ": not in data order");
    if (t.bytes() > 0) {
      TESSERA_FUZZ_CHECK(t.begin >= lastEnd, tw + ": overlaps");
      lastEnd = t.end;
    }
    lastBegin = t.begin;
    const auto dtype = tessera::profile::findDtype(t.dtype);
    TESSERA_FUZZ_CHECK(dtype.has_value(), tw + ": dtype " + t.dtype);
    const auto n = tessera::profile::elementCount(t.shape);
    TESSERA_FUZZ_CHECK(n.has_value(), tw + ": element count");
    TESSERA_FUZZ_CHECK(tessera::profile::dtypeBytes(*dtype, *n) == t.bytes(), tw + ": size");
    covered += t.bytes();
  }
  for (const auto& h : f.holes) {
    TESSERA_FUZZ_CHECK(h.begin < h.end && h.end <= dataBytes, what + ": hole");
    covered += h.end - h.begin;
  }
  TESSERA_FUZZ_CHECK(covered == dataBytes, what + ": tensors and holes cover " +
                                               std::to_string(covered) + " of " +
                                               std::to_string(dataBytes) + " bytes");

  // Given only the first 8 + N bytes: the same answer.
  auto prefix = tessera::profile::parseSafetensorsHeader(bytes.substr(0, f.dataOffset), fileSize);
  TESSERA_FUZZ_CHECK(prefix && sameTensors(f, *prefix), what + ": differs on the prefix");

  // Written back, accepted again with the same tensors.
  nlohmann::json header = nlohmann::json::object();
  if (!f.metadata.empty()) header["__metadata__"] = f.metadata;
  for (const TensorInfo& t : f.tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {t.begin, t.end}}};
  }
  const std::string text = header.dump();
  const std::string again = le64(text.size()) + text;
  auto back = tessera::profile::parseSafetensorsHeader(again, again.size() + dataBytes);
  TESSERA_FUZZ_CHECK(back.has_value(), what + ": round trip refused: " +
                                           (back ? std::string() : back.error().message));
  TESSERA_FUZZ_CHECK(sameTensors(f, *back), what + ": round trip differs");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  check(bytes, size);
  // The input as a header: its length first, 4 KiB of (absent) data after it.
  const std::string file = le64(size) + std::string(bytes);
  check(file, file.size() + 4096);
  return 0;
}
