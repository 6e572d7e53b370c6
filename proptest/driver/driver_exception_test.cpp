// Whatever an engine throws, the lane aborts the write: std::runtime_error, std::bad_alloc, any other
// std::exception, and types not derived from std::exception alike. The exception reaches the caller
// unchanged, the record keeps only the untouched prefix, no row past written_end holds data, and the
// next request equals a cold run bit for bit.

#include "support/lanes.hpp"
#include "support/requirement.hpp"

#include <pfx/driver/lane.hpp>
#include <pfx/engines/host_reference_engine.hpp>
#include <pfx/engines/wrapped_engine.hpp>

#include <gtest/gtest.h>

#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using pfx::token;
using pfx::engines::HostReferenceEngine;
using pfx::driver::Lane;

constexpr std::size_t capacity = 128;

/// The kinds of exception an engine may throw.
enum class Kind { runtime_error, bad_alloc, other_std_exception, not_std_exception, integer };

/// An exception type of the engine's own, derived from std::exception but from none of its
/// standard subclasses.
struct EngineSpecificError : std::exception {
  const char* what() const noexcept override { return "engine specific"; }
};
/// A type that does not derive from std::exception at all.
struct NotAnException {
  int code = 7;
};

[[noreturn]] void throw_kind(Kind kind) {
  switch (kind) {
    case Kind::runtime_error: throw std::runtime_error("engine failed");
    case Kind::bad_alloc: throw std::bad_alloc();
    case Kind::other_std_exception: throw EngineSpecificError();
    case Kind::not_std_exception: throw NotAnException();
    case Kind::integer: throw 42;
  }
  throw std::logic_error("unknown kind");
}

/// Whether `error` holds an exception of exactly `kind`, as thrown.
bool is_kind(const std::exception_ptr& error, Kind kind) {
  try {
    std::rethrow_exception(error);
  } catch (const std::bad_alloc&) {
    return kind == Kind::bad_alloc;
  } catch (const EngineSpecificError&) {
    return kind == Kind::other_std_exception;
  } catch (const std::runtime_error& e) {
    return kind == Kind::runtime_error && std::string(e.what()) == "engine failed";
  } catch (const NotAnException& e) {
    return kind == Kind::not_std_exception && e.code == 7;
  } catch (int value) {
    return kind == Kind::integer && value == 42;
  } catch (...) {
    return false;
  }
}

/// Throws `kind` on its `fail_at`-th call (prefill or decode), after writing that call's rows half
/// the time, so that a partly written request is aborted too.
class ThrowingEngine final : public pfx::engines::WrappedEngine {
 public:
  ThrowingEngine(Engine& inner, Kind kind, std::size_t fail_at, bool after_writing)
      : WrappedEngine(inner), kind_(kind), fail_at_(fail_at), after_writing_(after_writing) {}
  void prefill(pfx::driver::KvState& kv, std::span<const token> tokens, std::size_t position,
               std::span<float> logits) override {
    call([&] { inner_.prefill(kv, tokens, position, logits); });
  }
  void decode(pfx::driver::KvState& kv, token next, std::size_t position, std::span<float> logits) override {
    call([&] { inner_.decode(kv, next, position, logits); });
  }
  bool armed = false;
  std::size_t calls = 0;

 private:
  template <class Step>
  void call(Step&& step) {
    const bool fail = armed && calls++ == fail_at_;
    if (fail && !after_writing_) throw_kind(kind_);
    step();
    if (fail) throw_kind(kind_);
  }
  Kind kind_;
  std::size_t fail_at_;
  bool after_writing_;
};

PFX_PROPERTY(Exceptions, AnyExceptionAbortsTheWriteAndTheNextRequestIsCold, "DRV-4 INV-8 DRV-2", ()) {
  const Kind kind = *rc::gen::element(Kind::runtime_error, Kind::bad_alloc, Kind::other_std_exception,
                                      Kind::not_std_exception, Kind::integer);
  HostReferenceEngine engine({.vocab = 16, .chunk = *rc::gen::inRange<std::size_t>(1, 5)});
  const auto first = *rc::gen::container<std::vector<token>>(
      *rc::gen::inRange<std::size_t>(2, 40), rc::gen::inRange<token>(0, 16));
  auto second = first;  // extends the first, so that part of it is reused
  const auto more = *rc::gen::nonEmpty(rc::gen::container<std::vector<token>>(rc::gen::inRange<token>(0, 16)));
  second.insert(second.end(), more.begin(), more.end());
  const std::size_t max_new_tokens = *rc::gen::inRange<std::size_t>(0, 6);
  RC_PRE(second.size() + max_new_tokens <= capacity && first.size() + 4 <= capacity);

  ThrowingEngine throwing(engine, kind, *rc::gen::inRange<std::size_t>(0, 8), *rc::gen::arbitrary<bool>());
  Lane lane(throwing, {.capacity = capacity, .config = {.enabled = true, .keep_min = 0}, .poison = true});
  const pfx::driver::Response warm = lane.serve(first, 4);
  std::vector<token> held = first;
  held.insert(held.end(), warm.generated.begin(), warm.generated.end());

  throwing.armed = true;
  const std::size_t offset = lane.machine().query(second).decision.offset;
  std::exception_ptr error;
  try {
    (void)lane.serve(second, max_new_tokens);
  } catch (...) {
    error = std::current_exception();
  }
  if (error == nullptr) {
    // The failing call was never reached: the request ran to the end and was published.
    RC_ASSERT(throwing.calls > 0);
    RC_ASSERT(lane.machine().held().canonical_end == second.size());
  } else {
    RC_ASSERT(is_kind(error, kind));  // rethrown unchanged
    RC_ASSERT(lane.machine().phase() == pfx::Phase::idle);
    const std::vector<token> untouched(second.begin(), second.begin() + static_cast<std::ptrdiff_t>(offset));
    RC_ASSERT(lane.machine().held().ids == untouched);
    RC_ASSERT(lane.machine().held().canonical_end <= offset);
  }
  if (const auto why = pfx::test::unpoisoned_row(lane)) RC_FAIL(*why);

  throwing.armed = false;
  const pfx::driver::Response again = lane.serve(second, max_new_tokens);
  const pfx::test::Cold cold = pfx::test::cold_run(engine, capacity, second, max_new_tokens);
  if (const auto why = pfx::test::differs_from_cold(lane, again, cold, second.size(), max_new_tokens)) {
    RC_FAIL(*why);
  }
  RC_CLASSIFY(error != nullptr, "the engine threw");
}

}  // namespace
