#include "profile/safetensors_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <memory>
#include <set>
#include <span>

#include <nlohmann/json.hpp>

#include "profile/dtype.h"

namespace tessera::profile {
namespace {

constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;
constexpr std::size_t kChunkBytes = 16u << 20;

inline std::uint64_t patternWord(std::uint64_t seed, std::uint64_t index) {
  return seed ^ ((index + 1) * kGolden);
}

inline std::uint64_t toLittle(std::uint64_t v) {
  if constexpr (std::endian::native == std::endian::big) return std::byteswap(v);
  return v;
}

// Buffered writes of large chunks to a file descriptor.
class ChunkWriter {
 public:
  explicit ChunkWriter(int fd) : fd_(fd), buffer_(new std::byte[kChunkBytes]) {}

  // Room left in the buffer, flushing first when it is full.
  Result<std::span<std::byte>> space() {
    if (used_ == kChunkBytes) TESSERA_RETURN_IF_ERROR(flush());
    return std::span<std::byte>(buffer_.get() + used_, kChunkBytes - used_);
  }
  void commit(std::size_t n) { used_ += n; }

  Result<void> append(const void* data, std::size_t n) {
    const auto* p = static_cast<const std::byte*>(data);
    while (n > 0) {
      auto room = space();
      if (!room) return fail(std::move(room.error()));
      const std::size_t k = std::min(n, room->size());
      std::memcpy(room->data(), p, k);
      commit(k);
      p += k;
      n -= k;
    }
    return {};
  }

  Result<void> flush() {
    std::size_t done = 0;
    while (done < used_) {
      const ssize_t w = ::write(fd_, buffer_.get() + done, used_ - done);
      if (w < 0) {
        if (errno == EINTR) continue;
        return fail(Error::internal(std::string("write failed: ") + std::strerror(errno)));
      }
      done += static_cast<std::size_t>(w);
    }
    used_ = 0;
    return {};
  }

 private:
  int fd_;
  std::unique_ptr<std::byte[]> buffer_;
  std::size_t used_ = 0;
};

Result<void> writeFile(const std::string& path, const std::string& header,
                       const std::vector<std::pair<std::uint64_t, std::uint64_t>>& data) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return fail(Error::invalid(path + ": cannot create: " + std::strerror(errno)));
  }
  ChunkWriter out(fd);
  auto body = [&]() -> Result<void> {
    unsigned char len[8];
    std::uint64_t n = header.size();
    for (int i = 0; i < 8; ++i, n >>= 8) len[i] = static_cast<unsigned char>(n & 0xff);
    TESSERA_RETURN_IF_ERROR(out.append(len, 8));
    TESSERA_RETURN_IF_ERROR(out.append(header.data(), header.size()));
    for (const auto& [seed, bytes] : data) {
      std::uint64_t offset = 0;
      while (offset < bytes) {
        auto room = out.space();
        if (!room) return fail(std::move(room.error()));
        const std::size_t k =
            static_cast<std::size_t>(std::min<std::uint64_t>(bytes - offset, room->size()));
        tensorPatternFill(seed, offset, room->data(), k);
        out.commit(k);
        offset += k;
      }
    }
    return out.flush();
  };
  auto written = body();
  if (::close(fd) != 0 && written) {
    written = fail(Error::internal(path + ": close failed: " + std::strerror(errno)));
  }
  if (!written) {
    ::unlink(path.c_str());
    return fail(Error{written.error().code, path + ": " + written.error().message});
  }
  return {};
}

}  // namespace

std::uint64_t tensorPatternSeed(std::string_view name) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

