// pfx::llama (integrations/llama): the parse of llama.cpp's sequence state into rows, as a property
// over every layout it can take, and the engine on a model with random weights written at start-up
// (pfx.fixtures.tiny_gguf): THM-1's grid on llama.cpp found by pfx::conform, a Lane with reuse equal to
// cold runs through driver::verify, forget, and the errors that name their cause.

#include <pfx/conform/check.hpp>
#include <pfx/driver/lane.hpp>
#include <pfx/driver/verify.hpp>
#include <pfx/llama/engine.hpp>
#include <pfx/llama/sequence_state.hpp>

#include "support/requirement.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <filesystem>
#include <numeric>
#include <random>
#include <stdexcept>
#include <system_error>
#include <string>
#include <vector>

namespace {

using pfx::llama::rows_of_sequence_state;

template <class T>
void put(std::vector<std::byte>& out, T value) {
  const auto* p = reinterpret_cast<const std::byte*>(&value);
  out.insert(out.end(), p, p + sizeof(T));
}

/// A sequence state of llama.cpp's layout whose row of position p, layer l, plane k/v, byte b is
/// byte_of(p, l, plane, b); the cells hold the positions in `cell_positions`' order.
struct Layout {
  std::vector<std::int32_t> cell_positions;
  std::size_t layers = 1;
  std::size_t key_row = 4;
  std::size_t element = 2;  ///< value element bytes
  std::size_t value_width = 2;
  bool transposed = false;
  bool header = false;  ///< newer llama.cpp's magic and sequence first
};

std::byte byte_of(std::size_t p, std::size_t l, std::size_t plane, std::size_t b) {
  return static_cast<std::byte>((p * 131 + l * 31 + plane * 17 + b * 7 + 1) & 0xff);
}

std::vector<std::byte> state_of(const Layout& s) {
  std::vector<std::byte> out;
  if (s.header) {
    put<std::uint32_t>(out, 0xaf143cd8);
    put<std::int32_t>(out, 0);
  }
  const std::size_t cells = s.cell_positions.size();
  put<std::uint32_t>(out, 1);  // one stream
  put<std::uint32_t>(out, static_cast<std::uint32_t>(cells));
  if (cells == 0) return out;
  for (const std::int32_t p : s.cell_positions) {
    put<std::int32_t>(out, p);
    put<std::uint32_t>(out, 1);
    put<std::int32_t>(out, 0);
  }
  put<std::uint32_t>(out, s.transposed ? 1 : 0);
  put<std::uint32_t>(out, static_cast<std::uint32_t>(s.layers));
  const std::size_t value_row = s.element * s.value_width;
  for (std::size_t l = 0; l < s.layers; ++l) {
    put<std::int32_t>(out, 1);
    put<std::uint64_t>(out, s.key_row);
    for (const std::int32_t p : s.cell_positions) {
      for (std::size_t b = 0; b < s.key_row; ++b) out.push_back(byte_of(static_cast<std::size_t>(p), l, 0, b));
    }
  }
  for (std::size_t l = 0; l < s.layers; ++l) {
    put<std::int32_t>(out, 1);
    if (!s.transposed) {
      put<std::uint64_t>(out, value_row);
      for (const std::int32_t p : s.cell_positions) {
        for (std::size_t b = 0; b < value_row; ++b) out.push_back(byte_of(static_cast<std::size_t>(p), l, 1, b));
      }
    } else {
      put<std::uint32_t>(out, static_cast<std::uint32_t>(s.element));
      put<std::uint32_t>(out, static_cast<std::uint32_t>(s.value_width));
      for (std::size_t j = 0; j < s.value_width; ++j) {
        for (const std::int32_t p : s.cell_positions) {
          for (std::size_t e = 0; e < s.element; ++e) {
            out.push_back(byte_of(static_cast<std::size_t>(p), l, 1, j * s.element + e));
          }
        }
      }
    }
  }
  return out;
}

/// What rows_of_sequence_state must return: per layer the key rows of [from, to), then per layer
/// the value rows, in position order.
std::vector<std::byte> expected_rows(const Layout& s, std::size_t from, std::size_t to) {
  std::vector<std::byte> out;
  for (std::size_t l = 0; l < s.layers; ++l) {
    for (std::size_t p = from; p < to; ++p) {
      for (std::size_t b = 0; b < s.key_row; ++b) out.push_back(byte_of(p, l, 0, b));
    }
  }
  for (std::size_t l = 0; l < s.layers; ++l) {
    for (std::size_t p = from; p < to; ++p) {
      for (std::size_t b = 0; b < s.element * s.value_width; ++b) out.push_back(byte_of(p, l, 1, b));
    }
  }
  return out;
}

rc::Gen<Layout> layouts() {
  return rc::gen::exec([] {
    Layout s;
    const auto held = *rc::gen::inRange<std::size_t>(0, 40);
    s.cell_positions.resize(held);
    std::iota(s.cell_positions.begin(), s.cell_positions.end(), 0);
    const auto seed = *rc::gen::arbitrary<std::uint32_t>();
    std::mt19937 shuffle(seed);
    std::shuffle(s.cell_positions.begin(), s.cell_positions.end(), shuffle);  // cells in any order
    s.layers = *rc::gen::inRange<std::size_t>(1, 4);
    s.key_row = *rc::gen::inRange<std::size_t>(1, 9);
    s.element = *rc::gen::element<std::size_t>(2, 4);
    s.value_width = *rc::gen::inRange<std::size_t>(1, 6);
    s.transposed = *rc::gen::arbitrary<bool>();
    s.header = *rc::gen::arbitrary<bool>();
    return s;
  });
}

PFX_PROPERTY(LlamaState, RowsAreThoseOfTheirPositionsInPositionOrder, "THM-1", ()) {
  const Layout s = *layouts();
  const std::size_t held = s.cell_positions.size();
  const auto from = *rc::gen::inRange<std::size_t>(0, held + 1);
  const auto to = *rc::gen::inRange<std::size_t>(from, held + 1);
  RC_ASSERT(rows_of_sequence_state(state_of(s), from, to) == expected_rows(s, from, to));
}

// One parse gives each row apart, as its own read does: the bit-exactness check of a long context
// serializes llama.cpp's cache once, not once a row.
PFX_PROPERTY(LlamaState, EachRowOfOneParseIsThatRowsOwnRead, "THM-1", ()) {
  const Layout s = *layouts();
  const std::size_t held = s.cell_positions.size();
  const auto from = *rc::gen::inRange<std::size_t>(0, held + 1);
  const auto to = *rc::gen::inRange<std::size_t>(from, held + 1);
  const std::vector<std::byte> state = state_of(s);
  std::size_t next = from;
  pfx::llama::for_each_row_of_sequence_state(state, from, to, [&](std::size_t row, std::span<const std::byte> bytes) {
    RC_ASSERT(row == next++);
    RC_ASSERT(std::vector<std::byte>(bytes.begin(), bytes.end()) == expected_rows(s, row, row + 1));
  });
  RC_ASSERT(next == to);
  bool visited = false;
  RC_ASSERT_THROWS_AS(pfx::llama::for_each_row_of_sequence_state(
                          state, from, held + 1, [&](std::size_t, std::span<const std::byte>) { visited = true; }),
                      std::runtime_error);
  RC_ASSERT(!visited);  // a missing row is found before any row is given
}

PFX_PROPERTY(LlamaState, AMissingRowOrACutStateIsAnError, "THM-1", ()) {
  const Layout s = *layouts();
  const std::size_t held = s.cell_positions.size();
  const std::vector<std::byte> state = state_of(s);
  RC_ASSERT_THROWS_AS((void)rows_of_sequence_state(state, 0, held + 1), std::runtime_error);
  const auto cut = *rc::gen::inRange<std::size_t>(0, state.size());
  RC_ASSERT_THROWS_AS((void)rows_of_sequence_state(std::span(state).first(cut), 0, 0), std::runtime_error);
  std::vector<std::byte> longer = state;
  longer.push_back(std::byte{0});
  RC_ASSERT_THROWS_AS((void)rows_of_sequence_state(longer, 0, 0), std::runtime_error);
}

// Mutant llama-state-position-twice: a state in which two cells hold one position (of sequence 0)
// is not one pfx::llama reads, whichever of the two a parse would take: it is refused, naming it.
PFX_PROPERTY(LlamaState, APositionHeldByTwoCellsIsAnError, "THM-1", ()) {
  Layout s = *layouts();
  RC_PRE(!s.cell_positions.empty());
  const auto twice = *rc::gen::elementOf(s.cell_positions);
  const auto at = *rc::gen::inRange<std::size_t>(0, s.cell_positions.size() + 1);
  s.cell_positions.insert(s.cell_positions.begin() + static_cast<std::ptrdiff_t>(at), twice);
  try {
    (void)rows_of_sequence_state(state_of(s), 0, 0);
    RC_FAIL("a state that holds position " + std::to_string(twice) + " twice was read");
  } catch (const std::runtime_error& e) {
    RC_ASSERT(std::string(e.what()) == "llama.cpp's sequence state holds position " + std::to_string(twice) + " twice");
  }
}

/// The model, written once per process into a temporary folder by the script the CTest fixture
/// uses, and removed at exit.
struct WrittenModel {
  std::filesystem::path folder =
      std::filesystem::temp_directory_path() / ("pfx_llama_engine_test_" + std::to_string(::getpid()));
  std::filesystem::path path = folder / "gqa_f16.gguf";
  WrittenModel() {
    std::filesystem::create_directories(folder);
    const std::string command = std::string("python3 '") + PFX_WRITE_TINY_GGUF + "' '" + path.string() + "' --seed 1";
    if (std::system(command.c_str()) != 0) throw std::runtime_error("could not write the model: " + command);
  }
  ~WrittenModel() {
    std::error_code ignored;
    std::filesystem::remove_all(folder, ignored);
  }
  WrittenModel(const WrittenModel&) = delete;
  WrittenModel& operator=(const WrittenModel&) = delete;
};

const WrittenModel& model() {
  static const WrittenModel written;
  return written;
}

pfx::llama::Settings settings(std::size_t chunk = 64) {
  pfx::llama::Settings s;
  s.model = model().path.string();
  s.chunk = chunk;
  s.threads = 1;
  s.flash_attention = pfx::llama::FlashAttention::on;
  return s;
}

TEST(LlamaEngine, ConformFindsTheChunkGridExactAndAnUnalignedRuleUnsafe) {
  pfx::test::verifies("THM-1 CONF-1");
  pfx::llama::Engine engine(settings());
  pfx::conform::CheckOptions options;
  options.budget = pfx::conform::Budget::named("quick");
  options.budget.max_grid = 64;
  const pfx::conform::Report safe = pfx::conform::check(engine, options);
  EXPECT_EQ(safe.verdict, pfx::conform::Verdict::safe) << safe.explanation();
  options.rule_chunk = 1;
  const pfx::conform::Report unsafe = pfx::conform::check(engine, options);
  EXPECT_EQ(unsafe.verdict, pfx::conform::Verdict::unsafe) << unsafe.explanation();
}

TEST(LlamaEngine, ALaneWithReuseEqualsColdRunsByteForByteAndTheUnalignedRuleDoesNot) {
  pfx::test::verifies("THM-1 CEX-1");
  pfx::llama::Engine engine(settings());
  std::mt19937 random(7);
  std::vector<pfx::driver::TraceRequest> trace;
  std::vector<pfx::token> prompt;
  for (int turn = 0; turn < 4; ++turn) {
    for (int i = 0; i < 70; ++i) prompt.push_back(static_cast<pfx::token>(3 + random() % 500));
    trace.push_back({prompt, 3});
    trace.push_back({prompt, 2});  // a retry: resumed at the grid below the prompt's end
  }
  pfx::driver::LaneOptions lane;
  lane.capacity = 1024;
  lane.config.keep_min = 64;
  const pfx::driver::VerifyReport aligned = pfx::driver::verify(engine, trace, lane);
  EXPECT_TRUE(aligned.ok()) << (aligned.first_mismatch ? aligned.first_mismatch->what : "nothing compared");
  EXPECT_GT(aligned.reused_tokens, 0u);
  EXPECT_GT(aligned.rows_compared, 0u);
  lane.rule_chunk = 1;  // llama.cpp's own rule: the common prefix, on no grid
  const pfx::driver::VerifyReport unaligned = pfx::driver::verify(engine, trace, lane);
  EXPECT_GT(unaligned.mismatches, 0u);
}

// Mutant llama-ubatch-from-chunk: llama.cpp splits each prefill call into ubatches of --ubatch rows,
// so a ubatch of 16 below a chunk of 64 makes 16 llama.cpp's grid: the rule chunk 16 is exact on it,
// and not on an engine whose ubatch is the chunk.
TEST(LlamaEngine, AUbatchBelowTheChunkReachesLlamaCppAndIsItsGrid) {
  pfx::test::verifies("THM-1 CONF-1");
  pfx::conform::CheckOptions options;
  options.budget = pfx::conform::Budget::named("quick");
  options.budget.max_grid = 64;
  options.rule_chunk = 16;
  pfx::llama::Settings split = settings(64);
  split.ubatch = 16;
  pfx::llama::Engine on_ubatches(split);
  EXPECT_NE(on_ubatches.describe().find("chunk 64, ubatch 16"), std::string::npos) << on_ubatches.describe();
  const pfx::conform::Report safe = pfx::conform::check(on_ubatches, options);
  EXPECT_EQ(safe.verdict, pfx::conform::Verdict::safe) << safe.explanation();
  pfx::llama::Engine whole(settings(64));
  const pfx::conform::Report unsafe = pfx::conform::check(whole, options);
  EXPECT_EQ(unsafe.verdict, pfx::conform::Verdict::unsafe) << unsafe.explanation();
}

// A KV state is sized by the model: at most its trained context (n_ctx_train, 8192 for the written
// model), and a larger one is refused, naming it.
TEST(LlamaEngine, AStateLargerThanTheModelsTrainedContextIsRefused) {
  pfx::test::verifies("THM-1");
  pfx::llama::Engine engine(settings(16));
  EXPECT_EQ(engine.trained_context(), 8192U);
  EXPECT_NE(engine.describe().find("context 8192"), std::string::npos) << engine.describe();
  EXPECT_NE(engine.make_kv_state(8192), nullptr);
  try {
    (void)engine.make_kv_state(8193);
    FAIL() << "a state of 8193 rows was made on a model trained on 8192";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("more than the model's trained context, 8192"), std::string::npos) << e.what();
  }
}

