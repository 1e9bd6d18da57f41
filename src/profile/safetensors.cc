#include "profile/safetensors.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <system_error>

#include "profile/dtype.h"
#include "profile/json_util.h"

namespace tessera::profile {

using internal::describeJson;
using internal::jsonUnsigned;
using internal::printable;
using nlohmann::json;

namespace {

Error prefixed(const std::string& path, const Error& e) {
  return Error{e.code, path + ": " + e.message};
}

// The header length N, checked against the bound and the file size.
Result<std::uint64_t> headerLength(std::string_view bytes, std::uint64_t fileSize) {
  if (fileSize < 8) {
    return fail(Error::invalid("file is " + std::to_string(fileSize) +
                               " bytes, too short for the 8-byte header length"));
  }
  if (bytes.size() < 8) return fail(Error::invalid("truncated before the 8-byte header length"));
  const std::uint64_t n = internal::readLe64(bytes.data());
  if (n > kMaxSafetensorsHeaderBytes) {
    return fail(Error::invalid("header length " + std::to_string(n) + " exceeds the limit of " +
                               std::to_string(kMaxSafetensorsHeaderBytes) + " bytes (100 MiB)"));
  }
  if (n > fileSize - 8) {
    return fail(Error::invalid("header length " + std::to_string(n) +
                               " runs past the end of the file (" + std::to_string(fileSize) +
                               " bytes)"));
  }
  if (n < 2)
    return fail(Error::invalid("header length " + std::to_string(n) + " is too short for JSON"));
  return n;
}

Result<TensorInfo> parseTensor(const std::string& name, const json& entry) {
  const std::string what = "tensor " + printable(name);
  if (!entry.is_object()) {
    return fail(Error::invalid(what + ": expected an object, got " + describeJson(entry)));
  }
  TensorInfo t;
  t.name = name;

  const auto dtypeIt = entry.find("dtype");
  if (dtypeIt == entry.end()) return fail(Error::invalid(what + ": missing \"dtype\""));
  if (!dtypeIt->is_string()) {
    return fail(Error::invalid(what + ": dtype must be a string, got " + describeJson(*dtypeIt)));
  }
  t.dtype = dtypeIt->get<std::string>();
  const auto dtype = findDtype(t.dtype);
  if (!dtype) {
    return fail(Error::invalid(what + ": unknown dtype " + printable(t.dtype) +
                               " (known: " + std::string(knownDtypeList()) + ")"));
  }

  const auto shapeIt = entry.find("shape");
  if (shapeIt == entry.end()) return fail(Error::invalid(what + ": missing \"shape\""));
  if (!shapeIt->is_array()) {
    return fail(Error::invalid(what + ": shape must be an array, got " + describeJson(*shapeIt)));
  }
  t.shape.reserve(shapeIt->size());
  for (const json& d : *shapeIt) {
    const auto v = jsonUnsigned(d);
    if (!v || *v > static_cast<std::uint64_t>(INT64_MAX)) {
      return fail(Error::invalid(what + ": shape dimensions must be integers >= 0, got " +
                                 describeJson(d)));
    }
    t.shape.push_back(static_cast<std::int64_t>(*v));
  }

  const auto offIt = entry.find("data_offsets");
  if (offIt == entry.end()) return fail(Error::invalid(what + ": missing \"data_offsets\""));
  if (!offIt->is_array() || offIt->size() != 2) {
    return fail(Error::invalid(what + ": data_offsets must be an array [begin, end], got " +
                               describeJson(*offIt)));
  }
  const auto begin = jsonUnsigned((*offIt)[0]);
  const auto end = jsonUnsigned((*offIt)[1]);
  if (!begin || !end) {
    return fail(Error::invalid(what + ": data_offsets must be integers >= 0"));
  }
  if (*end < *begin) {
    return fail(Error::invalid(what + ": data_offsets [" + std::to_string(*begin) + ", " +
                               std::to_string(*end) + "] end before they begin"));
  }
  t.begin = *begin;
  t.end = *end;

  const auto elements = elementCount(t.shape);
  const auto bytes = elements ? dtypeBytes(*dtype, *elements) : std::nullopt;
  if (!elements || !bytes) {
    return fail(Error::invalid(what + ": shape is too large for its dtype " + t.dtype +
                               " (the byte size overflows or is not whole bytes)"));
  }
  if (*bytes != t.end - t.begin) {
    std::string shape = "[";
    for (std::size_t i = 0; i < t.shape.size(); ++i) {
      if (i != 0) shape += ", ";
      shape += std::to_string(t.shape[i]);
    }
    shape += "]";
    return fail(Error::invalid(what + ": shape " + shape + " of " + t.dtype + " is " +
                               std::to_string(*bytes) + " bytes, but data_offsets [" +
                               std::to_string(t.begin) + ", " + std::to_string(t.end) + "] span " +
                               std::to_string(t.end - t.begin)));
  }
  return t;
}

Result<std::string> readPrefix(const std::string& path, std::uint64_t n) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(Error::invalid(path + ": cannot open"));
  std::string buffer(n, '\0');
  in.read(buffer.data(), static_cast<std::streamsize>(n));
  if (static_cast<std::uint64_t>(in.gcount()) != n) {
    return fail(Error::invalid(path + ": read " +
                               std::to_string(static_cast<std::uint64_t>(in.gcount())) +
                               " of the first " + std::to_string(n) + " bytes"));
  }
  return buffer;
}

Result<std::uint64_t> regularFileSize(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    return fail(Error::invalid(path + ": no such file"));
  }
  if (!std::filesystem::is_regular_file(status)) {
    return fail(Error::invalid(path + ": not a regular file"));
  }
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return fail(Error::invalid(path + ": " + ec.message()));
  return static_cast<std::uint64_t>(size);
}

}  // namespace

