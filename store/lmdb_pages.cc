// LMDB's page maths for record values (declared in store/db_writer.h): what
// a value of a given size costs in a shard file, for packing and for judging
// a dictionary. Page layout as in LMDB's mdb.c (docs/FORMAT.md, "Keys and shards").
#include <unistd.h>

#include "store/db_writer.h"
#include "store/shard_index.h"

namespace granary {

size_t ValueBytesFillingPages(size_t pages) {
  const size_t page_bytes = static_cast<size_t>(::sysconf(_SC_PAGESIZE));  // LMDB's page size
  return pages * page_bytes - kLmdbPageHeaderBytes;
}

uint64_t StoredBytesOfValue(size_t value_bytes) {
  const size_t page_bytes = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  // A leaf node: 8 bytes of header, the 8-byte key, the value or, for an
  // overflow value, its page number; and a 2-byte slot in the page's index.
  constexpr size_t kNodeBytes = 8 + 8 + 2;
  // LMDB's largest in-page node (me_nodemax): half a page's payload, even.
  const size_t node_max = (((page_bytes - kLmdbPageHeaderBytes) / 2) & ~size_t{1}) - 2;
  if (kNodeBytes - 2 + value_bytes <= node_max) return kNodeBytes + value_bytes;
  const size_t pages = (value_bytes + kLmdbPageHeaderBytes + page_bytes - 1) / page_bytes;
  return kNodeBytes + 8 + pages * page_bytes;
}

}  // namespace granary
