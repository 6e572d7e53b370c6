// A certificate of a llama.cpp configuration (pfx/llama/certificate.hpp).

#include <pfx/llama/certificate.hpp>

#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>

namespace pfx::llama {
namespace {

using json = nlohmann::json;

/// The hex of a digest.
std::string hex(const unsigned char* digest, unsigned int length) {
  static constexpr std::string_view digits = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out += digits[digest[i] >> 4U];
    out += digits[digest[i] & 15U];
  }
  return out;
}

/// SHA-256 of `text`, in hex: the digest that seals a certificate.
std::string sha256(const std::string& text) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (EVP_Digest(text.data(), text.size(), digest.data(), &length, EVP_sha256(), nullptr) != 1) {
    throw CertificateError("SHA-256 failed in OpenSSL's libcrypto");
  }
  return hex(digest.data(), length);
}

/// SHA-256 of the file at `path`, read in pieces: a model is named by its bytes, not its file name
/// (two models of one shape have one size).
std::string file_sha256(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw CertificateError("cannot read the model " + path);
  const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!context || EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr) != 1) {
    throw CertificateError("SHA-256 failed in OpenSSL's libcrypto");
  }
  std::vector<char> piece(std::size_t{1} << 20);
  while (file) {
    file.read(piece.data(), static_cast<std::streamsize>(piece.size()));
    if (EVP_DigestUpdate(context.get(), piece.data(), static_cast<std::size_t>(file.gcount())) != 1) {
      throw CertificateError("SHA-256 failed in OpenSSL's libcrypto");
    }
  }
  if (!file.eof()) throw CertificateError("cannot read the model " + path);
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(context.get(), digest.data(), &length) != 1) {
    throw CertificateError("SHA-256 failed in OpenSSL's libcrypto");
  }
  return hex(digest.data(), length);
}

/// The digest of a certificate's body (every field but "digest"): its JSON with keys sorted, compact.
std::string digest_of(const json& body) { return sha256(body.dump()); }

std::size_t count(const json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_number_unsigned() ? it->get<std::size_t>() : 0;
}

}  // namespace

Configuration configuration(const Served& s) {
  return {{"engine", "llama.cpp"},
          {"ggml", s.ggml},
          {"CPU paths", s.reference_paths ? "reference (GGML_CPU_USE_REF)" : "ggml's own"},
          {"model", std::filesystem::path(s.model_path).filename().string()},
          {"model sha256", file_sha256(s.model_path)},
          {"n_batch", std::to_string(s.n_batch)},
          {"n_ubatch", std::to_string(s.n_ubatch)},
          {"flash attention", s.flash_attention},
          {"KV type", s.kv_type},
          {"threads", std::to_string(s.threads)},
          {"batch threads", std::to_string(s.batch_threads)}};
}

Proved proved_by(const std::string& report_json) {
  const json report = json::parse(report_json, nullptr, false);
  if (!report.is_object() || report.value("type", "") != "conform") {
    throw CertificateError("its report is not one pfx conform --json wrote");
  }
  Proved proved;
  proved.verdict = report.value("verdict", "");
  for (const json& grid : report.value("grids", json::array())) {
    if (grid.value("exact", false) && count(grid, "resumes") > 0) proved.exact_grids.push_back(count(grid, "grid"));
  }
  const json batching = report.value("batching", json::object());
  proved.batch_invariant = count(batching, "batches") > 0 && batching.value("independent", false);
  // Decode rows are exact only on the evidence of `pfx conform --decode-rows`, none of it differing, and
  // where a request decoded beside others answers as alone (the server decodes its slots together).
  const json decode = report.value("decode_rows", json::object());
  std::vector<std::string>& lacking = proved.decode_rows_lacking;
  const auto at_least = [&](const char* key, std::size_t least, const std::string& what) {
    if (count(decode, key) < least) {
      lacking.push_back(std::to_string(count(decode, key)) + " " + what + ", fewer than " + std::to_string(least));
    }
  };
  at_least("resumes", kCertifiedResumes, "resumes from rows decode wrote");
  at_least("rescored", kCertifiedRescored, "decode steps rescored by a cold prefill");
  at_least("kv_blocks", kCertifiedRows, "rows decode wrote compared byte for byte with a cold prefill's");
  if (decode.contains("mismatch")) lacking.emplace_back("a resume from rows decode wrote differed from its cold run");
  if (count(decode, "rescoring_differs") > 0) {
    lacking.push_back(std::to_string(count(decode, "rescoring_differs")) +
                      " decode steps differed from a cold prefill's rescoring");
  }
  if (count(decode, "kv_blocks_differ") > 0) {
    lacking.push_back(std::to_string(count(decode, "kv_blocks_differ")) +
                      " rows decode wrote differed from a cold prefill's, byte for byte");
  }
  if (!proved.batch_invariant) lacking.emplace_back("no batch of requests answered as each request alone");
  proved.decode_rows_equal = lacking.empty();
  return proved;
}

