// Each sub-command registers its flags (apps/flags.h) and returns the function that runs it
// (after parsing) and yields the process exit code.
#pragma once

#include <functional>

#include "apps/flags.h"

namespace daisy::apps {

using Runner = std::function<int()>;

Runner AddGenModel(Flags& flags);
Runner AddInspect(Flags& flags);
Runner AddTokenize(Flags& flags);
Runner AddDetokenize(Flags& flags);
Runner AddRun(Flags& flags);
Runner AddScore(Flags& flags);
Runner AddCompile(Flags& flags);
Runner AddWorker(Flags& flags);
Runner AddProxy(Flags& flags);
Runner AddServe(Flags& flags);
Runner AddQuantize(Flags& flags);
Runner AddPerplexity(Flags& flags);
Runner AddChatTemplate(Flags& flags);

// Long-running commands: block SIGINT/SIGTERM before starting threads, then wait for one.
void BlockTermSignals();
void WaitForTermSignal();

// Prints "daisy: error: <message>" to stderr and returns the exit code for failures.
int Fail(const std::string& message);

}  // namespace daisy::apps