std::uint64_t TensorInfo::elements() const {
  return elementCount(shape).value_or(0);
}

std::uint64_t SafetensorsFile::tensorBytes() const {
  std::uint64_t sum = 0;
  for (const TensorInfo& t : tensors) sum += t.bytes();
  return sum;
}

Result<SafetensorsFile> parseSafetensorsHeader(std::string_view bytes, std::uint64_t fileSize) {
  auto n = headerLength(bytes, fileSize);
  if (!n) return fail(std::move(n.error()));
  if (bytes.size() - 8 < *n) {
    return fail(Error::invalid("truncated: the header is " + std::to_string(*n) + " bytes, only " +
                               std::to_string(bytes.size() - 8) + " present"));
  }
  const std::string_view text = bytes.substr(8, *n);
  if (text.front() != '{') {
    return fail(Error::invalid("header does not start with '{' (not a safetensors file?)"));
  }
  auto parsed = internal::parseJson(text, kMaxSafetensorsHeaderDepth, true);
  if (!parsed) return fail(Error::invalid("header: " + parsed.error().message));
  if (!parsed->is_object()) {
    return fail(Error::invalid("header must be a JSON object, got " + describeJson(*parsed)));
  }

  SafetensorsFile file;
  file.fileSize = fileSize;
  file.dataOffset = 8 + *n;
  const std::uint64_t dataBytes = fileSize - file.dataOffset;
  for (const auto& [key, value] : parsed->items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) {
        return fail(Error::invalid("__metadata__ must be an object of strings, got " +
                                   describeJson(value)));
      }
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) {
          return fail(Error::invalid("__metadata__ " + printable(mk) + " must be a string, got " +
                                     describeJson(mv)));
        }
        file.metadata.emplace(mk, mv.get<std::string>());
      }
      continue;
    }
    auto tensor = parseTensor(key, value);
    if (!tensor) return fail(std::move(tensor.error()));
    if (tensor->end > dataBytes) {
      return fail(Error::invalid(
          "tensor " + printable(key) + ": data_offsets [" + std::to_string(tensor->begin) + ", " +
          std::to_string(tensor->end) + "] run past the end of the file (the data section has " +
          std::to_string(dataBytes) + " bytes)"));
    }
    file.tensors.push_back(std::move(*tensor));
  }

  std::sort(file.tensors.begin(), file.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.name < b.name;
  });
  // Overlaps and holes, in data order (empty tensors occupy nothing).
  std::uint64_t covered = 0;
  const TensorInfo* last = nullptr;
  for (const TensorInfo& t : file.tensors) {
    if (t.begin == t.end) continue;
    if (last != nullptr && t.begin < covered) {
      return fail(Error::invalid("tensors " + printable(last->name) + " [" +
                                 std::to_string(last->begin) + ", " + std::to_string(last->end) +
                                 ") and " + printable(t.name) + " [" + std::to_string(t.begin) +
                                 ", " + std::to_string(t.end) + ") overlap"));
    }
    if (t.begin > covered) file.holes.push_back({covered, t.begin});
    covered = t.end;
    last = &t;
  }
  if (covered < dataBytes) file.holes.push_back({covered, dataBytes});
  return file;
}

Result<SafetensorsFile> readSafetensors(const std::string& path) {
  auto size = regularFileSize(path);
  if (!size) return fail(std::move(size.error()));
  auto head = readPrefix(path, std::min<std::uint64_t>(8, *size));
  if (!head) return fail(std::move(head.error()));
  auto n = headerLength(*head, *size);
  if (!n) return fail(prefixed(path, n.error()));
  auto bytes = readPrefix(path, 8 + *n);
  if (!bytes) return fail(std::move(bytes.error()));
  auto file = parseSafetensorsHeader(*bytes, *size);
  if (!file) return fail(prefixed(path, file.error()));
  file->path = path;
  return file;
}

