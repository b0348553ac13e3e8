// Each sub-command registers its flags on the CLI11 app and returns the function that runs it
// (after parsing) and yields the process exit code.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace daisy::apps {

using Runner = std::function<int()>;

Runner AddGenModel(CLI::App& app);
Runner AddInspect(CLI::App& app);
Runner AddTokenize(CLI::App& app);
Runner AddDetokenize(CLI::App& app);
Runner AddRun(CLI::App& app);
Runner AddScore(CLI::App& app);
Runner AddCompile(CLI::App& app);
Runner AddWorker(CLI::App& app);
Runner AddProxy(CLI::App& app);
Runner AddServe(CLI::App& app);
Runner AddQuantize(CLI::App& app);
Runner AddPerplexity(CLI::App& app);
Runner AddChatTemplate(CLI::App& app);

// Long-running commands: block SIGINT/SIGTERM before starting threads, then wait for one.
void BlockTermSignals();
void WaitForTermSignal();

// Prints "daisy: error: <message>" to stderr and returns the exit code for failures.
int Fail(const std::string& message);

}  // namespace daisy::apps
