#include "backend/cpu/prompt_attention.h"

#include <algorithm>
#include <cmath>

namespace vega::cpu {

void prompt_attention(ThreadPool& pool, const KvView& c, const float* q, float* out, int n_head, float scale,
                      const int32_t* pos, const int32_t* seq, int row_begin, int row_end,
                      PromptAttentionScratch& scratch) {
    const int hd = c.layout.head_dim, n_kv_head = c.layout.n_kv_head, group = n_head / n_kv_head;
    // Runs of consecutive rows of one sequence, cut into tasks of kPromptTileRows rows.
    std::vector<PromptTask>& tasks = scratch.tasks;
    tasks.clear();
    for (int r = row_begin; r < row_end;) {
        int e = r + 1;
        while (e < row_end && e - r < kPromptTileRows && seq[e] == seq[r]) ++e;
        for (int h = 0; h < n_kv_head; ++h) tasks.push_back({r, e, h});
        r = e;
    }
    // Scratch per thread: K and V tiles [kPromptTileKv][hd], scores [kPromptTileKv], and per
    // (row, head) pair of a task its running max, sum and output [hd].
    const int pairs = kPromptTileRows * group;
    const size_t stride = size_t(2 * kPromptTileKv * hd + kPromptTileKv + pairs * (hd + 2));
    if (scratch.stride != stride || scratch.per_thread.size() < stride * size_t(pool.size())) {
        scratch.stride = stride;
        scratch.per_thread.assign(stride * size_t(pool.size()), 0.f);
    }
    pool.parallel_for(int64_t(tasks.size()), 1, [&](int64_t beg, int64_t end, int thread) {
        float* kt = scratch.per_thread.data() + size_t(thread) * stride;
        float* vt = kt + size_t(kPromptTileKv) * hd;
        float* s = vt + size_t(kPromptTileKv) * hd;
        float* m = s + kPromptTileKv;
        float* l = m + pairs;
        float* o = l + pairs;
        for (int64_t ti = beg; ti < end; ++ti) {
            const PromptTask& tk = tasks[size_t(ti)];
            const int n_pairs = (tk.r1 - tk.r0) * group;
            int n_kv = 0;
            for (int t = tk.r0; t < tk.r1; ++t) n_kv = std::max(n_kv, pos[t] + 1);
            std::fill(m, m + n_pairs, -INFINITY);
            std::fill(l, l + n_pairs, 0.f);
            std::fill(o, o + size_t(n_pairs) * hd, 0.f);
            const size_t base = c.layer_base + size_t(c.layout.row(seq[tk.r0], tk.kvh, 0));
            for (int j0 = 0; j0 < n_kv; j0 += kPromptTileKv) {
                const int n = std::min(kPromptTileKv, n_kv - j0);
                for (int j = 0; j < n; ++j) {
                    decode_kv_row(c.k, c.k_scale, c.layout, base + size_t(j0 + j) * hd, hd, kt + size_t(j) * hd);
                    decode_kv_row(c.v, c.v_scale, c.layout, base + size_t(j0 + j) * hd, hd, vt + size_t(j) * hd);
                }
                for (int p = 0; p < n_pairs; ++p) {
                    const int t = tk.r0 + p / group, h = tk.kvh * group + p % group;
                    const int n_valid = std::min(n, pos[t] + 1 - j0);  // causal: positions 0..pos[t]
                    if (n_valid <= 0) continue;
                    const float* qh = q + (size_t(t) * n_head + h) * hd;
                    float mx = -INFINITY;
                    for (int j = 0; j < n_valid; ++j) {
                        const float* kr = kt + size_t(j) * hd;
                        float acc = 0.f;
                        for (int i = 0; i < hd; ++i) acc += qh[i] * kr[i];
                        s[j] = acc * scale;
                        mx = std::max(mx, s[j]);
                    }
                    const float m_new = std::max(m[p], mx);
                    const float corr = std::exp(m[p] - m_new);  // 0 for the first tile (m = -inf)
                    float* op = o + size_t(p) * hd;
                    float sum = 0.f;
                    for (int i = 0; i < hd; ++i) op[i] *= corr;
                    for (int j = 0; j < n_valid; ++j) {
                        const float e = std::exp(s[j] - m_new);
                        sum += e;
                        const float* vr = vt + size_t(j) * hd;
                        for (int i = 0; i < hd; ++i) op[i] += e * vr[i];
                    }
                    l[p] = l[p] * corr + sum;
                    m[p] = m_new;
                }
            }
            for (int p = 0; p < n_pairs; ++p) {
                const int t = tk.r0 + p / group, h = tk.kvh * group + p % group;
                const float inv = l[p] > 0.f ? 1.f / l[p] : 0.f;
                float* dst = out + (size_t(t) * n_head + h) * hd;
                for (int i = 0; i < hd; ++i) dst[i] = o[size_t(p) * hd + i] * inv;
            }
        }
    });
}

}  // namespace vega::cpu
