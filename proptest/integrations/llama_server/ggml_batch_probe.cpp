// Does a row's result in ggml's CPU backend depend on the rows computed beside it? The operations a
// llama.cpp decode step runs on a sequence's row (matrix products with the model's weights, flash
// attention, attention without it) computed for that row alone and beside other rows, and compared bit
// for bit (docs/engines.md, "llama-server": what makes a batched answer differ).
//
//   ggml_batch_probe [--threads N] [--quiet]
//
// Each line names a case and how many of the row's outputs differ from the row computed alone; the
// last line counts the cases that differ. Exit status: 0 when none differs, 1 when one does, 2 on bad
// arguments. Built against the ggml of llama-server's build (scripts/llama.sh --server); the
// environment decides which paths the CPU backend takes (GGML_CPU_USE_REF=1: the reference paths that
// integrations/llama_server/ggml-cpu.patch makes batch invariant).

#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml-cpu.h>
#include <ggml.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int threads = 1;
bool quiet = false;
int differing_cases = 0;
ggml_backend_t backend = nullptr;

// Deterministic values in [-1, 1): each case fills the same tensors with the same numbers.
struct Numbers {
    std::uint64_t state;
    explicit Numbers(std::uint64_t seed) : state(seed * 0x9E3779B97F4A7C15ull + 1) {}
    float next() {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        return static_cast<float>(static_cast<std::int64_t>(state >> 11) % 2000000 - 1000000) / 1.0e6f;
    }
};

std::vector<float> numbers(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
    Numbers source(seed);
    std::vector<float> out(n);
    for (float & x : out) x = source.next() * scale;
    return out;
}

// A context whose tensors live in plain host memory, which the CPU backend computes on.
ggml_context * host_context(std::size_t bytes) {
    ggml_init_params params{bytes, nullptr, false};
    return ggml_init(params);
}

void set_f32(ggml_tensor * t, const std::vector<float> & values) {
    std::memcpy(t->data, values.data(), values.size() * sizeof(float));
}

void set_f16(ggml_tensor * t, const std::vector<float> & values) {
    auto * out = static_cast<ggml_fp16_t *>(t->data);
    for (std::size_t i = 0; i < values.size(); ++i) out[i] = ggml_fp32_to_fp16(values[i]);
}

std::vector<float> compute(ggml_context * ctx, ggml_tensor * result) {
    ggml_cgraph * graph = ggml_new_graph(ctx);
    ggml_build_forward_expand(graph, result);
    if (ggml_backend_graph_compute(backend, graph) != GGML_STATUS_SUCCESS) {
        std::fprintf(stderr, "ggml_batch_probe: the CPU backend failed to compute a graph\n");
        std::exit(2);
    }
    const auto * data = static_cast<const float *>(result->data);
    return std::vector<float>(data, data + ggml_nelements(result));
}

// Compares `row` with `alone` bit for bit and prints the case.
// `counted`: a case the batch-invariant paths must keep equal (false: one llama-server --pfx refuses).
void report(const std::string & name, const float * row, const std::vector<float> & alone, bool counted = true) {
    int differ = 0;
    float largest = 0.0f;
    for (std::size_t i = 0; i < alone.size(); ++i) {
        if (std::memcmp(&row[i], &alone[i], sizeof(float)) != 0) {
            ++differ;
            largest = std::fmax(largest, std::fabs(row[i] - alone[i]));
        }
    }
    differing_cases += counted && differ > 0;
    if (!quiet || differ > 0) {
        std::printf("%-72s %4d of %4zu differ from alone (largest %.3g)%s\n", name.c_str(), differ, alone.size(),
                    static_cast<double>(largest), counted ? "" : " [not counted: a unified cache's placement]");
    }
}

