// A ustar archive made in memory, as tar and webdataset's ShardWriter make
// one: for the WebDataset tests and the tar fuzz target's seeds.
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace granary::testing {

// The archive of `members` (name, bytes), each a regular file; a name
// ending in "|T" is a member of type T ("|x": a pax header, "|L": a GNU long
// name), named without it.
inline std::string UstarArchive(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string tar;
  for (const auto& [named, bytes] : members) {
    const size_t bar = named.find('|');
    const std::string name = named.substr(0, bar);
    std::string header(512, '\0');
    header.replace(0, name.size(), name);
    char size[12];
    std::snprintf(size, sizeof(size), "%011o", static_cast<unsigned>(bytes.size()));
    header.replace(124, 11, size);
    header[156] = bar == std::string::npos ? '0' : named.back();
    header.replace(257, 6, std::string("ustar\0", 6));
    tar += header + bytes + std::string((512 - bytes.size() % 512) % 512, '\0');
  }
  return tar + std::string(1024, '\0');
}

}  // namespace granary::testing