TEST(LlamaEngine, ForgetDropsTheRowsFromItsPosition) {
  pfx::test::verifies("THM-1");
  pfx::llama::Engine engine(settings(16));
  const auto kv = engine.make_kv_state(256);
  std::vector<float> logits(engine.vocab());
  std::vector<pfx::token> tokens(16);
  std::iota(tokens.begin(), tokens.end(), 5);
  engine.prefill(*kv, tokens, 0, logits);
  const std::vector<std::byte> rows = kv->read_rows(0, 16);
  kv->forget(10);
  EXPECT_THROW((void)kv->read_rows(0, 11), std::runtime_error);
  EXPECT_EQ(kv->read_rows(0, 10).size() * 16, rows.size() * 10);
  kv->forget(0);
  engine.prefill(*kv, tokens, 0, logits);
  EXPECT_EQ(kv->read_rows(0, 16), rows);  // the same rows again, and no second copy of any
  std::size_t visited = 0;
  kv->for_each_row(0, 16, [&](std::size_t row, std::span<const std::byte> bytes) {
    ++visited;
    EXPECT_EQ(std::vector<std::byte>(bytes.begin(), bytes.end()), kv->read_rows(row, row + 1)) << "row " << row;
  });
  EXPECT_EQ(visited, 16u);
}

TEST(LlamaEngine, BadSettingsAndFilesAreErrorsThatNameThem) {
  pfx::llama::Settings missing = settings();
  missing.model = (model().folder / "no-such-model.gguf").string();
  try {
    pfx::llama::Engine engine(missing);
    FAIL() << "a missing model loaded";
  } catch (const pfx::llama::ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-model.gguf"), std::string::npos) << e.what();
  }
  pfx::llama::Settings wide = settings();
  wide.ubatch = 128;
  EXPECT_THROW(pfx::llama::Engine{wide}, std::invalid_argument);
  pfx::llama::Engine engine(settings(16));
  const auto kv = engine.make_kv_state(64);
  std::vector<float> logits(engine.vocab());
  const std::vector<pfx::token> seventeen(17, 5);
  EXPECT_THROW(engine.prefill(*kv, seventeen, 0, logits), std::invalid_argument);
}

}  // namespace