Result<ShardedSafetensors> parseSafetensorsIndex(std::string_view text) {
  auto parsed = internal::parseJson(text, kMaxSafetensorsHeaderDepth, true);
  if (!parsed) return fail(std::move(parsed.error()));
  if (!parsed->is_object()) {
    return fail(Error::invalid("index must be a JSON object, got " + describeJson(*parsed)));
  }
  ShardedSafetensors index;
  if (const auto meta = parsed->find("metadata"); meta != parsed->end() && !meta->is_null()) {
    if (!meta->is_object()) {
      return fail(Error::invalid("metadata must be an object, got " + describeJson(*meta)));
    }
    if (const auto total = meta->find("total_size"); total != meta->end()) {
      // Written as an integer, sometimes as an integral float.
      if (const auto v = jsonUnsigned(*total)) {
        index.declaredTotalSize = *v;
      } else if (total->is_number_float() && total->get<double>() >= 0 &&
                 total->get<double>() < 1.8e19) {
        index.declaredTotalSize = static_cast<std::uint64_t>(total->get<double>());
      } else {
        return fail(Error::invalid("metadata.total_size must be a number >= 0, got " +
                                   describeJson(*total)));
      }
    }
  }
  const auto map = parsed->find("weight_map");
  if (map == parsed->end()) return fail(Error::invalid("missing \"weight_map\""));
  if (!map->is_object()) {
    return fail(Error::invalid("weight_map must be an object, got " + describeJson(*map)));
  }
  if (map->empty()) return fail(Error::invalid("weight_map is empty"));
  for (const auto& [tensor, shard] : map->items()) {
    if (!shard.is_string()) {
      return fail(Error::invalid("weight_map " + printable(tensor) +
                                 ": shard must be a file name, got " + describeJson(shard)));
    }
    const std::string name = shard.get<std::string>();
    if (name.empty() || name == "." || name == ".." ||
        name.find_first_of(std::string_view("/\\\0", 3)) != std::string::npos) {
      return fail(Error::invalid("weight_map " + printable(tensor) + ": shard " + printable(name) +
                                 " must be a plain file name in the index's directory"));
    }
    index.weightMap.emplace(tensor, name);
  }
  return index;
}

Result<ShardedSafetensors> readSafetensorsIndex(const std::string& indexPath) {
  auto size = regularFileSize(indexPath);
  if (!size) return fail(std::move(size.error()));
  if (*size > kMaxSafetensorsHeaderBytes) {
    return fail(Error::invalid(indexPath + ": " + std::to_string(*size) +
                               " bytes, more than the limit of " +
                               std::to_string(kMaxSafetensorsHeaderBytes)));
  }
  auto text = readPrefix(indexPath, *size);
  if (!text) return fail(std::move(text.error()));
  auto index = parseSafetensorsIndex(*text);
  if (!index) return fail(prefixed(indexPath, index.error()));
  index->indexPath = indexPath;

  const std::filesystem::path dir = std::filesystem::path(indexPath).parent_path();
  std::map<std::string, std::string> firstTensorOf;  // shard → a tensor the index puts there
  for (const auto& [tensor, shard] : index->weightMap) firstTensorOf.emplace(shard, tensor);
  std::map<std::string, std::string> holder;  // tensor → shard that holds it
  for (const auto& [shard, tensor] : firstTensorOf) {
    const std::string shardPath = (dir / shard).string();
    std::error_code ec;
    if (!std::filesystem::exists(shardPath, ec)) {
      return fail(Error::invalid(indexPath + ": shard " + printable(shard) + " (holding tensor " +
                                 printable(tensor) + ") does not exist: " + shardPath));
    }
    auto file = readSafetensors(shardPath);
    if (!file) return fail(std::move(file.error()));
    for (const TensorInfo& t : file->tensors) {
      const auto mapped = index->weightMap.find(t.name);
      if (mapped == index->weightMap.end()) {
        return fail(Error::invalid(shardPath + ": tensor " + printable(t.name) +
                                   " is not in the index's weight_map"));
      }
      if (mapped->second != shard) {
        return fail(Error::invalid(shardPath + ": tensor " + printable(t.name) +
                                   " is mapped to shard " + printable(mapped->second) +
                                   " by the index"));
      }
      holder.emplace(t.name, shard);
    }
    index->shards.push_back(std::move(*file));
  }
  for (const auto& [tensor, shard] : index->weightMap) {
    if (!holder.contains(tensor)) {
      return fail(Error::invalid(indexPath + ": tensor " + printable(tensor) +
                                 " is mapped to shard " + printable(shard) +
                                 ", which does not hold it"));
    }
  }
  return index;
}

}  // namespace tessera::profile
