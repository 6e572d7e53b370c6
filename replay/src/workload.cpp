#include <pfx/replay/workload.hpp>

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <variant>

namespace pfx::replay {
namespace {

/// What a request does to the conversation, as the table shows it.
enum class Kind { new_session, turn, regenerate, edit_late, edit_early, other_session, shorter, short_prompt, clear };

/// Each kind's label: a switch, so that a kind added without one is a warning (an error here).
const char* label(Kind kind) {
  switch (kind) {
    case Kind::new_session: return "new session";
    case Kind::turn: return "turn";
    case Kind::regenerate: return "regenerate";
    case Kind::edit_late: return "edit late";
    case Kind::edit_early: return "edit early";
    case Kind::other_session: return "other session";
    case Kind::shorter: return "shorter";
    case Kind::short_prompt: return "short";
    case Kind::clear: return "clear";
  }
  return "?";
}

struct Session {
  std::vector<token> prompt;  ///< the last prompt sent
  std::size_t system = 0;     ///< length of its system prompt
};

class Generator {
 public:
  explicit Generator(const WorkloadOptions& options)
      : options_(options),
        random_(options.seed),
        vocab_(std::max<std::size_t>(1, std::min<std::size_t>(options.vocab, 32000))),
        // Prompts stay short enough for a cold run on the host engine to take well under a second.
        longest_(std::min<std::size_t>(options.capacity, 2600)) {
    for (const std::size_t length : {448 + below(64), 320 + below(64)}) systems_.push_back(tokens(length));
  }

  std::optional<TraceItem> next() {
    // First every kind once, in an order where each means what its label says; then a random mix.
    static constexpr std::array script{Kind::new_session, Kind::turn,          Kind::turn,        Kind::regenerate,
                                       Kind::edit_late,   Kind::turn,          Kind::edit_early,  Kind::new_session,
                                       Kind::turn,        Kind::other_session, Kind::new_session, Kind::turn,
                                       Kind::shorter,     Kind::short_prompt,  Kind::clear,       Kind::turn};
    if (requests_ >= options_.requests) return std::nullopt;
    TraceItem item = step(scripted_ < script.size() ? script[scripted_++] : draw());
    std::visit([this](auto& i) { i.line = ++items_given_; }, item);
    return item;
  }

 private:
  std::size_t below(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(random_); }
  std::size_t between(std::size_t lo, std::size_t hi) { return lo + below(hi - lo + 1); }

  std::vector<token> tokens(std::size_t n) {
    std::vector<token> out(n);
    for (token& t : out) t = static_cast<token>(below(vocab_));
    return out;
  }

  Kind draw() {
    static constexpr std::array<std::pair<Kind, unsigned>, 9> weights{
        {{Kind::turn, 40}, {Kind::regenerate, 6}, {Kind::edit_late, 8}, {Kind::edit_early, 6}, {Kind::other_session, 12},
         {Kind::new_session, 10}, {Kind::shorter, 4}, {Kind::short_prompt, 4}, {Kind::clear, 3}}};
    unsigned total = 0;
    for (const auto& [kind, weight] : weights) total += weight;
    std::size_t pick = below(total);
    for (const auto& [kind, weight] : weights) {
      if (pick < weight) return kind;
      pick -= weight;
    }
    return Kind::turn;
  }

  TraceItem step(Kind kind) {
    if (kind == Kind::clear) return TraceClear{};
    if (sessions_.empty() && kind != Kind::short_prompt) kind = Kind::new_session;
    const std::size_t max_new = between(8, 24);
    std::vector<token> prompt;
    switch (kind) {
      case Kind::new_session: {
        const std::size_t system = below(systems_.size());
        Session session{systems_[system], systems_[system].size()};
        append(session.prompt, tokens(between(20, 120)));  // the user's first message
        sessions_.push_back(std::move(session));
        if (options_.sessions > 0 && sessions_.size() > options_.sessions) sessions_.erase(sessions_.begin());
        current_ = sessions_.size() - 1;
        prompt = sessions_[current_].prompt;
        break;
      }
      case Kind::other_session:
        if (sessions_.size() > 1) current_ = (current_ + 1 + below(sessions_.size() - 1)) % sessions_.size();
        [[fallthrough]];
      case Kind::turn: {  // the last prompt, its answer, the user's next message
        Session& session = sessions_[current_];
        std::vector<token> next = session.prompt;
        append(next, tokens(between(8, 24)));
        append(next, tokens(between(20, 150)));
        if (next.size() + max_new > longest_) return step(Kind::new_session);  // too long: start another
        session.prompt = next;
        prompt = next;
        break;
      }
      case Kind::regenerate:
        prompt = sessions_[current_].prompt;
        break;
      case Kind::edit_late: {  // the user rewrites the end of the last message
        Session& session = sessions_[current_];
        const std::size_t keep = session.prompt.size() - std::min(session.prompt.size() - 1, between(10, 40));
        session.prompt.resize(keep);
        append(session.prompt, tokens(between(10, 40)));
        prompt = session.prompt;
        break;
      }
      case Kind::edit_early: {  // the user edits the first message, just after the system prompt
        Session& session = sessions_[current_];
        const std::size_t at = std::min(session.prompt.size() - 1, session.system + below(16));
        session.prompt[at] = static_cast<token>((static_cast<std::size_t>(session.prompt[at]) + 1) % vocab_);
        prompt = session.prompt;
        break;
      }
      case Kind::shorter: {  // an earlier, shorter version of the conversation
        const std::vector<token>& last = sessions_[current_].prompt;
        prompt.assign(last.begin(), last.begin() + static_cast<std::ptrdiff_t>(std::max<std::size_t>(1, last.size() / 2)));
        break;
      }
      case Kind::short_prompt: {  // a one-off question that shares only a few tokens with the last prompt
        const std::vector<token>& last = sessions_.empty() ? systems_[0] : sessions_[current_].prompt;
        prompt.assign(last.begin(), last.begin() + static_cast<std::ptrdiff_t>(std::min(last.size(), between(20, 50))));
        append(prompt, tokens(between(5, 20)));
        break;
      }
      case Kind::clear: break;
    }
    prompt.resize(std::min(prompt.size(), longest_ - max_new));
    ++requests_;
    return TraceRequest{std::move(prompt), max_new, label(kind), 0, ""};
  }

  static void append(std::vector<token>& to, const std::vector<token>& more) { to.insert(to.end(), more.begin(), more.end()); }

  WorkloadOptions options_;
  std::mt19937_64 random_;
  std::size_t vocab_;
  std::size_t longest_;
  std::vector<std::vector<token>> systems_;
  std::vector<Session> sessions_;
  std::size_t current_ = 0;
  std::size_t requests_ = 0;
  std::size_t scripted_ = 0;     ///< kinds of the opening script done
  std::size_t items_given_ = 0;  ///< numbers the items as the lines of `pfx workload`'s output
};

}  // namespace

ItemSource workload_stream(const WorkloadOptions& options) {
  return [generator = std::make_shared<Generator>(options)] { return generator->next(); };
}

std::vector<TraceItem> embedded_workload(const WorkloadOptions& options) {
  std::vector<TraceItem> items;
  const ItemSource next = workload_stream(options);
  while (std::optional<TraceItem> item = next()) items.push_back(std::move(*item));
  return items;
}

}  // namespace pfx::replay
