// The machine's allocation contract (docs/spec.md, "Cost"; MEM-1): within the reserved capacity no
// event allocates; past it, begin, commit and record grow their storage, and when that allocation
// fails they throw std::bad_alloc and leave the machine exactly as it was. This program replaces the
// global operator new to count allocations and to make them fail on demand.

#include "support/requirement.hpp"

#include <pfx/core.hpp>

#include <cstddef>
#include <cstdlib>
#include <functional>
#include <new>
#include <vector>

namespace {

std::size_t allocations = 0;
bool failing = false;

}  // namespace

void* operator new(std::size_t size) {
  ++allocations;
  if (failing) throw std::bad_alloc();
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

using Tokens = std::vector<pfx::token>;

Tokens iota(std::size_t n, pfx::token from = 0) {
  Tokens t;
  for (std::size_t i = 0; i < n; ++i) t.push_back(from + static_cast<pfx::token>(i));
  return t;
}

/// Runs `f` with every allocation failing; true when it threw std::bad_alloc.
bool throws_bad_alloc(const std::function<void()>& f) {
  bool threw = false;
  failing = true;
  try {
    f();
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  failing = false;
  return threw;
}

}  // namespace

TEST(Allocation, WithinTheReservedCapacityNoEventAllocates) {
  pfx::test::verifies("MEM-1");
  pfx::Machine m;
  ASSERT_TRUE(m.configure({true, 2, 2}).accepted());
  m.reserve(64);
  const Tokens first = iota(40);
  Tokens answer = iota(40);
  answer.push_back(7);
  Tokens second = answer;
  second.push_back(9);
  Tokens second_answer = second;
  second_answer.insert(second_answer.end(), 22, 5);  // 64 tokens: exactly the capacity
  const std::size_t before = allocations;
  bool ok = m.begin(first, 0).accepted() && m.commit(answer, first.size()).accepted();
  const std::size_t offset = m.query(second).decision.offset;
  ok = ok && offset == 40 && m.begin(second, offset).accepted();
  ok = ok && m.clear().accepted() && m.abort().accepted();
  ok = ok && m.begin(second, 0).accepted() && m.commit(second_answer, second.size()).accepted();
  ok = ok && m.record(second_answer, 50).accepted() && m.configure({true, 2, 4}).accepted();
  EXPECT_TRUE(ok);
  EXPECT_EQ(allocations, before);
  EXPECT_EQ(m.capacity(), 64U);
}

TEST(Allocation, PastTheCapacityAFailedAllocationThrowsBadAllocAndChangesNothing) {
  pfx::test::verifies("MEM-1 INV-10");
  pfx::Machine m;
  ASSERT_TRUE(m.configure({true, 2, 2}).accepted());
  m.reserve(8);
  ASSERT_TRUE(m.record(iota(8), 8).accepted());
  const Tokens long_prompt = iota(20);
  Tokens long_answer = long_prompt;
  long_answer.push_back(3);

  pfx::Machine idle = m;
  EXPECT_TRUE(throws_bad_alloc([&] { (void)m.begin(long_prompt, 0); }));
  EXPECT_EQ(m, idle);
  EXPECT_TRUE(throws_bad_alloc([&] { (void)m.record(long_answer, 20); }));
  EXPECT_EQ(m, idle);

  // With room for the prompt but not for the answer, the commit is the one that allocates.
  m.reserve(20);
  ASSERT_TRUE(m.begin(long_prompt, 8).accepted());
  const pfx::Machine writing = m;
  EXPECT_TRUE(throws_bad_alloc([&] { (void)m.commit(long_answer, 20); }));
  EXPECT_EQ(m, writing);
  // The same commit succeeds once memory is there again, and events that need none never throw.
  EXPECT_FALSE(throws_bad_alloc([&] { (void)m.abort(); }));
  EXPECT_EQ(m.held().ids, iota(8));
  ASSERT_TRUE(m.begin(long_prompt, 8).accepted());
  EXPECT_TRUE(m.commit(long_answer, 20).accepted());
  EXPECT_EQ(m.held().ids, long_answer);
}