// y = W x: the probed column beside n - 1 others, first or last, against the column alone. `buft` is
// where W lives (the CPU's own buffer, or the repacking one).
void matmul(ggml_type type, ggml_backend_buffer_type_t buft, const char * where) {
    const int k = 512;
    const int m = 64;
    ggml_init_params weight_params{ggml_tensor_overhead() * 2, nullptr, true};
    ggml_context * weights = ggml_init(weight_params);
    ggml_tensor * w = ggml_new_tensor_2d(weights, type, k, m);
    ggml_backend_buffer_t buffer = ggml_backend_alloc_ctx_tensors_from_buft(weights, buft);
    if (buffer == nullptr) {
        std::fprintf(stderr, "ggml_batch_probe: no buffer of type %s\n", ggml_backend_buft_name(buft));
        std::exit(2);
    }
    if (buft != ggml_backend_cpu_buffer_type() && w->extra == nullptr) {  // not repacked: nothing to probe
        ggml_backend_buffer_free(buffer);
        ggml_free(weights);
        return;
    }
    const std::vector<float> values = numbers(static_cast<std::size_t>(k) * m, 1, 0.1f);
    std::vector<char> raw(ggml_row_size(type, k) * m);
    if (type == GGML_TYPE_F32) {
        std::memcpy(raw.data(), values.data(), raw.size());
    } else if (type == GGML_TYPE_F16) {
        auto * out = reinterpret_cast<ggml_fp16_t *>(raw.data());
        for (std::size_t i = 0; i < values.size(); ++i) out[i] = ggml_fp32_to_fp16(values[i]);
    } else {
        ggml_quantize_chunk(type, values.data(), raw.data(), 0, m, k, nullptr);
    }
    ggml_backend_tensor_set(w, raw.data(), 0, raw.size());
    const std::vector<float> probe = numbers(k, 2);
    std::vector<float> alone;
    for (int n : {1, 2, 3, 4, 5, 8, 16, 33}) {
        for (bool last : {false, true}) {
            if (n == 1 && last) continue;
            ggml_context * ctx = host_context(64u << 20);
            ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, n);
            std::vector<float> columns = numbers(static_cast<std::size_t>(k) * n, 3 + n);
            const int at = last ? n - 1 : 0;
            std::copy(probe.begin(), probe.end(), columns.begin() + static_cast<std::ptrdiff_t>(at) * k);
            set_f32(x, columns);
            const std::vector<float> y = compute(ctx, ggml_mul_mat(ctx, w, x));
            if (n == 1) {
                alone = y;
            } else {
                report(std::string("mul_mat ") + ggml_type_name(type) + " (" + where + "), column " +
                           (last ? "last" : "first") + " of " + std::to_string(n),
                       y.data() + static_cast<std::ptrdiff_t>(at) * m, alone);
            }
            ggml_free(ctx);
        }
    }
    ggml_backend_buffer_free(buffer);
    ggml_free(weights);
}

// One query row's attention over `valid` keys that sit in cells [first, first + valid) of a cache of
// n_kv cells (the rest masked out), beside n_q - 1 other query rows; against the row alone in a cache
// holding just its keys in cells [0, valid). With flash attention or without (the product with K,
// soft_max with the mask, the product with V).
// `swapped`: the two halves of its keys trade cells (a unified cache that put a sequence's later rows
// in cells freed below its earlier ones). Not counted, since llama-server --pfx refuses that cache: nor
// is, without flash attention, a row whose keys do not start at cell 0 (its sums over the cells run in
// SIMD lanes chosen by the cell's index); a KV stream per slot keeps each key at the cell of its position.
void attention(bool flash, int n_q, int n_kv, int first, int valid, std::vector<float> & alone,
               bool swapped = false) {
    const int d = 64;
    const int heads = 4;
    const int kv_heads = 2;
    ggml_context * ctx = host_context(256u << 20);
    ggml_tensor * q = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, d, n_q, heads);
    ggml_tensor * k = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, d, n_kv, kv_heads);
    ggml_tensor * v = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, d, n_kv, kv_heads);
    ggml_tensor * mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, n_kv, n_q);
    // The probed row's query and keys are the same numbers in every case; other cells and rows differ.
    const std::vector<float> probe_q = numbers(static_cast<std::size_t>(d) * heads, 10);
    const std::vector<float> probe_k = numbers(static_cast<std::size_t>(d) * valid * kv_heads, 11);
    const std::vector<float> probe_v = numbers(static_cast<std::size_t>(d) * valid * kv_heads, 12);
    std::vector<float> qs = numbers(static_cast<std::size_t>(d) * n_q * heads, 20 + n_q);
    std::vector<float> ks = numbers(static_cast<std::size_t>(d) * n_kv * kv_heads, 30 + n_kv);
    std::vector<float> vs = numbers(static_cast<std::size_t>(d) * n_kv * kv_heads, 40 + n_kv);
    for (int h = 0; h < heads; ++h) {
        for (int i = 0; i < d; ++i) qs[(static_cast<std::size_t>(h) * n_q) * d + i] = probe_q[h * d + i];
    }
    for (int h = 0; h < kv_heads; ++h) {
        for (int c = 0; c < valid; ++c) {
            const int cell = swapped ? (c + valid / 2) % valid : c;
            for (int i = 0; i < d; ++i) {
                const std::size_t to = (static_cast<std::size_t>(h) * n_kv + first + cell) * d + i;
                const std::size_t from = (static_cast<std::size_t>(h) * valid + c) * d + i;
                ks[to] = probe_k[from];
                vs[to] = probe_v[from];
            }
        }
    }
    std::vector<float> masks(static_cast<std::size_t>(n_kv) * n_q, 0.0f);
    for (int c = 0; c < n_kv; ++c) {
        if (c < first || c >= first + valid) masks[c] = -INFINITY;  // the probed row sees only its own keys
    }
    set_f32(q, qs);
    set_f16(k, ks);
    set_f16(v, vs);
    set_f16(mask, masks);
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    std::vector<float> out;
    std::vector<float> row;
    if (flash) {
        ggml_tensor * result = ggml_flash_attn_ext(ctx, q, k, v, mask, scale, 0.0f, 0.0f);
        out = compute(ctx, result);  // [d, heads, n_q]: the probed row is the first d * heads values
        row.assign(out.begin(), out.begin() + d * heads);
    } else {
        ggml_tensor * kq = ggml_mul_mat(ctx, k, q);  // [n_kv, n_q, heads]
        kq = ggml_soft_max_ext(ctx, kq, mask, scale, 0.0f);
        ggml_tensor * vt = ggml_cont(ctx, ggml_transpose(ctx, v));  // [n_kv, d, kv_heads], f16
        ggml_tensor * kqv = ggml_mul_mat(ctx, vt, kq);               // [d, n_q, heads]
        out = compute(ctx, kqv);
        for (int h = 0; h < heads; ++h) {
            const float * at = out.data() + static_cast<std::size_t>(h) * n_q * d;
            row.insert(row.end(), at, at + d);
        }
    }
    if (alone.empty()) {
        alone = row;
    } else {
        report(std::string(flash ? "flash attention" : "attention without flash") + ", " + std::to_string(n_q) +
                   " query rows, keys in cells " + std::to_string(first) + ".." + std::to_string(first + valid) +
                   " of " + std::to_string(n_kv) + (swapped ? ", halves swapped" : ""),
               row.data(), alone, !swapped && (flash || first == 0));
    }
    ggml_free(ctx);
}

}  // namespace

