#include "api/device_pool_report.h"

#include <cstdint>
#include <string>
#include <string_view>

#include "api/json_fields.h"

namespace tessera::api {

using nlohmann::json;

Result<json> parseDevicePool(const json& pool) {
  constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 40;
  constexpr std::size_t kMaxEntries = 256;
  if (!pool.is_object()) return fail(fieldError("devicePool", "expected an object"));
  TESSERA_RETURN_IF_ERROR(
      onlyKeys(pool, "devicePool", {"blockBytes", "blocks", "freeBlocks", "resident", "loading"}));
  auto blockBytes = intField(pool, "blockBytes", "devicePool", 1, kMaxBlocks, 0);
  if (!blockBytes) return fail(blockBytes.error());
  auto blocks = intField(pool, "blocks", "devicePool", 0, kMaxBlocks, 0);
  if (!blocks) return fail(blocks.error());
  auto freeBlocks = intField(pool, "freeBlocks", "devicePool", 0, *blocks, 0);
  if (!freeBlocks) return fail(freeBlocks.error());
  json out{{"blockBytes", *blockBytes}, {"blocks", *blocks}, {"freeBlocks", *freeBlocks}};
  for (const char* list : {"resident", "loading"}) {
    json entries = json::array();
    if (const json* items = member(pool, list); items != nullptr) {
      if (!items->is_array() || items->size() > kMaxEntries) {
        return fail(fieldError(std::string("devicePool.") + list,
                               "expected an array of at most 256 entries"));
      }
      for (std::size_t i = 0; i < items->size(); ++i) {
        const json& e = (*items)[i];
        const std::string path = std::string("devicePool.") + list + "[" + std::to_string(i) + "]";
        const bool resident = std::string_view(list) == "resident";
        if (resident) {
          TESSERA_RETURN_IF_ERROR(onlyKeys(e, path, {"model", "version", "blocks"}));
        } else {
          TESSERA_RETURN_IF_ERROR(onlyKeys(e, path, {"model", "version", "doneBytes", "totalBytes"}));
        }
        const json* model = member(e, "model");
        if (model == nullptr || !model->is_string() || model->get<std::string>().empty() ||
            model->get<std::string>().size() > 253) {
          return fail(fieldError(path + ".model", "required text, at most 253 characters"));
        }
        const json* version = member(e, "version");
        if (version != nullptr && (!version->is_string() || version->get<std::string>().size() > 253)) {
          return fail(fieldError(path + ".version", "expected text, at most 253 characters"));
        }
        json row{{"model", *model}, {"version", version ? *version : json("")}};
        if (resident) {
          auto b = intField(e, "blocks", path, 0, *blocks, 0);
          if (!b) return fail(b.error());
          row["blocks"] = *b;
        } else {
          // A byte bound of its own: blocks x blockBytes could overflow.
          auto total = intField(e, "totalBytes", path, 0, std::int64_t{1} << 50, 0);
          if (!total) return fail(total.error());
          auto done = intField(e, "doneBytes", path, 0, *total, 0);
          if (!done) return fail(done.error());
          row["doneBytes"] = *done;
          row["totalBytes"] = *total;
        }
        entries.push_back(std::move(row));
      }
    }
    out[list] = std::move(entries);
  }
  return out;
}

}  // namespace tessera::api
