#pragma once

/// \file
/// A certificate of a llama.cpp configuration (docs/engines.md, "Certified decode rows on llama.cpp"):
/// what `pfx conform --engine llama --certify FILE` proved on one configuration, which `llama-server
/// --pfx --pfx-certificate FILE` takes for that configuration only. A premise belongs to the
/// configuration it was measured on: the certificate names it (ggml's version, its CPU paths, the
/// model, n_batch, n_ubatch, flash attention, the KV type, threads), keeps conform's report whole, and
/// is sealed by a SHA-256 digest of the rest. What it proves is derived from the report where it is
/// read, never taken from the file's own words, so a fact edited by hand is refused even where the
/// digest was sealed again. Used by pfx's program and by llama-server's pfx_server.cpp (built into
/// each), the standard library, nlohmann/json and OpenSSL's libcrypto only: no llama.cpp.

#include <cstddef>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace pfx::llama {

/// The first words of every certificate's "format".
inline constexpr const char* kCertificateFormat = "pfx llama.cpp certificate 1";
/// The least evidence from which a certificate says decode rows are exact: resumes from rows decode
/// wrote (`pfx conform --decode-rows` makes 200), decode steps rescored (100), and rows decode wrote
/// compared byte for byte (200 at rule chunk 1), none of them differing.
inline constexpr std::size_t kCertifiedResumes = 200;
inline constexpr std::size_t kCertifiedRescored = 100;
inline constexpr std::size_t kCertifiedRows = 40;

/// What the configuration served is made of, as the server and `pfx conform` each know it.
struct Served {
  std::string ggml;             ///< ggml_version() and ggml_commit(): the code that computes every row
  bool reference_paths = false; ///< GGML_CPU_USE_REF: ggml's batch-invariant CPU paths (llama-server --pfx)
  std::string model_path;       ///< the GGUF file: named by its file name and its bytes' SHA-256
  std::size_t n_batch = 0;
  std::size_t n_ubatch = 0;
  std::string flash_attention;  ///< "on", "off" or "auto"
  std::string kv_type;          ///< "f16" where K and V are alike, else "K q8_0, V f16"
  std::size_t threads = 0;      ///< decode's threads
  std::size_t batch_threads = 0;  ///< prefill's threads (llama.cpp's n_threads_batch)
};

/// A configuration as a certificate names it: each field by name, each value as text, so that a
/// difference is named with both values.
using Configuration = std::map<std::string, std::string>;

/// ggml's version and commit as a certificate names them: "0.25.3 (abc1234)".
[[nodiscard]] inline std::string ggml_identity(const char* version, const char* commit) {
  return std::string(version) + " (" + commit + ")";
}

/// The configuration of `served`. Reads the whole model file (its SHA-256): about a second a gigabyte.
/// Throws CertificateError where it cannot be read.
[[nodiscard]] Configuration configuration(const Served& served);

/// What a conform report proves, derived from its JSON (`pfx conform --json`).
struct Proved {
  std::string verdict;
  std::vector<std::size_t> exact_grids;  ///< grids on which conform resumed, every resume exact
  bool batch_invariant = false;          ///< batches served, every answer equal to alone
  bool decode_rows_equal = false;        ///< decode_rows_lacking is empty
  std::vector<std::string> decode_rows_lacking;  ///< what the evidence lacks for decode rows, in words
};

/// A certificate that cannot be read, is not one, was edited, or does not cover what is served; the
/// message names which, and what differs.
class CertificateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What `report_json` proves. Throws CertificateError where it is not a conform report.
[[nodiscard]] Proved proved_by(const std::string& report_json);

/// The certificate of `configuration` from conform's `report_json`: its text, sealed.
[[nodiscard]] std::string certificate(const Configuration& configuration, const std::string& report_json);

/// What the certificate at `path` proves for the configuration `served`. Throws CertificateError,
/// its message starting with `path`, where it cannot be read, is not a certificate, was changed after
/// it was written (its digest), says a fact its report does not show, or names a configuration other
/// than `served` (each field that differs, with both values).
[[nodiscard]] Proved read_certificate(const std::string& path, const Configuration& served);

}  // namespace pfx::llama
