#include <pfx/engines/faulty_engine.hpp>

#include <string>

namespace pfx::engines {

FaultyEngine::FaultyEngine(driver::Engine& inner, double rate, std::uint64_t seed) : WrappedEngine(inner), random_(seed) {
  set_rate(rate);
}

void FaultyEngine::set_rate(double rate) {
  if (!(rate >= 0.0 && rate <= 1.0)) {
    throw std::invalid_argument("FaultyEngine: the failure rate " + std::to_string(rate) + " is not in [0, 1]");
  }
  fails_ = std::bernoulli_distribution(rate);
}

template <class Step>
void FaultyEngine::maybe_fail(driver::KvState& kv, std::size_t begin, std::size_t end, const char* what, Step&& step) {
  if (!fails_(random_)) {
    step();
    return;
  }
  // An engine that exchanges with other ranks cannot skip a call without leaving them waiting: it
  // fails after the call, its rows written or overwritten with garbage.
  const int first = inner_.exchanges() ? 1 : 0;
  const auto mode = static_cast<Mode>(std::uniform_int_distribution<int>(first, 2)(random_));
  if (mode != Mode::before_writing) step();
  if (mode == Mode::after_garbage) kv.fill(begin, end, 1.0e3f);  // finite, plausible-looking, wrong
  ++failures_;
  throw InjectedFault(std::string("injected engine failure in ") + what + " of rows [" + std::to_string(begin) +
                      ", " + std::to_string(end) + ")");
}

void FaultyEngine::prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
                           std::span<float> logits) {
  maybe_fail(kv, position, position + tokens.size(), "prefill",
             [&] { inner_.prefill(kv, tokens, position, logits); });
}

void FaultyEngine::decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) {
  maybe_fail(kv, position, position + 1, "decode", [&] { inner_.decode(kv, next, position, logits); });
}

}  // namespace pfx::engines
