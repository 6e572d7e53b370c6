#pragma once

/// \file
/// An engine that computes nothing: `pfx replay --engine none` (docs/cli.md). A lane on it queries,
/// begins, aborts and commits exactly as on any engine of the same chunk and vocabulary, so its
/// offsets are the rule's for the trace, at the speed of the machine's comparisons: a trace of
/// million-token prompts replays in seconds, where a model would take minutes.
///
/// Why its offsets are those of a real engine: the record a lane commits holds the prompt and then
/// the generated tokens, with canonical_end = len(prompt), and every offset is capped at
/// canonical_end (INV-2). lcp(ids[0, canonical_end), prompt) = min(lcp(ids, prompt), canonical_end),
/// so the generated tokens, which this engine does not know (its logits are all zero, so it
/// "generates" token 0), never change an offset or a reason. They can change what explains it: the
/// common-prefix length, and on a tie which bound is named.
///
/// Its KV state holds no row (RowlessKvState), so nothing can be verified against it: there is no
/// stale row to read and no bit to compare.

#include <pfx/driver/engine.hpp>
#include <pfx/driver/kv_state.hpp>

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

namespace pfx::engines {

/// A KV state of `capacity` positions that stores nothing (0 layers, 0 floats): fill and copy_rows
/// check their range, as every KV state does, and do nothing else.
class RowlessKvState final : public driver::KvState {
 public:
  explicit RowlessKvState(std::size_t capacity) : shape_{.capacity = capacity, .layers = 0, .width = 0} {}

  [[nodiscard]] const driver::KvShape& shape() const noexcept override { return shape_; }
  void forget(std::size_t from) override { driver::check_rows(shape_, from, shape_.capacity, "RowlessKvState::forget"); }
  [[nodiscard]] bool owns_rows() const noexcept override { return true; }
  void fill(std::size_t from, std::size_t to, float value) override;
  [[nodiscard]] std::vector<float> copy_rows(std::size_t from, std::size_t to) const override;
  void synchronize() override {}
  [[nodiscard]] std::size_t memory_bytes() const noexcept override { return 0; }

 private:
  driver::KvShape shape_;
};

class DecisionsOnlyEngine final : public driver::Engine {
 public:
  /// Throws std::invalid_argument when chunk or vocab is 0.
  DecisionsOnlyEngine(std::size_t chunk, std::size_t vocab);

  [[nodiscard]] std::size_t chunk() const noexcept override { return chunk_; }
  [[nodiscard]] std::size_t vocab() const noexcept override { return vocab_; }

  /// A RowlessKvState of `capacity` positions.
  [[nodiscard]] std::unique_ptr<driver::KvState> make_kv_state(std::size_t capacity) const override;

  /// Computes and writes no row (checking only that the rows are within `kv`), and sets the logits
  /// to zero: finite, so the lane's stale-row check passes, and their argmax is token 0.
  void prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position, std::span<float> logits) override;
  void decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) override;

 private:
  std::size_t chunk_;
  std::size_t vocab_;
};

}  // namespace pfx::engines