std::string certificate(const Configuration& configuration, const std::string& report_json) {
  const Proved proved = proved_by(report_json);
  json body{{"format", kCertificateFormat},
            {"configuration", configuration},
            {"proved", {{"verdict", proved.verdict},
                        {"exact grids", proved.exact_grids},
                        {"batch invariant", proved.batch_invariant},
                        {"decode rows equal", proved.decode_rows_equal}}},
            {"report", json::parse(report_json)}};
  body["digest"] = digest_of(body);
  return body.dump(2) + "\n";
}

Proved read_certificate(const std::string& path, const Configuration& served) {
  std::ifstream file(path);
  if (!file) throw CertificateError(path + ": cannot read a certificate there");
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  json body = json::parse(text, nullptr, false);
  if (!body.is_object() || body.value("format", "") != kCertificateFormat || !body.contains("configuration") ||
      !body.contains("report") || !body.contains("proved")) {
    throw CertificateError(path + " is not a certificate pfx conform --engine llama --certify wrote (its format is "
                                  "not \"" + std::string(kCertificateFormat) + "\")");
  }
  const std::string digest = body.value("digest", "");
  body.erase("digest");
  if (digest != digest_of(body)) {
    throw CertificateError(path + " was changed after pfx conform wrote it (its digest does not match what it "
                                  "says): certify the configuration again");
  }
  Proved proved = proved_by(body["report"].dump());
  const json& said = body["proved"];
  const bool as_its_report_shows = said.value("decode rows equal", false) == proved.decode_rows_equal &&
                                  said.value("batch invariant", false) == proved.batch_invariant &&
                                  said.value("exact grids", std::vector<std::size_t>{}) == proved.exact_grids &&
                                  said.value("verdict", "") == proved.verdict;
  if (!as_its_report_shows) {  // a fact edited by hand, the digest sealed again
    throw CertificateError(path + " says " + said.dump() + ", which its own report does not show: certify the "
                                  "configuration again");
  }
  Configuration certified;
  for (const auto& [key, value] : body["configuration"].items()) {
    certified[key] = value.is_string() ? value.get<std::string>() : value.dump();
  }
  // Each field that differs, named with both values ("nothing" where one side has no such field).
  std::string differ;
  const auto add = [&differ](const std::string& key, const std::string& was, const std::string& is) {
    differ.append(differ.empty() ? "" : "; ").append(key).append(" ").append(was).append(" certified, ").append(is);
    differ.append(" served");
  };
  const auto quoted = [](const std::string& value) { return "\"" + value + "\""; };
  for (const auto& [key, value] : served) {
    const auto it = certified.find(key);
    if (it == certified.end() || it->second != value) {
      add(key, it == certified.end() ? "nothing" : quoted(it->second), quoted(value));
    }
  }
  for (const auto& [key, value] : certified) {
    if (!served.contains(key)) add(key, quoted(value), "nothing");
  }
  if (!differ.empty()) {
    throw CertificateError(path + " certifies another configuration than the one served: " + differ);
  }
  return proved;
}

}  // namespace pfx::llama
