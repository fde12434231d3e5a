// KV cache types: which GGUF types a cache can hold, and the checks before one is made.
#include "backend/backend.h"
#include "core/error.h"

namespace vega {

KvElem kv_elem(GgmlType t) {
    switch (t) {
        case GgmlType::F32: return KvElem::F32;
        case GgmlType::F16: return KvElem::F16;
        case GgmlType::Q8_0: return KvElem::Q8_0;
        default: fail("a KV cache cannot hold {} (use f16, f32 or q8_0)", type_traits(t).name);
    }
}

void check_kv_cache_desc(const KvCacheDesc& d) {
    kv_elem(d.type);
    if (d.type == GgmlType::Q8_0 && kv_q8_block(d.head_dim) == 0)
        fail("--kv-type q8_0 needs a head dimension that is a multiple of 8 (this model's is {}); use f16",
             d.head_dim);
}

}  // namespace vega
