#include <pfx/cli/audit_runs.hpp>

#include <pfx/spec/reference.hpp>


#include <random>
#include <variant>

namespace pfx::cli {
namespace {

/// Draws the events of one case. Tokens come from a three-letter alphabet and prompts mostly
/// extend a prefix of what is held, so that reuse, every bound and every refusal are all common.
class EventSource {
 public:
  explicit EventSource(std::mt19937_64& random) : random_(random) {}

  /// Mostly what the phase accepts (a lane's own sequence), else any event, so refusals come too.
  spec::Event next(const spec::State& model, const spec::Tokens& writing_prompt) {
    const std::size_t pick = below(10);
    if (model.writing && pick < 5) return commit(model, writing_prompt);
    if (model.writing && pick == 5) return spec::Abort{};
    if (!model.writing && pick < 3) return spec::Query{prompt_near(model.ids)};
    if (!model.writing && pick < 6) return begin(model);
    return any(model, writing_prompt);
  }

  spec::Configure configure() {
    // chunk 0 now and then, which the machine must refuse (INV-9).
    return spec::Configure{spec::Config{below(8) != 0, below(5), below(12) == 0 ? 0 : 1 + below(4)}};
  }

 private:
  spec::Event any(const spec::State& model, const spec::Tokens& writing_prompt) {
    switch (below(10)) {
      case 0:
      case 1: return spec::Query{prompt_near(model.ids)};
      case 2:
      case 3: return begin(model);
      case 4:
      case 5: return commit(model, writing_prompt);
      case 6: return spec::Abort{};
      case 7: {
        spec::Tokens ids = prompt_near(model.ids);
        return spec::Record{ids, below(ids.size() + 2)};  // one past the end is refused (INV-9)
      }
      case 8: return below(2) == 0 ? spec::Event{spec::Clear{}} : spec::Event{configure()};
      default: return below(2) == 0 ? spec::Event{spec::Query{tokens(below(8))}} : begin(model);
    }
  }

  std::size_t below(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(random_); }

  spec::Tokens tokens(std::size_t n) {
    spec::Tokens t;
    for (std::size_t i = 0; i < n; ++i) t.push_back(static_cast<spec::Token>(below(3)));
    return t;
  }

  /// A prefix of `held` (any length) followed by a few random tokens.
  spec::Tokens prompt_near(const spec::Tokens& held) {
    spec::Tokens prompt(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(below(held.size() + 1)));
    for (const spec::Token t : tokens(below(5))) prompt.push_back(t);
    return prompt;
  }

  /// Begin at the granted offset, at 0, or at an offset the rule does not grant.
  spec::Event begin(const spec::State& model) {
    spec::Tokens prompt = prompt_near(model.ids);
    const std::size_t granted = spec::reference_offset(model, prompt);
    const std::size_t offsets[] = {granted, granted, 0, granted + 1, below(prompt.size() + 1)};
    return spec::Begin{prompt, offsets[below(5)]};
  }

  /// What a lane commits (the prompt being written plus generated tokens), or a bad commit.
  spec::Event commit(const spec::State& model, const spec::Tokens& writing_prompt) {
    spec::Tokens ids = writing_prompt;
    for (const spec::Token t : tokens(below(4))) ids.push_back(t);
    switch (below(6)) {
      case 0: return spec::Commit{ids, below(ids.size() + 2)};       // any canonical_end
      case 1: {                                                       // breaks the kept prefix
        if (!ids.empty()) ids[0] = (ids[0] + 1) % 3;
        return spec::Commit{ids, writing_prompt.size()};
      }
      case 2: return spec::Commit{tokens(below(6)), model.begin_offset};  // unrelated ids
      default: return spec::Commit{ids, writing_prompt.size()};
    }
  }

  std::mt19937_64& random_;
};

}  // namespace

std::string random_ranges() {
  return "tokens 0..2; prompts a prefix of the record plus 0..4 tokens, or 0..7 tokens; begin at the "
         "granted offset, 0, granted + 1 or 0..len; commits the begun prompt plus 0..3 tokens with "
         "canonical_end len(prompt) or 0..len(ids)+1, its first token changed, or 0..5 unrelated "
         "tokens; records canonical_end 0..len+1; configure enabled 7 in 8, keep_min 0..4, chunk 1..4 "
         "or 0 (1 in 12); while writing commit 5 in 10 and abort 1 in 10, while idle query 3 in 10 and begin 3 "
         "in 10, else any event";
}

RandomRunsReport run_random_cases(std::uint64_t seed, std::size_t cases, std::size_t events_per_case,
                                  const Stepper& step, const CaseHook& before_case) {
  RandomRunsReport report;
  std::mt19937_64 random(seed);
  for (std::size_t c = 0; c < cases; ++c) {
    if (before_case && !before_case(c)) {  // asked to stop: every case so far is whole
      report.stopped = true;
      break;
    }
    ++report.cases;
    EventSource source(random);
    Machine machine;
    spec::State model;
    spec::Tokens writing_prompt;  // the prompt of the request being written, for its commit
    std::vector<spec::Event> events;
    for (std::size_t s = 0; s < events_per_case; ++s) {
      events.push_back(s == 0 ? spec::Event{source.configure()} : source.next(model, writing_prompt));
      const spec::Event& event = events.back();
      const spec::State before = model;
      const refinement::Comparison result = step(machine, model, event);
      ++report.steps;
      if (!result.ok()) {
        if (report.failed++ == 0) {
          report.first = RandomRunFailure{c, s, events, before, refinement::to_spec(machine), model, result};
        }
        break;  // the machine and the model no longer agree on the state: the rest would not mean much
      }
      if (const auto* b = std::get_if<spec::Begin>(&event); b != nullptr && model.writing) {
        writing_prompt = b->prompt;
      }
    }
  }
  return report;
}

}  // namespace pfx::cli