void tensorPatternFill(std::uint64_t seed, std::uint64_t offset, std::byte* out, std::size_t size) {
  std::uint64_t index = offset / 8;
  std::size_t pos = 0;
  // A partial first word.
  if (const std::size_t skip = offset % 8; skip != 0 && size > 0) {
    const std::uint64_t w = toLittle(patternWord(seed, index));
    const std::size_t k = std::min<std::size_t>(8 - skip, size);
    std::memcpy(out, reinterpret_cast<const std::byte*>(&w) + skip, k);
    pos = k;
    ++index;
  }
  for (; pos + 8 <= size; pos += 8, ++index) {
    const std::uint64_t w = toLittle(patternWord(seed, index));
    std::memcpy(out + pos, &w, 8);
  }
  if (pos < size) {
    const std::uint64_t w = toLittle(patternWord(seed, index));
    std::memcpy(out + pos, &w, size - pos);
  }
}

std::int64_t tensorPatternMismatch(std::uint64_t seed, std::uint64_t offset, const std::byte* data,
                                   std::size_t size) {
  std::byte expected[64 * 1024];
  for (std::size_t done = 0; done < size;) {
    const std::size_t k = std::min(sizeof expected, size - done);
    tensorPatternFill(seed, offset + done, expected, k);
    if (std::memcmp(expected, data + done, k) != 0) {
      for (std::size_t i = 0; i < k; ++i) {
        if (expected[i] != data[done + i]) return static_cast<std::int64_t>(done + i);
      }
    }
    done += k;
  }
  return -1;
}

Result<void> writeSafetensors(const std::string& path, const std::vector<TensorSpec>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> data;  // (seed, bytes) in file order
  std::set<std::string> names;
  std::uint64_t offset = 0;
  for (const TensorSpec& t : tensors) {
    const std::string what = path + ": tensor \"" + t.name + "\"";
    if (t.name == "__metadata__") return fail(Error::invalid(what + ": reserved name"));
    if (!names.insert(t.name).second) return fail(Error::invalid(what + ": duplicate name"));
    const auto dtype = findDtype(t.dtype);
    if (!dtype) return fail(Error::invalid(what + ": unknown dtype \"" + t.dtype + "\""));
    const auto elements = elementCount(t.shape);
    const auto bytes = elements ? dtypeBytes(*dtype, *elements) : std::nullopt;
    if (!bytes || *bytes > UINT64_MAX - offset) {
      return fail(Error::invalid(what + ": negative or too large shape for " + t.dtype));
    }
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + *bytes}}};
    data.emplace_back(tensorPatternSeed(t.name), *bytes);
    offset += *bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    return fail(Error::invalid(path + ": header: " + e.what()));  // names not valid UTF-8
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  return writeFile(path, text, data);
}

std::vector<TensorSpec> syntheticModelTensors(std::uint64_t totalBytes, int tensorCount) {
  const std::uint64_t elements = totalBytes / 2;
  std::uint64_t count = static_cast<std::uint64_t>(std::max(tensorCount, 1));
  count = std::max<std::uint64_t>(1, std::min(count, elements));
  const std::uint64_t each = elements / count;
  std::vector<TensorSpec> out;
  out.reserve(count);
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint64_t n = i + 1 == count ? elements - each * (count - 1) : each;
    std::uint64_t cols = 4096;
    while (cols > 1 && n % cols != 0) cols /= 2;
    TensorSpec t;
    t.name = "model.layers." + std::to_string(i) + ".weight";
    t.dtype = "BF16";
    if (cols > 1 && n > cols) {
      t.shape = {static_cast<std::int64_t>(n / cols), static_cast<std::int64_t>(cols)};
    } else {
      t.shape = {static_cast<std::int64_t>(n)};
    }
    out.push_back(std::move(t));
  }
  return out;
}

Result<void> writeSyntheticModel(const std::string& path, std::uint64_t totalBytes,
                                 int tensorCount) {
  if (tensorCount < 1) {
    return fail(Error::invalid(path + ": tensorCount must be at least 1, got " +
                               std::to_string(tensorCount)));
  }
  return writeSafetensors(path, syntheticModelTensors(totalBytes, tensorCount),
                          {{"format", "pt"}, {"tessera", "synthetic"}});
}

}  // namespace tessera::profile
