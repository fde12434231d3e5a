// The reference compositions of the block ops (backend.h) from primitive ops: what
// every backend computes, and what the CPU runs. A backend overriding a block op is
// checked against these by the parity tests.
#include "backend/backend.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "core/error.h"

namespace vega {

void Backend::note(const std::string& line) {
    if (std::find(noted_.begin(), noted_.end(), line) != noted_.end()) return;
    noted_.push_back(line);
    if (notes_on_) std::fprintf(stderr, "vega: note: %s\n", line.c_str());
}

void Backend::copy_to(Backend& dst, void* dst_ptr, const void* src, size_t bytes) {
    synchronize();
    std::vector<uint8_t> host(bytes);
    download(host.data(), src, bytes);
    dst.upload(dst_ptr, host.data(), bytes);
}

void Backend::qkv_projections(const AttentionBlock& a, const BlockBuffers& buf, int rows, bool head_norms) {
    const int Dq = a.n_head * a.head_dim, Dkv = a.n_kv_head * a.head_dim;
    matmul_qkv(a.wq, a.wk, a.wv, buf.q, buf.k, buf.v);
    if (a.bq) add_bias(buf.q, a.bq, rows, Dq);
    if (a.bk) add_bias(buf.k, a.bk, rows, Dkv);
    if (a.bv) add_bias(buf.v, a.bv, rows, Dkv);
    if (!head_norms) return;
    if (a.q_norm) head_rms_norm(buf.q, a.q_norm, rows, a.n_head, a.head_dim, a.eps);
    if (a.k_norm) head_rms_norm(buf.k, a.k_norm, rows, a.n_kv_head, a.head_dim, a.eps);
}

void Backend::attention_block(const AttentionBlock& a, KvCache& c, int layer, const BatchView& b, float* x,
                              const BlockBuffers& buf, const BlockLink& link) {
    const int T = b.n_tokens;
    const int64_t E = a.wq.n_in, Dq = int64_t(a.n_head) * a.head_dim;
    if (link.sum_output) fail("block op: a part summed over the devices by the output (sum_output) needs a GPU backend");
    if (link.pending) add(x, link.pending, int64_t(T) * E);
    if (!link.input_normed) matmul_input_rms_norm(x, a.norm, a.eps, T, E);
    qkv_projections(a, buf, T);
    rope_kv_store(c, layer, buf.q, buf.k, buf.v, a.n_head, a.n_kv_head, a.head_dim, a.rope, b);
    attention(c, layer, buf.q, buf.att, a.n_head, a.scale, b);
    matmul_input(buf.att, T, Dq);
    matmul(a.wo, buf.tmp);
    if (link.part_only) return;
    add(x, buf.tmp, int64_t(T) * E);
    if (link.next_norm) matmul_input_rms_norm(x, *link.next_norm, link.next_eps, T, E);
}

void Backend::ffn_block(const FfnBlock& f, float* x, int rows, const BlockBuffers& buf, const BlockLink& link) {
    const int64_t E = f.n_embd();
    if (link.sum_output) fail("block op: a part summed over the devices by the output (sum_output) needs a GPU backend");
    if (link.pending) add(x, link.pending, int64_t(rows) * E);
    if (!link.input_normed) matmul_input_rms_norm(x, f.norm, f.eps, rows, E);
    if (f.experts()) {
        // Routed experts: router logits, ids + weights, the chosen experts' gate/up +
        // SwiGLU (input row r for each of its slots), their down projections (slot
        // (r, j) reads h row r * n_used + j), the weighted sum.
        const int K = f.routing.n_used;
        matmul(f.router, buf.router);
        route_experts(buf.router, rows, f.routing, buf.expert_ids, buf.expert_w);
        if (f.route_override)
            f.route_override->override_routes(*this, f.layer, f.routing, rows, buf.router, buf.expert_ids,
                                              buf.expert_w);
        matmul_experts_swiglu(f.gate_exps, f.up_exps, buf.expert_ids, rows, K, buf.g, buf.u, buf.h);
        matmul_input(buf.h, rows * K, f.gate_exps.n_out);
        matmul_experts(f.down_exps, buf.expert_ids, rows, K, true, buf.expert_out);
        combine_experts(buf.expert_out, buf.expert_w, rows, K, E, buf.tmp);
    } else {
        matmul_swiglu(f.gate, f.up, buf.g, buf.u, buf.h, rows);
        matmul_input(buf.h, rows, f.gate.n_out);
        matmul(f.down, buf.tmp);
    }
    if (link.part_only) return;
    add(x, buf.tmp, int64_t(rows) * E);
    if (link.next_norm) matmul_input_rms_norm(x, *link.next_norm, link.next_eps, rows, E);
}

}  // namespace vega
