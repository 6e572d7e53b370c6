#pragma once

/// \file
/// Everything users of pfx::core need: the Machine and the types it speaks.

#include <pfx/common_prefix.hpp>
#include <pfx/config.hpp>
#include <pfx/decision.hpp>
#include <pfx/events.hpp>
#include <pfx/machine.hpp>
#include <pfx/offset_rule.hpp>
#include <pfx/outcome.hpp>
#include <pfx/prefill_step.hpp>
#include <pfx/record.hpp>
#include <pfx/refusal.hpp>
#include <pfx/token.hpp>
#include <pfx/version.hpp>
