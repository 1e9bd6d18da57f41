#pragma once
// Which file sits at a path: device, inode and change time, as text ("" when there is none).
// Socket servers compare it with what they served to notice a socket removed or replaced
// (a kubelet restart), which a mere existence check misses.

#include <sys/stat.h>

#include <string>

namespace tessera {

inline std::string fileIdentity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
         std::to_string(st.st_ctim.tv_sec) + "." + std::to_string(st.st_ctim.tv_nsec);
}

}  // namespace tessera