int main(int argc, char ** argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string word = argv[i];
        if (word == "--threads" && i + 1 < argc) {
            threads = std::atoi(argv[++i]);
        } else if (word == "--quiet") {
            quiet = true;
        } else {
            std::fprintf(stderr, "ggml_batch_probe: unknown argument '%s'\nusage: ggml_batch_probe [--threads N] "
                                 "[--quiet]\n", word.c_str());
            return 2;
        }
    }
    if (threads < 1) {
        std::fprintf(stderr, "ggml_batch_probe: --threads must be at least 1\n");
        return 2;
    }
    ggml_cpu_init();
    backend = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(backend, threads);
    const char * use_ref = std::getenv("GGML_CPU_USE_REF");
    std::printf("ggml's CPU backend, %d thread(s), GGML_CPU_USE_REF=%s\n", threads, use_ref ? use_ref : "(unset)");

    ggml_backend_buffer_type_t repack = nullptr;
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    auto extra = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
        ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(cpu), "ggml_backend_dev_get_extra_bufts"));
    if (extra != nullptr) {
        for (ggml_backend_buffer_type_t * b = extra(cpu); b != nullptr && *b != nullptr; ++b) {
            if (std::strcmp(ggml_backend_buft_name(*b), "CPU_REPACK") == 0) repack = *b;
        }
    }
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_K}) {
        matmul(type, ggml_backend_cpu_buffer_type(), "plain");
        if (repack != nullptr && type != GGML_TYPE_F32 && type != GGML_TYPE_F16) matmul(type, repack, "repacked");
    }
    for (bool flash : {true, false}) {
        // Beside other query rows (a batch of several sequences' decode steps), short and long caches.
        for (int valid : {200, 700}) {
            std::vector<float> alone;
            const int cells = valid <= 256 ? 256 : 768;
            attention(flash, 1, cells, 0, valid, alone);
            for (int n_q : {2, 4, 32, 64}) attention(flash, n_q, cells, 0, valid, alone);
            // The same keys in a larger cache (n_kv padded past other sequences' cells), or placed after
            // another sequence's cells (a unified cache).
            attention(flash, 1, cells + 512, 0, valid, alone);
            attention(flash, 1, cells + 512, 256, valid, alone);
            attention(flash, 4, cells + 512, 37, valid, alone);
            attention(flash, 1, cells, 0, valid, alone, true);
        }
    }
    std::printf("%d case(s) differ from the row computed alone\n", differing_cases);
    ggml_backend_free(backend);
    return differing_cases == 0 ? 0 : 1;
}
