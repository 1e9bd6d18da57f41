// Fuzz target: profile::parseHfConfig (a Hugging Face config.json, read from model
// directories a user or a node agent points at), then profile::estimateMemory on the shape
// it gives, with a few context, concurrency, KV dtype and tensor-parallel settings.
//
// Checks beyond "no crash, no sanitizer report, no exception": an accepted config passes
// checkShape (counts within bounds, KV heads <= heads, head dims >= 1); parsing twice gives
// the same shape; an estimate either succeeds with every figure of the model profile within
// the 16 TiB a profile may state and per GPU = ceil(total / tp), or fails saying so; errors
// are valid UTF-8.

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_check.h"
#include "profile/estimate.h"
#include "profile/hf_config.h"

namespace {

void checkUtf8(const std::string& message) {
  try {
    (void)nlohmann::json(message).dump();
  } catch (const nlohmann::json::exception&) {
    tessera::fuzz::checkFailed("valid UTF-8", "error message: " + message, __FILE__, __LINE__);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = tessera::profile::parseHfConfig(text);
  if (!r) {
    TESSERA_FUZZ_CHECK(!r.error().message.empty(), "empty error");
    checkUtf8(r.error().message);
    return 0;
  }
  const tessera::profile::ModelShape& s = *r;
  const std::string what = std::string(text.substr(0, 200));
  TESSERA_FUZZ_CHECK(tessera::profile::checkShape(s).has_value(), what);
  auto again = tessera::profile::parseHfConfig(text);
  TESSERA_FUZZ_CHECK(again && again->kvElementsPerToken() == s.kvElementsPerToken() &&
                         again->maxContext == s.maxContext && again->dtype == s.dtype,
                     what + ": not deterministic");

  tessera::profile::ModelFiles model;
  model.weightBytes = 16ull << 30;
  model.byDtype["BF16"] = {model.weightBytes, model.weightBytes / 2, 1};
  model.shape = s;
  const char* dtypes[] = {"auto", "fp8", "fp32", "q4_0"};
  const std::int64_t contexts[] = {0, 1, 131072};
  const std::int64_t concurrency[] = {1, 7, 1000};
  int i = 0;
  for (int tp : {1, 3, 16}) {
    for (std::int64_t context : contexts) {
      tessera::profile::EstimateOptions o;
      o.tensorParallel = tp;
      o.context = context;
      o.concurrency = concurrency[i % 3];
      o.kvDtype = dtypes[i % 4];
      ++i;
      auto e = tessera::profile::estimateMemory(model, o);
      if (!e) {
        checkUtf8(e.error().message);
        TESSERA_FUZZ_CHECK(e.error().message.find("16 TiB") != std::string::npos,
                           what + ": " + e.error().message);
        continue;
      }
      const auto p = tessera::profile::toModelProfile(*e, "m");
      const std::string pw = what + ": tp " + std::to_string(tp) + " context " +
                             std::to_string(e->context) + " kv " + std::to_string(p.kvCacheMib);
      TESSERA_FUZZ_CHECK(e->context >= 1, pw);
      TESSERA_FUZZ_CHECK(p.weightsMib >= 0 && p.kvCacheMib >= 0 && p.overheadMib >= 0, pw);
      constexpr auto kMax = static_cast<std::int64_t>(tessera::profile::kMaxProfileMib);
      TESSERA_FUZZ_CHECK(p.weightsMib <= kMax && p.kvCacheMib <= kMax && p.overheadMib <= kMax, pw);
      const bool someHeads = s.perLayerKvHeads.empty() || s.kvHeads > 0;
      TESSERA_FUZZ_CHECK(e->kvBytesPerToken > 0 || !someHeads, pw);
      TESSERA_FUZZ_CHECK(e->totalBytes == e->weightBytes + e->kvCacheBytes + e->overheadBytes, pw);
      TESSERA_FUZZ_CHECK(e->perGpuBytes == (e->totalBytes + tp - 1) / tp, pw);
    }
  }
  return 0;
}
