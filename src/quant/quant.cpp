// Row sizes and the type checks shared by the (de)quantizers and dot products.
#include "quant/quant.h"

#include "core/error.h"
#include "quant/internal.h"
#include "quant/type_table.h"

namespace vega::quant {

std::string type_label(GgmlType t) {
    const TypeTraits tt = type_traits(t);
    if (tt.name == nullptr) return fmt::format("unknown type id {}", uint32_t(t));
    return fmt::format("{} (id {})", tt.name, uint32_t(t));
}

void fail_unsupported(const char* what, GgmlType t) {
    fail("{}: tensor type {} is not supported", what, type_label(t));
}

size_t row_bytes(GgmlType t, int64_t n) {
    const TypeTraits tt = type_traits(t);
    if (tt.name == nullptr) fail("row_bytes: {}", type_label(t));
    if (n < 0 || n % tt.block_size != 0)
        fail("row_bytes: row of {} elements is not a multiple of the {} block size {}", n, tt.name,
             tt.block_size);
    return size_t(n / tt.block_size) * size_t(tt.type_size);
}

bool uses_q8_activations(GgmlType t) {
    return with_weight_type(t, []<GgmlType>() {});
}

}  // namespace vega::quant
